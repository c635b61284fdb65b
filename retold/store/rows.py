"""Conversions between SQLite rows and the spec's types: the only place that knows both shapes."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from retold.models import Entity, Grant, Record, RecordSource, Scope, SessionInfo, Turn
from retold.util import format_ts, parse_ts

__all__ = [
    "RECORD_COLUMNS",
    "TURN_KEY_SQL",
    "entity_from_row",
    "grant_from_row",
    "record_from_row",
    "record_to_params",
    "scope_clause",
    "session_from_row",
    "source_from_row",
    "turn_from_row",
]


TURN_KEY_SQL = "(agent_id || '/' || user_id || '/' || session_id)"
"""A turn's (or a source's) session as ``str(SessionKey)``, to match a list of qualified keys."""


def scope_clause(scopes: Sequence[Scope], prefix: str = "") -> tuple[str, list[Any]]:
    """``(<parenthesised OR of scope matches>, params)``; a clause matching nothing for no scopes.

    ``prefix`` is the table alias with its dot (``"r."``).
    """
    if not scopes:
        return "0", []
    clause = " OR ".join(f"({prefix}scope_kind = ? AND {prefix}scope_id = ?)" for _ in scopes)
    return f"({clause})", [part for s in scopes for part in (s.kind, s.id)]


RECORD_COLUMNS: tuple[str, ...] = (
    "id", "type", "version", "content", "subject", "subject_entity_id", "attribute",
    "scope_kind", "scope_id", "source_kind", "source_ref", "creator_agent_id", "evidence",
    "created_at", "event_at", "expires_at", "valid_from", "valid_until", "review_at",
    "review_flagged_at", "confidence", "status", "supersedes_id", "reinforcements",
    "last_reinforced_at", "index_version", "tags",
)  # fmt: skip

_TIME_COLUMNS = frozenset(
    {"created_at", "event_at", "expires_at", "valid_from", "valid_until", "review_at",
     "review_flagged_at", "last_reinforced_at"}
)  # fmt: skip


def to_sql(column: str, value: Any) -> Any:
    """One Python value as the column stores it (timestamps as fixed-width UTC text, tags as JSON)."""
    if value is None:
        return None
    if column in _TIME_COLUMNS or isinstance(value, datetime):
        if isinstance(value, str):
            value = parse_ts(value)
        return format_ts(value)
    if column == "tags":
        return json.dumps(list(value))
    return value


def record_to_params(record: Record) -> dict[str, Any]:
    values = {c: getattr(record, c) for c in RECORD_COLUMNS if c not in ("scope_kind", "scope_id")}
    values["scope_kind"] = record.scope.kind
    values["scope_id"] = record.scope.id
    return {c: to_sql(c, values[c]) for c in RECORD_COLUMNS}


def record_from_row(row: sqlite3.Row, entity_ids: list[str] | None = None) -> Record:
    return Record(
        id=row["id"],
        type=row["type"],
        version=row["version"],
        content=row["content"],
        subject=row["subject"],
        subject_entity_id=row["subject_entity_id"],
        attribute=row["attribute"],
        scope=Scope(row["scope_kind"], row["scope_id"]),
        source_kind=row["source_kind"],
        source_ref=row["source_ref"],
        creator_agent_id=row["creator_agent_id"],
        evidence=row["evidence"],
        created_at=parse_ts(row["created_at"]),  # type: ignore[arg-type]
        event_at=parse_ts(row["event_at"]),  # type: ignore[arg-type]
        expires_at=parse_ts(row["expires_at"]),
        valid_from=parse_ts(row["valid_from"]),
        valid_until=parse_ts(row["valid_until"]),
        review_at=parse_ts(row["review_at"]),
        review_flagged_at=parse_ts(row["review_flagged_at"]),
        confidence=row["confidence"],
        status=row["status"],
        supersedes_id=row["supersedes_id"],
        reinforcements=row["reinforcements"],
        last_reinforced_at=parse_ts(row["last_reinforced_at"]),
        tags=json.loads(row["tags"]),
        entity_ids=list(entity_ids or []),
        index_version=row["index_version"],
    )


def entity_from_row(row: sqlite3.Row, aliases: list[str]) -> Entity:
    return Entity(
        id=row["id"],
        kind=row["kind"],
        canonical=row["canonical"],
        scope=Scope(row["scope_kind"], row["scope_id"]),
        status=row["status"],
        merged_into=row["merged_into"],
        aliases=aliases,
        created_at=parse_ts(row["created_at"]),  # type: ignore[arg-type]
        origin_user=row["origin_user"],
        origin_record=row["origin_record"],
    )


def source_from_row(row: sqlite3.Row) -> RecordSource:
    return RecordSource(
        record_id=row["record_id"],
        origin=row["origin"],
        source_kind=row["source_kind"],
        source_ref=row["source_ref"],
        agent_id=row["agent_id"],
        user_id=row["user_id"],
        session_id=row["session_id"],
        evidence=row["evidence"],
        content=row["content"],
        added_at=parse_ts(row["added_at"]),  # type: ignore[arg-type]
        counted=bool(row["counted"]),
    )


def grant_from_row(row: sqlite3.Row) -> Grant:
    return Grant(
        agent_id=row["agent_id"],
        scope=Scope(row["scope_kind"], row["scope_id"]),
        can_read=bool(row["can_read"]),
        can_write=bool(row["can_write"]),
    )


def session_from_row(row: sqlite3.Row) -> SessionInfo:
    return SessionInfo(
        id=row["id"],
        agent_id=row["agent_id"],
        user_id=row["user_id"],
        project_id=row["project_id"],
        started_at=parse_ts(row["started_at"]),  # type: ignore[arg-type]
        ended_at=parse_ts(row["ended_at"]),
        extraction_started_at=parse_ts(row["extraction_started_at"]),
        extracted_at=parse_ts(row["extracted_at"]),
    )


def turn_from_row(row: sqlite3.Row) -> Turn:
    return Turn(
        session_id=row["session_id"],
        turn=row["turn"],
        role=row["role"],
        content=row["content"],
        at=parse_ts(row["at"]),  # type: ignore[arg-type]
    )
