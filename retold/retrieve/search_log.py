"""The search_log row (spec §10, §14): what a search did, in the form replay and audit read.

Record ids and scores go in the list columns (``dense``, ``lexical``, ``fused``...), query
text only in ``request``, ``context``, ``rewritten_queries`` and ``lexical``'s matched terms:
the columns erasure scrubs when a record or a user is erased.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from retold.models import SearchResult
from retold.policy.prompt import POLICY_VERSION

if TYPE_CHECKING:
    from retold.config import Config, GateFloors
    from retold.retrieve.search_run import SearchRun

__all__ = ["log_row"]


def log_row(
    cfg: Config,
    embedder: object,
    run: SearchRun,
    floors: GateFloors,
    results: list[SearchResult],
    reason: str | None,
    budget_out: list[str],
    timings: dict[str, float],
) -> dict[str, Any]:
    """The search_log row of one search: every list a replay needs, ids and scores, and the
    query text in the columns erasure scrubs (retold.store.erase)."""
    req = run.request
    explanations: list[Any] = [r.explanation for r in results]  # encoded field by field
    if reason is not None:
        explanations.append({"empty_reason": reason})
    seen = {rid for rid, _ in run.dense}
    context_only = []  # in fusion.fuse's order: the context pass, then the neighbours
    for rid, cos in (*run.context, *run.neighbours):
        if rid not in seen:
            seen.add(rid)
            context_only.append((rid, cos))
    return {
        "id": run.search_id,
        "at": run.started_at,
        "agent_id": run.principal.agent_id,
        "user_id": run.principal.user_id,
        "session_id": run.principal.session_id,
        "trigger": req.trigger,
        "request": {
            "queries": req.queries,
            "types": req.types,
            "entities": req.entities,
            "since": req.since,
            "until": req.until,
            "k": req.k,
            "include_history": req.include_history,
            # What the dense channel embedded when query_focus left names out (text: erased with the rest).
            "dense_queries": run.dense_queries if run.dense_queries not in ([], run.queries) else None,
            "time_windows": [[w.text, w.start.isoformat(), w.end.isoformat()] for w in run.windows] or None,
        },
        "context": req.context,
        "rewrite_status": run.rewrite_status,
        "rewritten_queries": run.queries if run.rewrite_status in ("applied", "unchanged") else None,
        "readable_scopes": [str(s) for s in run.scopes],
        # The context pass's hits follow the dense channel's own, ranked after them (fusion.fuse).
        "dense": [
            [rid, rank, round(cos, 4)] for rank, (rid, cos) in enumerate([*run.dense, *context_only], start=1)
        ],
        "lexical": [
            [
                h.record_id,
                h.rank,
                round(h.bm25, 4),
                [[t.value, t.is_identifier, t.is_entity_alias, t.common, t.rare] for t in h.match.terms],
                h.match.total_terms,
                h.match.common_terms,
            ]
            for h in run.lexical
        ],
        "entity": [[h.record_id, h.rank, h.entity_id] for h in run.entity],
        "fused": run.fused_log,
        "freshness": [
            [c.record_id, round(c.freshness_multiplier, 4)]
            for c in run.candidates
            if c.freshness_multiplier is not None
        ],
        "gated_out": [list(x) for x in run.gated_out],
        "deduped_out": [list(x) for x in run.deduped_out],
        "reranked": run.reranked,
        "reranked_out": run.reranked_out,
        "rerank_status": run.rerank_status,
        "rerank_error": run.rerank_error,
        "budget_out": budget_out,
        "returned": [r.record.id for r in results],
        "explanations": explanations,
        "config_flags": {
            "embedding_model": getattr(embedder, "name", None),
            "embedding_version": getattr(embedder, "version", None),
            "policy_version": POLICY_VERSION,  # the instructions the searching agent ran under
            "rewrite_enabled": cfg.retrieval.rewrite.enabled,
            "reranker_enabled": cfg.reranker.enabled,
            "reranker_mode": cfg.reranker.mode,
            "index_refresh": run.index_refresh,
            "broad_entities": run.broad_entities,
            "focus_queries": cfg.retrieval.focus_queries,
            "entity_max_share": cfg.retrieval.entity_max_share,
            # enabled False: the caller asked for every match (floors at zero)
            "gate": {
                "enabled": req.gate,
                **floors.summary(),
                "common_word_share": cfg.retrieval.gate.common_word_share,
                "common_word_min_records": cfg.retrieval.gate.common_word_min_records,
                "rare_word_records": cfg.retrieval.gate.rare_word_records,
                "rare_word_min_records": cfg.retrieval.gate.rare_word_min_records,
                "chat_words": cfg.retrieval.gate.chat_words,
                "date_words_uncounted": cfg.retrieval.gate.date_words_uncounted,
            },
            "dedup_cosine": cfg.retrieval.dedup_cosine,
            "rrf_k": cfg.retrieval.rrf_k,
            "similarity_weight": cfg.retrieval.similarity_weight,
        },
        "warm": run.warm,
        "timings_ms": timings,
    }
