"""A match that stands out of its search's dense scores passes the gate, in a real store (gate.py)."""

from __future__ import annotations

import json
from typing import Any

import retold
from retold.ingest.write.ingestor import WriteResult
from retold.ingest.write.request import WriteRequest
from retold.models import SearchRequest
from retold.retrieve.replay import replay_gate

from .writepath import World, make_world

# Every absolute floor out of reach, so only the standout rule can answer.
OUT_OF_REACH = {
    "retrieval.gate.dense_floor.episodic": 0.95,
    "retrieval.gate.lexical_min_matched_terms": 50,
    "retrieval.gate.companion_floor": 1.0,
    "retrieval.gate.context_floor": 1.0,
    "retrieval.gate.standout_floor": 0.3,
    "retrieval.gate.standout_margin": 0.2,
}
LAMP = (
    "Bought a brass lamp at the flea market on Sunday, then had lunch with my sister and walked home "
    "through the park before it rained."
)


async def write_lamp_among_chores(world: World) -> WriteResult:
    """Fourteen short chores and one long record about a lamp: enough dense matches for a
    standout, and one match that stands out of them."""
    rt, p = world.rt, world.p
    for n in range(14):
        written = await rt.host.ingest(p, WriteRequest(
            type="episodic", content=f"Watered the garden again, note {n}.", scope=p.user_scope,
            source_kind="user_statement", trusted=True,
        ))  # fmt: skip
        assert written.ok, written
    lamp = await rt.host.ingest(p, WriteRequest(
        type="episodic", content=LAMP, scope=p.user_scope, source_kind="user_statement", trusted=True,
    ))  # fmt: skip
    assert lamp.ok, lamp
    return lamp


async def test_a_long_record_that_stands_out_answers_and_its_replay_agrees(store_location: Any) -> None:
    world = await make_world(store_location("standout.sqlite"), config=retold.Config().override(OUT_OF_REACH))
    rt, p = world.rt, world.p
    try:
        lamp = await write_lamp_among_chores(world)
        response = await rt.search(p, SearchRequest(queries=["the brass lamp from the flea market"], k=5))
        assert [r.record.id for r in response.results] == [lamp.record_id]
        assert response.results[0].explanation.gate.startswith("standout: dense ")
        replayed = await replay_gate(rt.store, response.search_id, rt.config)
        assert replayed.kept[:1] == [lamp.record_id]
        # The same search with the rule off answers nothing, and says how far the match stood out.
        off = rt.config.override({"retrieval.gate.standout_floor": 1.0})
        assert (await replay_gate(rt.store, response.search_id, off)).kept == []
        strict = rt.config.override({"retrieval.gate.standout_margin": 0.9})
        empty = await replay_gate(rt.store, response.search_id, strict)
        assert empty.kept == [] and empty.empty_reason is not None
        assert "best standout" in empty.empty_reason and "< 0.90" in empty.empty_reason
        log = await rt.store.search_log(response.search_id)
        assert log is not None and json.loads(log["config_flags"])["gate"]["standout_margin"] == 0.2
    finally:
        await rt.close()


async def test_a_question_about_the_searcher_stands_out_at_its_own_margin(store_location: Any) -> None:
    """The same match answers "where did I buy...?" at gate.self_question_margin and stays out
    for a question put to someone else, at the usual margin; the reason and the replay say so."""
    margins = {
        "retrieval.gate.standout_floor": 0.2,
        "retrieval.gate.standout_margin": 0.9,
        "retrieval.gate.self_question_margin": 0.0,
    }
    config = retold.Config().override({**OUT_OF_REACH, **margins})
    world = await make_world(store_location("self.sqlite"), config=config)
    rt, p = world.rt, world.p
    try:
        lamp = await write_lamp_among_chores(world)
        own = await rt.search(p, SearchRequest(queries=["Where did I buy the brass lamp?"], k=5))
        assert own.results and own.results[0].record.id == lamp.record_id, own.empty_reason
        assert own.results[0].explanation.gate.endswith("(a question about the searcher)")
        asked = await rt.search(p, SearchRequest(queries=["Where did you buy the brass lamp?"], k=5))
        assert asked.results == []
        assert (await replay_gate(rt.store, own.search_id, rt.config)).kept[:1] == [lamp.record_id]
        narrow = rt.config.override({"retrieval.gate.self_question_margin": 0.9})
        empty = await replay_gate(rt.store, own.search_id, narrow)
        assert empty.kept == [] and empty.empty_reason is not None
        assert "(a question about the searcher)" in empty.empty_reason
        log = await rt.store.search_log(own.search_id)
        assert log is not None and json.loads(log["config_flags"])["gate"]["query_kind"] == "self"
    finally:
        await rt.close()
