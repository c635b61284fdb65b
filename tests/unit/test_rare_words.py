"""A rare word is evidence alone (issue 18): ``gate.rare_word_records``.

The spec's two-term floor stops a one-word query from admitting every record that mentions the
word. A question about the user's own past often has one content word ("Where have I camped?");
a plain word in at most ``rare_word_records`` of the searcher's records (and a store of at least
``rare_word_min_records``, 200) passes the floor alone, as an identifier does, and cannot flood.
"""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

import retold
from retold.ingest.write.request import WriteRequest
from retold.models import LexicalTerm, Scope, SearchRequest
from retold.retrieve.gate import gate, passes_step1
from retold.retrieve.query_terms import query_terms, with_variants
from retold.retrieve.replay import replay_gate
from retold.retrieve.word_counts import rare_words

from .test_common_words import EPISODE, FLOORS, lexical_only, lexical_world

# --- which words are rare ------------------------------------------------------------------------


def test_rare_words_are_plain_words_in_few_records_of_a_store_large_enough() -> None:
    terms = query_terms("Where have I camped with Ana near ERR42?")
    counts = {"camped": 2, "ana": 1, "err42": 1, "near": 9}
    assert rare_words(terms, 100, counts, max_records=3, min_records=50) == {("camped",), ("ana",)}
    assert rare_words(terms, 49, counts, max_records=3, min_records=50) == set()  # a handful of records
    assert rare_words(terms, 100, counts, max_records=0, min_records=50) == set()  # turned off
    # An inflection's records count too: "camp" + "camping" in 4 records is not rare at 3.
    ((camp,),) = with_variants([query_terms("camp")], {"camp": [("camping", 2)]})
    assert camp.variants == ("camping",)
    assert rare_words([camp], 100, {"camp": 2, "camping": 2}, max_records=3, min_records=50) == set()
    assert rare_words([camp], 100, {"camp": 2, "camping": 1}, max_records=3, min_records=50) == {("camp",)}


# --- the gate ------------------------------------------------------------------------------------


def test_one_rare_word_passes_and_says_so_while_one_plain_word_does_not() -> None:
    rare = lexical_only((LexicalTerm("camped", False, False, rare=True),), 1)
    assert passes_step1(rare, EPISODE, FLOORS) == "lexical 1/1 terms, the rare word 'camped'"
    plain = lexical_only((LexicalTerm("camped", False, False),), 1)
    assert passes_step1(plain, EPISODE, FLOORS) is None
    _, out = gate([plain], {"r": EPISODE}, FLOORS)
    assert "no identifier, entity alias or rare word" in out[0][1]
    # The term fraction still applies: one rare word of three is not enough.
    assert (
        passes_step1(lexical_only((LexicalTerm("camped", False, False, rare=True),), 3), EPISODE, FLOORS)
        is None
    )
    # A common word is never evidence, flagged rare or not.
    both = lexical_only((LexicalTerm("camped", False, False, True, True),), 2, 1)
    assert passes_step1(both, EPISODE, FLOORS) is None


_flags = st.tuples(st.booleans(), st.booleans(), st.booleans(), st.booleans())


@settings(max_examples=300, deadline=None)
@given(
    matched=st.lists(_flags, max_size=6),
    unmatched=st.integers(0, 4),
    fraction=st.sampled_from([0.0, 0.25, 0.34, 0.5, 1.0]),
    least=st.integers(1, 3),
)
def test_the_lexical_floor_is_the_spec_rule_with_rare_words_as_precise_as_identifiers(
    matched: list[tuple[bool, bool, bool, bool]], unmatched: int, fraction: float, least: int
) -> None:
    floors = retold.Config().override({
        "retrieval.gate.lexical_min_term_fraction": fraction,
        "retrieval.gate.lexical_min_matched_terms": least,
    }).retrieval.gate.floors_for("tool")  # fmt: skip
    terms = tuple(LexicalTerm(f"w{i}", ident, alias, common and not (ident or alias), rare)
                  for i, (ident, alias, common, rare) in enumerate(matched))  # fmt: skip
    common = sum(t.common for t in terms)
    total = len(terms) + unmatched
    if total == common:
        return
    passed = passes_step1(lexical_only(terms, total, common), EPISODE, floors) is not None
    counted = [t for t in terms if not t.common]
    evidence = any(t.is_identifier or t.is_entity_alias or t.rare for t in counted)
    spec = len(counted) / (total - common) >= fraction and (len(counted) >= least or evidence)
    assert passed == spec


# --- through the runtime, on every backend ----------------------------------------------------

NOTES = [f"Garden note {n}: the tomatoes and the beans need water" for n in range(55)]
CAMPED = "We camped by the lake and watched the stars all night"


async def _world(store_location: Any, name: str, notes: list[str]) -> tuple[Any, Any, dict[str, str]]:
    overrides = {
        "retrieval.gate.rare_word_min_records": 50,  # the default 200 would need a larger store
        # No record beside an answer rides along with it.
        "retrieval.gate.context_floor": 1.0,
        "retrieval.gate.companion_floor": 1.0,
        "retrieval.gate.companion_beside_floor": 1.0,
    }
    world, ids = await lexical_world(store_location, name, overrides, [*notes, CAMPED])
    return world, world.p, ids


async def test_a_question_with_one_rare_word_is_answered_and_the_replay_agrees(store_location: Any) -> None:
    world, p, ids = await _world(store_location, "rare.sqlite", NOTES)
    rt = world.rt
    try:
        response = await rt.search(p, SearchRequest(queries=["Where have I camped?"]))
        assert [r.record.id for r in response.results] == [ids[CAMPED]]
        assert "the rare word 'camped'" in (response.results[0].explanation.gate or "")
        row = await rt.store.search_log(response.search_id)
        assert row is not None
        flags = json.loads(row["config_flags"])["gate"]
        assert (flags["rare_word_records"], flags["rare_word_min_records"]) == (3, 50)
        replayed = await replay_gate(rt.store, response.search_id, rt.config)
        assert replayed.kept == [ids[CAMPED]]
        # A word in many of the records is the spec's one-word query: nothing passes on it.
        assert (await rt.search(p, SearchRequest(queries=["Where are the tomatoes?"]))).results == []
        # Another tenant camping in a hundred records does not make the word common for me.
        await rt.host.provision_user("someone-else")
        other = retold.Principal(p.agent_id, "someone-else")
        for n in range(100):
            await rt.host.ingest(other, WriteRequest(
                type="episodic", content=f"camped again, night {n}", scope=Scope("user", "someone-else"),
                source_kind="user_statement", trusted=True,
            ))  # fmt: skip
        again = await rt.search(p, SearchRequest(queries=["Where have I camped?"]))
        assert [r.record.id for r in again.results] == [ids[CAMPED]]
        off = rt.config.override({"retrieval.gate.rare_word_records": 0})
        assert (await replay_gate(rt.store, response.search_id, off)).kept == [ids[CAMPED]]  # logged flags
    finally:
        await rt.close()


async def test_in_a_small_store_one_word_is_no_evidence(store_location: Any) -> None:
    world, p, _ = await _world(store_location, "small.sqlite", NOTES[:10])
    try:
        response = await world.rt.search(p, SearchRequest(queries=["Where have I camped?"]))
        assert response.results == []
        assert "no identifier, entity alias or rare word" in (response.empty_reason or "")
    finally:
        await world.rt.close()
