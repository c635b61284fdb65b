"""A question that asks when lifts the candidates that tell a time (retold.retrieve.time_answers)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import retold
from retold.ingest.write.request import WriteRequest
from retold.models import Principal, SearchRequest
from retold.retrieve.explain import summary_line
from retold.retrieve.fusion import fuse, logged_flags, read_flags
from retold.retrieve.replay import replay_gate
from retold.retrieve.time_answers import SCAN_CHARS, asks_when, tells_time, time_answers

from .writepath import make_world

# --- the rules, as plain functions ---------------------------------------------------------------


@pytest.mark.parametrize(
    "query",
    [
        "When did you adopt the dog?",
        "  when is the recital",
        "Since when has she lived in Oslo?",
        "How long did the project take?",
        "What year did they marry?",
        "Which month was the trip in?",
        "In what year did he start?",
        "On which day is the meeting?",
        "How many weeks passed between the two visits?",
        '"When" did it start?',
    ],
)
def test_questions_that_ask_for_a_time(query: str) -> None:
    assert asks_when([query])
    assert asks_when(["something else entirely", query])


@pytest.mark.parametrize(
    "query",
    [
        "What did you adopt?",
        "Where did she move when she left?",  # "when" inside, not what is asked
        "How many dogs does she have?",
        "Who said it was the right time?",
        "Tell me about the trip",
        "",
    ],
)
def test_questions_that_ask_something_else(query: str) -> None:
    assert not asks_when([query])
    assert not asks_when([])


@pytest.mark.parametrize(
    "text",
    [
        "I've had them for 3 years!",
        "Been playing it for a month now.",
        "I bought it a year ago in Paris.",
        "We finally wrapped that up last month.",
        "I went swimming yesterday.",
        "Recently I started running.",
        "I saw it the other day at the market.",
        "We moved on May 8, 2022.",
        "Going to order sushi tonight.",
        "for a couple of weeks",
    ],
)
def test_texts_that_tell_a_time(text: str) -> None:
    assert tells_time(text)


@pytest.mark.parametrize(
    "text",
    [
        "Yes, I adopted her from the shelter.",
        "Since you asked, I prefer tea.",  # a reason, not a time
        "She has three dogs and a cat.",
        "May I borrow your pen?",
        "",
    ],
)
def test_texts_that_tell_no_time(text: str) -> None:
    assert not tells_time(text)


def test_only_the_head_of_a_long_text_is_read_so_no_stored_text_makes_a_search_slow() -> None:
    filler = "1 " * 30_000  # every "1" an anchor of the grammar, and no expression anywhere
    assert not tells_time(filler + "two years ago")
    assert tells_time("two years ago " + filler)
    assert tells_time("1 " * (SCAN_CHARS // 2 - 10) + "two years ago")


def test_time_answers_keep_the_ranked_order_within_the_depth() -> None:
    texts = {
        "a": "for two years",
        "b": "a shelter dog",
        "c": "last week",
        "d": "yesterday",
        "e": "in May 2020",
    }
    assert time_answers(["a", "b", "c", "d", "e"], texts, 3) == ["a", "c"]
    assert time_answers(["d", "c", "b"], texts, 10) == ["d", "c"]
    assert time_answers(["a", "zz"], texts, 0) == []
    assert time_answers(["zz"], texts, 5) == []  # no text: tells nothing


def test_no_list_when_most_candidates_tell_a_time() -> None:
    texts = {"a": "for two years", "b": "a shelter dog", "c": "last week", "d": "yesterday"}
    assert time_answers(["a", "b", "c", "d"], texts, 4, max_share=0.5) == []  # 3 of 4: no signal
    assert time_answers(["a", "b", "c", "d"], texts, 4, max_share=0.75) == ["a", "c", "d"]
    assert time_answers(["a", "b"], texts, 4, max_share=0.5) == ["a"]  # half is not more than half


@settings(max_examples=200, deadline=None)
@given(
    ranked=st.lists(st.sampled_from(list("abcdefgh")), unique=True, max_size=8),
    telling=st.sets(st.sampled_from(list("abcdefgh"))),
    depth=st.integers(0, 10),
)
def test_time_answers_are_only_ever_the_best_candidates_that_tell_a_time(
    ranked: list[str], telling: set[str], depth: int
) -> None:
    texts = {rid: "two years ago" if rid in telling else "a dog" for rid in ranked}
    out = time_answers(ranked, texts, depth)
    assert out == [rid for rid in ranked[:depth] if rid in telling]
    shared = time_answers(ranked, texts, depth, max_share=0.5)
    assert shared in ([], out) and (shared == out) == (len(out) <= 0.5 * len(ranked[:depth]))


def test_the_reply_to_a_candidate_that_asks_follows_it_when_it_tells_a_time() -> None:
    texts = {
        "ask": "How long have you had them?",
        "reply": "Oh, for six years now!",
        "a": "two years ago",
        "b": "a dog",
        "mute": "They are lovely.",
    }
    assert time_answers(["a", "ask", "b"], texts, 5, replies={"ask": "reply"}) == ["a", "reply"]
    assert time_answers(["ask", "a"], texts, 5, replies={"ask": "mute"}) == ["a"]  # tells no time
    assert time_answers(["ask", "reply"], texts, 5, replies={"ask": "reply"}) == ["reply"]  # once
    assert time_answers(["b", "ask"], texts, 1, replies={"ask": "reply"}) == []  # beyond the depth


def test_fusion_lifts_and_flags_the_time_answers_only() -> None:
    dense = [("q", 0.9), ("x", 0.8), ("a", 0.7)]
    plain = fuse(dense, [], [], 10)
    lifted = fuse(dense, [], [], 10, time_answers=["a"], time_answer_weight=0.5)
    assert [c.record_id for c in plain] == ["q", "x", "a"]
    assert [c.record_id for c in lifted] == ["a", "q", "x"]
    a = lifted[0]
    assert a.tells_time and a.rrf_score == pytest.approx(1 / 13 + 0.5 / 11)
    assert read_flags(["a", a.fused_rank, a.rrf_score, *logged_flags(a)]).tells_time
    assert logged_flags(lifted[1]) == [] and not read_flags(["q", 2, 0.1]).tells_time
    assert "tells a time" in summary_line(a, None)
    assert "tells a time" not in summary_line(lifted[1], None)
    # Weighed with the similarity lists: a record about someone else is lifted at its weight.
    other = {c.record_id: c for c in fuse(dense, [], [], 10, other_subject={"a"}, subject_weight=0.25,
                                          time_answers=["a"], time_answer_weight=0.5)}  # fmt: skip
    assert other["a"].rrf_score == pytest.approx(0.25 * (1 / 13 + 0.5 / 11))


# --- in a real store -----------------------------------------------------------------------------

QUERY = "When did I adopt Pepper?"
NOTES = [  # (key, content)
    ("plan", "I want to adopt a puppy named Pepper"),
    ("answer", "I have had Pepper for two weeks, best decision"),
    ("name", "Pepper is a lovely name for a puppy"),
    ("sofa", "Pepper chews the sofa cushions"),
    ("cat", "Pepper and the cat get along"),
]


async def _search(
    store_location: Any, name: str, depth: int, query: str = QUERY
) -> tuple[Any, Any, dict[str, str], Any]:
    config = retold.Config().override({"retrieval.time_answer_depth": depth})
    world = await make_world(store_location(name), config=config)
    rt, p = world.rt, world.p
    ids: dict[str, str] = {}
    for key, content in NOTES:
        written = await rt.host.ingest(p, WriteRequest(
            type="episodic", content=content, scope=p.user_scope, source_kind="user_statement", trusted=True,
        ))  # fmt: skip
        assert written.ok, written
        ids[key] = written.record_id
    # Another user's note tells a time and names Pepper: it is never theirs to read.
    await rt.host.provision_user("u2")
    other = await rt.hooks.on_session_start(Principal("planner", "u2", "s2"))
    theirs = await rt.host.ingest(other, WriteRequest(
        type="episodic", content="I adopted Pepper two years ago", scope=other.user_scope,
        source_kind="user_statement", trusted=True,
    ))  # fmt: skip
    assert theirs.ok, theirs
    ids["theirs"] = theirs.record_id
    response = await rt.search(p, SearchRequest(queries=[query], k=10))
    return rt, p, ids, response


def _fused(log: dict[str, Any], ids: dict[str, str]) -> dict[str, list[Any]]:
    return {key: row for key, rid in ids.items() for row in json.loads(log["fused"]) if row[0] == rid}


async def test_a_question_that_asks_when_lifts_the_answer_that_tells_a_time(store_location: Any) -> None:
    off_rt, _, off_ids, off = await _search(store_location, "when-off.sqlite", 0)
    try:
        off_log = await off_rt.store.search_log(off.search_id)
        assert off_log is not None
        before = _fused(off_log, off_ids)
        assert not any(read_flags(row).tells_time for row in before.values())
    finally:
        await off_rt.close()
    rt, _, ids, response = await _search(store_location, "when.sqlite", 20)
    try:
        log = await rt.store.search_log(response.search_id)
        assert log is not None
        after = _fused(log, ids)
        assert "theirs" not in after and ids["theirs"] not in {r.record.id for r in response.results}
        assert {key for key, row in after.items() if read_flags(row).tells_time} == {"answer"}
        assert after["answer"][1] < before["answer"][1]  # a better fused rank
        assert after["answer"][2] > before["answer"][2]
        assert after["plan"][2] == pytest.approx(before["plan"][2], abs=1e-6)  # the others as they were
        results = {r.record.id: r for r in response.results}
        assert "tells a time" in results[ids["answer"]].explanation.summary
        assert "tells a time" not in results[ids["plan"]].explanation.summary
        replayed = await replay_gate(rt.store, response.search_id, rt.config)
        assert replayed.kept == [r.record.id for r in response.results]
    finally:
        await rt.close()


async def test_a_question_that_asks_something_else_is_ranked_as_before(store_location: Any) -> None:
    rt, _, ids, response = await _search(store_location, "what.sqlite", 20, query="Did I adopt Pepper?")
    try:
        log = await rt.store.search_log(response.search_id)
        assert log is not None
        assert not any(read_flags(row).tells_time for row in _fused(log, ids).values())
    finally:
        await rt.close()
