"""The auto gate raises its floors only for a turn that plainly states (query_kind)."""

from __future__ import annotations

import json

import pytest

from retold.config import Config
from retold.models import SearchRequest
from retold.retrieve.query_kind import asks
from retold.retrieve.replay import replay_gate

from .writepath import World


@pytest.mark.parametrize(
    ("text", "asking"),
    [
        ("What state did Nate visit", True),
        ("That's great! How was the trip", True),
        ("Did you see it?", True),
        ("I love hiking.", False),
        ("Wow, that’s great! I went hiking yesterday.", False),
        ("Thanks! Sounds like fun.", False),
        ("Summarise the meeting in concise answers", True),  # a request opens with a verb
        ("Thanks! Book the usual table.", True),
        ("I want the usual table booked.", True),  # a request in statement form
        ("I'd like to plan a trip like last year's.", True),
        ("I can't remember where I parked", True),
        ("user favourite food", True),  # a model's keyword query: not plainly a statement
        ("", True),
    ],
)
def test_only_plain_statements_ask_nothing(text: str, asking: bool) -> None:
    assert asks([text]) is asking


def test_any_query_that_asks_makes_the_search_ask() -> None:
    assert asks(["I love hiking.", "where do I hike?"]) and not asks(["I love hiking.", "My knee hurts."])


def test_statement_floors_rise_by_the_offset_for_auto_only() -> None:
    gate = (
        Config()
        .override({"retrieval.gate.auto.statements": {"dense_offset": 0.1, "lexical_min_term_fraction": 0.9}})
        .retrieval.gate
    )
    question, statement = gate.floors_for("auto", asks=True), gate.floors_for("auto", asks=False)
    assert statement.dense_floor.episodic == pytest.approx(question.dense_floor.episodic + 0.1)
    assert statement.dense_floor.semantic == pytest.approx(question.dense_floor.semantic + 0.1)
    assert statement.lexical_min_term_fraction == 0.9
    assert (question.query_kind, statement.query_kind) == ("question", "statement")
    assert gate.floors_for("tool", asks=False) == gate.floors_for("tool", asks=True)
    assert statement.opened().dense_floor.episodic == 0.0


async def test_a_statement_turn_is_logged_and_replayed_with_its_floors(world: World) -> None:
    rt, p = world.rt, world.p
    await rt.tools.call(p, "memory_write", {
        "type": "semantic", "content": "Aditya prefers concise answers without preamble.",
        "attribute": "answer_style", "source_kind": "user_statement",
        "evidence": "I prefer concise answers without preamble",
    })  # fmt: skip
    for text, kind in (("I love concise answers.", "statement"), ("Why concise answers?", "question")):
        response = await rt.search(p, SearchRequest(queries=[text], trigger="auto"))
        log = await rt.store.search_log(response.search_id)
        assert log is not None
        flags = json.loads(log["config_flags"])["gate"]
        assert flags["query_kind"] == kind
        expected = rt.config.retrieval.gate.floors_for("auto", asks=kind == "question")
        assert flags["dense_floor"] == expected.dense_floor.model_dump()
        replayed = await replay_gate(rt.store, response.search_id, rt.config)
        assert replayed.kept == [r.record.id for r in response.results]
