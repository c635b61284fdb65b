"""Entities, their normalised aliases, and the sessions and turns that evidence is read from."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime

from retold.errors import NotFoundError
from retold.models import Entity, Scope, SessionInfo, Turn
from retold.store.database import Database
from retold.store.rows import entity_from_row, scope_clause, session_from_row, turn_from_row
from retold.util import Clock, format_ts, parse_ts

__all__ = ["EntitiesMixin", "SessionsMixin"]


class EntitiesMixin:
    db: Database
    clock: Clock

    async def insert_entity(self, entity: Entity) -> None:
        """Insert an entity and its aliases in one transaction."""
        async with self.db.transaction():
            await self.db.execute(
                """INSERT INTO entities(id, kind, canonical, scope_kind, scope_id, status, merged_into,
                                        created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)""",
                (
                    entity.id,
                    entity.kind,
                    entity.canonical,
                    entity.scope.kind,
                    entity.scope.id,
                    entity.status,
                    entity.merged_into,
                    format_ts(entity.created_at),
                ),
            )
            await self.add_aliases(entity.id, entity.aliases)

    async def add_aliases(self, entity_id: str, aliases: Iterable[str]) -> list[str]:
        """Attach normalised aliases; return those that were new."""
        added = []
        async with self.db.transaction():
            for alias in aliases:
                changed = await self.db.execute(
                    "INSERT OR IGNORE INTO entity_aliases(entity_id, alias_norm) VALUES (?, ?)",
                    (entity_id, alias),
                )
                if changed:
                    added.append(alias)
        return added

    async def get_entity(self, entity_id: str) -> Entity | None:
        row = await self.db.fetchone("SELECT * FROM entities WHERE id = ?", (entity_id,))
        if row is None:
            return None
        return entity_from_row(row, await self._aliases_of(entity_id))

    async def require_entity(self, entity_id: str) -> Entity:
        entity = await self.get_entity(entity_id)
        if entity is None:
            raise NotFoundError(f"no entity {entity_id!r}")
        return entity

    async def _aliases_of(self, entity_id: str) -> list[str]:
        rows = await self.db.fetchall(
            "SELECT alias_norm FROM entity_aliases WHERE entity_id = ? ORDER BY rowid", (entity_id,)
        )
        return [r[0] for r in rows]

    async def entities_by_alias(
        self,
        alias_norm: str,
        *,
        scopes: Sequence[Scope],
        kinds: Sequence[str] | None = None,
        statuses: Sequence[str] = ("provisional", "confirmed"),
    ) -> list[Entity]:
        """Entities in ``scopes`` that own the normalised alias, following merges to survivors."""
        if not scopes:
            return []
        scope_sql, scope_params = scope_clause(scopes, "e.")
        params: list[object] = [alias_norm, *scope_params]
        sql = f"""SELECT DISTINCT coalesce(e.merged_into, e.id) AS id
                   FROM entity_aliases a JOIN entities e ON e.id = a.entity_id
                  WHERE a.alias_norm = ? AND {scope_sql}"""
        if kinds:
            sql += f" AND e.kind IN ({', '.join('?' for _ in kinds)})"
            params += list(kinds)
        found = []
        for row in await self.db.fetchall(sql + " ORDER BY e.id", params):
            entity = await self.follow_merges(row["id"])
            fits = entity is not None and entity.status in statuses and entity.scope in scopes
            if fits and entity.id not in {e.id for e in found}:  # type: ignore[union-attr]
                found.append(entity)  # type: ignore[arg-type]
        return found

    async def follow_merges(self, entity_id: str) -> Entity | None:
        """The surviving entity after any chain of merges (None if the id does not exist)."""
        seen: set[str] = set()
        entity = await self.get_entity(entity_id)
        while entity is not None and entity.status == "merged" and entity.merged_into:
            if entity.id in seen:  # pragma: no cover - a cycle is a corrupt store
                break
            seen.add(entity.id)
            entity = await self.get_entity(entity.merged_into)
        return entity

    async def entities_in_scope(self, scope: Scope, *, kind: str | None = None) -> list[Entity]:
        sql = "SELECT * FROM entities WHERE scope_kind = ? AND scope_id = ?"
        params: list[object] = [scope.kind, scope.id]
        if kind is not None:
            sql += " AND kind = ?"
            params.append(kind)
        rows = await self.db.fetchall(sql + " ORDER BY id", params)
        return [entity_from_row(r, await self._aliases_of(r["id"])) for r in rows]

    async def merge_entity(self, source_id: str, target_id: str) -> list[str]:
        """Merge ``source`` into ``target``: links, aliases and current-fact subjects move.

        Returns the ids of every record whose FTS row must be rebuilt (those linked to the
        survivor after the merge). Runs inside the caller's transaction when there is one.
        """
        async with self.db.transaction():
            await self.db.execute(
                "UPDATE entities SET status = 'merged', merged_into = ? WHERE id = ?", (target_id, source_id)
            )
            # Older merges into the source now point at the survivor, so lookups stay one hop.
            await self.db.execute(
                "UPDATE entities SET merged_into = ? WHERE merged_into = ?", (target_id, source_id)
            )
            await self.db.execute(
                """INSERT OR IGNORE INTO entity_aliases(entity_id, alias_norm)
                   SELECT ?, alias_norm FROM entity_aliases WHERE entity_id = ?""",
                (target_id, source_id),
            )
            # A record linked to both keeps one link; 'about' wins over 'mentions'.
            await self.db.execute(
                """UPDATE record_entities SET role = 'about'
                    WHERE entity_id = ? AND role = 'mentions' AND record_id IN
                          (SELECT record_id FROM record_entities WHERE entity_id = ? AND role = 'about')""",
                (target_id, source_id),
            )
            await self.db.execute(
                """DELETE FROM record_entities WHERE entity_id = ? AND record_id IN
                          (SELECT record_id FROM record_entities WHERE entity_id = ?)""",
                (source_id, target_id),
            )
            await self.db.execute(
                "UPDATE record_entities SET entity_id = ? WHERE entity_id = ?", (target_id, source_id)
            )
            rows = await self.db.fetchall(
                "SELECT record_id FROM record_entities WHERE entity_id = ? ORDER BY record_id", (target_id,)
            )
        return [r[0] for r in rows]

    async def records_with_subject_entity(self, entity_id: str) -> list[tuple[str, str | None]]:
        """(record_id, attribute) of every record whose current-fact key names the entity."""
        rows = await self.db.fetchall(
            "SELECT id, attribute FROM records WHERE subject_entity_id = ? ORDER BY id", (entity_id,)
        )
        return [(r[0], r[1]) for r in rows]


class SessionsMixin:
    db: Database
    clock: Clock

    async def insert_session(self, session: SessionInfo) -> None:
        async with self.db.transaction():
            await self.db.execute(
                """INSERT INTO sessions(id, agent_id, user_id, project_id, started_at, ended_at)
                   VALUES (?, ?, ?, ?, ?, ?)""",
                (
                    session.id,
                    session.agent_id,
                    session.user_id,
                    session.project_id,
                    format_ts(session.started_at),
                    None if session.ended_at is None else format_ts(session.ended_at),
                ),
            )

    async def get_session(self, session_id: str) -> SessionInfo | None:
        row = await self.db.fetchone("SELECT * FROM sessions WHERE id = ?", (session_id,))
        return None if row is None else session_from_row(row)

    async def end_session(self, session_id: str, at: datetime) -> bool:
        """Set ``ended_at`` once; return False when it was already ended (ending twice is a no-op)."""
        async with self.db.transaction():
            changed = await self.db.execute(
                "UPDATE sessions SET ended_at = ? WHERE id = ? AND ended_at IS NULL",
                (format_ts(at), session_id),
            )
        return bool(changed)

    async def append_turn(self, session_id: str, role: str, content: str, at: datetime) -> Turn:
        """Append the next turn, numbered from 1 in arrival order within the session."""
        async with self.db.transaction():
            number = await self.db.fetchval(
                "SELECT coalesce(max(turn), 0) + 1 FROM session_turns WHERE session_id = ?", (session_id,)
            )
            await self.db.execute(
                "INSERT INTO session_turns(session_id, turn, role, content, at) VALUES (?, ?, ?, ?, ?)",
                (session_id, number, role, content, format_ts(at)),
            )
        return Turn(session_id=session_id, turn=int(number), role=role, content=content, at=at)  # type: ignore[arg-type]

    async def turns(self, session_id: str) -> list[Turn]:
        rows = await self.db.fetchall(
            "SELECT * FROM session_turns WHERE session_id = ? ORDER BY turn", (session_id,)
        )
        return [turn_from_row(r) for r in rows]

    async def session_chain(self, base_id: str) -> list[SessionInfo]:
        """The session and every idle-split continuation of it (``<base>~2``, ``~3``, ...), in order."""
        rows = await self.db.fetchall(
            "SELECT * FROM sessions WHERE id = ? OR (id > ? AND id < ?)",
            (base_id, base_id + "~", base_id + "~\uffff"),
        )
        sessions = [session_from_row(r) for r in rows]
        return sorted(sessions, key=lambda s: _split_number(s.id, base_id))

    async def last_activity(self, session_id: str) -> datetime | None:
        """When the session last saw a turn (its start when it has none)."""
        value = await self.db.fetchval(
            """SELECT coalesce((SELECT max(at) FROM session_turns WHERE session_id = ?), started_at)
                 FROM sessions WHERE id = ?""",
            (session_id, session_id),
        )
        return None if value is None else parse_ts(value)

    async def sessions_for_user(self, user_id: str) -> list[SessionInfo]:
        rows = await self.db.fetchall("SELECT * FROM sessions WHERE user_id = ? ORDER BY id", (user_id,))
        return [session_from_row(r) for r in rows]


def _split_number(session_id: str, base_id: str) -> int:
    """1 for the base session, n for ``<base>~n``; anything else sorts last."""
    if session_id == base_id:
        return 1
    suffix = session_id[len(base_id) + 1 :]
    return int(suffix) if suffix.isdigit() else 1 << 30
