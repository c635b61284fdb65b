"""Reciprocal rank fusion (spec §10.3): one ranking from three generators on different scales.

Cosine, BM25 and exact entity matches are not comparable numbers, so only ranks are
fused: each list a record appears in adds ``1 / (rrf_k + rank)``. An empty generator adds
nothing and the others still rank.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Collection, Mapping, Sequence
from typing import Any, NamedTuple

import numpy as np

from retold.models import Candidate, GeneratorHit, LexicalMatch

__all__ = ["Flags", "assemble", "fuse", "hold_below_best", "logged_flags", "read_flags", "rrf"]


# Bits of a fused log row's fourth item.
CONTEXT_FLAG, WINDOW_FLAG, PASSAGE_FLAG, SUBJECT_FLAG, TIME_FLAG, REPLY_FLAG = 1, 2, 4, 8, 16, 32
_BITS = (CONTEXT_FLAG, WINDOW_FLAG, PASSAGE_FLAG, SUBJECT_FLAG, TIME_FLAG, REPLY_FLAG)


class Flags(NamedTuple):
    in_context: bool  # found by the same-day context pass or as a neighbour
    in_window: bool  # its event time lies inside the query's dates
    from_passage: bool  # its dense score is its best passage's (retold.index.passages)
    other_subject: bool  # about someone else than the query names (retold.retrieve.subjects)
    tells_time: bool  # tells a time, and the query asks when (retold.retrieve.time_answers)
    is_reply: bool  # the reply to a candidate that asks a question (retold.retrieve.replies)


def logged_flags(candidate: Candidate) -> list[int]:
    """A fused log row's optional fourth item (:class:`Flags` as bits); absent when none is set
    (logs before date windows hold only the 1, before passages only 1 and 2)."""
    flags = (
        (CONTEXT_FLAG if candidate.in_context else 0)
        | (WINDOW_FLAG if candidate.in_window else 0)
        | (PASSAGE_FLAG if candidate.from_passage else 0)
        | (SUBJECT_FLAG if candidate.other_subject else 0)
        | (TIME_FLAG if candidate.tells_time else 0)
        | (REPLY_FLAG if candidate.is_reply else 0)
    )
    return [flags] if flags else []


def read_flags(row: Sequence[Any]) -> Flags:
    """The :class:`Flags` of a logged fused row; anything but an int reads as none."""
    flags = row[3] if len(row) > 3 and isinstance(row[3], int) else 0
    return Flags(*(bool(flags & bit) for bit in _BITS))


def rrf(
    rankings: Sequence[Sequence[str]], k: int, weights: Sequence[float] | None = None
) -> dict[str, float]:
    """``{record_id: score}`` in descending score order (ties keep first-seen order); each list
    counts ``weights[i]`` times (1 by default)."""
    score: dict[str, float] = defaultdict(float)
    for i, ranking in enumerate(rankings):
        weight = 1.0 if weights is None else weights[i]
        for rank, record_id in enumerate(ranking, start=1):
            score[record_id] += weight / (k + rank)
    return dict(sorted(score.items(), key=lambda kv: -kv[1]))


def fuse(
    dense: Sequence[tuple[str, float]],
    lexical: Sequence[tuple[str, float, LexicalMatch]],
    entity: Sequence[tuple[str, str]],
    k: int,
    context: Sequence[tuple[str, float]] = (),
    context_weight: float = 1.0,
    neighbours: Sequence[tuple[str, float]] = (),
    neighbour_weight: float = 1.0,
    other_subject: Collection[str] = (),
    subject_weight: float = 1.0,
    time_answers: Sequence[str] = (),
    time_answer_weight: float = 1.0,
    replies: Sequence[str] = (),
    reply_weight: float = 1.0,
    similarity_weight: float = 1.0,
    best: Sequence[str] = (),
) -> list[Candidate]:
    """Candidates carrying every generator's rank and score, ordered by fused score.

    ``dense`` is ``(record_id, cosine)`` best first; ``lexical`` is ``(record_id, bm25,
    match)`` best first; ``entity`` is ``(record_id, entity_id)`` best first. ``context`` is
    the dense channel's second pass (:mod:`retold.retrieve.context`), fused as a list of its
    own at ``context_weight``, and ``neighbours`` (the records beside the best matches, in
    the order of the matches) at ``neighbour_weight``; their records not already dense hits
    carry dense ranks after them, context first (as the search log writes them). For a record
    in ``other_subject`` (about someone else than the query names, :mod:`retold.retrieve.
    subjects`) what similarity gave (the dense, context and neighbour lists) counts
    ``subject_weight`` times; its word and entity matches count in full. ``time_answers``
    (the best candidates that tell a time, for a query that asks when: :mod:`retold.retrieve.
    time_answers`) fuse at ``time_answer_weight``, weighed with the similarity lists since
    they are drawn from a ranking those lists made; so are ``replies`` (the records just after
    the best candidates that ask a question, in their askers' order: :mod:`retold.retrieve.
    replies`), at ``reply_weight``. All of these similarity lists count ``similarity_weight``
    times against the lexical and entity lists (``retrieval.similarity_weight``, 1 by default:
    more helps stores of short turns and hurts stores of long records, docs/decisions.md).
    Each candidate carries what every list gave its score (``contributions``, by list name),
    so an explanation adds up to it.

    ``best`` are the best matches of the first fusion (the leaders the passes read beside):
    what the passes that read beside them add (context, neighbours, replies) never lifts a
    record above one of them that the other lists rank higher (:func:`hold_below_best`).
    """
    similar = {
        "dense": [d[0] for d in dense], "context": [c[0] for c in context],
        "neighbours": [n[0] for n in neighbours], "time_answers": list(time_answers),
        "replies": list(replies),
    }  # fmt: skip
    own = {"dense": 1.0, "context": context_weight, "neighbours": neighbour_weight,
           "time_answers": time_answer_weight, "replies": reply_weight}  # fmt: skip
    weights = {**{name: similarity_weight * w for name, w in own.items()}, "lexical": 1.0, "entity": 1.0}
    words = {"lexical": [x[0] for x in lexical], "entity": [e[0] for e in entity]}
    shares = _shares({**similar, **words}, weights, k)
    scores: dict[str, float] = {}
    for rid, parts in shares.items():
        # Similarity summed and weighed first, then the words, in list order: rrf()'s own sums.
        alike = said = 0.0
        for name, share in parts.items():
            if name in words:
                said += share
            else:
                alike += share
        if rid in other_subject:
            alike *= subject_weight
            for name in parts.keys() - words.keys():
                parts[name] *= subject_weight
        scores[rid] = alike + said
    if best:
        hold_below_best(scores, shares, best, _PASSES)
    dense_hits = {rid: GeneratorHit(rank, cos) for rank, (rid, cos) in enumerate(dense, start=1)}
    for rid, cos in (*context, *neighbours):
        dense_hits.setdefault(rid, GeneratorHit(len(dense_hits) + 1, cos))
    lexical_hits = {
        rid: (GeneratorHit(rank, bm25), m) for rank, (rid, bm25, m) in enumerate(lexical, start=1)
    }
    entity_hits = {rid: (GeneratorHit(rank, 0.0), eid) for rank, (rid, eid) in enumerate(entity, start=1)}

    def best_rank(rid: str) -> int:
        ranks = [h.rank for h in (dense_hits.get(rid), lexical_hits.get(rid, (None,))[0],
                                  entity_hits.get(rid, (None,))[0]) if h is not None]  # fmt: skip
        return min(ranks)

    ordered = sorted(scores, key=lambda rid: (-scores[rid], best_rank(rid), rid))
    in_context = {c[0] for c in (*context, *neighbours)}
    telling, replying = set(time_answers), set(replies)
    return [
        assemble(rid, rank, scores[rid], dense_hits, lexical_hits, entity_hits, in_context=rid in in_context,
                 other_subject=rid in other_subject, tells_time=rid in telling, is_reply=rid in replying,
                 contributions=shares[rid])
        for rank, rid in enumerate(ordered, start=1)
    ]  # fmt: skip


_PASSES = frozenset({"context", "neighbours", "replies"})
"""The lists that say where a record was said (beside a best match, on its day, just after a
question), not what it says. The time answers are judged by their own words (a time, for a
query that asks when): they rank as a channel does."""


def hold_below_best(
    scores: dict[str, float],
    shares: Mapping[str, dict[str, float]],
    best: Sequence[str],
    passes: Collection[str],
) -> None:
    """Keep every record that a pass lifted strictly below each of the ``best`` matches the
    other lists rank above it: in place, scaling down what the passes gave it so that its
    contributions still add up to its score.

    The passes say where a record was said (beside a best match, on its day, just after a
    question), not how well it matches: on a store where every record shares one day or sits
    beside every other (a user's first few facts), they would lift every record beside every
    other and outweigh the channel that found the answer. Bounded this way they fill the
    ranks after the best matches, and a record the channels put first stays first. The bound
    is against every best match, not only the one a record sits beside, so that a record
    lifted beside the second best cannot pass the first either.
    """
    own = {rid: sum(v for name, v in parts.items() if name not in passes) for rid, parts in shares.items()}
    leaders = sorted((rid for rid in dict.fromkeys(best) if rid in scores), key=lambda rid: -own[rid])
    lifted = sorted(
        (rid for rid, parts in shares.items() if passes & parts.keys()), key=lambda rid: -own[rid]
    )
    for rid in lifted:  # in the channels' order: a leader's own bound is settled before it bounds others
        above = [scores[a] for a in leaders if a != rid and own[a] > own[rid]]
        if not above or scores[rid] < min(above):
            continue
        bound = float(np.nextafter(min(above), -np.inf))
        parts = shares[rid]
        lift = sum(v for name, v in parts.items() if name in passes)
        keep = max(0.0, (bound - own[rid]) / lift) if lift > 0 else 0.0
        for name in passes & parts.keys():
            parts[name] *= keep
        # Exactly the bound: records held below the same leader tie, and fusion's own tie-break
        # (best channel rank) orders them, as it would have with what the passes gave them.
        scores[rid] = bound


def _shares(
    lists: Mapping[str, Sequence[str]], weights: Mapping[str, float], k: int
) -> dict[str, dict[str, float]]:
    """What each named list gives each record, ``weight / (k + rank)``: the parts of the fused
    score, so an explanation can show them (``fuse`` adds them in its own order)."""
    shares: dict[str, dict[str, float]] = defaultdict(dict)
    for name, ranking in lists.items():
        for rank, rid in enumerate(ranking, start=1):
            shares[rid][name] = shares[rid].get(name, 0.0) + weights[name] / (k + rank)
    return shares


Hits = Mapping[str, tuple[GeneratorHit, Any]]


def assemble(
    record_id: str,
    fused_rank: int,
    rrf_score: float,
    dense: Mapping[str, GeneratorHit],
    lexical: Hits,
    entity: Hits,
    freshness_multiplier: float | None = None,
    *,
    in_context: bool = False,
    in_window: bool = False,
    from_passage: bool = False,
    other_subject: bool = False,
    tells_time: bool = False,
    is_reply: bool = False,
    contributions: Mapping[str, float] | None = None,
) -> Candidate:
    """One candidate from the generators' hits; also how a logged search is rebuilt for replay."""
    lex = lexical.get(record_id)
    ent = entity.get(record_id)
    multiplier = 1.0 if freshness_multiplier is None else freshness_multiplier
    return Candidate(
        record_id=record_id,
        dense=dense.get(record_id),
        lexical=lex[0] if lex else None,
        lexical_terms=lex[1] if lex else None,
        entity=ent[0] if ent else None,
        entity_id=ent[1] if ent else None,
        rrf_score=rrf_score,
        fused_rank=fused_rank,
        freshness_multiplier=freshness_multiplier,
        score=rrf_score * multiplier,
        gate_reason=None,
        in_context=in_context,
        in_window=in_window,
        from_passage=from_passage,
        other_subject=other_subject,
        tells_time=tells_time,
        is_reply=is_reply,
        contributions=dict(contributions or {}),
        rerank_score=None,
        rank_after_rerank=None,
    )
