"""The auto gate raises its floors only for a turn that plainly states, and both gates let a
question about the searcher stand out at a smaller margin (query_kind)."""

from __future__ import annotations

import json

import pytest

from retold.config import Config
from retold.models import SearchRequest
from retold.retrieve.query_kind import about_self, asks
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
    for text, kind in (
        ("I love concise answers.", "statement"),
        ("Why concise answers?", "question"),
        ("How do I like my answers?", "self"),
    ):
        response = await rt.search(p, SearchRequest(queries=[text], trigger="auto"))
        log = await rt.store.search_log(response.search_id)
        assert log is not None
        flags = json.loads(log["config_flags"])["gate"]
        assert flags["query_kind"] == kind
        expected = rt.config.retrieval.gate.floors_for(
            "auto", asks=kind != "statement", about_self=kind == "self"
        )
        assert flags["standout_margin"] == expected.standout_margin
        assert flags["dense_floor"] == expected.dense_floor.model_dump()
        replayed = await replay_gate(rt.store, response.search_id, rt.config)
        assert replayed.kept == [r.record.id for r in response.results]


@pytest.mark.parametrize(
    ("text", "own"),
    [
        ("When did I go to the museum?", True),
        ("What are my hobbies?", True),
        ("How many days did I spend at church in December?", True),
        ("Thanks! Where have I camped?", True),  # one sentence asks about the searcher
        ("What’s my star sign?", True),  # curly apostrophe
        ("Where have I camped", False),  # no question mark: a model's keywords, not a question
        ("What did you think of my painting?", False),  # put to someone else
        ("I loved it. Did you?", False),  # the first person is in the statement, not the question
        ("Can I help you with anything?", False),
        ("When did Caroline go to the museum?", False),
        ("Is mine the blue one? Yes.", True),
        ("", False),
    ],
)
def test_a_question_about_the_searcher(text: str, own: bool) -> None:
    assert about_self([text]) is own


def test_a_question_about_the_searcher_stands_out_at_its_own_margin() -> None:
    gate = (
        Config()
        .override({
            "retrieval.gate.standout_margin": 0.2, "retrieval.gate.self_question_margin": 0.1,
            "retrieval.gate.auto.standout_margin": 0.25, "retrieval.gate.auto.self_question_margin": 0.15,
        })
        .retrieval.gate
    )  # fmt: skip
    tool, auto = gate.floors_for("tool", about_self=True), gate.floors_for("auto", about_self=True)
    assert (tool.standout_margin, tool.query_kind) == (0.1, "self")
    assert (auto.standout_margin, auto.query_kind) == (0.15, "self")
    assert tool.dense_floor == gate.floors_for("tool").dense_floor  # only the margin differs
    assert gate.floors_for("tool").standout_margin == 0.2
    # A turn that plainly states is never a question, whatever the caller says.
    stating = gate.floors_for("auto", asks=False, about_self=True)
    assert (stating.query_kind, stating.standout_margin) == ("statement", 0.25)
    # The smaller margin applies: a self margin above the usual one changes nothing.
    wider = Config().override({"retrieval.gate.self_question_margin": 0.5}).retrieval.gate
    assert wider.floors_for("tool", about_self=True).standout_margin == wider.standout_margin
