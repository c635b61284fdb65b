"""Common words are no evidence for the gate (issue 18): ``gate.common_word_share``.

A plain word in more than that share of the searcher's records ("awesome", "great" in a chat
history) still ranks, but the lexical floors count it neither as matched nor as a query term.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import retold
from retold.ingest.write.request import WriteRequest
from retold.models import Candidate, GeneratorHit, LexicalMatch, LexicalTerm, Scope, SearchRequest
from retold.retrieve.gate import GateSubject, gate, passes_step1
from retold.retrieve.lexical import lexical_search
from retold.retrieve.query_terms import query_terms
from retold.retrieve.replay import candidates_from_log, replay_gate
from retold.retrieve.word_counts import common_share, common_words
from retold.store import Store

from .factories import MakeRecord
from .writepath import make_world

FLOORS = retold.Config().retrieval.gate.floors_for("tool")
EPISODE = GateSubject("episodic", "user_statement")
TYPES = ("semantic", "episodic", "procedural", "session_summary")


def lexical_only(terms: tuple[LexicalTerm, ...], total: int, common: int = 0) -> Candidate:
    return Candidate(
        "r", None, GeneratorHit(1, 5.0), LexicalMatch(terms, total, common), None, None, 0.1, 1,
        None, 0.1, None, None, None,
    )  # fmt: skip


# --- which words are common ------------------------------------------------------------------


def test_common_words_are_plain_words_past_the_share_and_never_names_or_identifiers() -> None:
    terms = query_terms("Awesome Ana, the ERR42 fix sounds great")
    counts = {"awesome": 40, "ana": 90, "err42": 50, "fix": 3, "sounds": 11, "great": 30}
    common = common_words(terms, 100, counts, share=0.1, min_records=50)
    assert common == {("awesome",), ("sounds",), ("great",)}  # "Ana" is written as a name
    assert common_words(terms, 49, counts, share=0.1, min_records=50) == set()  # a small store
    assert common_words(terms, 100, counts, share=1.0, min_records=1) == set()  # turned off
    lower = query_terms("awesome ana")  # not written as a name: a word like any other
    assert common_words(lower, 100, counts, share=0.1, min_records=50) == {("awesome",), ("ana",)}


def test_the_share_rises_with_the_records_length() -> None:
    assert common_share(0.1, 0.0) == common_share(0.1, 12) == common_share(0.1, 20) == 0.1
    assert common_share(0.1, 40) == pytest.approx(0.19)  # in either of two sentence-long halves
    assert common_share(0.1, 100) == pytest.approx(1 - 0.9**5)
    terms = query_terms("what family trips did we take")
    counts = {"family": 25, "trips": 5, "take": 12}
    assert common_words(terms, 100, counts, share=0.1, min_records=50) == {("family",), ("take",)}
    long = common_words(terms, 100, counts, share=0.1, min_records=50, average_tokens=60)
    assert long == set()  # a share under 27 % is ordinary in records of three short paragraphs


async def test_term_statistics_report_the_records_length(store: Store, make_record: MakeRecord) -> None:
    for content in ("one two three", "four five six seven eight"):
        await store.insert_record(make_record(content=content))
    async with store.lexical_index([make_record().scope]) as index:
        stats = await store.term_statistics(["two"], index=index)
    assert stats.total == 2
    # Every indexed column counts (the record's subject and aliases too): at least its words.
    assert stats.tokens >= 8 and stats.average_tokens == stats.tokens / 2


async def test_the_lexical_channel_flags_common_words_from_the_searchers_own_records(
    store: Store, make_record: MakeRecord
) -> None:
    ids = []
    for i in range(12):
        record = make_record(content=f"awesome, sounds great {i}" if i < 4 else f"note {i} about the garden")
        await store.insert_record(record)
        ids.append(record.id)
    pottery = make_record(content="awesome pottery class, great teacher")
    await store.insert_record(pottery)
    ids.append(pottery.id)
    query = ["awesome, the great pottery class"]
    hits = await lexical_search(store, query, set(ids), 20, common_word_share=0.2, common_word_min_records=10)
    by_id = {h.record_id: h.match for h in hits}
    match = by_id[pottery.id]
    assert {t.value: t.common for t in match.terms} == {
        "awesome": True, "great": True, "pottery": False, "class": False
    }  # fmt: skip
    assert (match.total_terms, match.common_terms, match.counted) == (4, 2, (2, 2))
    chat = by_id[ids[0]]
    assert chat.counted == (0, 2) and all(t.common for t in chat.terms)
    # Off (the default of direct callers): nothing is common, and the ranking is the same.
    plain = await lexical_search(store, query, set(ids), 20)
    assert [h.record_id for h in plain] == [h.record_id for h in hits]
    assert all(not t.common for h in plain for t in h.match.terms)


# --- the gate ------------------------------------------------------------------------------------


def test_a_match_on_common_words_alone_does_not_pass_and_says_why() -> None:
    words = (LexicalTerm("awesome", False, False, True), LexicalTerm("great", False, False, True))
    chat = lexical_only(words, 3, 2)
    assert passes_step1(chat, EPISODE, FLOORS) is None
    kept, out = gate([chat], {"r": EPISODE}, FLOORS)
    assert not kept
    assert "lexical 0/1 terms (2 common or date words not counted)" in out[0][1]
    # A search that asked for no gate (a LangGraph store built with gate=False) gets every match.
    assert passes_step1(chat, EPISODE, FLOORS.opened()) is not None


def test_common_words_unmatched_in_the_query_no_longer_dilute_a_match() -> None:
    # "awesome, that sounds great: the pottery class" against a record about the pottery class.
    terms = (LexicalTerm("pottery", False, False), LexicalTerm("class", False, False))
    assert passes_step1(lexical_only(terms, 7, 0), EPISODE, FLOORS) is None  # 2/7 < 0.34
    assert passes_step1(lexical_only(terms, 7, 5), EPISODE, FLOORS) == (
        "lexical 2/2 terms (5 common or date words not counted)"
    )


_flags = st.tuples(st.booleans(), st.booleans(), st.booleans())


@settings(max_examples=300, deadline=None)
@given(
    matched=st.lists(_flags, max_size=6),
    unmatched_common=st.integers(0, 4),
    unmatched_plain=st.integers(0, 4),
    fraction=st.sampled_from([0.0, 0.25, 0.34, 0.5, 1.0]),
    least=st.integers(1, 3),
)
def test_the_lexical_floor_reads_only_the_words_that_are_not_common(
    matched: list[tuple[bool, bool, bool]],
    unmatched_common: int,
    unmatched_plain: int,
    fraction: float,
    least: int,
) -> None:
    """Without common words the rule is the spec's; with them, it is the spec's rule over the
    remaining words, and a match on common words alone never passes."""
    floors = retold.Config().override({
        "retrieval.gate.lexical_min_term_fraction": fraction,
        "retrieval.gate.lexical_min_matched_terms": least,
    }).retrieval.gate.floors_for("tool")  # fmt: skip
    terms = tuple(LexicalTerm(f"w{i}", ident, alias, common and not (ident or alias))
                  for i, (ident, alias, common) in enumerate(matched))  # fmt: skip
    common = sum(t.common for t in terms) + unmatched_common
    total = len(terms) + unmatched_common + unmatched_plain
    if total == 0:
        return
    passed = passes_step1(lexical_only(terms, total, common), EPISODE, floors) is not None
    counted = [t for t in terms if not t.common]
    rest = total - common
    precise = any(t.is_identifier or t.is_entity_alias for t in counted)
    spec = (len(counted) / rest if rest else 0.0) >= fraction and (len(counted) >= least or precise)
    assert passed == spec
    if not counted and fraction > 0:
        assert not passed


def test_a_log_written_before_common_words_replays_as_before() -> None:
    row = {
        "dense": "[]",
        "lexical": json.dumps([["r", 1, 4.2, [["pottery", False, False], ["class", False, False]], 3]]),
        "entity": "[]",
        "freshness": "[]",
        "fused": json.dumps([["r", 1, 0.1]]),
    }
    (candidate,) = candidates_from_log(row)
    assert candidate.lexical_terms == LexicalMatch(
        (LexicalTerm("pottery", False, False), LexicalTerm("class", False, False)), 3, 0
    )
    assert passes_step1(candidate, EPISODE, FLOORS) == "lexical 2/3 terms"


# --- through the runtime, on every backend ----------------------------------------------------

CHAT = [f"Awesome, sounds great! See you on day {n}" for n in range(6)] + [
    f"The garden note number {n} mentions tomatoes" for n in range(6)
]


# Lexical floors alone decide: nothing passes on the fake embedder's cosines.
LEXICAL_FLOORS_ONLY = {
    "retrieval.gate.dense_floor": dict.fromkeys(TYPES, 1.0),
    "retrieval.gate.standout_floor": 1.0,
    "retrieval.gate.window_floor": 1.0,
}


async def lexical_world(
    store_location: Any, name: str, overrides: dict[str, Any], contents: list[str]
) -> tuple[Any, dict[str, str]]:
    """A world whose gate reads only the lexical floors, ``contents`` written as the user's episodes."""
    config = retold.Config().override({**LEXICAL_FLOORS_ONLY, **overrides})
    world = await make_world(store_location(name), config=config)
    ids: dict[str, str] = {}
    for content in contents:
        written = await world.rt.host.ingest(world.p, WriteRequest(
            type="episodic", content=content, scope=world.p.user_scope, source_kind="user_statement",
            trusted=True,
        ))  # fmt: skip
        assert written.ok, written
        ids[content] = written.record_id
    return world, ids


