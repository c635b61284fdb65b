"""Read-only listings for people looking at a store: the queries behind ``retold ui``.

Every listing takes ``scopes``: ``None`` is the operator's view of the whole store, a list
is what one principal may read (:func:`retold.policy.grants.readable_scopes`), applied in
the statement itself, never by loading everything and dropping rows afterwards. Listings
that belong to a principal rather than to a scope (sessions, searches) take ``owner``, an
``(agent_id, user_id)`` pair, for the same reason. Pages are ``limit`` rows from ``offset``;
callers ask for one row more than they show to know whether a next page exists, so no
listing counts a whole table.

The statements are plain SQL both backends run (PostgreSQL through
:func:`retold.store.postgres.dialect.translate`).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from retold.models import Entity, Record, Scope, SessionInfo, SessionKey, Turn
from retold.store.database import Database
from retold.store.rows import entity_from_row, scope_clause, session_from_row, turn_from_row
from retold.util import format_ts, maybe_json

__all__ = ["InspectMixin", "Owner"]

Owner = tuple[str, str]
"""``(agent_id, user_id)``: whose sessions and searches a principal's view lists."""

_IN_CHUNK = 500
_SEARCH_COLUMNS = (
    "id, at, agent_id, user_id, session_id, trigger, request, returned, gated_out, fused, timings_ms"
)


def _where(clauses: list[str]) -> str:
    return " WHERE " + " AND ".join(clauses) if clauses else ""


