"""LangGraph store items (``store_items``): a key's whole value beside the record carrying its text.

:mod:`retold.adapters.langgraph_store` decides who may see what; these queries only read and
write rows, always filtered by the scopes the caller passes. An item is *live* while it has not
expired and its record (when it has one) is active and unexpired: a record forgotten, expired or
superseded through any surface takes its items out of reads without touching their rows, and
erasure removes the rows themselves (:mod:`retold.erasure`).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from retold.models import Scope
from retold.store.database import Database
from retold.store.rows import scope_clause
from retold.util import format_ts, parse_ts

__all__ = ["StoreEntry", "StoreItemRow", "StoreItemsMixin"]

# The item has not expired and its record, if any, is live (``r`` is the LEFT JOINed record).
_LIVE = """(i.expires_at IS NULL OR i.expires_at > ?)
           AND (i.record_id IS NULL OR (r.status IN ('provisional','confirmed')
                                        AND (r.expires_at IS NULL OR r.expires_at > ?)))"""
_ITEM_COLUMNS = (
    "i.namespace, i.key, i.scope_kind, i.scope_id, i.record_id, i.value, i.agent_id, i.user_id, "
    "i.created_at, i.updated_at, i.expires_at, i.ttl_minutes"
)


@dataclass(frozen=True)
class StoreItemRow:
    """One ``store_items`` row; ``namespace`` is the JSON text of the namespace tuple."""

    namespace: str
    key: str
    scope: Scope
    record_id: str | None
    value: str
    agent_id: str
    user_id: str | None
    created_at: datetime
    updated_at: datetime
    expires_at: datetime | None = None
    ttl_minutes: float | None = None


@dataclass(frozen=True)
class StoreEntry:
    """One row of a namespace listing: an item, or (``item`` None) a record no item refers to."""

    item: StoreItemRow | None
    record_id: str | None
    updated_at: datetime


def _item(row: Any) -> StoreItemRow:
    return StoreItemRow(
        namespace=row[0], key=row[1], scope=Scope(row[2], row[3]), record_id=row[4], value=row[5],
        agent_id=row[6], user_id=row[7], created_at=parse_ts(row[8]),  # type: ignore[arg-type]
        updated_at=parse_ts(row[9]),  # type: ignore[arg-type]
        expires_at=parse_ts(row[10]), ttl_minutes=None if row[11] is None else float(row[11]),
    )  # fmt: skip


def _prefix_clause(prefix: str | None) -> tuple[str, list[Any]]:
    """Items whose namespace is ``prefix`` or lies below it (JSON text: ``["a","b"`` then ``]`` or ``,``)."""
    if prefix is None:
        return "1 = 1", []
    opening = prefix[:-1]  # the JSON array text without its closing bracket
    return "(i.namespace = ? OR substr(i.namespace, 1, ?) = ?)", [prefix, len(opening) + 1, opening + ","]


class StoreItemsMixin:
    db: Database

    async def put_store_item(self, item: StoreItemRow) -> None:
        """Create or replace the item at ``(namespace, key)``; ``created_at`` of a replaced one stays."""
        await self.db.execute_atomic(
            """INSERT INTO store_items(namespace, key, scope_kind, scope_id, record_id, value, agent_id,
                                       user_id, created_at, updated_at, expires_at, ttl_minutes)
               VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
               ON CONFLICT(namespace, key) DO UPDATE SET
                 scope_kind = excluded.scope_kind, scope_id = excluded.scope_id,
                 record_id = excluded.record_id, value = excluded.value, agent_id = excluded.agent_id,
                 user_id = excluded.user_id, updated_at = excluded.updated_at,
                 expires_at = excluded.expires_at, ttl_minutes = excluded.ttl_minutes""",
            (
                item.namespace, item.key, item.scope.kind, item.scope.id, item.record_id, item.value,
                item.agent_id, item.user_id, format_ts(item.created_at), format_ts(item.updated_at),
                format_ts(item.expires_at) if item.expires_at else None, item.ttl_minutes,
            ),
        )  # fmt: skip

    async def get_store_item(
        self, namespace: str, key: str, scope: Scope, *, now: datetime
    ) -> StoreItemRow | None:
        """The live item at ``(namespace, key)`` when it belongs to ``scope``."""
        t = format_ts(now)
        row = await self.db.fetchone(
            f"""SELECT {_ITEM_COLUMNS} FROM store_items i LEFT JOIN records r ON r.id = i.record_id
                 WHERE i.namespace = ? AND i.key = ? AND i.scope_kind = ? AND i.scope_id = ? AND {_LIVE}""",
            (namespace, key, scope.kind, scope.id, t, t),
        )
        return _item(row) if row is not None else None

    async def store_item_row(self, namespace: str, key: str) -> StoreItemRow | None:
        """The row at ``(namespace, key)``, live or not (for a write deciding what to replace)."""
        row = await self.db.fetchone(
            f"SELECT {_ITEM_COLUMNS} FROM store_items i WHERE i.namespace = ? AND i.key = ?", (namespace, key)
        )
        return _item(row) if row is not None else None

    async def delete_store_item(self, namespace: str, key: str) -> bool:
        return bool(
            await self.db.execute_atomic(
                "DELETE FROM store_items WHERE namespace = ? AND key = ?", (namespace, key)
            )
        )

    async def store_item_users(self, record_id: str) -> list[tuple[str, str]]:
        """Every ``(namespace, key)`` whose item carries ``record_id``."""
        rows = await self.db.fetchall(
            "SELECT namespace, key FROM store_items WHERE record_id = ? ORDER BY namespace, key", (record_id,)
        )
        return [(r[0], r[1]) for r in rows]

    async def set_store_item_expiry(
        self, namespace: str, key: str, expires_at: datetime | None, *, updated_at: datetime | None = None
    ) -> None:
        """Move an item's expiry (a TTL refresh on read), keeping its value."""
        await self.db.execute_atomic(
            "UPDATE store_items SET expires_at = ? WHERE namespace = ? AND key = ?",
            (format_ts(expires_at) if expires_at else None, namespace, key),
        )

    async def store_entries(
        self,
        scopes: Sequence[Scope],
        prefix: str | None,
        *,
        root: Scope | None,
        now: datetime,
        limit: int,
        offset: int,
    ) -> list[StoreEntry]:
        """Live items under ``prefix`` in ``scopes``, newest first; with ``root``, also that scope's
        live records no item refers to (the memories other surfaces wrote), interleaved by time."""
        t = format_ts(now)
        where, params = scope_clause(scopes, "i.")
        under, prefix_params = _prefix_clause(prefix)
        items_sql = f"""SELECT i.namespace AS ns, i.key AS k, i.record_id AS rid, i.updated_at AS at
                          FROM store_items i LEFT JOIN records r ON r.id = i.record_id
                         WHERE {where} AND {under} AND {_LIVE}"""
        args: list[Any] = [*params, *prefix_params, t, t]
        sql = items_sql
        if root is not None and root in scopes:
            sql += """ UNION ALL
                   SELECT NULL AS ns, NULL AS k, r.id AS rid,
                          coalesce(r.last_reinforced_at, r.created_at) AS at
                     FROM records r
                    WHERE r.scope_kind = ? AND r.scope_id = ? AND r.status IN ('provisional','confirmed')
                      AND (r.expires_at IS NULL OR r.expires_at > ?)
                      AND NOT EXISTS (SELECT 1 FROM store_items s WHERE s.record_id = r.id)"""
            args += [root.kind, root.id, t]
        rows = await self.db.fetchall(
            f"SELECT ns, k, rid, at FROM ({sql}) AS entries ORDER BY at DESC, rid DESC, k LIMIT ? OFFSET ?",
            [*args, limit, offset],
        )
        keys = [(r[0], r[1]) for r in rows if r[0] is not None]
        found = await self._items_by_key(keys)
        return [
            StoreEntry(found.get((r[0], r[1])) if r[0] is not None else None, r[2], parse_ts(r[3]))  # type: ignore[arg-type]
            for r in rows
            if r[0] is None or (r[0], r[1]) in found
        ]

    async def _items_by_key(self, keys: Sequence[tuple[str, str]]) -> dict[tuple[str, str], StoreItemRow]:
        out: dict[tuple[str, str], StoreItemRow] = {}
        for namespace, key in keys:
            item = await self.store_item_row(namespace, key)
            if item is not None:
                out[(namespace, key)] = item
        return out

    async def store_items_for_records(
        self, record_ids: Iterable[str], scopes: Sequence[Scope], prefix: str | None, *, now: datetime
    ) -> dict[str, list[StoreItemRow]]:
        """Live items under ``prefix`` in ``scopes`` that carry each record (search hits → items)."""
        ids = list(dict.fromkeys(record_ids))
        if not ids:
            return {}
        t = format_ts(now)
        where, params = scope_clause(scopes, "i.")
        under, prefix_params = _prefix_clause(prefix)
        out: dict[str, list[StoreItemRow]] = {}
        async with self.db.temp_ids(ids) as chosen:
            rows = await self.db.fetchall(
                f"""SELECT {_ITEM_COLUMNS} FROM store_items i LEFT JOIN records r ON r.id = i.record_id
                     WHERE i.record_id IN (SELECT id FROM {chosen}) AND {where} AND {under} AND {_LIVE}
                     ORDER BY i.namespace, i.key""",
                [*params, *prefix_params, t, t],
            )
        for row in rows:
            item = _item(row)
            out.setdefault(item.record_id or "", []).append(item)
        return out

    async def records_with_items(self, record_ids: Iterable[str]) -> set[str]:
        """Which of these records some store item carries (live or not)."""
        ids = list(dict.fromkeys(record_ids))
        if not ids:
            return set()
        async with self.db.temp_ids(ids) as chosen:
            rows = await self.db.fetchall(
                f"SELECT DISTINCT record_id FROM store_items WHERE record_id IN (SELECT id FROM {chosen})"
            )
        return {r[0] for r in rows}

    async def store_namespaces(self, scopes: Sequence[Scope], *, now: datetime) -> list[str]:
        """Distinct namespaces (JSON text) of live items in ``scopes``."""
        if not scopes:
            return []
        t = format_ts(now)
        where, params = scope_clause(scopes, "i.")
        rows = await self.db.fetchall(
            f"""SELECT DISTINCT i.namespace FROM store_items i LEFT JOIN records r ON r.id = i.record_id
                 WHERE {where} AND {_LIVE} ORDER BY i.namespace""",
            [*params, t, t],
        )
        return [r[0] for r in rows]

    async def scopes_with_records(self, scopes: Sequence[Scope], *, now: datetime) -> list[Scope]:
        """Which of ``scopes`` hold a live record."""
        out = []
        t = format_ts(now)
        for scope in scopes:
            if await self.db.fetchval(
                """SELECT EXISTS (SELECT 1 FROM records r WHERE r.scope_kind = ? AND r.scope_id = ?
                      AND r.status IN ('provisional','confirmed')
                      AND (r.expires_at IS NULL OR r.expires_at > ?))""",
                (scope.kind, scope.id, t),
            ):
                out.append(scope)
        return out

    async def sweep_store_items(self, now: datetime) -> int:
        """Remove items whose TTL has passed, so their values do not outlive it on disk."""
        return await self.db.execute_atomic(
            "DELETE FROM store_items WHERE expires_at IS NOT NULL AND expires_at <= ?", (format_ts(now),)
        )

    # --- erasure --------------------------------------------------------------------------------

    async def store_items_reached(
        self, *, record_ids: Iterable[str] = (), user_id: str | None = None
    ) -> list[tuple[str, str]]:
        """Items an erasure removes: those carrying an erased record; for a user, those they wrote
        and every item in their own scopes (``user:<id>``, ``agent:<agent>/<id>``)."""
        ids = list(dict.fromkeys(record_ids))
        async with self.db.temp_ids(ids) as chosen:
            rows = await self.db.fetchall(
                f"""SELECT namespace, key FROM store_items
                     WHERE record_id IN (SELECT id FROM {chosen})
                        OR user_id = ?
                        OR (scope_kind = 'user' AND scope_id = ?)
                        OR (scope_kind = 'agent' AND instr(scope_id, '/') > 0
                            AND substr(scope_id, instr(scope_id, '/') + 1) = ?)
                     ORDER BY namespace, key""",
                (user_id, user_id, user_id),
            )
        return [(r[0], r[1]) for r in rows]
