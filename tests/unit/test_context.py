"""Same-day context: a second dense pass over the days of the best candidates (retrieve.context)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import retold
from retold.ingest.write.request import WriteRequest
from retold.models import SearchRequest
from retold.retrieve.context import anchor_days
from retold.retrieve.fusion import fuse
from retold.retrieve.replay import replay_gate

from .writepath import World, make_world

START = datetime(2024, 3, 1, 9, tzinfo=UTC)


def test_anchor_days_are_distinct_utc_days_in_order() -> None:
    late = datetime(2024, 3, 1, 23, 30, tzinfo=UTC)
    days = anchor_days([late, None, START, START + timedelta(days=2)])
    assert days == [
        (datetime(2024, 3, 1, tzinfo=UTC), datetime(2024, 3, 2, tzinfo=UTC)),
        (datetime(2024, 3, 3, tzinfo=UTC), datetime(2024, 3, 4, tzinfo=UTC)),
    ]


def test_context_hits_fuse_at_their_weight_and_rank_after_the_dense_list() -> None:
    fused = fuse([("a", 0.9)], [], [], 10, context=[("b", 0.2), ("a", 0.9)], context_weight=0.5)
    by_id = {c.record_id: c for c in fused}
    assert by_id["a"].rrf_score == 1 / 11 + 0.5 / 12 and by_id["b"].rrf_score == 0.5 / 11
    assert by_id["b"].dense is not None and by_id["b"].dense.rank == 2  # after the dense list's own


async def _diary(path: Any, *, anchors: int) -> tuple[World, dict[str, str]]:
    config = retold.Config().override({"retrieval.per_generator_k": 5, "retrieval.context_anchors": anchors})
    world = await make_world(path, config=config)
    rt, p = world.rt, world.p
    ids: dict[str, str] = {}
    entries = [(day, f"Errands and chores, list {day}.") for day in range(30)]
    entries += [(20, "We hiked up Ben Nevis in the fog."), (20, "Fish and chips afterwards in Fort William.")]
    for day, text in entries:
        written = await rt.host.ingest(p, WriteRequest(
            type="episodic", content=text, scope=p.user_scope, source_kind="user_statement",
            event_at=START + timedelta(days=day), trusted=True,
        ))  # fmt: skip
        assert written.ok, written
        ids[text] = str(written.record_id)
    return world, ids


async def test_a_match_brings_its_days_other_records_into_fusion(store_location: Any) -> None:
    world, ids = await _diary(store_location("diary.sqlite"), anchors=3)
    try:
        rt, p = world.rt, world.p
        response = await rt.search(p, SearchRequest(queries=["Where did we hike up Ben Nevis?"], gate=False))
        log = await rt.store.search_log(response.search_id)
        assert log is not None
        dense = {row[0]: row[1] for row in json.loads(log["dense"])}
        sibling = ids["Fish and chips afterwards in Fort William."]
        assert dense[sibling] > 5  # found by the context pass, ranked after the dense channel's 5
        assert sibling in {row[0] for row in json.loads(log["fused"])}
        assert sibling in [r.record.id for r in response.results]  # gate off: it reaches the caller
        # Context hits are logged as dense hits, so a replay judges them as the live gate did.
        gated = await rt.search(p, SearchRequest(queries=["Where did we hike up Ben Nevis?"]))
        replayed = await replay_gate(rt.store, gated.search_id, rt.config)
        assert [r.record.id for r in gated.results] == [r for r in replayed.kept][: len(gated.results)]
    finally:
        await world.rt.close()


async def test_with_no_anchors_the_dense_list_is_the_channels_own(store_location: Any) -> None:
    world, _ = await _diary(store_location("plain.sqlite"), anchors=0)
    try:
        rt, p = world.rt, world.p
        response = await rt.search(p, SearchRequest(queries=["Where did we hike up Ben Nevis?"], gate=False))
        log = await rt.store.search_log(response.search_id)
        assert log is not None and len(json.loads(log["dense"])) == 5
    finally:
        await world.rt.close()
