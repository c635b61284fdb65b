"""Erasure with no residue: one record, one session, or everything a user's text reached.

Spec §16 promises an erased person's words survive nowhere in the file, so this is the
one place rows of the append-only ``events`` table change, and :meth:`EraseMixin.compact`
rewrites the FTS index, the file and the WAL so no freed page keeps the text.
:mod:`retold.operations` decides what to erase; the queries that find and change the rows
live here so the SQL stays in :mod:`retold.store`.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from retold.errors import StoreError
from retold.store.database import Database

__all__ = ["ERASED_PAYLOAD", "EraseMixin", "ErasureSet"]

ERASED_PAYLOAD = '{"erased":true}'
"""What an event's payload becomes when it was about erased rows; its id, kind, actor and time stay."""

# Events whose payloads carry no user text, kept so grant history survives an erasure,
# and the erasure events themselves, whose reason must outlive later erasures.
_KEEP_PAYLOAD_KINDS = ("grant.changed", "record.erased", "session.erased", "user.erased")

# A private agent scope belongs to the user after its (only) slash: agent:<agent>/<user>.
_USER_SCOPES = """((scope_kind = 'user' AND scope_id = :user) OR
                   (scope_kind = 'agent' AND instr(scope_id, '/') > 0
                    AND substr(scope_id, instr(scope_id, '/') + 1) = :user))"""

# The session a record's source_ref names: 'session:<id>' (a summary) or 'session:<id><turn:n>'.
_REF_SESSION = """CASE WHEN instr({ref}, '<turn:') > 0
                       THEN substr({ref}, 9, instr({ref}, '<turn:') - 9)
                       ELSE substr({ref}, 9) END"""


@dataclass
class ErasureSet:
    """Every row an erasure touches, found before anything changes (the dry run prints it)."""

    records: list[str] = field(default_factory=list)  # tombstoned: text, vector, FTS row and links go
    evidence_only: list[str] = field(default_factory=list)  # keep their content, lose the quoted evidence
    sessions: list[str] = field(default_factory=list)  # their turns go blank; the rows stay
    turns: int = 0  # non-blank turns among those sessions
    entities: list[str] = field(default_factory=list)  # canonical name and aliases go
    search_logs: list[str] = field(default_factory=list)  # queries, context and matched terms go
    events: list[str] = field(default_factory=list)  # payloads replaced by ERASED_PAYLOAD


