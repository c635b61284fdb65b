"""JSON-serialisable tool results: records for memory_get, responses for memory_search.

Everything a tool returns is built here, so what a caller may see is decided in one
place: entity links, lineage and conflicts outside the caller's readable scopes are
left out, and a forgotten record is only its audit shape (a tombstone).
"""

from __future__ import annotations

from collections.abc import Collection
from datetime import datetime
from typing import Any

from retold.models import Explanation, GeneratorHit, Record, Scope, SearchResponse
from retold.retrieve.render import render_search, short_id
from retold.store import Store
from retold.tools.schemas import EXPLAIN_MODES
from retold.util import format_ts

__all__ = ["MAX_EVENTS", "MODEL_HIDDEN_KEYS", "explanation_payload", "model_view", "record_payload",
           "search_payload"]  # fmt: skip

MAX_EVENTS = 50
"""memory_get shows a record's most recent events up to this many; ``events_total`` counts all."""

MODEL_HIDDEN_KEYS: tuple[str, ...] = ("timings_ms",)
"""Keys of a tool result that the host keeps and the model is never shown.

``timings_ms`` is the write's (spec §8.1 step 9) or the search's per-stage latency: thirteen
numbers a model pays for as tokens on every call and cannot act on. The structured result of
``rt.tools.call`` keeps it (benchmarks read write latency there); the write event's payload and
``search_log.timings_ms`` record it as well."""


def model_view(result: dict[str, Any]) -> dict[str, Any]:
    """``result`` as a model reads it: the same dict without :data:`MODEL_HIDDEN_KEYS`.

    Every adapter builds the tool message from this (``retold.adapters.common.tool_text``, the
    MCP server's text and ``structuredContent``), so what the model pays for is decided here.
    """
    return {k: v for k, v in result.items() if k not in MODEL_HIDDEN_KEYS}


def _ts(value: datetime | None) -> str | None:
    return None if value is None else format_ts(value)


def _brief(record: Record) -> dict[str, Any]:
    """A lineage or conflict entry: enough to decide whether to fetch it."""
    gone = record.status == "deleted"
    return {
        "record_id": record.id,
        "short_id": short_id(record.id),
        "status": record.status,
        "source_kind": record.source_kind,
        "event_at": _ts(record.event_at),
        "content": None if gone else record.content,
    }


async def _visible(store: Store, ids: list[str], readable: Collection[Scope]) -> list[Record]:
    return [r for r in await store.get_records(ids) if r.scope in readable]


async def record_payload(store: Store, record: Record, readable: Collection[Scope]) -> dict[str, Any]:
    """The full record with lineage, conflicts, links and events, as the caller may see it."""
    # A record reinforced thousands of times must not make an unbounded answer.
    events, total = await store.latest_events(record.id, MAX_EVENTS)
    if record.status == "deleted":
        return {
            "record_id": record.id,
            "short_id": short_id(record.id),
            "tombstone": True,
            "status": "deleted",
            "type": record.type,
            "scope": str(record.scope),
            "content": None,
            "evidence": None,
            "source_ref": None,
            "created_at": _ts(record.created_at),
            "events_total": total,
            "events": [
                {"at": e["at"], "kind": e["kind"], "actor": e["actor"], "reason": e["payload"].get("reason")}
                for e in events
            ],
        }
    entities = []
    for entity_id, role in await store.record_links(record.id):
        entity = await store.get_entity(entity_id)
        if entity is not None and entity.scope in readable:
            entities.append(
                {"entity_id": entity.id, "kind": entity.kind, "canonical": entity.canonical,
                 "role": role, "scope": str(entity.scope)}
            )  # fmt: skip
    supersedes = await _visible(store, await store.supersession_chain(record.id), readable)
    superseded_by = await _visible(store, await store.superseded_by(record.id), readable)
    conflicts = await _visible(store, await store.conflicts_for(record.id), readable)
    decided = (await store.activation_of([record.id])).get(record.id)
    return {
        "record_id": record.id,
        "short_id": short_id(record.id),
        "tombstone": False,
        "type": record.type,
        "version": record.version,
        "status": record.status,
        "content": record.content,
        "subject": record.subject,
        "attribute": record.attribute,
        "scope": str(record.scope),
        "source_kind": record.source_kind,
        "source_ref": record.source_ref,
        "evidence": record.evidence,
        "confidence": record.confidence,
        "reinforcements": record.reinforcements,
        "creator_agent_id": record.creator_agent_id,
        "created_at": _ts(record.created_at),
        "event_at": _ts(record.event_at),
        "expires_at": _ts(record.expires_at),
        "valid_from": _ts(record.valid_from),
        "valid_until": _ts(record.valid_until),
        "review_at": _ts(record.review_at),
        "last_reinforced_at": _ts(record.last_reinforced_at),
        "tags": list(record.tags),
        "activation": decided.activation if decided else "conditional",
        "activation_reason": decided.reason if decided else None,
        "entities": entities,
        "supersedes": [_brief(r) for r in supersedes],
        "superseded_by": [_brief(r) for r in superseded_by],
        "conflicts": [_brief(r) for r in conflicts],
        "events_total": total,
        "events": [
            {"at": e["at"], "kind": e["kind"], "actor": e["actor"], "payload": e["payload"]} for e in events
        ],
    }


