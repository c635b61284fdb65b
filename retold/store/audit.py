"""Grants, the append-only event log, the search log and migration issues."""

from __future__ import annotations

import dataclasses
import json
import sqlite3
from collections.abc import Mapping
from contextlib import closing
from datetime import datetime
from typing import Any

import orjson

from retold.errors import InvalidArgumentError, StoreError
from retold.models import Grant, Scope
from retold.store.database import Database, translate_error
from retold.store.rows import grant_from_row
from retold.util import Clock, format_ts, new_id

__all__ = ["SEARCH_LOG_COLUMNS", "AuditMixin"]

SEARCH_LOG_COLUMNS: tuple[str, ...] = (
    "id", "at", "agent_id", "user_id", "session_id", "trigger", "request", "context",
    "rewrite_status", "rewritten_queries", "readable_scopes", "dense", "lexical", "entity",
    "fused", "freshness", "gated_out", "deduped_out", "reranked", "reranked_out",
    "rerank_status", "rerank_error", "budget_out", "returned", "explanations", "config_flags",
    "warm", "timings_ms",
)  # fmt: skip
_SEARCH_LOG_OPTIONAL = frozenset({"session_id", "context", "rewritten_queries", "reranked", "rerank_error"})
_SEARCH_LOG_DEFAULTS = {"trigger": "tool", "reranked_out": [], "rerank_status": "disabled"}


# orjson's own datetime and dataclass encoders are skipped so _json_default decides both, as
# for the standard library: the two give the same text for everything retold logs.
_ORJSON = orjson.OPT_PASSTHROUGH_DATETIME | orjson.OPT_PASSTHROUGH_DATACLASS | orjson.OPT_NON_STR_KEYS


def _json(value: Any) -> str:
    """Compact JSON for the event and search_log columns; orjson (about 3x faster on a search's
    log row, the last stage of every search), the standard library for what orjson refuses
    (integers past 64 bits, lone surrogates)."""
    try:
        return orjson.dumps(value, default=_json_default, option=_ORJSON).decode()
    except TypeError:  # orjson.JSONEncodeError is one
        return json.dumps(value, default=_json_default, separators=(",", ":"))