class EraseMixin:
    """Finds every row an erasure reaches before changing any, so a dry run shows the same set."""

    db: Database

    if TYPE_CHECKING:  # provided by Store

        async def _bump(self) -> int: ...

        async def _write_fts(self, record_id: str, *, fresh: bool = False) -> None: ...

    # --- finding the rows --------------------------------------------------------------------------

    async def session_exists(self, session_id: str) -> bool:
        return bool(await self.db.fetchval("SELECT 1 FROM sessions WHERE id = ?", (session_id,)))

    async def user_known(self, user_id: str) -> bool:
        """Whether anything in the store belongs to the user: a session, a scope, a search."""
        return bool(
            await self.db.fetchval(
                f"""SELECT EXISTS (SELECT 1 FROM sessions WHERE user_id = :user)
                        OR EXISTS (SELECT 1 FROM records WHERE {_USER_SCOPES})
                        OR EXISTS (SELECT 1 FROM entities WHERE {_USER_SCOPES})
                        OR EXISTS (SELECT 1 FROM search_log WHERE user_id = :user)""",
                {"user": user_id},
            )
        )

    async def user_session_ids(self, user_id: str) -> list[str]:
        rows = await self.db.fetchall("SELECT id FROM sessions WHERE user_id = ? ORDER BY id", (user_id,))
        return [r[0] for r in rows]

    async def user_scope_record_ids(self, user_id: str) -> list[str]:
        """Records in ``user:<id>`` and in every private ``agent:<agent>/<id>`` scope."""
        rows = await self.db.fetchall(
            f"SELECT id FROM records WHERE {_USER_SCOPES} ORDER BY id", {"user": user_id}
        )
        return [r[0] for r in rows]

    async def user_scope_entity_ids(self, user_id: str) -> list[str]:
        rows = await self.db.fetchall(
            f"SELECT id FROM entities WHERE {_USER_SCOPES} ORDER BY id", {"user": user_id}
        )
        return [r[0] for r in rows]

    async def records_sourced_from(self, session_ids: Iterable[str]) -> list[tuple[str, str]]:
        """``(record_id, source_kind)`` of every record, in any scope, whose source_ref names a session."""
        async with self.db.temp_ids(session_ids) as sessions:
            rows = await self.db.fetchall(
                f"""SELECT r.id, r.source_kind FROM records r
                      JOIN {sessions} s ON s.id = ({_REF_SESSION.format(ref="r.source_ref")})
                     WHERE r.source_ref LIKE 'session:%' ORDER BY r.id"""
            )
        return [(r[0], r[1]) for r in rows]

    async def count_text_turns(self, session_ids: Iterable[str]) -> int:
        async with self.db.temp_ids(session_ids) as sessions:
            return int(
                await self.db.fetchval(
                    f"""SELECT count(*) FROM session_turns
                         WHERE content != '' AND session_id IN (SELECT id FROM {sessions})"""
                )
            )

    async def search_log_ids(
        self, *, user_id: str | None = None, session_ids: Iterable[str] = ()
    ) -> list[str]:
        """Search-log rows run for the user or inside any of the sessions."""
        async with self.db.temp_ids(session_ids) as sessions:
            rows = await self.db.fetchall(
                f"""SELECT id FROM search_log
                     WHERE user_id = :user OR session_id IN (SELECT id FROM {sessions}) ORDER BY id""",
                {"user": user_id},
            )
        return [r[0] for r in rows]

    async def event_ids_about(
        self,
        *,
        record_ids: Iterable[str] = (),
        entity_ids: Iterable[str] = (),
        session_ids: Iterable[str] = (),
        user_id: str | None = None,
    ) -> list[str]:
        """Events whose payload may carry erased text.

        Those about an erased record or entity; those naming one of the sessions anywhere
        in their payload (a reinforcement quoting a turn, a split, an extraction run); and,
        for a user, those recorded against one of the user's scopes (an ambiguous alias).
        Grant changes and earlier erasure events hold no user text and keep their payloads.
        """
        keep = ", ".join(f"'{k}'" for k in _KEEP_PAYLOAD_KINDS)
        async with (
            self.db.temp_ids(record_ids) as records,
            self.db.temp_ids(entity_ids) as entities,
            self.db.temp_ids(session_ids) as sessions,
        ):
            rows = await self.db.fetchall(
                f"""WITH ev AS (SELECT id, kind, record_id, entity_id, payload,
                                       json_extract(payload, '$.scope') AS scope FROM events)
                    SELECT ev.id FROM ev
                     WHERE ev.kind NOT IN ({keep}) AND (
                           ev.record_id IN (SELECT id FROM {records})
                        OR ev.entity_id IN (SELECT id FROM {entities})
                        OR ev.scope = 'user:' || :user
                        OR (ev.scope LIKE 'agent:%/%' AND substr(ev.scope, instr(ev.scope, '/') + 1) = :user)
                        OR EXISTS (
                             SELECT 1 FROM json_tree(ev.payload) j
                              WHERE j.type = 'text' AND (
                                    j.value IN (SELECT id FROM {sessions})
                                 OR (j.value LIKE 'session:%' AND ({_REF_SESSION.format(ref="j.value")})
                                                                  IN (SELECT id FROM {sessions})))))
                     ORDER BY ev.id""",
                {"user": user_id},
            )
        return [r[0] for r in rows]

    # --- changing the rows --------------------------------------------------------------------------

    async def apply_erasure(self, erasure: ErasureSet) -> int:
        """Erase every row in ``erasure`` in one transaction; return the ``records_version`` it took.

        Records keep their ids, kinds, scopes, references and timestamps as a ``deleted``
        tombstone; their content, evidence, tags, attribute, vector, FTS row and entity
        links go. Entities keep their row with a blank name and no aliases; records in
        other scopes linked to them get FTS rows without those aliases.
        """
        async with (
            self.db.transaction(),
            self.db.temp_ids(erasure.records) as records,
            self.db.temp_ids(erasure.evidence_only) as evidence,
            self.db.temp_ids(erasure.sessions) as sessions,
            self.db.temp_ids(erasure.entities) as entities,
            self.db.temp_ids(erasure.search_logs) as logs,
            self.db.temp_ids(erasure.events) as events,
        ):
            version = await self._bump()
            await self.db.execute(
                f"""UPDATE records SET content = '', evidence = NULL, tags = '[]', attribute = NULL,
                           subject = '-', status = 'deleted', index_version = ?
                     WHERE id IN (SELECT id FROM {records})""",
                (version,),
            )
            await self.db.execute(
                f"UPDATE records SET evidence = NULL, index_version = ? "
                f"WHERE id IN (SELECT id FROM {evidence})",
                (version,),
            )
            await self.db.execute(f"DELETE FROM embeddings WHERE record_id IN (SELECT id FROM {records})")
            await self.db.execute(f"DELETE FROM records_fts WHERE record_id IN (SELECT id FROM {records})")
            await self.db.execute(
                f"DELETE FROM record_entities WHERE record_id IN (SELECT id FROM {records})"
            )
            await self.db.execute(
                f"UPDATE migration_issues SET issue = 'erased' WHERE record_id IN (SELECT id FROM {records})"
            )
            await self.db.execute(
                f"UPDATE session_turns SET content = '' WHERE content != '' "
                f"AND session_id IN (SELECT id FROM {sessions})"
            )
            await self.db.execute(
                f"UPDATE entities SET canonical = '', status = 'deleted' "
                f"WHERE id IN (SELECT id FROM {entities})"
            )
            await self.db.execute(
                f"DELETE FROM entity_aliases WHERE entity_id IN (SELECT id FROM {entities})"
            )
            relinked = await self.db.fetchall(
                f"""SELECT DISTINCT record_id FROM record_entities
                     WHERE entity_id IN (SELECT id FROM {entities})
                       AND record_id NOT IN (SELECT id FROM {records})"""
            )
            for row in relinked:
                await self._write_fts(row[0])
            await self.db.execute(
                f"""UPDATE search_log SET request = '{{}}', context = NULL, rewritten_queries = NULL,
                           lexical = '[]', explanations = '[]', reranked_out = '[]', rerank_error = NULL,
                           reranked = CASE WHEN reranked IS NULL THEN NULL ELSE '[]' END
                     WHERE id IN (SELECT id FROM {logs})"""
            )
            await self.db.execute(
                f"UPDATE events SET payload = ? WHERE id IN (SELECT id FROM {events})", (ERASED_PAYLOAD,)
            )
        return version

    async def compact(self) -> bool:
        """Leave no residue of deleted text in the file: rebuild FTS, VACUUM, truncate the WAL.

        FTS5 records a delete as a tombstone in a newer segment, so the erased terms stay
        in older segments until they merge: ``rebuild`` writes the index afresh from the
        remaining rows. ``secure_delete`` (on for every connection) zeroes freed cells,
        VACUUM rewrites the file without free pages, and a TRUNCATE checkpoint moves every
        page into the main file and empties the WAL, which still holds pre-erasure frames.
        Returns False when another connection kept the file from being compacted or the WAL
        from being emptied; the deleted rows are gone either way, and running it again finishes.
        """
        async with self.db.transaction():
            await self.db.execute("INSERT INTO records_fts(records_fts) VALUES ('rebuild')")
            await self.db.execute("INSERT INTO records_fts(records_fts) VALUES ('optimize')")
        # Outside a transaction these run on the idle read connection; SQLite's own locking
        # orders them after any write another task or process has in progress.
        try:
            await self.db.execute("VACUUM")
        except StoreError:  # another writer outlasted the busy timeout: report, do not hide the erasure
            await self.truncate_wal()
            return False
        return await self.truncate_wal()

    async def truncate_wal(self) -> bool:
        """Checkpoint every WAL frame into the main file and truncate the WAL to zero bytes."""
        row = await self.db.fetchone("PRAGMA wal_checkpoint(TRUNCATE)")
        return row is None or int(row[0]) == 0
