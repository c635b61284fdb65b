"""Fusion, freshness, gate, duplicate collapse and budget (spec §10.3–§10.8) as pure functions."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta

import pytest

from retold.config import Config
from retold.models import Candidate, GeneratorHit, LexicalMatch, LexicalTerm
from retold.retrieve.budget import fill_budget, record_tokens
from retold.retrieve.dedup import collapse_duplicates
from retold.retrieve.freshness import apply_freshness
from retold.retrieve.fusion import fuse, rrf
from retold.retrieve.gate import (
    STANDOUT_MIN_MATCHES,
    GateSubject,
    Reference,
    dense_reference,
    empty_reason,
    gate,
)

from .factories import MakeRecord

# The spec's rules at the spec's numbers (§2.3, §17.4); the shipped defaults are calibrated
# for MiniLM (docs/benchmarks.md) and tested in test_config.py.
SPEC = Config().override(
    {
        "retrieval.gate.dense_floor": {
            "semantic": 0.45,
            "episodic": 0.40,
            "procedural": 0.45,
            "session_summary": 0.5,
        },
        "retrieval.gate.lexical_min_term_fraction": 0.5,
        "retrieval.gate.lexical_min_matched_terms": 2,
        "retrieval.gate.relative_floor": 0.5,
        # The spec has no companion rule (retold's addition, tested on its own below).
        "retrieval.gate.companion_floor": 1.0,
        "retrieval.gate.auto.companion_floor": 1.0,
        "retrieval.gate.window_floor": 1.0,
        "retrieval.gate.auto.window_floor": 1.0,
        "retrieval.gate.standout_floor": 1.0,
        "retrieval.gate.auto.standout_floor": 1.0,
    }
)
FLOORS = SPEC.retrieval.gate.floors_for("tool")
AUTO = SPEC.retrieval.gate.floors_for("auto")


def cand(
    rid: str,
    *,
    dense: float | None = None,
    lex: tuple[int, int, tuple[str, ...]] | None = None,
    entity: str | None = None,
    score: float = 0.01,
) -> Candidate:
    """A candidate with the given signals; ``lex`` is (matched, total, flags) with flags in {id, alias}."""
    match = None
    if lex is not None:
        matched, total, flags = lex
        terms = tuple(
            LexicalTerm(f"t{i}", "id" in flags and i == 0, "alias" in flags and i == 0)
            for i in range(matched)
        )
        match = LexicalMatch(terms, total)
    return Candidate(
        rid,
        GeneratorHit(1, dense) if dense is not None else None,
        GeneratorHit(1, 5.0) if lex else None,
        match,
        GeneratorHit(1, 0.0) if entity else None,
        entity,
        score,
        1,
        None,
        score,
        None,
        None,
        None,
    )


SEM = GateSubject("semantic", "user_statement")
EPI = GateSubject("episodic", "user_statement")


def test_rrf_handles_an_empty_generator() -> None:
    assert list(rrf([[], ["a", "b"], []], 60)) == ["a", "b"]
    fused = fuse([], [("a", 3.0, LexicalMatch((), 1))], [], 60)
    assert [c.record_id for c in fused] == ["a"] and fused[0].dense is None


def test_rrf_sums_reciprocal_ranks_across_generators() -> None:
    scores = rrf([["a", "b"], ["b"], ["b", "a"]], 60)
    assert list(scores) == ["b", "a"]
    assert abs(scores["b"] - (1 / 62 + 1 / 61 + 1 / 61)) < 1e-12


def test_the_similarity_lists_weigh_against_the_word_and_entity_lists() -> None:
    match = LexicalMatch([LexicalTerm("pottery", True, False, False, False)], 1, 1)
    dense = [("d", 0.8), ("both", 0.7)]
    lexical = [("w", 9.0, match), ("both", 5.0, match)]
    even = fuse(dense, lexical, [], 10, context=[("c", 0.6)], context_weight=0.5)
    # Equal weight: the dense and the word list's best tie, and the better rank (both 1st) then id.
    assert [c.record_id for c in even][:3] == ["both", "d", "w"]
    assert even[1].rrf_score == pytest.approx(even[2].rrf_score)
    weighed = fuse(dense, lexical, [], 10, context=[("c", 0.6)], context_weight=0.5, similarity_weight=1.5)
    by_id = {c.record_id: c for c in weighed}
    assert [c.record_id for c in weighed][:3] == ["both", "d", "w"]
    assert by_id["d"].rrf_score == pytest.approx(1.5 / 11) and by_id["w"].rrf_score == pytest.approx(1 / 11)
    # The lists drawn from the dense channel are weighed with it: context at 0.5 x 1.5.
    assert by_id["c"].rrf_score == pytest.approx(0.5 * 1.5 / 11)
    assert by_id["both"].rrf_score == pytest.approx(1.5 / 12 + 1 / 12)
    # Weight 0 leaves the words and entities alone to rank.
    words_only = fuse(dense, lexical, [("e", "ent")], 10, similarity_weight=0.0)
    assert [c.record_id for c in words_only][:3] == ["e", "w", "both"]  # tied: best rank, then id


def test_per_type_dense_floor_is_named_in_the_reason() -> None:
    kept, out = gate([cand("e", dense=0.42), cand("s", dense=0.42)], {"e": EPI, "s": SEM}, FLOORS)
    assert [c.record_id for c in kept] == ["e"]
    assert out[0][0] == "s" and "dense 0.42 < 0.45 (semantic)" in out[0][1]


def test_lexical_rules_plain_word_identifier_two_words_and_alias() -> None:
    subjects = {r: SEM for r in "abcd"}
    one_plain = cand("a", lex=(1, 1, ()))
    one_identifier = cand("b", lex=(1, 1, ("id",)))
    two_plain = cand("c", lex=(2, 2, ()))
    one_alias = cand("d", lex=(1, 1, ("alias",)))
    kept, out = gate([one_plain, one_identifier, two_plain, one_alias], subjects, FLOORS)
    assert {c.record_id for c in kept} == {"b", "c", "d"}
    assert [r for r, _ in out] == ["a"] and "1 matched < 2" in out[0][1]


def test_relative_floor_within_channel_groups_and_the_entity_exemption() -> None:
    subjects = {r: SEM for r in ("strong", "weak", "ent", "corroborated")}
    corroborated = cand("corroborated", dense=0.9, lex=(2, 2, ()), score=0.033)
    strong = cand("strong", dense=0.9, score=0.016)
    weak = cand("weak", dense=0.5, score=0.007)
    ent = cand("ent", entity="e1", score=0.007)
    kept, out = gate([corroborated, strong, weak, ent], subjects, FLOORS)
    assert [c.record_id for c in kept] == ["corroborated", "strong", "ent"]
    assert out == [("weak", out[0][1])] and out[0][1].startswith("step 2:")


def test_a_single_survivor_is_never_dropped_by_the_relative_floor() -> None:
    kept, out = gate([cand("only", dense=0.5, score=0.0001)], {"only": SEM}, FLOORS)
    assert [c.record_id for c in kept] == ["only"] and out == []


def test_auto_trigger_excludes_session_summaries_before_the_floors() -> None:
    summary = GateSubject("episodic", "session_summary")
    kept, out = gate([cand("s", dense=0.99, entity="e")], {"s": summary}, AUTO)
    assert kept == [] and "session_summary" in out[0][1]


def test_empty_reason_names_every_missed_floor_with_the_type() -> None:
    best = cand("a", dense=0.38, lex=(1, 4, ()), score=0.02)
    other = cand("b", dense=0.2, score=0.01)
    kept, _ = gate([best, other], {"a": SEM, "b": SEM}, FLOORS)
    assert kept == []
    reason = empty_reason([best, other], {"a": SEM, "b": SEM}, FLOORS, eligible=2)
    assert reason == (
        "best dense 0.38 < 0.45 (semantic); best lexical 1/4 terms < 0.5 of the query; no entity match"
    )
    assert empty_reason([], {}, FLOORS, eligible=0).startswith("no eligible records")


def test_episodic_records_decay_and_semantic_do_not(make_record: MakeRecord, clock) -> None:  # type: ignore[no-untyped-def]
    old_episode = make_record(type="episodic", event_at=clock.now() - timedelta(days=30))
    old_fact = make_record(type="semantic", event_at=clock.now() - timedelta(days=300))
    records = {old_episode.id: old_episode, old_fact.id: old_fact}
    cands = [cand(old_episode.id, score=0.02), cand(old_fact.id, score=0.02)]
    out = apply_freshness(cands, records, clock.now(), Config().retrieval.freshness)
    by_id = {c.record_id: c for c in out}
    assert abs(by_id[old_episode.id].freshness_multiplier - 0.5) < 1e-9  # type: ignore[operator]
    assert by_id[old_fact.id].freshness_multiplier is None and by_id[old_fact.id].score == 0.02
    skipped = apply_freshness(cands, records, clock.now(), Config().retrieval.freshness, skip=True)
    assert all(c.freshness_multiplier is None for c in skipped)


def test_duplicate_collapse_keeps_the_higher_ranked_record() -> None:
    cos = {("b", "a"): 0.95, ("c", "a"): 0.5}
    kept, dropped = collapse_duplicates(
        [cand("a"), cand("b"), cand("c")], lambda x, y: cos.get((x, y), 0.0), 0.92
    )
    assert [c.record_id for c in kept] == ["a", "c"] and dropped == [("b", "a", 0.95)]


def test_budget_never_truncates_and_skips_what_does_not_fit(make_record: MakeRecord) -> None:
    long = make_record(content="x" * 4000)
    short = make_record(content="short fact")
    records = {long.id: long, short.id: short}
    admitted, out = fill_budget(
        [cand(long.id), cand(short.id)], records, lambda r: None, k=8, token_budget=200
    )
    assert [a.candidate.record_id for a in admitted] == [short.id] and out == [long.id]
    assert records[long.id].content == "x" * 4000
    assert admitted[0].tokens_used == record_tokens(short)


def test_authority_counterpart_that_outranks_its_conflict_keeps_its_place_under_k_1(
    make_record: MakeRecord,
) -> None:
    confirmed = make_record(content="Aditya prefers concise answers.")
    provisional = make_record(content="Aditya prefers detailed answers.", status="provisional")
    records = {confirmed.id: confirmed, provisional.id: provisional}
    top, second = cand(confirmed.id, score=0.03), cand(provisional.id, score=0.02)
    admitted, out = fill_budget(
        [top, second], records, lambda r: top if r.id == provisional.id else None, k=1, token_budget=1500
    )
    assert [a.candidate.record_id for a in admitted] == [confirmed.id] and out == [provisional.id]
    # When the provisional record ranks first, its counterpart is pulled in front of it as a pair.
    admitted, _ = fill_budget(
        [second, top], records, lambda r: top if r.id == provisional.id else None, k=1, token_budget=1500
    )
    assert [a.candidate.record_id for a in admitted] == [confirmed.id, provisional.id]
    assert admitted[0].counterpart_of == provisional.id


def test_empty_reason_reports_each_channels_own_best_not_the_fused_leaders() -> None:
    """The fused leader can have a weaker cosine than another candidate: the reason names the
    strongest cosine and the most matched terms, the figures the search log shows."""
    leader = cand("a", dense=0.30, lex=(1, 4, ()), score=0.05)
    closest = cand("b", dense=0.41, score=0.02)
    wordiest = cand("c", lex=(1, 3, ()), score=0.01)
    subjects = {"a": SEM, "b": SEM, "c": SEM}
    assert gate([leader, closest, wordiest], subjects, FLOORS)[0] == []
    reason = empty_reason([leader, closest, wordiest], subjects, FLOORS, eligible=3)
    assert reason.startswith("best dense 0.41 < 0.45 (semantic); best lexical 1/")


def test_a_context_candidate_passes_beside_a_survivor_of_its_day_and_never_alone() -> None:
    monday, tuesday = datetime(2024, 3, 4, 9, tzinfo=UTC), datetime(2024, 3, 5, 9, tzinfo=UTC)
    subjects = {
        "match": GateSubject("episodic", "user_statement", monday),
        "beside": GateSubject("episodic", "user_statement", monday + timedelta(hours=3)),
        "elsewhere": GateSubject("episodic", "user_statement", tuesday),
        "weak": GateSubject("episodic", "user_statement", monday),
    }
    floors = dataclasses.replace(FLOORS, context_floor=0.3, relative_floor=0.0)
    match = cand("match", dense=0.9, score=0.2)
    beside, elsewhere, weak = (
        cand(r, dense=d, score=0.05) for r, d in (("beside", 0.35), ("elsewhere", 0.35), ("weak", 0.2))
    )
    for c in (beside, elsewhere, weak):
        c.in_context = True
    kept, out = gate([match, beside, elsewhere, weak], subjects, floors)
    assert [c.record_id for c in kept] == ["match", "beside"]
    assert beside.gate_reason == "context: dense 0.35 >= 0.30 on the day of match"
    assert {r for r, _ in out} == {"elsewhere", "weak"}
    # Without a survivor on its day a context candidate cannot make an empty answer non-empty.
    assert gate([beside, weak], subjects, floors)[0] == []
    plain = cand("beside", dense=0.35, score=0.05)  # the same record, not found by the context pass
    assert [c.record_id for c in gate([match, plain], subjects, floors)[0]] == ["match"]


def test_a_companion_passes_near_the_top_of_an_answered_search_and_never_alone() -> None:
    floors = dataclasses.replace(FLOORS, companion_floor=0.3, companion_rank=3, relative_floor=0.0)
    answer = cand("answer", dense=0.9, score=0.3)
    signals = (("near", 0.35, 0.2), ("weak", 0.25, 0.1), ("deep", 0.38, 0.05))
    near, weak, deep = (cand(r, dense=d, score=s) for r, d, s in signals)
    lexical_only = cand("lexical", lex=(1, 4, ()), score=0.15)
    subjects = dict.fromkeys(("answer", "near", "weak", "deep", "lexical"), EPI)
    kept, out = gate([answer, near, lexical_only, weak, deep], subjects, floors)
    assert [c.record_id for c in kept] == ["answer", "near"]
    assert near.gate_reason == "companion: fused rank 2, dense 0.35 >= 0.30 in an answered search"
    # weak: under the floor; deep: past companion_rank; lexical: no cosine to read.
    assert {r for r, _ in out} == {"weak", "deep", "lexical"}
    assert weak.gate_reason is not None and weak.gate_reason.startswith("step 1: dense 0.25 < 0.40")
    # Nothing cleared a floor: a companion cannot make an empty answer non-empty.
    assert gate([near, weak], subjects, floors)[0] == []
    # 1 switches the rule off.
    off = dataclasses.replace(floors, companion_floor=1.0)
    assert [c.record_id for c in gate([answer, near], subjects, off)[0]] == ["answer"]


def test_a_companion_found_beside_the_answer_or_inside_the_dates_needs_no_cosine_of_its_own() -> None:
    floors = dataclasses.replace(
        FLOORS, companion_floor=0.2, companion_beside_floor=0.0, companion_rank=4, relative_floor=0.0
    )
    answer = cand("answer", dense=0.9, score=0.3)
    neighbour, dated, plain = (
        cand("neighbour", dense=0.12),
        cand("dated", dense=0.05),
        cand("plain", dense=0.12),
    )
    neighbour.in_context, dated.in_window = True, True
    subjects = dict.fromkeys(("answer", "neighbour", "dated", "plain"), EPI)
    kept, out = gate([answer, neighbour, dated, plain], subjects, floors)
    assert [c.record_id for c in kept] == ["answer", "neighbour", "dated"]
    assert neighbour.gate_reason == (
        "companion: fused rank 2, dense 0.12 >= 0.00 beside the best matches in an answered search"
    )
    assert dated.gate_reason == (
        "companion: fused rank 3, dense 0.05 >= 0.00 inside the query's dates in an answered search"
    )
    assert [r for r, _ in out] == ["plain"]  # its place came from its words: companion_floor holds
    # Still never alone, and never past companion_rank.
    assert gate([neighbour, dated], subjects, floors)[0] == []
    shallow = dataclasses.replace(floors, companion_rank=2)
    assert [c.record_id for c in gate([answer, neighbour, dated], subjects, shallow)[0]] == [
        "answer",
        "neighbour",
    ]
    # The lower of the two floors applies; companion_floor 1 switches companions off altogether.
    higher = dataclasses.replace(floors, companion_beside_floor=0.5)
    assert [c.record_id for c in gate([answer, neighbour, dated], subjects, higher)[0]] == ["answer"]
    off = dataclasses.replace(floors, companion_floor=1.0)
    assert [c.record_id for c in gate([answer, neighbour, dated], subjects, off)[0]] == ["answer"]
    # A fact written beside another is not about it: other types keep companion_floor.
    facts = {**subjects, "neighbour": SEM, "dated": SEM}
    assert [c.record_id for c in gate([answer, neighbour, dated], facts, floors)[0]] == ["answer"]


def test_a_candidate_inside_the_querys_dates_passes_at_the_window_floor() -> None:
    floors = dataclasses.replace(FLOORS, window_floor=0.3, relative_floor=0.0)
    dated, undated, faint = cand("dated", dense=0.32), cand("undated", dense=0.32), cand("faint", dense=0.25)
    dated.in_window = faint.in_window = True
    subjects = dict.fromkeys(("dated", "undated", "faint"), EPI)
    kept, out = gate([dated, undated, faint], subjects, floors)
    # Unlike a companion, a dated match can answer on its own: the date is the query's own signal.
    assert [c.record_id for c in kept] == ["dated"]
    assert dated.gate_reason == "dated: dense 0.32 >= 0.30 inside the query's dates"
    assert {r for r, _ in out} == {"undated", "faint"}
    assert gate([dated], subjects, dataclasses.replace(floors, window_floor=1.0))[0] == []
    # A dated candidate under the window floor says so, in its reason and in the empty reason.
    assert faint.gate_reason is not None and "dated 0.25 < 0.30 inside the query's dates" in faint.gate_reason
    reason = empty_reason([faint, undated], subjects, floors, eligible=2)
    dated_part = "best dated 0.25 < 0.30 inside the query's dates;"
    assert reason.startswith(f"best dense 0.32 < 0.40 (episodic); {dated_part}")


def test_the_window_floor_never_applies_to_a_turn_that_asks_nothing() -> None:
    gate_config = Config().retrieval.gate
    assert gate_config.floors_for("tool").window_floor == gate_config.window_floor < 1.0
    assert gate_config.floors_for("auto").window_floor == gate_config.auto.window_floor < 1.0
    assert gate_config.floors_for("auto", asks=False).window_floor == 1.0


def _crowd(n: int, cosine: float) -> list[Candidate]:
    return [cand(f"other{i}", dense=cosine, score=0.001) for i in range(n)]


def test_a_match_that_stands_out_of_the_searchs_dense_scores_passes() -> None:
    floors = dataclasses.replace(FLOORS, standout_floor=0.3, standout_margin=0.25, relative_floor=0.0)
    top = cand("top", dense=0.42, score=0.1)  # under the semantic floor 0.45
    crowd = _crowd(STANDOUT_MIN_MATCHES, 0.15)
    subjects = {c.record_id: SEM for c in [top, *crowd]}
    kept, _ = gate([top, *crowd], subjects, floors)
    assert [c.record_id for c in kept] == ["top"]
    assert top.gate_reason == (
        "standout: dense 0.42 >= 0.30, 0.27 above the mean 0.15 of this search's other dense matches"
    )
    # 1 switches it off.
    assert gate([top, *crowd], subjects, dataclasses.replace(floors, standout_floor=1.0))[0] == []


def test_a_search_with_too_few_matches_counts_the_missing_ones_as_unrelated() -> None:
    """A store of a few facts still has a standout: the matches it lacks count as cosine 0,
    so the reference is the others' sum over STANDOUT_MIN_MATCHES - 1, and the reason says so."""
    floors = dataclasses.replace(FLOORS, standout_floor=0.3, standout_margin=0.25, relative_floor=0.0)
    top, few = cand("top", dense=0.42, score=0.1), _crowd(2, 0.2)
    subjects = {c.record_id: SEM for c in [top, *few]}
    reference = dense_reference([top, *few])
    assert reference is not None and reference.missing == STANDOUT_MIN_MATCHES - 3
    assert reference.mean == pytest.approx(0.4 / (STANDOUT_MIN_MATCHES - 1))
    assert [c.record_id for c in gate([top, *few], subjects, floors)[0]] == ["top"]
    assert top.gate_reason is not None and "missing and counted as 0" in top.gate_reason
    # Alone in its store: the floor decides. Under it, nothing, and the reason names it.
    alone = cand("alone", dense=0.29)
    assert dense_reference([alone]) == Reference(0.0, STANDOUT_MIN_MATCHES - 1)
    assert gate([alone], {"alone": SEM}, floors)[0] == []
    assert "standout needs dense >= 0.30" in empty_reason([alone], {"alone": SEM}, floors, eligible=1)
    assert dense_reference([]) is None


