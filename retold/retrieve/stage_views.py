"""What each search stage decided, as small JSON a person can read (Studio, traces, `retold ui`).

The search graph's state is these views, one channel per stage, never the run itself: a
run holds the eligible set and the query vectors (megabytes at 50K records), a view holds
the top of each list with a short text, so every node's update stays a few kilobytes
whatever the store's size. Pure functions of a :class:`~retold.retrieve.search_run.SearchRun`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from retold.models import Candidate
    from retold.retrieve.search_run import SearchRun

__all__ = ["gate_view", "generate_view", "prepare_view", "rank_view", "rerank_view", "snippet"]

CHANNEL_TOP = 10  # candidates shown per generator
RANKED_TOP = 20  # fused candidates, gate decisions shown
TEXT_CHARS = 100  # of a record's content
QUERY_CHARS = 300
MAX_SCOPES = 50


def snippet(text: str | None, limit: int = TEXT_CHARS) -> str | None:
    """The first ``limit`` characters on one line, marked when cut."""
    if text is None:
        return None
    flat = " ".join(text[: limit * 2].split())  # never split a long record's whole text
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def _text(run: SearchRun, record_id: str) -> str | None:
    record = run.records.get(record_id)
    return snippet(record.content if record is not None else run.snippets.get(record_id))


def _queries(queries: list[str]) -> list[str | None]:
    return [snippet(q, QUERY_CHARS) for q in queries]


def prepare_view(run: SearchRun) -> dict[str, Any]:
    """The validated request, who asks, and how many records the hard filter left (not which)."""
    req = run.request
    p = run.principal
    floors = run.floors
    return {
        "search_id": run.search_id,
        "principal": {
            "agent_id": p.agent_id, "user_id": p.user_id,
            "session_id": p.session_id, "project_id": p.project_id,
        },
        "request": {
            "queries": _queries(req.queries),
            "rewritten_queries": _queries(run.queries) if run.rewrite_status == "applied" else None,
            "rewrite_status": run.rewrite_status,
            "trigger": req.trigger,
            "k": req.k,
            "types": req.types,
            "entities": req.entities[:20] if req.entities else req.entities,
            "since": req.since.isoformat() if req.since else None,
            "until": req.until.isoformat() if req.until else None,
            "include_history": req.include_history,
            "gate": req.gate,
            "context_chars": len(req.context or ""),
        },
        "eligible": {
            "count": len(run.eligible),
            "scopes": [str(s) for s in run.scopes[:MAX_SCOPES]],
            "scope_count": len(run.scopes),
            "excluded_source_kinds": sorted(floors.exclude_source_kinds) if floors else [],
            "index_refresh": run.index_refresh,
        },
    }  # fmt: skip


def generate_view(run: SearchRun) -> dict[str, Any]:
    """Each generator's top candidates: id, short text, score, rank."""
    dense = [
        {"id": rid, "text": _text(run, rid), "score": round(cos, 4), "rank": i}
        for i, (rid, cos) in enumerate(run.dense[:CHANNEL_TOP], 1)
    ]
    lexical = [
        {
            "id": h.record_id, "text": _text(run, h.record_id), "score": round(h.bm25, 4), "rank": h.rank,
            "terms": [t.value for t in h.match.terms][:10] if h.match else [],
        }
        for h in run.lexical[:CHANNEL_TOP]
    ]  # fmt: skip
    entity = [
        {"id": h.record_id, "text": _text(run, h.record_id), "entity_id": h.entity_id, "rank": h.rank}
        for h in run.entity[:CHANNEL_TOP]
    ]
    return {
        "channels": {
            "dense": {"total": len(run.dense), "queries": _queries(run.dense_queries), "top": dense},
            "lexical": {"total": len(run.lexical), "top": lexical},
            "entity": {"total": len(run.entity), "broad_entities": run.broad_entities[:20], "top": entity},
            "time_windows": [
                {"text": w.text, "start": w.start.isoformat(), "end": w.end.isoformat()}
                for w in run.windows[:5]
            ],
        }
    }


def _ranks(c: Candidate) -> dict[str, int]:
    found = {"dense": c.dense, "lexical": c.lexical, "entity": c.entity}
    return {name: hit.rank for name, hit in found.items() if hit is not None}


def rank_view(run: SearchRun) -> dict[str, Any]:
    """The fused list: each candidate's rank in every channel, its RRF score, what each fused list
    gave it, and freshness."""
    return {
        "fused": {
            "total": len(run.candidates),
            "context_hits": len(run.context),
            "top": [
                {
                    "id": c.record_id, "text": _text(run, c.record_id), "rank": c.fused_rank,
                    "channel_ranks": _ranks(c), "in_context": c.in_context, "in_window": c.in_window,
                    "from_passage": c.from_passage, "other_subject": c.other_subject,
                    "tells_time": c.tells_time,
                    "is_reply": c.is_reply,
                    "rrf": round(c.rrf_score, 6),
                    "contributions": {name: round(share, 6) for name, share in c.contributions.items()},
                    "freshness": None if c.freshness_multiplier is None else round(c.freshness_multiplier, 4),
                    "score": round(c.score, 6),
                }
                for c in run.candidates[:RANKED_TOP]
            ],
        }
    }  # fmt: skip


def gate_view(run: SearchRun) -> dict[str, Any]:
    """What passed the gate and why, what it rejected and why, and what dedup folded."""
    floors = run.floors
    return {
        "gate": {
            "floors": floors.summary() if floors is not None else {},
            "passed": [
                {"id": c.record_id, "text": _text(run, c.record_id), "reason": c.gate_reason}
                for c in run.kept[:RANKED_TOP]
            ],
            "passed_total": len(run.kept),
            "rejected": [
                {"id": rid, "text": _text(run, rid), "reason": reason}
                for rid, reason in run.gated_out[:RANKED_TOP]
            ],
            "rejected_total": len(run.gated_out),
            "deduped": [
                {"dropped": dropped, "kept": kept, "cosine": round(cos, 4)}
                for dropped, kept, cos in run.deduped_out[:RANKED_TOP]
            ],
        }
    }


def rerank_view(run: SearchRun) -> dict[str, Any]:
    """The cross-encoder's verdicts on the shortlist (rank before, rank after, score)."""
    return {
        "rerank": {
            "status": run.rerank_status,
            "error": run.rerank_error,
            "scored": [
                {"id": row[0], "text": _text(run, row[0]), "before": row[1], "after": row[2], "score": row[3]}
                for row in (run.reranked or [])[:RANKED_TOP]
            ],
            "dropped": [{"id": row[0], "reason": row[1]} for row in run.reranked_out[:RANKED_TOP]],
        }
    }
