"""Words of conversation itself are no evidence for the gate (issue 18): ``gate.chat_words``.

Greetings, reactions and the verbs chat wraps around its topic ("Cool! What did it look
like?") count among the query's terms but never as matched, in a store of any size; they
still rank.
"""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from retold.models import SearchRequest
from retold.retrieve.query_terms import query_terms
from retold.retrieve.replay import replay_gate
from retold.retrieve.stopwords import CHAT_WORDS
from retold.retrieve.word_counts import chat_words

from .test_common_words import lexical_world

SHOWN = "That looks so cool, I really like it!"
NECKLACE = "Bought a silver necklace at the harbour market on Saturday."
NOTES = [f"The garden note number {n} mentions tomatoes" for n in range(10)]


def test_chat_words_and_their_inflections_but_never_names_identifiers_or_content() -> None:
    terms = query_terms("Cool! Looked great, waiting to hear how Hope liked the ERR42 necklace")
    assert chat_words(terms) == {("cool",), ("looked",), ("great",), ("waiting",), ("hear",), ("liked",)}
    # "Hope" written as a name, an identifier and a content word are never chat.
    assert chat_words(query_terms("hope")) == {("hope",)}
    # Words of feeling and liking a memory is about stay evidence, inflections included (the
    # list is matched by stem, so no chat word may share one with them: "lovely" would).
    feelings = "What makes me happy? I love my silver necklace, proud and excited, loving it"
    assert chat_words(query_terms(feelings)) == set()


@settings(max_examples=200, deadline=None)
@given(
    words=st.lists(st.sampled_from([*sorted(CHAT_WORDS), "necklace", "Hope", "ERR42", "market"]), max_size=8)
)
def test_chat_words_are_a_subset_of_the_querys_plain_words(words: list[str]) -> None:
    terms = query_terms(" ".join(words))
    found = chat_words(terms)
    assert found <= {t.tokens for t in terms if t.stemmable and not t.is_name}
    assert all(not any(c.isdigit() for c in token) for tokens in found for token in tokens)


async def test_a_chat_turn_finds_nothing_on_chat_words_but_a_question_still_does(store_location: Any) -> None:
    overrides = {"retrieval.gate.context_floor": 1.0, "retrieval.gate.companion_floor": 1.0}
    world, ids = await lexical_world(store_location, "chat.sqlite", overrides, [*NOTES, SHOWN, NECKLACE])
    rt, p = world.rt, world.p
    try:
        chat = await rt.search(p, SearchRequest(queries=["Cool! What did it look like?"]))
        assert chat.results == [], [r.explanation.gate for r in chat.results]
        assert "'cool', 'look', 'like' matched, not counted" in (chat.empty_reason or "")
        assert "lexical 0/3 terms" in (chat.empty_reason or "")  # counted in the query, never matched
        log = await rt.store.search_log(chat.search_id)
        assert log is not None and json.loads(log["lexical"])  # the words still matched and ranked
        assert json.loads(log["config_flags"])["gate"]["chat_words"] is True
        # The replay reads the logged flags; with the rule off, the same words are evidence.
        assert (await replay_gate(rt.store, chat.search_id, rt.config)).kept == []
        asked = await rt.search(p, SearchRequest(queries=["Where did I buy the silver necklace? Looks cool"]))
        assert [r.record.id for r in asked.results] == [ids[NECKLACE]]
        # "looks" and "cool" stay among the question's five terms; its two content words carry it.
        assert (asked.results[0].explanation.gate or "").startswith("lexical 2/5 terms")
    finally:
        await rt.close()
    off_world, off_ids = await lexical_world(
        store_location, "chat-off.sqlite", {**overrides, "retrieval.gate.chat_words": False}, [*NOTES, SHOWN]
    )
    try:
        chat = await off_world.rt.search(off_world.p, SearchRequest(queries=["Cool! What did it look like?"]))
        assert [r.record.id for r in chat.results] == [off_ids[SHOWN]]
    finally:
        await off_world.rt.close()
