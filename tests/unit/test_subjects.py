"""A query that names its subject ranks records about someone else lower (retold.retrieve.subjects)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import retold
from retold.ingest.write.request import WriteRequest
from retold.models import EntityMention, LexicalMatch, LexicalTerm, SearchRequest
from retold.retrieve.explain import summary_line
from retold.retrieve.fusion import fuse, logged_flags, read_flags, rrf
from retold.retrieve.replay import replay_gate
from retold.retrieve.subjects import about_someone_else

from .writepath import make_world

# --- the rule, as a plain function ---------------------------------------------------------------

NAMED = {"ana": "person"}
OWN = {"me"}


def test_a_record_about_another_person_is_about_someone_else() -> None:
    about = {
        "ben": [("ben", "person")],
        "ana": [("ana", "person")],
        "both": [("ben", "person"), ("ana", "person")],
        "mine": [("me", "person")],
        "ben-and-me": [("ben", "person"), ("me", "person")],
        "acme": [("acme", "org")],
        "thing": [("lamp", "other")],
        "nobody": [],
    }
    assert about_someone_else(about, NAMED, OWN) == {"ben"}


def test_nothing_is_weighed_down_when_the_query_names_no_one_or_only_things_of_no_kind() -> None:
    about = {"ben": [("ben", "person")], "lamp": [("lamp", "other")]}
    assert about_someone_else(about, {}, OWN) == set()
    assert about_someone_else(about, {"vase": "other"}, OWN) == set()
    # A project named selects among projects only: people stay where they rank.
    assert about_someone_else({**about, "apollo": [("apollo", "project")]}, {"atlas": "project"}, OWN) == {
        "apollo"
    }


LINKS = st.lists(
    st.tuples(
        st.sampled_from(["ana", "ben", "me", "acme", "lamp"]), st.sampled_from(["person", "org", "other"])
    ),
    max_size=3,
)


@settings(max_examples=200, deadline=None)
@given(
    about=st.dictionaries(st.sampled_from(["r1", "r2", "r3", "r4"]), LINKS),
    named=st.dictionaries(
        st.sampled_from(["ana", "ben", "acme", "lamp"]), st.sampled_from(["person", "org", "other"])
    ),
)
def test_a_record_linked_to_a_named_entity_or_the_searcher_is_never_weighed_down(
    about: dict[str, list[tuple[str, str]]], named: dict[str, str]
) -> None:
    out = about_someone_else(about, named, OWN)
    assert out <= set(about)
    for record_id in out:
        links = about[record_id]
        assert not {e for e, _ in links} & (set(named) | OWN)
        assert any(kind in named.values() and kind != "other" for _, kind in links)


def test_fusion_weighs_a_record_about_someone_else_and_flags_it() -> None:
    dense = [("ben", 0.9), ("ana", 0.8), ("nobody", 0.7)]
    plain = fuse(dense, [], [], 10)
    weighed = fuse(dense, [], [], 10, other_subject={"ben"}, subject_weight=0.25)
    assert [c.record_id for c in plain] == ["ben", "ana", "nobody"]
    assert [c.record_id for c in weighed] == ["ana", "nobody", "ben"]
    ben = weighed[-1]
    assert ben.other_subject and ben.rrf_score == plain[0].rrf_score * 0.25
    assert read_flags(["ben", ben.fused_rank, ben.rrf_score, *logged_flags(ben)]).other_subject
    assert logged_flags(weighed[0]) == []
    assert "about someone else" in summary_line(ben, None)
    assert "someone else" not in summary_line(weighed[0], None)


def test_a_record_about_someone_else_keeps_its_word_matches_in_full() -> None:
    match = LexicalMatch((LexicalTerm("bowl", False, False),), 1)
    dense = [("ben", 0.9), ("ana", 0.8)]
    lexical = [("ben", 4.0, match)]
    weighed = {
        c.record_id: c for c in fuse(dense, lexical, [], 10, other_subject={"ben"}, subject_weight=0.25)
    }
    assert weighed["ben"].rrf_score == 0.25 / 11 + 1 / 11
    assert weighed["ana"].rrf_score == 1 / 12
    assert weighed["ben"].fused_rank == 1  # the word match still puts it first


def test_each_candidate_carries_what_every_list_gave_its_score() -> None:
    match = LexicalMatch((LexicalTerm("bowl", False, False),), 1)
    fused = fuse(
        [("ben", 0.9), ("ana", 0.8)], [("ben", 4.0, match), ("cat", 3.0, match)], [("ana", "e-ana")], 10,
        context=[("day", 0.3)], context_weight=0.5, neighbours=[("next", 0.2)], neighbour_weight=0.25,
        other_subject={"ben"}, subject_weight=0.25, time_answers=["ana"], time_answer_weight=0.5,
        replies=["next"], reply_weight=0.5, similarity_weight=1.5,
    )  # fmt: skip
    by_id = {c.record_id: c for c in fused}
    for c in fused:
        assert sum(c.contributions.values()) == pytest.approx(c.rrf_score)
    assert by_id["ben"].contributions == pytest.approx({"dense": 0.25 * 1.5 / 11, "lexical": 1 / 11})
    assert by_id["ana"].contributions == pytest.approx(
        {"dense": 1.5 / 12, "time_answers": 1.5 * 0.5 / 11, "entity": 1 / 11}
    )
    assert set(by_id["day"].contributions) == {"context"}
    assert set(by_id["next"].contributions) == {"neighbours", "replies"}


_IDS = st.sampled_from([f"r{i}" for i in range(12)])
_LIST = st.lists(_IDS, max_size=8, unique=True)


@settings(max_examples=200, deadline=None)
@given(
    dense=_LIST,
    context=_LIST,
    neighbours=_LIST,
    lexical=_LIST,
    entity=_LIST,
    other=st.sets(_IDS),
    data=st.data(),
    weights=st.lists(st.sampled_from([0.1, 0.25, 0.5, 1.0, 1.5]), min_size=5, max_size=5),
)
def test_the_fused_score_is_rrf_and_its_contributions_add_up_to_it(
    dense: list[str], context: list[str], neighbours: list[str], lexical: list[str], entity: list[str],
    other: set[str], data: st.DataObject, weights: list[float],
) -> None:  # fmt: skip
    listed = sorted({*dense, *context, *neighbours})  # time answers and replies come from these lists
    times = data.draw(st.lists(st.sampled_from(listed), max_size=4, unique=True)) if listed else []
    replies = data.draw(st.lists(st.sampled_from(listed), max_size=4, unique=True)) if listed else []
    sw, cw, nw, tw, subject = weights
    match = LexicalMatch((LexicalTerm("w", False, False),), 1)
    fused = fuse(
        [(r, 0.5) for r in dense], [(r, 1.0, match) for r in lexical], [(r, "e") for r in entity], 10,
        context=[(r, 0.4) for r in context], context_weight=cw, neighbours=[(r, 0.3) for r in neighbours],
        neighbour_weight=nw, other_subject=other, subject_weight=subject, time_answers=times,
        time_answer_weight=tw, replies=replies, reply_weight=0.5, similarity_weight=sw,
    )  # fmt: skip
    alike = rrf([dense, context, neighbours, times, replies], 10, [sw, sw * cw, sw * nw, sw * tw, sw * 0.5])
    said = rrf([lexical, entity], 10)
    for c in fused:
        expected = alike.get(c.record_id, 0.0) * (subject if c.record_id in other else 1.0)
        assert c.rrf_score == expected + said.get(c.record_id, 0.0)  # the same sums, to the bit
        assert sum(c.contributions.values()) == pytest.approx(c.rrf_score)
    assert [c.fused_rank for c in fused] == list(range(1, len(fused) + 1))
    assert [c.rrf_score for c in fused] == sorted((c.rrf_score for c in fused), reverse=True)


# --- in a real store -----------------------------------------------------------------------------

# Ben's record shares the query's small words (which the dense channel reads and full-text
# search drops as stop words), Ana's its one content word: by similarity alone Ben's comes first.
QUERY = "what did Ana do before they went out that evening"
ABOUT: list[tuple[str, str, str | None]] = [  # (key, content, whom it is about as kind:name)
    ("ben", "what did Ben do before they went out? he cooked", "person:Ben"),
    ("ana", "Ana painted the fence that evening", "person:Ana"),
    ("nobody", "they went out for a walk before the evening rain", None),  # about the user
    ("mine", "Aditya did the dishes before they went out", "person:Aditya"),
    ("acme", "Acme did the inventory before they went out", "org:Acme"),
]


# Ana and Ben are in most records (as the two people of a conversation are), so naming either
# selects nothing (entity_max_share) and leaves the dense and full-text queries (focus_queries).
FILLERS = [(f"{who.lower()}-{n}", f"{who} wrote note {n} on the garden", f"person:{who}")
           for who in ("Ana", "Ben") for n in range(6)]  # fmt: skip


async def _search(store_location: Any, name: str, weight: float) -> tuple[Any, dict[str, str], Any]:
    config = retold.Config().override({"retrieval.subject_weight": weight, "retrieval.per_generator_k": 5})
    world = await make_world(store_location(name), config=config)
    rt, p = world.rt, world.p
    ids: dict[str, str] = {}
    for key, content, about in [*ABOUT, *FILLERS]:
        entities = []
        if about is not None:
            kind, who = about.split(":")
            entities = [EntityMention(kind, who, "about")]  # type: ignore[arg-type]
        written = await rt.host.ingest(p, WriteRequest(
            type="episodic", content=content, scope=p.user_scope, source_kind="user_statement", trusted=True,
            entities=entities,
        ))  # fmt: skip
        assert written.ok, written
        ids[key] = written.record_id
    response = await rt.search(p, SearchRequest(queries=[QUERY], k=10))
    return rt, ids, response


async def test_a_search_naming_its_subject_ranks_records_about_someone_else_lower(
    store_location: Any,
) -> None:
    off_rt, off_ids, off = await _search(store_location, "subjects-off.sqlite", 1.0)
    try:
        off_log = await off_rt.store.search_log(off.search_id)
        assert off_log is not None
        off_fused = {off_ids_key: row for off_ids_key, rid in off_ids.items()
                     for row in json.loads(off_log["fused"]) if row[0] == rid}  # fmt: skip
        assert not any(read_flags(row).other_subject for row in off_fused.values())
    finally:
        await off_rt.close()
    rt, ids, response = await _search(store_location, "subjects.sqlite", 0.25)
    try:
        log = await rt.store.search_log(response.search_id)
        assert log is not None
        by_key = {key: row for key, rid in ids.items() for row in json.loads(log["fused"]) if row[0] == rid}
        assert {"ben", "ana", "nobody", "mine", "acme"} <= set(by_key)
        flagged = {key for key, row in by_key.items() if read_flags(row).other_subject}
        # Ben's records, not Ana's, the searcher's, a record about nobody or one about an org.
        assert flagged == {key for key in by_key if key.startswith("ben")}
        # Ben's record is found by similarity alone (no word of it is a query term), so its
        # whole fused score is weighed (its rank among the neighbours may differ); Ana's is
        # what it was.
        assert ids["ben"] not in {row[0] for row in json.loads(log["lexical"])}
        assert by_key["ben"][2] < 0.5 * off_fused["ben"][2]
        assert by_key["ana"][2] == pytest.approx(off_fused["ana"][2], abs=1e-5)
        assert by_key["ben"][1] > off_fused["ben"][1]
        results = {r.record.id: r for r in response.results}
        assert "about someone else" in results[ids["ben"]].explanation.summary  # still served, said why
        assert "someone else" not in results[ids["ana"]].explanation.summary
        # The replay rebuilds the order the search gated, weights included.
        replayed = await replay_gate(rt.store, response.search_id, rt.config)
        assert replayed.kept == [r.record.id for r in response.results]
    finally:
        await rt.close()


async def test_about_entities_reads_only_the_about_links_of_the_records_asked(store_location: Any) -> None:
    rt, ids, _ = await _search(store_location, "subjects-links.sqlite", 0.25)
    try:
        about = await rt.store.about_entities([ids["ben"], ids["nobody"], ids["acme"], "no-such-record"])
        assert set(about) == {ids["ben"], ids["nobody"], ids["acme"]}
        assert [kind for _, kind in about[ids["acme"]]] == ["org"]
        # A user's statement that names no one is about the user, who is never someone else.
        assert about[ids["nobody"]] == (await rt.store.about_entities([ids["mine"]]))[ids["mine"]]
        kinds = await rt.store.entity_kinds([about[ids["ben"]][0][0], "no-such-entity"])
        assert list(kinds.values()) == ["person"]
    finally:
        await rt.close()
