"""Explanations (spec §4, §10.9): why each result came back, in a structure and in one line."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from retold.models import Candidate, Explanation, Record, RewriteStatus
from retold.retrieve.budget import Admission

__all__ = ["build_explanation", "summary_line"]


def summary_line(candidate: Candidate, rerank: tuple[int, int, float] | None) -> str:
    """``matched: dense 0.71 (rank 2), lexical 3/3 (rank 1); fused rank 1; passed gate on dense``."""
    parts = []
    if candidate.dense is not None:
        # A record the same-day pass or the neighbours brought in has a cosine but no place in
        # the dense channel's own list: say where it came from, not a rank after that list.
        beside = bool(candidate.contributions) and "dense" not in candidate.contributions
        where = "found beside a best match" if beside else f"rank {candidate.dense.rank}"
        parts.append(f"dense {candidate.dense.score:.2f} ({where})")
    if candidate.lexical is not None and candidate.lexical_terms is not None:
        m = candidate.lexical_terms
        parts.append(f"lexical {len(m.terms)}/{m.total_terms} (rank {candidate.lexical.rank})")
    if candidate.entity is not None:
        parts.append(f"entity (rank {candidate.entity.rank})")
    line = "matched: " + (", ".join(parts) or "conflict counterpart") + f"; fused rank {candidate.fused_rank}"
    if candidate.freshness_multiplier is not None and candidate.freshness_multiplier < 0.999:
        line += f"; freshness x{candidate.freshness_multiplier:.2f}"
    if candidate.other_subject:
        line += "; weighed down: about someone else than the query names"
    if candidate.tells_time:
        line += "; lifted: tells a time, and the query asks when"
    if candidate.is_reply:
        line += "; lifted: the reply to a question like the query"
    if rerank is not None:
        line += f"; reranked {rerank[0]}->{rerank[1]} ({rerank[2]:.2f})"
    gate = candidate.gate_reason or ""
    signal = gate.split(" ", 1)[0] if gate else "pairing"
    return line + f"; passed gate on {signal}"


def build_explanation(
    admission: Admission,
    record: Record,
    *,
    raw_queries: list[str],
    rewritten: list[str] | None,
    rewrite_status: RewriteStatus,
    dedup: Mapping[str, tuple[str, float]],
    reranked: Mapping[str, tuple[int, int, float]],
    conflicts_with: Sequence[str],
    total: int,
) -> Explanation:
    candidate = admission.candidate
    matched_by = [
        name
        for name, hit in (
            ("dense", candidate.dense),
            ("lexical", candidate.lexical),
            ("entity", candidate.entity),
        )
        if hit is not None
    ]
    dropped = dedup.get(candidate.record_id)
    rerank = reranked.get(candidate.record_id)
    gate = candidate.gate_reason or (
        f"admitted with {admission.counterpart_of} as its conflict counterpart"
        if admission.counterpart_of
        else ""
    )
    return Explanation(
        raw_queries=raw_queries,
        rewritten_queries=rewritten,
        rewrite_status=rewrite_status,
        matched_by=matched_by,  # type: ignore[arg-type]
        dense=candidate.dense,
        lexical=candidate.lexical,
        lexical_terms=candidate.lexical_terms,
        entity=candidate.entity,
        fused_rank=candidate.fused_rank,
        freshness_multiplier=candidate.freshness_multiplier,
        rerank=rerank,
        gate=gate,
        dedup="kept" if dropped is None else f"kept over {dropped[0]} at cosine {dropped[1]:.2f}",
        budget=f"fit at position {admission.position} of {total}, {admission.tokens_used} tokens used",
        source_kind=record.source_kind,
        status=record.status,
        created_at=record.created_at,
        event_at=record.event_at,
        entity_ids=list(record.entity_ids),
        conflicts_with=list(conflicts_with),
        summary=summary_line(candidate, rerank),
        contributions={name: round(share, 6) for name, share in candidate.contributions.items()},
    )