class InspectMixin:
    db: Database

    if TYPE_CHECKING:  # provided by Store

        async def get_records(self, record_ids: Iterable[str]) -> list[Record]: ...

    # --- records ---------------------------------------------------------------------------------

    async def scope_counts(self, scopes: Sequence[Scope] | None) -> list[tuple[Scope, dict[str, int]]]:
        """Every scope that holds records (of ``scopes``, when given), with its count per status."""
        if scopes is not None and not scopes:
            return []
        clauses, params = [], []
        if scopes is not None:
            sql, params = scope_clause(scopes)
            clauses.append(sql)
        rows = await self.db.fetchall(
            f"""SELECT scope_kind, scope_id, status, count(*) AS n FROM records{_where(clauses)}
                 GROUP BY scope_kind, scope_id, status ORDER BY scope_kind, scope_id, status""",
            params,
        )
        found: dict[Scope, dict[str, int]] = {}
        for kind, ident, status, n in rows:
            found.setdefault(Scope(kind, ident), {})[status] = int(n)
        return list(found.items())

    async def recent_records(
        self,
        scopes: Sequence[Scope] | None,
        *,
        scope: Scope | None = None,
        status: str | None = None,
        limit: int = 20,
        offset: int = 0,
    ) -> list[Record]:
        """Records newest first (ids are UUIDv7, so by creation), optionally of one scope or status."""
        if scopes is not None and not scopes:
            return []
        clauses, params = [], []
        if scopes is not None:
            sql, params = scope_clause(scopes, "r.")
            clauses.append(sql)
        if scope is not None:
            clauses.append("r.scope_kind = ? AND r.scope_id = ?")
            params += [scope.kind, scope.id]
        if status is not None:
            clauses.append("r.status = ?")
            params.append(status)
        ids = await self.db.fetch_column(
            f"SELECT r.id FROM records r{_where(clauses)} ORDER BY r.id DESC LIMIT ? OFFSET ?",
            [*params, limit, offset],
        )
        return await self.get_records(ids)

    async def readable_record_ids(
        self, record_ids: Iterable[str], scopes: Sequence[Scope] | None
    ) -> set[str]:
        """Of these ids, those that exist and (with ``scopes``) live in one of the scopes."""
        ids = list(dict.fromkeys(record_ids))
        if not ids or (scopes is not None and not scopes):
            return set()
        scope_sql, scope_params = scope_clause(scopes) if scopes is not None else ("1 = 1", [])
        found: set[str] = set()
        for start in range(0, len(ids), _IN_CHUNK):
            chunk = ids[start : start + _IN_CHUNK]
            found.update(
                await self.db.fetch_column(
                    f"SELECT id FROM records WHERE id IN ({', '.join('?' * len(chunk))}) AND {scope_sql}",
                    [*chunk, *scope_params],
                )
            )
        return found

    async def records_by_day(
        self, scopes: Sequence[Scope] | None, since: datetime
    ) -> list[tuple[str, str, int]]:
        """``(YYYY-MM-DD, status, count)`` of the records created on each day since ``since``."""
        if scopes is not None and not scopes:
            return []
        clauses, params = ["created_at >= ?"], [format_ts(since)]
        if scopes is not None:
            sql, scope_params = scope_clause(scopes)
            clauses.append(sql)
            params += scope_params
        rows = await self.db.fetchall(
            f"""SELECT substr(created_at, 1, 10) AS day, status, count(*) AS n FROM records{_where(clauses)}
                 GROUP BY substr(created_at, 1, 10), status ORDER BY day, status""",
            params,
        )
        return [(str(day), str(status), int(n)) for day, status, n in rows]

    async def conflict_rows(self, record_id: str) -> list[tuple[str, str, str]]:
        """``(record_id, other_id, noted_at)`` of every conflict row naming the record, either side."""
        rows = await self.db.fetchall(
            """SELECT record_id, other_id, noted_at FROM record_conflicts
                WHERE record_id = ? OR other_id = ? ORDER BY noted_at, record_id, other_id""",
            (record_id, record_id),
        )
        return [(r[0], r[1], r[2]) for r in rows]

    async def records_from_session(self, key: SessionKey, scopes: Sequence[Scope] | None) -> list[Record]:
        """Records a session's turns support (through ``record_sources``), newest first."""
        if scopes is not None and not scopes:
            return []
        clauses = ["s.agent_id = ?", "s.user_id = ?", "s.session_id = ?"]
        params: list[Any] = [key.agent_id, key.user_id, key.session_id]
        if scopes is not None:
            sql, scope_params = scope_clause(scopes, "r.")
            clauses.append(sql)
            params += scope_params
        ids = await self.db.fetch_column(
            f"""SELECT DISTINCT r.id FROM record_sources s JOIN records r ON r.id = s.record_id
                {_where(clauses)} ORDER BY r.id DESC""",
            params,
        )
        return await self.get_records(ids)

    async def entity_record_ids(
        self, entity_id: str, scopes: Sequence[Scope] | None, limit: int
    ) -> list[str]:
        """Ids of the records linked to an entity, newest first."""
        if scopes is not None and not scopes:
            return []
        clauses, params = ["l.entity_id = ?"], [entity_id]
        if scopes is not None:
            sql, scope_params = scope_clause(scopes, "r.")
            clauses.append(sql)
            params += scope_params
        return await self.db.fetch_column(
            f"""SELECT r.id FROM record_entities l JOIN records r ON r.id = l.record_id
                {_where(clauses)} ORDER BY r.id DESC LIMIT ?""",
            [*params, limit],
        )

    # --- entities --------------------------------------------------------------------------------

    async def list_entities(
        self, scopes: Sequence[Scope] | None, *, kind: str | None = None, limit: int = 50, offset: int = 0
    ) -> list[Entity]:
        """Entities by canonical name, each with the aliases ``scopes`` may see (all without)."""
        if scopes is not None and not scopes:
            return []
        clauses, params = [], []
        if scopes is not None:
            sql, params = scope_clause(scopes, "e.")
            clauses.append(sql)
        if kind is not None:
            clauses.append("e.kind = ?")
            params.append(kind)
        rows = await self.db.fetchall(
            f"SELECT e.* FROM entities e{_where(clauses)} ORDER BY e.canonical, e.id LIMIT ? OFFSET ?",
            [*params, limit, offset],
        )
        aliases = await self.entity_aliases([r["id"] for r in rows], scopes)
        return [entity_from_row(r, [a for a, _ in aliases.get(r["id"], [])]) for r in rows]

    async def entity_aliases(
        self, entity_ids: Sequence[str], scopes: Sequence[Scope] | None
    ) -> dict[str, list[tuple[str, Scope | None]]]:
        """Each entity's aliases with the scope each was given in; only readable ones with ``scopes``."""
        found: dict[str, list[tuple[str, Scope | None]]] = {}
        ids = list(dict.fromkeys(entity_ids))
        if not ids or (scopes is not None and not scopes):
            return found
        alias_sql, alias_params = scope_clause(scopes, "a.") if scopes is not None else ("1 = 1", [])
        for start in range(0, len(ids), _IN_CHUNK):
            chunk = ids[start : start + _IN_CHUNK]
            rows = await self.db.fetchall(
                f"""SELECT a.entity_id, a.alias_norm, a.scope_kind, a.scope_id FROM entity_aliases a
                     WHERE a.entity_id IN ({", ".join("?" * len(chunk))}) AND {alias_sql}
                     ORDER BY a.rowid""",
                [*chunk, *alias_params],
            )
            for entity_id, alias, kind, ident in rows:
                scope = Scope(kind, ident) if kind and ident else None
                found.setdefault(entity_id, []).append((alias, scope))
        return found

    async def merged_into_these(
        self, entity_ids: Sequence[str], scopes: Sequence[Scope] | None
    ) -> dict[str, list[tuple[str, str]]]:
        """``survivor id -> [(merged id, its canonical name)]`` for the given survivors."""
        ids = list(dict.fromkeys(entity_ids))
        if not ids or (scopes is not None and not scopes):
            return {}
        scope_sql, scope_params = scope_clause(scopes) if scopes is not None else ("1 = 1", [])
        rows = await self.db.fetchall(
            f"""SELECT merged_into, id, canonical FROM entities
                 WHERE merged_into IN ({", ".join("?" * len(ids))}) AND {scope_sql} ORDER BY id""",
            [*ids, *scope_params],
        )
        found: dict[str, list[tuple[str, str]]] = {}
        for survivor, entity_id, canonical in rows:
            found.setdefault(survivor, []).append((entity_id, canonical))
        return found

    async def readable_entity(self, entity_id: str, scopes: Sequence[Scope] | None) -> Entity | None:
        """The entity when it exists and (with ``scopes``) lives in one of them, with its visible aliases."""
        if scopes is not None and not scopes:
            return None
        scope_sql, scope_params = scope_clause(scopes) if scopes is not None else ("1 = 1", [])
        row = await self.db.fetchone(
            f"SELECT * FROM entities WHERE id = ? AND {scope_sql}", [entity_id, *scope_params]
        )
        if row is None:
            return None
        aliases = await self.entity_aliases([entity_id], scopes)
        return entity_from_row(row, [a for a, _ in aliases.get(entity_id, [])])

    # --- sessions --------------------------------------------------------------------------------

    async def list_sessions(
        self, owner: Owner | None, *, limit: int = 50, offset: int = 0
    ) -> list[tuple[SessionInfo, int]]:
        """Sessions, latest started first, each with its number of turns."""
        clauses, params = [], []
        if owner is not None:
            clauses.append("s.agent_id = ? AND s.user_id = ?")
            params += list(owner)
        rows = await self.db.fetchall(
            f"""SELECT s.*, (SELECT count(*) FROM session_turns t WHERE t.agent_id = s.agent_id
                               AND t.user_id = s.user_id AND t.session_id = s.id) AS turn_count
                  FROM sessions s{_where(clauses)}
                 ORDER BY s.started_at DESC, s.agent_id, s.user_id, s.id LIMIT ? OFFSET ?""",
            [*params, limit, offset],
        )
        return [(session_from_row(r), int(r["turn_count"])) for r in rows]

    async def turns_between(self, key: SessionKey, first: int, last: int) -> list[Turn]:
        """Turns ``first`` to ``last`` (inclusive) of one owner's session."""
        rows = await self.db.fetchall(
            """SELECT * FROM session_turns WHERE agent_id = ? AND user_id = ? AND session_id = ?
                  AND turn >= ? AND turn <= ? ORDER BY turn""",
            (key.agent_id, key.user_id, key.session_id, first, last),
        )
        return [turn_from_row(r) for r in rows]

    # --- searches and events ---------------------------------------------------------------------

    async def list_search_logs(
        self, owner: Owner | None, *, limit: int = 50, offset: int = 0
    ) -> list[dict[str, Any]]:
        """``search_log`` rows newest first, with the columns a listing shows (JSON decoded)."""
        clauses, params = [], []
        if owner is not None:
            clauses.append("agent_id = ? AND user_id = ?")
            params += list(owner)
        rows = await self.db.fetchall(
            f"SELECT {_SEARCH_COLUMNS} FROM search_log{_where(clauses)} ORDER BY id DESC LIMIT ? OFFSET ?",
            [*params, limit, offset],
        )
        out = []
        for row in rows:
            item = dict(row)
            for column in ("request", "returned", "gated_out", "fused", "timings_ms"):
                item[column] = maybe_json(item[column])
            out.append(item)
        return out

    async def search_log_of(self, search_id: str, owner: Owner | None) -> dict[str, Any] | None:
        """One ``search_log`` row (JSON decoded); with ``owner``, only a search that principal ran."""
        clauses, params = ["id = ?"], [search_id]
        if owner is not None:
            clauses.append("agent_id = ? AND user_id = ?")
            params += list(owner)
        row = await self.db.fetchone(f"SELECT * FROM search_log{_where(clauses)}", params)
        return None if row is None else {k: maybe_json(v) for k, v in dict(row).items()}

    async def audit_events(
        self,
        scopes: Sequence[Scope] | None,
        *,
        kind: str | None = None,
        actor: str | None = None,
        record_id: str | None = None,
        entity_id: str | None = None,
        limit: int = 50,
        offset: int = 0,
    ) -> list[dict[str, Any]]:
        """Events newest first; with ``scopes``, only those about a record or entity in them."""
        if scopes is not None and not scopes:
            return []
        clauses, params = [], []
        filters = (("kind", kind), ("actor", actor), ("record_id", record_id), ("entity_id", entity_id))
        for column, value in filters:
            if value is not None:
                clauses.append(f"ev.{column} = ?")
                params.append(value)
        if scopes is not None:
            records_sql, record_params = scope_clause(scopes, "r.")
            entities_sql, entity_params = scope_clause(scopes, "n.")
            clauses.append(
                f"""(EXISTS (SELECT 1 FROM records r WHERE r.id = ev.record_id AND {records_sql})
                     OR (ev.record_id IS NULL AND EXISTS (SELECT 1 FROM entities n
                                                          WHERE n.id = ev.entity_id AND {entities_sql})))"""
            )
            params += [*record_params, *entity_params]
        rows = await self.db.fetchall(
            f"SELECT ev.* FROM events ev{_where(clauses)} ORDER BY ev.id DESC LIMIT ? OFFSET ?",
            [*params, limit, offset],
        )
        return [{**dict(r), "payload": maybe_json(r["payload"])} for r in rows]

    async def event_kinds(self) -> list[str]:
        """The kinds of event the log holds (names only: a filter's choices)."""
        return [str(k) for k in await self.db.fetch_column("SELECT DISTINCT kind FROM events ORDER BY kind")]
