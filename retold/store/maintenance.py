"""SQL behind the operator commands of spec §16: expiry, retention, erasure, re-embedding, checks, snapshots.

:class:`MaintenanceMixin` adds these to :class:`~retold.store.Store`; :mod:`retold.operations`
decides what to do with them. Erasure is the one place rows of the append-only ``events``
table change: an erased person's words must not survive in an audit payload either.

Snapshots use SQLite's online backup API, which copies every page (FTS shadow tables,
``schema_migrations`` and ``store_meta`` included) under one read transaction, so the
copy is consistent while writers carry on. Restoring works on a closed file:
:func:`restore_snapshot` takes SQLite's exclusive lock first, so it refuses while any
other connection (a host, another CLI) holds the store.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
from collections.abc import AsyncIterator, Iterable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio.to_thread

from retold.errors import InvalidArgumentError, SchemaVersionError, StoreError
from retold.store.database import Database
from retold.store.migrations import LATEST_VERSION
from retold.util import Clock, format_ts, new_id

__all__ = [
    "ERASED_PAYLOAD",
    "ErasureSet",
    "Finding",
    "MaintenanceMixin",
    "SnapshotInfo",
    "read_snapshot_info",
    "restore_snapshot",
]

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


@dataclass(frozen=True)
class Finding:
    """One integrity problem: what kind, which row, and what is wrong."""

    kind: str
    detail: str
    record_id: str | None = None

    def __str__(self) -> str:
        return f"{self.kind}: {self.record_id + ' ' if self.record_id else ''}{self.detail}"


@dataclass(frozen=True)
class SnapshotInfo:
    """What a snapshot file holds, read without changing it."""

    path: str
    schema_version: int
    records: int
    bytes: int


class MaintenanceMixin:
    db: Database
    clock: Clock

    if TYPE_CHECKING:  # provided by Store

        async def _bump(self) -> int: ...

        async def _write_fts(self, record_id: str, *, fresh: bool = False) -> None: ...

    # --- expiry and retention -------------------------------------------------------------------

    async def expirable_ids(self, now: datetime) -> list[str]:
        """Active records whose ``expires_at`` has passed (spec §6.5), oldest id first."""
        rows = await self.db.fetchall(
            """SELECT id FROM records WHERE status IN ('provisional', 'confirmed')
                 AND expires_at IS NOT NULL AND expires_at <= ? ORDER BY id""",
            (format_ts(now),),
        )
        return [r[0] for r in rows]

    async def retainable_sessions(self, ended_before: datetime) -> list[dict[str, Any]]:
        """Extracted sessions that ended before the cutoff and still hold transcript text."""
        rows = await self.db.fetchall(
            """SELECT s.id, s.ended_at, s.extracted_at,
                      (SELECT count(*) FROM session_turns t
                        WHERE t.session_id = s.id AND t.content != '') AS turns
                 FROM sessions s
                WHERE s.extracted_at IS NOT NULL AND s.ended_at IS NOT NULL AND s.ended_at <= ?
                  AND EXISTS (SELECT 1 FROM session_turns t WHERE t.session_id = s.id AND t.content != '')
                ORDER BY s.id""",
            (format_ts(ended_before),),
        )
        return [dict(r) for r in rows]

    async def blank_turns(self, session_ids: Iterable[str]) -> int:
        """Empty the text of every turn of the sessions; the rows stay so source refs resolve."""
        async with self.db.transaction(), self.db.temp_ids(session_ids) as sessions:
            return await self.db.execute(
                f"UPDATE session_turns SET content = '' WHERE content != '' "
                f"AND session_id IN (SELECT id FROM {sessions})"
            )

    # --- erasure: finding the rows ----------------------------------------------------------------

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

    # --- erasure: changing the rows -----------------------------------------------------------------

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

    # --- re-embedding ---------------------------------------------------------------------------

    async def records_with_text(self) -> list[tuple[str, str]]:
        """``(id, content)`` of every record that still has text (erased tombstones have none)."""
        rows = await self.db.fetchall("SELECT id, content FROM records WHERE content != '' ORDER BY id")
        return [(r[0], r[1]) for r in rows]

    async def replace_all_embeddings(
        self, model: str, version: str, dims: int, vectors: Sequence[tuple[str, bytes]]
    ) -> int:
        """Drop every stored vector and write ``vectors`` instead, as one change; return its version.

        Records that lose a vector are stamped too, so another process's index drops them.
        """
        async with self.db.transaction():
            index_version = await self._bump()
            await self.db.execute(
                "UPDATE records SET index_version = ? WHERE id IN (SELECT record_id FROM embeddings)",
                (index_version,),
            )
            await self.db.execute("DELETE FROM embeddings")
            await self.db.executemany(
                """INSERT INTO embeddings(record_id, model, version, dims, vector, index_version)
                   VALUES (?, ?, ?, ?, ?, ?)""",
                ((rid, model, version, dims, blob, index_version) for rid, blob in vectors),
            )
            async with self.db.temp_ids(rid for rid, _ in vectors) as table:
                await self.db.execute(
                    f"UPDATE records SET index_version = ? WHERE id IN (SELECT id FROM {table})",
                    (index_version,),
                )
        return index_version

    # --- integrity ------------------------------------------------------------------------------

    async def sqlite_integrity(self) -> list[str]:
        """SQLite's own ``integrity_check`` and FTS5's index check; empty when both pass."""
        problems = [r[0] for r in await self.db.fetchall("PRAGMA integrity_check") if r[0] != "ok"]
        try:
            async with self.db.transaction():
                await self.db.execute("INSERT INTO records_fts(records_fts) VALUES ('integrity-check')")
        except StoreError as exc:
            problems.append(f"records_fts index does not match its rows ({exc})")
        return problems

    async def fts_findings(self) -> list[Finding]:
        """Records without exactly one FTS row (deleted ones: none), orphan rows, and stale rows."""
        findings = []
        rows = await self.db.fetchall(
            """WITH f AS (SELECT record_id, count(*) AS n FROM records_fts GROUP BY record_id)
               SELECT r.id, r.status, coalesce(f.n, 0) AS n FROM records r LEFT JOIN f ON f.record_id = r.id
                WHERE (r.status != 'deleted' AND coalesce(f.n, 0) != 1) OR (r.status = 'deleted' AND f.n > 0)
               UNION ALL
               SELECT f.record_id, NULL, f.n FROM f LEFT JOIN records r ON r.id = f.record_id
                WHERE r.id IS NULL"""
        )
        for record_id, status, n in rows:
            if status is None:
                findings.append(
                    Finding("fts_orphan", f"{n} FTS row(s) for a record that does not exist", record_id)
                )
            elif status == "deleted":
                findings.append(Finding("fts_deleted", f"{n} FTS row(s) for a deleted record", record_id))
            else:
                findings.append(
                    Finding("fts_rows", f"{status} record has {n} FTS rows, expected 1", record_id)
                )
        counted = {f.record_id for f in findings}
        aliases: dict[str, list[str]] = {}
        for record_id, alias in await self.db.fetchall(
            """SELECT l.record_id, a.alias_norm FROM record_entities l
                 JOIN entity_aliases a ON a.entity_id = l.entity_id"""
        ):
            aliases.setdefault(record_id, []).append(alias)
        for row in await self.db.fetchall(
            """SELECT f.record_id, f.content, f.subject, f.aliases, r.content AS r_content,
                      r.subject AS r_subject
                 FROM records_fts f JOIN records r ON r.id = f.record_id WHERE r.status != 'deleted'"""
        ):
            if row["record_id"] in counted:
                continue
            stale = [
                column
                for column, ok in (
                    ("content", row["content"] == row["r_content"]),
                    ("subject", row["subject"] == row["r_subject"]),
                    ("aliases", sorted((row["aliases"] or "").split()) == sorted(
                        " ".join(aliases.get(row["record_id"], [])).split())),
                )
                if not ok
            ]  # fmt: skip
            if stale:
                findings.append(
                    Finding("fts_stale", f"FTS {', '.join(stale)} differ from the record", row["record_id"])
                )
        return findings

    async def embedding_findings(self, model: str, version: str, dims: int) -> list[Finding]:
        """Active records without a vector of the configured model; vectors of other models or corrupt."""
        findings = []
        rows = await self.db.fetchall(
            """SELECT r.id, r.status, r.content, e.model, e.version, e.dims, length(e.vector) AS size
                 FROM records r LEFT JOIN embeddings e ON e.record_id = r.id
                WHERE e.record_id IS NOT NULL OR r.status IN ('provisional', 'confirmed')
                ORDER BY r.id"""
        )
        for row in rows:
            rid = row["id"]
            if row["model"] is None:
                findings.append(Finding("vector_missing", f"{row['status']} record has no vector", rid))
            elif row["content"] == "":
                findings.append(Finding("vector_erased", "an erased record still has a vector", rid))
            elif (row["model"], row["version"], row["dims"]) != (model, version, dims):
                findings.append(
                    Finding(
                        "vector_foreign",
                        f"vector by {row['model']!r} version {row['version']!r} dims {row['dims']}, "
                        f"configured {model!r} version {version!r} dims {dims}",
                        rid,
                    )
                )
            elif row["size"] != 4 * dims:
                findings.append(
                    Finding(
                        "vector_corrupt", f"vector blob holds {row['size']} bytes, expected {4 * dims}", rid
                    )
                )
        orphans = await self.db.fetchall(
            """SELECT e.record_id FROM embeddings e
                 LEFT JOIN records r ON r.id = e.record_id WHERE r.id IS NULL"""
        )
        findings += [
            Finding("vector_orphan", "vector for a record that does not exist", r[0]) for r in orphans
        ]
        return findings

    async def orphan_findings(self) -> list[Finding]:
        """Rows that point at something that does not exist (only possible with foreign keys off)."""
        checks = (
            ("link_orphan", "entity link to a missing {what}",
             """SELECT l.record_id, CASE WHEN r.id IS NULL THEN 'record' ELSE 'entity ' || l.entity_id END
                  FROM record_entities l LEFT JOIN records r ON r.id = l.record_id
                  LEFT JOIN entities e ON e.id = l.entity_id WHERE r.id IS NULL OR e.id IS NULL"""),
            ("conflict_orphan", "conflict with a missing {what}",
             """SELECT c.record_id, 'record ' || c.other_id FROM record_conflicts c
                  LEFT JOIN records a ON a.id = c.record_id LEFT JOIN records b ON b.id = c.other_id
                 WHERE a.id IS NULL OR b.id IS NULL"""),
            ("supersedes_orphan", "supersedes a missing {what}",
             """SELECT r.id, 'record ' || r.supersedes_id FROM records r
                  LEFT JOIN records o ON o.id = r.supersedes_id
                 WHERE r.supersedes_id IS NOT NULL AND o.id IS NULL"""),
            ("subject_orphan", "subject names a missing {what}",
             """SELECT r.id, 'entity ' || r.subject_entity_id FROM records r
                  LEFT JOIN entities e ON e.id = r.subject_entity_id
                 WHERE r.subject_entity_id IS NOT NULL AND e.id IS NULL"""),
            ("alias_orphan", "alias of a missing {what}",
             """SELECT NULL, 'entity ' || a.entity_id FROM entity_aliases a
                  LEFT JOIN entities e ON e.id = a.entity_id WHERE e.id IS NULL"""),
            ("merge_orphan", "entity merged into a missing {what}",
             """SELECT NULL, 'entity ' || e.merged_into FROM entities e
                  LEFT JOIN entities t ON t.id = e.merged_into
                 WHERE e.merged_into IS NOT NULL AND t.id IS NULL"""),
            ("turn_orphan", "turns of a missing {what}",
             """SELECT DISTINCT NULL, 'session ' || t.session_id FROM session_turns t
                  LEFT JOIN sessions s ON s.id = t.session_id WHERE s.id IS NULL"""),
        )  # fmt: skip
        findings = []
        for kind, template, sql in checks:
            for record_id, what in await self.db.fetchall(sql):
                findings.append(Finding(kind, template.format(what=what), record_id))
        return findings

    async def one_way_conflicts(self) -> list[Finding]:
        """Conflicts recorded in one direction only (spec §3.3 writes both)."""
        rows = await self.db.fetchall(
            """SELECT c.record_id, c.other_id FROM record_conflicts c
                WHERE NOT EXISTS (SELECT 1 FROM record_conflicts b
                                   WHERE b.record_id = c.other_id AND b.other_id = c.record_id)
                ORDER BY c.record_id"""
        )
        return [Finding("conflict_one_way", f"conflict with {r[1]} is not recorded back", r[0]) for r in rows]

    async def version_findings(self) -> list[Finding]:
        """A row stamped with an ``index_version`` above ``records_version`` breaks index refresh."""
        row = await self.db.fetchone(
            """SELECT (SELECT value FROM store_meta WHERE key = 'records_version') AS current,
                      max((SELECT coalesce(max(index_version), 0) FROM records),
                          (SELECT coalesce(max(index_version), 0) FROM embeddings)) AS highest"""
        )
        assert row is not None
        if row["current"] is None:
            return [Finding("records_version", "store_meta has no records_version row")]
        if row["highest"] > row["current"]:
            return [
                Finding(
                    "records_version",
                    f"records_version is {row['current']} but rows carry index_version {row['highest']}",
                )
            ]
        return []

    async def supersession_edges(self) -> list[tuple[str, str]]:
        rows = await self.db.fetchall("SELECT id, supersedes_id FROM records WHERE supersedes_id IS NOT NULL")
        return [(r[0], r[1]) for r in rows]

    # --- repair ---------------------------------------------------------------------------------

    async def rebuild_fts_rows(self, record_ids: Iterable[str]) -> int:
        """Rewrite (or drop, for deleted and missing records) the FTS rows of these records."""
        ids = list(dict.fromkeys(record_ids))
        async with self.db.transaction():
            for record_id in ids:
                await self._write_fts(record_id)
        return len(ids)

    async def rebuild_fts_index(self) -> None:
        """Rebuild the FTS5 index structures from its stored rows (after a failed integrity-check)."""
        async with self.db.transaction():
            await self.db.execute("INSERT INTO records_fts(records_fts) VALUES ('rebuild')")

    async def drop_embeddings(self, record_ids: Iterable[str]) -> int:
        async with self.db.transaction(), self.db.temp_ids(record_ids) as table:
            return await self.db.execute(
                f"DELETE FROM embeddings WHERE record_id IN (SELECT id FROM {table})"
            )

    async def raise_records_version(self) -> int:
        """Lift ``records_version`` to the highest ``index_version`` any row carries."""
        async with self.db.transaction():
            return int(
                await self.db.fetchval(
                    """UPDATE store_meta SET value = max(value,
                              (SELECT coalesce(max(index_version), 0) FROM records),
                              (SELECT coalesce(max(index_version), 0) FROM embeddings))
                        WHERE key = 'records_version' RETURNING value"""
                )
            )

    # --- snapshots ------------------------------------------------------------------------------

    async def backup_to(self, target: str | os.PathLike[str]) -> SnapshotInfo:
        """Copy the whole store to a new file through SQLite's online backup API.

        The copy is written beside ``target`` and renamed into place, so a failure never
        leaves a half-written snapshot; it is switched to rollback-journal mode so it is
        one self-contained file. Refuses to overwrite an existing file.
        """
        path = Path(target)
        await anyio.to_thread.run_sync(_check_new_file, path)
        partial = path.with_name(f".{path.name}.{new_id()}.partial")
        dest = await anyio.to_thread.run_sync(lambda: sqlite3.connect(partial, check_same_thread=False))
        try:
            async with self._backup_source() as source:
                await source.backup(dest)

            def finish() -> None:
                dest.execute("PRAGMA journal_mode = DELETE").fetchall()
                dest.close()
                os.replace(partial, path)

            await anyio.to_thread.run_sync(finish)
        except BaseException:
            with contextlib.suppress(sqlite3.Error):
                dest.close()
            with contextlib.suppress(OSError):
                partial.unlink()
            raise
        return await anyio.to_thread.run_sync(read_snapshot_info, path)

    @asynccontextmanager
    async def _backup_source(self) -> AsyncIterator[Any]:
        """The read connection, for the backup API (a single-step backup holds one read snapshot)."""
        self.db._check_open()
        # Database belongs to this package; the backup API needs the raw connection.
        conn = self.db._reader or self.db._writer
        try:
            yield conn
        except sqlite3.Error as exc:
            raise StoreError(f"snapshot failed: {exc}") from exc


# --- snapshots of closed files (no Store open) --------------------------------------------------


def _check_new_file(path: Path) -> None:
    if path.exists():
        raise InvalidArgumentError(f"snapshot target {str(path)!r} already exists; choose a new path")
    if not path.parent.is_dir():
        raise InvalidArgumentError(f"snapshot folder {str(path.parent)!r} does not exist")


def _open_read_only(path: Path) -> sqlite3.Connection:
    uri = f"file:{path.resolve().as_posix()}?mode=ro"
    try:
        conn = sqlite3.connect(uri, uri=True)
        conn.execute("SELECT count(*) FROM sqlite_master").fetchall()
        return conn
    except sqlite3.DatabaseError as exc:
        raise InvalidArgumentError(f"{str(path)!r} is not a readable SQLite database ({exc})") from exc


def read_snapshot_info(path: str | os.PathLike[str]) -> SnapshotInfo:
    """Validate a snapshot file and describe it: a retold store at a schema this code can open.

    Raises :class:`InvalidArgumentError` for a missing, unreadable, corrupt or non-retold
    file and :class:`SchemaVersionError` for one written by a newer retold.
    """
    file = Path(path)
    if not file.is_file():
        raise InvalidArgumentError(f"snapshot {str(file)!r} does not exist")
    conn = _open_read_only(file)
    try:
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        if not {"schema_migrations", "records", "store_meta"} <= tables:
            raise InvalidArgumentError(f"{str(file)!r} is not a retold store (it has no retold schema)")
        version = int(conn.execute("SELECT coalesce(max(version), 0) FROM schema_migrations").fetchone()[0])
        if version > LATEST_VERSION:
            raise SchemaVersionError(
                f"snapshot {str(file)!r} is at schema version {version}, newer than this retold "
                f"understands ({LATEST_VERSION}); upgrade retold to load it"
            )
        if version < 1:
            raise InvalidArgumentError(f"snapshot {str(file)!r} records no applied schema migration")
        check = conn.execute("PRAGMA quick_check").fetchall()
        if [r[0] for r in check] != ["ok"]:
            raise InvalidArgumentError(f"snapshot {str(file)!r} is corrupt: {check[0][0]}")
        records = int(conn.execute("SELECT count(*) FROM records").fetchone()[0])
    except sqlite3.DatabaseError as exc:
        raise InvalidArgumentError(f"snapshot {str(file)!r} cannot be read ({exc})") from exc
    finally:
        conn.close()
    return SnapshotInfo(path=str(file), schema_version=version, records=records, bytes=file.stat().st_size)


def restore_snapshot(
    store_path: str | os.PathLike[str], snapshot_path: str | os.PathLike[str]
) -> SnapshotInfo:
    """Replace the store's contents with the snapshot's, atomically, on a store nobody has open.

    The snapshot is validated first (:func:`read_snapshot_info`). Then an exclusive lock
    on the store is taken without waiting: any other open connection holds a shared lock
    in WAL mode, so a running host or CLI makes this fail with :class:`StoreError` before
    anything changes. The copy itself runs through the backup API into the locked
    connection, as one transaction.
    """
    store, snapshot = Path(store_path), Path(snapshot_path)
    if store.exists() and snapshot.exists() and store.resolve() == snapshot.resolve():
        raise InvalidArgumentError("the snapshot and the store are the same file")
    info = read_snapshot_info(snapshot)
    try:
        dest = sqlite3.connect(store, timeout=0, isolation_level=None)
    except sqlite3.Error as exc:
        raise StoreError(f"cannot open the store {str(store)!r}: {exc}") from exc
    try:
        try:
            dest.execute("PRAGMA locking_mode = EXCLUSIVE").fetchall()
            dest.execute("BEGIN EXCLUSIVE")
            dest.execute("COMMIT")
        except sqlite3.OperationalError as exc:
            raise StoreError(
                f"another connection holds the store {str(store)!r} ({exc}); stop every host and command "
                "using it, then load the snapshot again"
            ) from exc
        source = _open_read_only(snapshot)
        try:
            source.backup(dest)
        except sqlite3.Error as exc:
            raise StoreError(
                f"loading snapshot {str(snapshot)!r} failed, the store is unchanged: {exc}"
            ) from exc
        finally:
            source.close()
        dest.execute("PRAGMA journal_mode = WAL").fetchall()
    finally:
        dest.close()
    return info