def test_a_standout_needs_its_margin_and_its_floor_and_says_which_it_missed() -> None:
    floors = dataclasses.replace(FLOORS, standout_floor=0.3, standout_margin=0.25, relative_floor=0.0)
    close = cand("close", dense=0.42)
    crowd = _crowd(STANDOUT_MIN_MATCHES, 0.25)
    subjects = {c.record_id: SEM for c in [close, *crowd]}
    assert gate([close, *crowd], subjects, floors)[0] == []
    assert close.gate_reason is not None
    assert "standout 0.17 above the other dense matches < 0.25" in close.gate_reason
    reason = empty_reason([close, *crowd], subjects, floors, eligible=11)
    assert reason.startswith("best dense 0.42 < 0.45 (semantic); best standout 0.17 above")
    # Far above a low crowd, but under the standout floor itself.
    faint, low = cand("faint", dense=0.28), _crowd(STANDOUT_MIN_MATCHES, 0.0)
    subjects |= {c.record_id: SEM for c in [faint, *low]}
    assert gate([faint, *low], subjects, floors)[0] == []
    assert faint.gate_reason is not None and "standout needs dense >= 0.30" in faint.gate_reason


def test_a_best_passage_is_held_a_margin_higher_for_every_dense_floor() -> None:
    floors = dataclasses.replace(FLOORS, passage_margin=0.04, relative_floor=0.0)
    whole, piece, high = cand("whole", dense=0.47), cand("piece", dense=0.47), cand("high", dense=0.5)
    piece.from_passage = high.from_passage = True
    subjects = {"whole": SEM, "piece": SEM, "high": SEM}
    kept, out = gate([whole, piece], subjects, floors)
    assert [c.record_id for c in kept] == ["whole"]
    assert whole.gate_reason == "dense 0.47 >= 0.45 (semantic)"
    # The reason keeps the logged cosine and names the raised floor.
    assert "dense 0.47 < 0.49 (semantic; best passage)" in dict(out)["piece"]
    assert gate([high], subjects, floors)[0] == [high]
    assert high.gate_reason == "dense 0.50 >= 0.49 (semantic; best passage)"
    assert empty_reason([piece], subjects, floors, eligible=1).startswith(
        "best dense 0.47 < 0.49 (semantic; best passage)"
    )
    # 0 restores the plain floor, and a search that asked for no gate has none.
    assert gate([piece], subjects, dataclasses.replace(floors, passage_margin=0.0))[0] == [piece]
    assert floors.opened().passage_margin == 0.0
    # What a standout stands out from reads passages at their margin too.
    crowd = _crowd(STANDOUT_MIN_MATCHES, 0.2)
    for c in crowd:
        c.from_passage = True
    assert dense_reference([whole, *crowd], 0.04).mean == pytest.approx(0.16)  # type: ignore[union-attr]


def test_a_day_of_near_matches_raises_the_bar_a_standout_must_clear() -> None:
    crowd = _crowd(STANDOUT_MIN_MATCHES, 0.1)
    beside = [cand(f"beside{i}", dense=0.4) for i in range(3)]
    for c in beside:
        c.in_context = True
    assert dense_reference(crowd).mean == pytest.approx(0.1)  # type: ignore[union-attr]
    n = STANDOUT_MIN_MATCHES
    assert dense_reference([*crowd, *beside]).mean == pytest.approx(  # type: ignore[union-attr]
        (0.1 * n + 0.4 * 2) / (n + 2)
    )


def test_the_standout_rule_never_applies_to_a_turn_that_asks_nothing() -> None:
    gate_config = Config().retrieval.gate
    assert gate_config.floors_for("tool").standout_floor == gate_config.standout_floor < 1.0
    assert gate_config.floors_for("auto", asks=False).standout_floor == 1.0
