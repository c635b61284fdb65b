"""Offline gate replay (spec §10.5): re-decide a logged search's gate under other floors.

``search_log`` keeps every candidate's generator ranks and scores, its fused score and its
freshness multiplier, so a floor sweep needs no re-execution: the candidates are rebuilt
from the row alone, and only each record's type and source kind (both immutable for the
gate's purposes) are read from the store.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from retold.config import Config
from retold.errors import NotFoundError
from retold.models import Candidate, GeneratorHit, LexicalMatch, LexicalTerm
from retold.retrieve.fusion import assemble, read_flags
from retold.retrieve.gate import GateSubject, empty_reason, gate
from retold.store import Store

__all__ = ["GateReplay", "candidates_from_log", "lexical_from_log", "replay_gate"]


@dataclass(frozen=True)
class GateReplay:
    search_id: str
    trigger: str
    kept: list[str]  # survivors of the gate, in ranked order
    gated_out: list[tuple[str, str]]
    empty_reason: str | None


def _load(value: Any) -> Any:
    return json.loads(value) if isinstance(value, str) else value


def lexical_from_log(row: dict[str, Any]) -> dict[str, tuple[GeneratorHit, LexicalMatch]]:
    """The logged lexical list: each record's hit and matched terms."""
    return {
        # Logs before common words (issue 18) have three-field terms and no common count.
        r[0]: (GeneratorHit(r[1], r[2]), LexicalMatch(tuple(LexicalTerm(*t) for t in r[3]), *r[4:6]))
        for r in _load(row["lexical"])
    }


def candidates_from_log(row: dict[str, Any]) -> list[Candidate]:
    """Rebuild the ranked, freshness-adjusted candidates exactly as the search gated them."""
    dense = {r[0]: GeneratorHit(r[1], r[2]) for r in _load(row["dense"])}
    lexical = lexical_from_log(row)
    entity = {r[0]: (GeneratorHit(r[1], 0.0), r[2]) for r in _load(row["entity"])}
    freshness = {r[0]: r[1] for r in _load(row["freshness"])}
    out = []
    for r in _load(row["fused"]):  # [id, rank, score], with flags fourth (fusion.logged_flags)
        flags = read_flags(r)
        out.append(assemble(
            r[0], r[1], r[2], dense, lexical, entity, freshness.get(r[0]),
            in_context=flags.in_context, in_window=flags.in_window, from_passage=flags.from_passage,
            other_subject=flags.other_subject, tells_time=flags.tells_time,
            is_reply=flags.is_reply,
        ))  # fmt: skip
    return sorted(out, key=lambda c: (-c.score, c.fused_rank))


async def replay_gate(store: Store, search_id: str, config: Config) -> GateReplay:
    """The gate decision ``config`` would have made for a logged search."""
    row = await store.search_log(search_id)
    if row is None:
        raise NotFoundError(f"no logged search {search_id!r}")
    candidates = candidates_from_log(row)
    records = {r.id: r for r in await store.get_records(c.record_id for c in candidates)}
    candidates = [c for c in candidates if c.record_id in records]
    subjects = {rid: GateSubject(r.type, r.source_kind, r.event_at) for rid, r in records.items()}
    logged_gate = _load(row["config_flags"] or "{}").get("gate", {})
    kind = logged_gate.get("query_kind")
    floors = config.retrieval.gate.floors_for(
        row["trigger"], asks=kind != "statement", about_self=kind == "self"
    )
    kept, gated_out = gate(candidates, subjects, floors)
    reason = None if kept else empty_reason(candidates, subjects, floors, eligible=len(candidates) or 1)
    return GateReplay(search_id, row["trigger"], [c.record_id for c in kept], gated_out, reason)
