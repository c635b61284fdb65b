"""Entities, their normalised aliases, and the sessions and turns that evidence is read from."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime

from retold.errors import InvalidArgumentError, NotFoundError
from retold.models import Entity, Scope, SessionInfo, SessionKey, Turn
from retold.store.database import Database
from retold.store.rows import entity_from_row, scope_clause, session_from_row, turn_from_row
from retold.util import Clock, format_ts, parse_ts

__all__ = ["EntitiesMixin", "SessionsMixin"]


class EntitiesMixin:
    db: Database
    clock: Clock

    async def insert_entity(self, entity: Entity) -> None:
        """Insert an entity and its aliases (scoped like the entity) in one transaction."""
        async with self.db.transaction():
            await self.db.execute(
                """INSERT INTO entities(id, kind, canonical, scope_kind, scope_id, status, merged_into,
                                        created_at, origin_user, origin_record)
                   VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)""",
                (
                    entity.id,
                    entity.kind,
                    entity.canonical,
                    entity.scope.kind,
                    entity.scope.id,
                    entity.status,
                    entity.merged_into,
                    format_ts(entity.created_at),
                    entity.origin_user,
                    entity.origin_record,
                ),
            )
            await self.add_aliases(
                entity.id, entity.aliases, scope=entity.scope, origin_user=entity.origin_user
            )

    async def add_aliases(
        self,
        entity_id: str,
        aliases: Iterable[str],
        *,
        scope: Scope | None = None,
        origin_user: str | None = None,
    ) -> list[str]:
        """Attach normalised aliases; return those that were new.

        An alias carries the scope whose readers may see it (default: the entity's own), so
        a name given in one scope never reaches another scope's index text.
        """
        added = []
        async with self.db.transaction():
            if scope is None:
                entity = await self.db.fetchone(
                    "SELECT scope_kind, scope_id FROM entities WHERE id = ?", (entity_id,)
                )
                if entity is None:
                    raise NotFoundError(f"no entity {entity_id!r}")
                scope = Scope(entity[0], entity[1])
            for alias in aliases:
                changed = await self.db.execute(
                    """INSERT OR IGNORE INTO entity_aliases(entity_id, alias_norm, scope_kind, scope_id,
                                                            origin_user) VALUES (?, ?, ?, ?, ?)""",
                    (entity_id, alias, scope.kind, scope.id, origin_user),
                )
                if changed:
                    added.append(alias)
        return added

    async def get_entity(self, entity_id: str) -> Entity | None:
        row = await self.db.fetchone("SELECT * FROM entities WHERE id = ?", (entity_id,))
        if row is None:
            return None
        return entity_from_row(row, await self._aliases_of(entity_id))

    async def entity_kinds(self, entity_ids: Iterable[str]) -> dict[str, str]:
        """entity id -> kind, for the ids that exist."""
        ids = list(dict.fromkeys(entity_ids))
        if not ids:
            return {}
        marks = ", ".join("?" * len(ids))
        rows = await self.db.fetchall(f"SELECT id, kind FROM entities WHERE id IN ({marks})", ids)
        return {r[0]: r[1] for r in rows}

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
        alias_sql, alias_params = scope_clause(scopes, "a.")
        params: list[object] = [alias_norm, *scope_params, *alias_params]
        # Both the entity and the alias row must be readable: an alias given in a scope the
        # caller cannot read does not resolve for them (aliases carry a scope).
        sql = f"""SELECT DISTINCT coalesce(e.merged_into, e.id) AS id
                   FROM entity_aliases a JOIN entities e ON e.id = a.entity_id
                  WHERE a.alias_norm = ? AND {scope_sql} AND {alias_sql}"""
        if kinds:
            sql += f" AND e.kind IN ({', '.join('?' for _ in kinds)})"
            params += list(kinds)
        found = []
        for row in await self.db.fetchall(sql + " ORDER BY 1", params):
            entity = await self.follow_merges(row["id"])
            fits = entity is not None and entity.status in statuses and entity.scope in scopes
            if fits and entity.id not in {e.id for e in found}:  # type: ignore[union-attr]
                found.append(entity)  # type: ignore[arg-type]
        return found

    async def readable_entity_ids(self, entity_ids: Iterable[str], scopes: Sequence[Scope]) -> set[str]:
        """Of the entities, those that live in one of ``scopes`` (what a caller may be shown)."""
        ids = list(dict.fromkeys(entity_ids))
        if not ids or not scopes:
            return set()
        scope_sql, params = scope_clause(scopes)
        rows = await self.db.fetchall(
            f"SELECT id FROM entities WHERE id IN ({', '.join('?' for _ in ids)}) AND {scope_sql}",
            [*ids, *params],
        )
        return {r[0] for r in rows}

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
            # An alias keeps the scope it was given in (and whose words it was) as it moves.
            await self.db.execute(
                """INSERT OR IGNORE INTO entity_aliases(entity_id, alias_norm, scope_kind, scope_id,
                                                        origin_user)
                   SELECT ?, alias_norm, scope_kind, scope_id, origin_user FROM entity_aliases
                    WHERE entity_id = ?""",
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
    """Sessions and their turns, always addressed by :class:`SessionKey` (owner and id).

    Session ids are the adapter's, so they are not unique on their own: every statement
    here names the agent and user too, and no caller-chosen id can reach another
    principal's transcript.
    """

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

    async def get_session(self, key: SessionKey) -> SessionInfo | None:
        row = await self.db.fetchone(
            "SELECT * FROM sessions WHERE agent_id = ? AND user_id = ? AND id = ?", _key(key)
        )
        return None if row is None else session_from_row(row)

    async def resolve_session(self, ref: str | SessionKey) -> SessionKey:
        """The session an operator or graph input names: a key, ``agent/user/session``, or a bare id.

        A bare id is accepted only while one principal uses it; otherwise the error lists the
        qualified ids to choose from. Raises :class:`NotFoundError` when nothing matches.
        """
        if isinstance(ref, SessionKey):
            key: SessionKey | None = ref
        else:
            if not isinstance(ref, str) or not ref.strip():
                raise InvalidArgumentError(f"a session id must be a non-empty string, got {ref!r}")
            key = SessionKey.parse(ref)
        if key is not None:
            if await self.get_session(key) is None:
                raise NotFoundError(f"no session {str(key)!r}")
            return key
        named = await self.sessions_named(ref)  # type: ignore[arg-type]
        if not named:
            raise NotFoundError(f"no session {ref!r}")
        if len(named) > 1:
            choices = ", ".join(str(s.key) for s in named[:10])
            raise InvalidArgumentError(
                f"session id {ref!r} is used by {len(named)} principals; name one as agent/user/session "
                f"({choices})"
            )
        return named[0].key

    async def sessions_named(self, session_id: str) -> list[SessionInfo]:
        """Every owner's session with this id (operators name sessions by id alone)."""
        rows = await self.db.fetchall(
            "SELECT * FROM sessions WHERE id = ? ORDER BY agent_id, user_id", (session_id,)
        )
        return [session_from_row(r) for r in rows]

    async def end_session(self, key: SessionKey, at: datetime) -> bool:
        """Set ``ended_at`` once; return False when it was already ended (ending twice is a no-op)."""
        async with self.db.transaction():
            changed = await self.db.execute(
                """UPDATE sessions SET ended_at = ?
                    WHERE agent_id = ? AND user_id = ? AND id = ? AND ended_at IS NULL""",
                (format_ts(at), *_key(key)),
            )
        return bool(changed)

    async def append_turn(self, key: SessionKey, role: str, content: str, at: datetime) -> Turn:
        """Append the next turn, numbered from 1 in arrival order within the session."""
        async with self.db.transaction():
            number = await self.db.fetchval(
                """SELECT coalesce(max(turn), 0) + 1 FROM session_turns
                    WHERE agent_id = ? AND user_id = ? AND session_id = ?""",
                _key(key),
            )
            await self.db.execute(
                """INSERT INTO session_turns(agent_id, user_id, session_id, turn, role, content, at)
                   VALUES (?, ?, ?, ?, ?, ?, ?)""",
                (*_key(key), number, role, content, format_ts(at)),
            )
        return Turn(session_id=key.session_id, turn=int(number), role=role, content=content, at=at)  # type: ignore[arg-type]

    async def turns(self, key: SessionKey) -> list[Turn]:
        rows = await self.db.fetchall(
            """SELECT * FROM session_turns WHERE agent_id = ? AND user_id = ? AND session_id = ?
                ORDER BY turn""",
            _key(key),
        )
        return [turn_from_row(r) for r in rows]

    async def session_chain(self, base: SessionKey) -> list[SessionInfo]:
        """The owner's session and every idle-split continuation of it (``<base>~2``, ...), in order.

        Only this owner's sessions: another principal's ``<base>~7`` is not a continuation.
        """
        base_id = base.session_id
        rows = await self.db.fetchall(
            """SELECT * FROM sessions WHERE agent_id = ? AND user_id = ?
                  AND (id = ? OR (id > ? AND id < ?))""",
            (base.agent_id, base.user_id, base_id, base_id + "~", base_id + "~\uffff"),
        )
        sessions = [session_from_row(r) for r in rows]
        chain = [s for s in sessions if _split_number(s.id, base_id) is not None]
        return sorted(chain, key=lambda s: _split_number(s.id, base_id) or 0)

    async def last_activity(self, key: SessionKey) -> datetime | None:
        """When the session last saw a turn (its start when it has none)."""
        value = await self.db.fetchval(
            """SELECT coalesce((SELECT max(t.at) FROM session_turns t
                                 WHERE t.agent_id = s.agent_id AND t.user_id = s.user_id
                                   AND t.session_id = s.id), s.started_at)
                 FROM sessions s WHERE s.agent_id = ? AND s.user_id = ? AND s.id = ?""",
            _key(key),
        )
        return None if value is None else parse_ts(value)

    async def sessions_for_user(self, user_id: str) -> list[SessionInfo]:
        rows = await self.db.fetchall(
            "SELECT * FROM sessions WHERE user_id = ? ORDER BY id, agent_id", (user_id,)
        )
        return [session_from_row(r) for r in rows]


def _key(key: SessionKey) -> tuple[str, str, str]:
    if not isinstance(key, SessionKey):
        raise TypeError(f"sessions are addressed by a retold.SessionKey, got {type(key).__name__}")
    return key.agent_id, key.user_id, key.session_id


def _split_number(session_id: str, base_id: str) -> int | None:
    """1 for the base session, n for ``<base>~n`` (n >= 2, digits only); None for anything else."""
    if session_id == base_id:
        return 1
    suffix = session_id[len(base_id) + 1 :]
    if session_id.startswith(base_id + "~") and suffix.isascii() and suffix.isdigit():
        number = int(suffix)
        return number if number >= 2 and str(number) == suffix else None
    return None