def _json_default(value: Any) -> Any:
    """Dataclasses (requests, explanations) as objects, datetimes as ISO text, sets as lists."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        # Shallow: the encoder recurses into fields itself, so asdict's deep copy is waste.
        return {f.name: getattr(value, f.name) for f in dataclasses.fields(value)}
    if isinstance(value, datetime):
        return format_ts(value)
    if isinstance(value, set | frozenset | tuple):
        return list(value)
    return str(value)


class AuditMixin:
    db: Database
    clock: Clock

    # --- grants ---------------------------------------------------------------------------

    async def set_grant(self, grant: Grant) -> Grant | None:
        """Create or replace a grant row; return the row it replaced (None if new)."""
        async with self.db.transaction():
            before = await self.get_grant(grant.agent_id, grant.scope)
            await self.db.execute(
                """INSERT INTO grants(agent_id, scope_kind, scope_id, can_read, can_write)
                   VALUES (?, ?, ?, ?, ?)
                   ON CONFLICT(agent_id, scope_kind, scope_id)
                   DO UPDATE SET can_read = excluded.can_read, can_write = excluded.can_write""",
                (grant.agent_id, grant.scope.kind, grant.scope.id, int(grant.can_read), int(grant.can_write)),
            )
        return before

    async def delete_grant(self, agent_id: str, scope: Scope) -> Grant | None:
        """Remove a grant; return the removed row (None if there was none)."""
        async with self.db.transaction():
            before = await self.get_grant(agent_id, scope)
            await self.db.execute(
                "DELETE FROM grants WHERE agent_id = ? AND scope_kind = ? AND scope_id = ?",
                (agent_id, scope.kind, scope.id),
            )
        return before

    async def get_grant(self, agent_id: str, scope: Scope) -> Grant | None:
        row = await self.db.fetchone(
            "SELECT * FROM grants WHERE agent_id = ? AND scope_kind = ? AND scope_id = ?",
            (agent_id, scope.kind, scope.id),
        )
        return None if row is None else grant_from_row(row)

    async def grants_for(
        self, agent_id: str, *, can_read: bool | None = None, can_write: bool | None = None
    ) -> list[Grant]:
        sql = "SELECT * FROM grants WHERE agent_id = ?"
        params: list[Any] = [agent_id]
        if can_read is not None:
            sql += " AND can_read = ?"
            params.append(int(can_read))
        if can_write is not None:
            sql += " AND can_write = ?"
            params.append(int(can_write))
        rows = await self.db.fetchall(sql + " ORDER BY scope_kind, scope_id", params)
        return [grant_from_row(r) for r in rows]

    def grants_for_sync(self, agent_id: str, *, can_write: bool | None = None) -> list[Grant]:
        """:meth:`grants_for` on a short-lived connection, for callers that cannot await.

        Frameworks that register tools synchronously need the write targets then. It is
        one indexed read of the small grants table (well under a millisecond), and WAL
        readers never wait for the writer.
        """
        self.db._check_open()
        if self.db.path == ":memory:":  # a second connection would open another, empty database
            raise StoreError("an in-memory store has no second connection to read from; await grants_for")
        sql = "SELECT * FROM grants WHERE agent_id = ?"
        params: list[Any] = [agent_id]
        if can_write is not None:
            sql += " AND can_write = ?"
            params.append(int(can_write))
        sql += " ORDER BY scope_kind, scope_id"
        return [grant_from_row(r) for r in self._fetch_sync(sql, params)]

    def _fetch_sync(self, sql: str, params: list[Any]) -> list[Any]:
        """One read on a short-lived read-only connection of its own (no event loop needed)."""
        try:
            with closing(sqlite3.connect(self.db.path, timeout=5.0)) as conn:
                conn.row_factory = sqlite3.Row
                conn.execute("PRAGMA query_only = ON")
                return conn.execute(sql, params).fetchall()
        except sqlite3.Error as exc:
            raise translate_error(exc, sql) from exc

    # --- events ---------------------------------------------------------------------------

    async def append_event(
        self,
        kind: str,
        actor: str,
        *,
        record_id: str | None = None,
        entity_id: str | None = None,
        payload: Mapping[str, Any] | None = None,
        at: datetime | None = None,
    ) -> str:
        """Append one audit event (never updated afterwards) and return its id."""
        event_id = new_id()
        # Inside the caller's transaction this is a savepoint; alone, it takes the write lock
        # instead of writing through the read connection.
        async with self.db.transaction():
            await self.db.execute(
                "INSERT INTO events(id, at, kind, actor, record_id, entity_id, payload) "
                "VALUES (?, ?, ?, ?, ?, ?, ?)",
                (
                    event_id,
                    format_ts(at or self.clock.now()),
                    kind,
                    actor,
                    record_id,
                    entity_id,
                    _json(dict(payload or {})),
                ),
            )
        return event_id

    async def events(
        self,
        *,
        record_id: str | None = None,
        entity_id: str | None = None,
        kind: str | None = None,
        limit: int | None = None,
    ) -> list[dict[str, Any]]:
        """Events in the order they were appended, filtered by any of the arguments."""
        clauses, params = [], []
        for column, value in (("record_id", record_id), ("entity_id", entity_id), ("kind", kind)):
            if value is not None:
                clauses.append(f"{column} = ?")
                params.append(value)
        sql = "SELECT * FROM events" + (" WHERE " + " AND ".join(clauses) if clauses else "")
        sql += " ORDER BY id"
        if limit is not None:
            sql += " LIMIT ?"
            params.append(limit)
        rows = await self.db.fetchall(sql, params)
        return [{**dict(r), "payload": json.loads(r["payload"])} for r in rows]

    async def latest_events(self, record_id: str, limit: int) -> tuple[list[dict[str, Any]], int]:
        """The record's ``limit`` most recent events (oldest first) and how many it has in all."""
        total = int(await self.db.fetchval("SELECT count(*) FROM events WHERE record_id = ?", (record_id,)))
        rows = await self.db.fetchall(
            "SELECT * FROM (SELECT * FROM events WHERE record_id = ? ORDER BY id DESC LIMIT ?) ORDER BY id",
            (record_id, limit),
        )
        return [{**dict(r), "payload": json.loads(r["payload"])} for r in rows], total

    # --- search log -----------------------------------------------------------------------

    async def insert_search_log(self, row: Mapping[str, Any]) -> None:
        """Write one complete ``search_log`` row; JSON columns accept Python values."""
        unknown = set(row) - set(SEARCH_LOG_COLUMNS)
        if unknown:
            raise InvalidArgumentError(f"unknown search_log column(s): {', '.join(sorted(unknown))}")
        values = {**_SEARCH_LOG_DEFAULTS, **row}
        missing = [c for c in SEARCH_LOG_COLUMNS if c not in values and c not in _SEARCH_LOG_OPTIONAL]
        if missing:
            raise InvalidArgumentError(f"search_log row is missing: {', '.join(missing)}")
        params = []
        for column in SEARCH_LOG_COLUMNS:
            value = values.get(column)
            if isinstance(value, datetime):
                value = format_ts(value)
            elif isinstance(value, bool):
                value = int(value)
            elif value is not None and not isinstance(value, str | int | float):
                value = _json(value)
            params.append(value)
        placeholders = ", ".join("?" for _ in SEARCH_LOG_COLUMNS)
        await self.db.execute_atomic(
            f"INSERT INTO search_log({', '.join(SEARCH_LOG_COLUMNS)}) VALUES ({placeholders})", params
        )

    async def search_log(self, search_id: str) -> dict[str, Any] | None:
        row = await self.db.fetchone("SELECT * FROM search_log WHERE id = ?", (search_id,))
        return None if row is None else dict(row)

    async def latest_search_log(self) -> dict[str, Any] | None:
        row = await self.db.fetchone("SELECT * FROM search_log ORDER BY id DESC LIMIT 1")
        return None if row is None else dict(row)

    # --- migration issues -----------------------------------------------------------------

    async def migration_issues(self, *, unresolved_only: bool = True) -> list[dict[str, Any]]:
        """Legacy rows a migration could not map; unresolved ones are still active and unacknowledged."""
        sql = """SELECT m.migration_version, m.record_id, m.issue, m.resolution, m.resolved_at,
                        m.resolved_by, r.status, r.subject, r.type, r.scope_kind, r.scope_id, r.content
                   FROM migration_issues m JOIN records r ON r.id = m.record_id"""
        if unresolved_only:
            sql += " WHERE m.resolution IS NULL AND r.status IN ('provisional', 'confirmed')"
        rows = await self.db.fetchall(sql + " ORDER BY m.migration_version, m.record_id")
        return [dict(r) for r in rows]
