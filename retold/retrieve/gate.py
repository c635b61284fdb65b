"""The relevance gate (spec §10.5): the stage that lets a search honestly return nothing.

Step 1 keeps a candidate that clears one absolute floor (an exact entity match, a dense
cosine at its record type's floor, or enough lexical terms). Step 2 drops survivors far
below the strongest survivor *with the same number of contributing channels*, so a
corroborated record cannot wipe out strong single-channel ones (entity hits are exempt).
A candidate the same-day context pass found (``in_context``) that misses step 1 still
passes when a survivor shares its event day and its cosine reaches ``context_floor``: it
can enlarge an answer, never turn an empty one into a non-empty one. So can a *companion*:
once some candidate has cleared a floor, one ranked among the first ``companion_rank`` of the
fused list passes at a cosine of ``companion_floor`` (a floor that decides how much of an
answer to give, not whether to answer), or of ``companion_beside_floor`` when its place came
from the answer's day or the query's dates rather than its words. A *standout* passes step 1
on the query's own score distribution: a cosine of at least ``standout_floor`` that lies
``standout_margin`` above the mean of the dense channel's other matches, so a record that
clearly answers beats a floor set for another length or phrasing of text (long records score
lower cosines on every query). Step 3 explains an empty result by naming every floor the best
candidate missed. Every dropped candidate carries the step and floor that dropped it, so a
logged search can be replayed offline with other floors (:func:`replay`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from retold.config import GateFloors
from retold.models import Candidate, LexicalTerm

__all__ = [
    "STANDOUT_MIN_MATCHES", "GateSubject", "Reference", "channel_count", "cosine", "dense_reference",
    "empty_reason", "gate", "missed_floors", "passes_step1",
]  # fmt: skip

STANDOUT_MIN_MATCHES = 5
"""The dense matches a search's reference is the mean of (after the best one). A search with
fewer (a user's first store holds a handful of facts; a filter can leave two records) counts
the ones it lacks as unrelated records, cosine 0, so a lone fact still stands out when it
clears ``standout_floor`` and ``standout_margin`` above what its few neighbours score: with no
reference at all, a paraphrase under its type's floor found nothing in a store of one to four
facts while InMemoryStore returned it (benchmarks/store_paraphrase.py; docs/decisions.md,
"A handful of facts still has a standout"). Stores of LoCoMo's and LongMemEval's size always
hold five."""


@dataclass(frozen=True)
class Reference:
    """What a standout stands out from: the ``mean`` cosine of the search's other dense
    matches, ``missing`` of them counted as 0 because the search had too few."""

    mean: float
    missing: int = 0

    def describe(self) -> str:
        if not self.missing:
            return f"the mean {self.mean:.2f} of this search's other dense matches"
        return (
            f"the mean {self.mean:.2f} of this search's other dense matches, "
            f"{self.missing} of {STANDOUT_MIN_MATCHES - 1} missing and counted as 0"
        )


@dataclass(frozen=True)
class GateSubject:
    """What ranking needs to know about a candidate's record: the gate reads type and source
    kind, freshness the type and event time (None when a caller has no use for it)."""

    type: str
    source_kind: str
    event_at: datetime | None = None


def channel_count(candidate: Candidate) -> int:
    return sum(h is not None for h in (candidate.dense, candidate.lexical, candidate.entity))


def _lexical_pass(candidate: Candidate, floors: GateFloors) -> tuple[bool, str | None]:
    """Term fraction and count, common words (``LexicalTerm.common``) left out of both sides
    and chat words out of the matched side (``gate.chat_words``); a rare word
    (``LexicalTerm.rare``) stands in for the missing terms as an identifier does."""
    match = candidate.lexical_terms
    if candidate.lexical is None or match is None or match.total_terms == 0:
        return False, None
    matched, total = match.counted
    fraction = matched / total if total else 0.0
    precise = any(t.precise and not t.common for t in match.terms)  # a date's number is no identifier
    rare = [t.value for t in match.terms if t.rare and not t.common and not t.precise]
    terms = f"lexical {matched}/{total} terms" + _common_note(match.common_terms) + _uncounted(match.terms)
    if fraction < floors.lexical_min_term_fraction:
        return False, f"{terms} < {floors.lexical_min_term_fraction:g} of the query"
    if matched < floors.lexical_min_matched_terms and not precise:
        if not rare:
            return False, (
                f"{terms}, {matched} matched < {floors.lexical_min_matched_terms} "
                "and no identifier, entity alias or rare word"
            )
        return True, f"{terms}, the rare word {rare[0]!r}"
    return True, terms


def _uncounted(terms: tuple[LexicalTerm, ...]) -> str:
    """The matched words the floors did not count: common words and words of chat
    (``gate.chat_words``, which stay among the query's terms)."""
    words = [t.value for t in terms if t.common]
    return f" ({', '.join(map(repr, words[:3]))} matched, not counted)" if words else ""


def _common_note(common: int) -> str:
    if not common:
        return ""
    return f" ({common} common or date word{'s' if common > 1 else ''} not counted)"


def cosine(candidate: Candidate, floors: GateFloors) -> float:
    """The cosine the floors read: a record's best passage counts ``passage_margin`` less, because
    the best of several short pieces is higher than one vector's cosine by selection alone
    (docs/decisions.md, "A turn of a few sentences is scored by its best passage too")."""
    return _counted(candidate, floors.passage_margin)


def _counted(candidate: Candidate, passage_margin: float) -> float:
    assert candidate.dense is not None
    return candidate.dense.score - (passage_margin if candidate.from_passage else 0.0)


def _raised(candidate: Candidate, floors: GateFloors, floor: float) -> float:
    """``floor`` as a printed reason states it for this candidate: the log's cosine against it."""
    return floor + (floors.passage_margin if candidate.from_passage else 0.0)


def dense_reference(candidates: Sequence[Candidate], passage_margin: float = 0.0) -> Reference | None:
    """The mean cosine of the search's dense matches after the best one: what a standout stands
    out from. Every candidate with a cosine counts (the context pass's and neighbours' too: a
    day of near matches raises the bar) but the replies (retold.retrieve.replies), brought for
    where they were said rather than for their words: they would lower it. A best passage's
    cosine counts ``passage_margin`` less, as the floors read it (:func:`cosine`). Fewer than
    :data:`STANDOUT_MIN_MATCHES` count the missing ones as 0; None without a dense match."""
    scores = sorted(
        (_counted(c, passage_margin) for c in candidates if c.dense is not None and not c.is_reply),
        reverse=True,
    )
    if not scores:
        return None
    rest = scores[1:]
    missing = max(0, STANDOUT_MIN_MATCHES - 1 - len(rest))
    return Reference(sum(rest) / (len(rest) + missing), missing)


def _standout(candidate: Candidate, floors: GateFloors, reference: Reference | None) -> bool:
    if reference is None or candidate.dense is None or floors.standout_floor >= 1.0:
        return False
    score = cosine(candidate, floors)
    return score >= floors.standout_floor and score - reference.mean >= floors.standout_margin


def passes_step1(
    candidate: Candidate, subject: GateSubject, floors: GateFloors, reference: Reference | None = None
) -> str | None:
    """The signal that lets the candidate through step 1, or None. ``reference`` is the search's
    :func:`dense_reference` (None: no standout)."""
    if candidate.entity is not None:
        return f"entity match {candidate.entity_id}"
    if candidate.dense is not None:
        floor, score = (
            floors.dense_floor.for_record(subject.type, subject.source_kind),
            cosine(candidate, floors),
        )
        logged = candidate.dense.score
        if score >= floor:
            floor = _raised(candidate, floors, floor)
            return f"dense {logged:.2f} >= {floor:.2f} ({_dense_name(candidate, subject)})"
        if candidate.in_window and score >= floors.window_floor:
            floor = _raised(candidate, floors, floors.window_floor)
            return (
                f"dated: dense {logged:.2f} >= {floor:.2f} inside the query's dates{_passage_note(candidate)}"
            )
        if _standout(candidate, floors, reference):
            assert reference is not None
            return (
                f"standout: dense {logged:.2f} >= {_raised(candidate, floors, floors.standout_floor):.2f}, "
                f"{score - reference.mean:.2f} above {reference.describe()}{_passage_note(candidate)}"
                + _self_note(floors)
            )
    ok, terms = _lexical_pass(candidate, floors)
    return terms if ok else None


def missed_floors(
    candidate: Candidate, subject: GateSubject, floors: GateFloors, reference: Reference | None = None
) -> str:
    """Every step-1 floor the candidate missed, in the spec's wording."""
    parts = []
    floor = floors.dense_floor.for_record(subject.type, subject.source_kind)
    if candidate.dense is None:
        parts.append("no dense match")
    else:
        score, raised = candidate.dense.score, _raised(candidate, floors, floor)
        parts.append(f"dense {score:.2f} < {raised:.2f} ({_dense_name(candidate, subject)})")
        if candidate.in_window and floors.window_floor < 1.0:
            window = _raised(candidate, floors, floors.window_floor)
            parts.append(f"dated {score:.2f} < {window:.2f} inside the query's dates")
        if reference is not None and floors.standout_floor < 1.0:
            parts.append(_standout_miss(candidate, reference, floors))
    _, lexical_reason = _lexical_pass(candidate, floors)
    parts.append(lexical_reason or "no lexical match")
    parts.append("no entity match")
    return "; ".join(parts)


def _self_note(floors: GateFloors) -> str:
    return " (a question about the searcher)" if floors.query_kind == "self" else ""


def _standout_miss(candidate: Candidate, reference: Reference, floors: GateFloors) -> str:
    score = cosine(candidate, floors)
    return (
        f"standout {score - reference.mean:.2f} above the other dense matches < {floors.standout_margin:.2f}"
        + _passage_note(candidate)
        + _self_note(floors)
        if score >= floors.standout_floor
        else f"standout needs dense >= {_raised(candidate, floors, floors.standout_floor):.2f}"
    )


def _dense_name(candidate: Candidate, subject: GateSubject) -> str:
    """The floor's name, and where the cosine came from when it is a passage's."""
    name = _floor_name(subject)
    return f"{name}; best passage" if candidate.from_passage else name


def _passage_note(candidate: Candidate) -> str:
    return " (best passage)" if candidate.from_passage else ""


def _floor_name(subject: GateSubject) -> str:
    return "session_summary" if subject.source_kind == "session_summary" else subject.type


def gate(
    candidates: Sequence[Candidate], subjects: Mapping[str, GateSubject], floors: GateFloors
) -> tuple[list[Candidate], list[tuple[str, str]]]:
    """Steps 1 and 2; returns the survivors in order and ``(record_id, reason)`` for the rest."""
    gated_out: list[tuple[str, str]] = []
    survivors: list[Candidate] = []
    missed: list[Candidate] = []
    reference = dense_reference(candidates, floors.passage_margin)
    for candidate in candidates:
        subject = subjects[candidate.record_id]
        if subject.source_kind in floors.exclude_source_kinds:
            candidate.gate_reason = (
                f"excluded: source kind {subject.source_kind} is not retrieved by the host"
            )
            gated_out.append((candidate.record_id, candidate.gate_reason))
            continue
        passed = passes_step1(candidate, subject, floors, reference)
        if passed is None:
            candidate.gate_reason = "step 1: " + missed_floors(candidate, subject, floors, reference)
            missed.append(candidate)
            continue
        candidate.gate_reason = passed
        survivors.append(candidate)
    rescued = _context_passes(missed, survivors, subjects, floors)
    if survivors:
        rescued |= _companion_passes(candidates, missed, rescued, subjects, floors)
    gated_out += [(c.record_id, c.gate_reason or "") for c in missed if c.record_id not in rescued]
    if rescued:
        kept_ids = rescued | {c.record_id for c in survivors}
        survivors = [c for c in candidates if c.record_id in kept_ids]

    top: dict[int, float] = {}
    for candidate in survivors:
        n = channel_count(candidate)
        top[n] = max(top.get(n, 0.0), candidate.score)
    kept: list[Candidate] = []
    for candidate in survivors:
        n = channel_count(candidate)
        bar = floors.relative_floor * top[n]
        if candidate.entity is None and candidate.score < bar:
            candidate.gate_reason = (
                f"step 2: score {candidate.score:.4f} < {floors.relative_floor:g} x {top[n]:.4f} "
                f"(top of the {n}-channel group)"
            )
            gated_out.append((candidate.record_id, candidate.gate_reason))
        else:
            kept.append(candidate)
    return kept, gated_out


def _day(subject: GateSubject) -> object:
    return None if subject.event_at is None else subject.event_at.astimezone(UTC).date()


def _context_passes(
    missed: Sequence[Candidate], survivors: Sequence[Candidate], subjects: Mapping[str, GateSubject],
    floors: GateFloors,
) -> set[str]:  # fmt: skip
    """Context candidates that missed step 1 but stand beside a survivor: same event day, and a
    cosine at ``floors.context_floor``. Only a non-empty answer can grow this way, so the
    floors alone still decide whether a search returns anything."""
    days: dict[object, str] = {}
    for survivor in survivors:
        day = _day(subjects[survivor.record_id])
        if day is not None:
            days.setdefault(day, survivor.record_id)
    rescued: set[str] = set()
    for candidate in missed:
        anchor = days.get(_day(subjects[candidate.record_id]))
        dense = candidate.dense
        if (
            candidate.in_context
            and anchor is not None
            and dense
            and cosine(candidate, floors) >= floors.context_floor
        ):
            floor = _raised(candidate, floors, floors.context_floor)
            candidate.gate_reason = f"context: dense {dense.score:.2f} >= {floor:.2f} on the day of {anchor}"
            rescued.add(candidate.record_id)
    return rescued


def _companion_passes(
    candidates: Sequence[Candidate], missed: Sequence[Candidate], rescued: set[str],
    subjects: Mapping[str, GateSubject], floors: GateFloors,
) -> set[str]:  # fmt: skip
    """Candidates near the top of an answered search's ranking that missed step 1: the fused
    rank already says they belong with the answer, so a low cosine is enough to keep them."""
    if floors.companion_floor >= 1.0:
        return set()
    rank = {c.record_id: i for i, c in enumerate(candidates[: floors.companion_rank], start=1)}
    beside_floor = min(floors.companion_floor, floors.companion_beside_floor)
    passed: set[str] = set()
    for candidate in missed:
        position, dense = rank.get(candidate.record_id), candidate.dense
        if position is None or candidate.record_id in rescued or dense is None:
            continue
        where = _beside(candidate, subjects[candidate.record_id])
        floor = beside_floor if where else floors.companion_floor
        if cosine(candidate, floors) >= floor:
            floor = _raised(candidate, floors, floor)
            candidate.gate_reason = (
                f"companion: fused rank {position}, dense {dense.score:.2f} >= {floor:.2f}{where} "
                "in an answered search"
            )
            passed.add(candidate.record_id)
    return passed


def _beside(candidate: Candidate, subject: GateSubject) -> str:
    """Where an episodic candidate's place came from when not from its own words: the answer's
    day (the context pass, the neighbours) or the query's dates; empty otherwise. Only events
    tell a story across records (a reply after its question); a fact written next to another
    is not about it, so other types keep ``companion_floor``."""
    if subject.type != "episodic":
        return ""
    if candidate.in_context:
        return " beside the best matches"
    return " inside the query's dates" if candidate.in_window else ""


def empty_reason(
    candidates: Sequence[Candidate], subjects: Mapping[str, GateSubject], floors: GateFloors, eligible: int
) -> str:
    """Step 3: why nothing survived, naming each channel's best candidate and the floor it missed.

    Each channel reports its own best (the highest dense cosine, the most query terms matched),
    not the best fused candidate's, so "best dense" agrees with the search log's best dense score.
    """
    if eligible == 0:
        return "no eligible records: nothing readable matches the scopes and filters"
    if not candidates:
        return "no candidate: no dense, lexical or entity match among the eligible records"
    best = max(candidates, key=lambda c: c.score)
    excluded = floors.exclude_source_kinds
    considered = [c for c in candidates if subjects[c.record_id].source_kind not in excluded]
    if not considered:
        kind = subjects[best.record_id].source_kind
        return f"best candidate excluded: source kind {kind} is not retrieved by the host"
    reference = dense_reference(candidates, floors.passage_margin)
    survivor = next(
        (c for c in considered if passes_step1(c, subjects[c.record_id], floors, reference)), None
    )
    if survivor is not None:
        return f"best candidate dropped: {survivor.gate_reason}"
    parts = []
    dense = [c for c in considered if c.dense is not None]
    if dense:
        top = max(dense, key=lambda c: c.dense.score)  # type: ignore[union-attr]
        subject = subjects[top.record_id]
        floor = _raised(top, floors, floors.dense_floor.for_record(subject.type, subject.source_kind))
        assert top.dense is not None
        parts.append(f"best dense {top.dense.score:.2f} < {floor:.2f} ({_dense_name(top, subject)})")
        dated = [c for c in dense if c.in_window and c.dense is not None]
        if dated and floors.window_floor < 1.0:
            near = max(dated, key=lambda c: c.dense.score)  # type: ignore[union-attr]
            score, window = near.dense.score, _raised(near, floors, floors.window_floor)  # type: ignore[union-attr]
            parts.append(f"best dated {score:.2f} < {window:.2f} inside the query's dates")
        if reference is not None and floors.standout_floor < 1.0:
            parts.append("best " + _standout_miss(top, reference, floors))
    else:
        parts.append("no dense match")
    lexical = [c for c in considered if c.lexical and c.lexical_terms and c.lexical_terms.total_terms]
    if lexical:
        top = max(lexical, key=lambda c: (c.lexical_terms.counted[0], c.score))  # type: ignore[union-attr]
        _, reason = _lexical_pass(top, floors)
        parts.append("best " + (reason or "lexical match"))
    else:
        parts.append("no lexical match")
    parts.append("no entity match")
    return "; ".join(parts)