def _hit(hit: GeneratorHit | None) -> dict[str, Any] | None:
    return None if hit is None else {"rank": hit.rank, "score": round(hit.score, 6)}


def explanation_payload(
    explanation: Explanation, rrf_k: int, similarity_weight: float = 1.0
) -> dict[str, Any]:
    """Every field of an explanation as JSON, so a caller can see why a result ranked and survived.

    The RRF contributions are what each fused list gave the result, weights applied (the
    similarity lists weigh ``similarity_weight``, the context pass, neighbours, time answers
    and replies their own weights, and a record about someone else ``subject_weight`` on
    them), so they add up to the fused score before freshness. An explanation built without
    them (a conflict counterpart, which no list found) shows the channels' ``weight / (rrf_k +
    rank)``.
    """
    e = explanation
    channels = {"dense": e.dense, "lexical": e.lexical, "entity": e.entity}
    weight = {"dense": similarity_weight, "lexical": 1.0, "entity": 1.0}
    parts = dict(e.contributions) or {
        name: round(weight[name] / (rrf_k + hit.rank), 6) for name, hit in channels.items() if hit is not None
    }
    return {
        "summary": e.summary,
        "raw_queries": list(e.raw_queries),
        "rewritten_queries": None if e.rewritten_queries is None else list(e.rewritten_queries),
        "rewrite_status": e.rewrite_status,
        "matched_by": list(e.matched_by),
        "channels": {name: _hit(hit) for name, hit in channels.items()},
        "lexical_terms": None
        if e.lexical_terms is None
        else {
            "terms": [
                {
                    "value": t.value,
                    "is_identifier": t.is_identifier,
                    "is_entity_alias": t.is_entity_alias,
                    "common": t.common,
                    "rare": t.rare,
                }
                for t in e.lexical_terms.terms
            ],
            "total_terms": e.lexical_terms.total_terms,
            "common_terms": e.lexical_terms.common_terms,
        },
        "rrf": {
            "k": rrf_k,
            "similarity_weight": similarity_weight,
            "contributions": parts,
            "score": round(sum(parts.values()), 6),
        },
        "fused_rank": e.fused_rank,
        "freshness_multiplier": None if e.freshness_multiplier is None else round(e.freshness_multiplier, 6),
        "rerank": None
        if e.rerank is None
        else {"rank_before": e.rerank[0], "rank_after": e.rerank[1], "score": round(e.rerank[2], 6)},
        "gate": e.gate,
        "dedup": e.dedup,
        "budget": e.budget,
        "source_kind": e.source_kind,
        "status": e.status,
        "created_at": _ts(e.created_at),
        "event_at": _ts(e.event_at),
        "entity_ids": list(e.entity_ids),
        "conflicts_with": list(e.conflicts_with),
    }


def search_payload(
    response: SearchResponse,
    explain: str = "compact",
    rrf_k: int | None = None,
    similarity_weight: float = 1.0,
) -> dict[str, Any]:
    """The structured response plus ``rendered``, the §10.9 text a model should be shown.

    ``explain="full"`` adds ``explanation_full`` to each result (``rrf_k`` and
    ``similarity_weight`` are then the fusion settings the search ran with); compact answers
    are unchanged, and ``rendered`` is the same in both modes.
    """
    if explain not in EXPLAIN_MODES:
        raise ValueError(f"explain must be one of {EXPLAIN_MODES}, got {explain!r}")
    if explain == "full" and rrf_k is None:
        raise ValueError("explain='full' needs the rrf_k the search was fused with")
    payload = {
        "ok": True,
        "search_id": response.search_id,
        "rendered": render_search(response),
        "results": [
            {
                "record_id": r.record.id,
                "short_id": short_id(r.record.id),
                "type": r.record.type,
                "status": r.record.status,
                "source_kind": r.record.source_kind,
                "scope": str(r.record.scope),
                "event_at": _ts(r.record.event_at),
                "content": r.record.content,
                "score": round(r.score, 6),
                "explanation": r.explanation.summary,
                "matched_by": list(r.explanation.matched_by),
                "conflicts_with": list(r.explanation.conflicts_with),
            }
            for r in response.results
        ],
        "empty_reason": response.empty_reason,
        "raw_queries": response.raw_queries,
        "rewritten_queries": response.rewritten_queries,
        "rewrite_status": response.rewrite_status,
        "timings_ms": response.timings_ms,
    }
    if explain == "full" and rrf_k is not None:
        for result, entry in zip(response.results, payload["results"], strict=True):
            entry["explanation_full"] = explanation_payload(result.explanation, rrf_k, similarity_weight)
    return payload