async def _world(store_location: Any, name: str, share: float) -> tuple[Any, Any, dict[str, str]]:
    overrides = {
        "retrieval.gate.common_word_share": share,
        "retrieval.gate.common_word_min_records": 10,
        "retrieval.gate.chat_words": False,  # the share alone decides here (test_chat_words.py)
    }
    world, ids = await lexical_world(
        store_location, name, overrides, [*CHAT, "Awesome pottery class, the teacher was great"]
    )
    return world.rt, world.p, ids


async def test_a_chat_turn_finds_nothing_on_its_common_words_but_a_question_still_does(
    store_location: Any,
) -> None:
    rt, p, ids = await _world(store_location, "common.sqlite", 0.1)
    try:
        chat = await rt.search(p, SearchRequest(queries=["Awesome, that sounds great!"]))
        assert chat.results == []
        log = await rt.store.search_log(chat.search_id)
        assert log is not None and json.loads(log["lexical"])  # the words still matched and ranked
        assert "common or date words not counted" in (chat.empty_reason or "")
        flags = json.loads(log["config_flags"])["gate"]
        assert (flags["common_word_share"], flags["common_word_min_records"]) == (0.1, 10)

        asked = await rt.search(p, SearchRequest(queries=["awesome, how was the pottery class?"]))
        found = {r.record.id: r for r in asked.results}
        pottery = ids["Awesome pottery class, the teacher was great"]
        assert pottery in found
        assert "common or date word" in (found[pottery].explanation.gate or "")
        for response in (chat, asked):  # the replay makes the gate's decision again from the log
            replayed = await replay_gate(rt.store, response.search_id, rt.config)
            row = await rt.store.search_log(response.search_id)
            assert row is not None
            assert replayed.gated_out == [tuple(x) for x in json.loads(row["gated_out"])]
            assert {r.record.id for r in response.results} <= set(replayed.kept)
    finally:
        await rt.close()
    rt, p, _ = await _world(store_location, "common-off.sqlite", 1.0)
    try:  # turned off: two shared words pass the floors, as before the rule
        assert (await rt.search(p, SearchRequest(queries=["Awesome, that sounds great!"]))).results
    finally:
        await rt.close()


async def test_another_tenants_long_records_do_not_change_my_records_length(
    store: Store, make_record: MakeRecord
) -> None:
    """The length that sets the share is the searcher's own, as every lexical statistic is."""
    mine, theirs = Scope("user", "u2"), Scope("user", "u1")
    await store.insert_record(make_record(content="short note", scope=mine))

    async def length() -> int:
        async with store.lexical_index([mine]) as index:
            return (await store.term_statistics(["note"], index=index)).tokens

    before = await length()
    await store.insert_record(make_record(content="word " * 400, scope=theirs))
    assert await length() == before
