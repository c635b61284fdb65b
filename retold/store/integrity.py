"""What ``retold check`` looks for beyond SQLite's own checks, and what ``--repair`` rebuilds.

FTS rows, vectors and ``records_version`` are derived from the records, so a hand edit, a
connection with foreign keys off, or a bug can leave them out of step without SQLite
noticing. Each query returns :class:`Finding` rows for :mod:`retold.operations` to report;
the repairs rebuild only what the records themselves determine.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from retold.errors import StoreError
from retold.store.database import Database

__all__ = ["Finding", "IntegrityMixin"]


@dataclass(frozen=True)
class Finding:
    """One integrity problem: what kind, which row, and what is wrong."""

    kind: str
    detail: str
    record_id: str | None = None

    def __str__(self) -> str:
        return f"{self.kind}: {self.record_id + ' ' if self.record_id else ''}{self.detail}"


class IntegrityMixin:
    """Each check is its own query so ``retold check`` can name the kind of every problem."""

    db: Database

    if TYPE_CHECKING:  # provided by Store

        async def _write_fts(self, record_id: str, *, fresh: bool = False) -> None: ...

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
            # What FTS_ROW_SQL writes: aliases given in the record's own scope only.
            """SELECT l.record_id, a.alias_norm FROM record_entities l
                 JOIN entity_aliases a ON a.entity_id = l.entity_id
                 JOIN records r ON r.id = l.record_id
                WHERE a.scope_kind = r.scope_kind AND a.scope_id = r.scope_id"""
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
             """SELECT DISTINCT NULL, 'session ' || t.agent_id || '/' || t.user_id || '/' || t.session_id
                  FROM session_turns t LEFT JOIN sessions s
                    ON s.agent_id = t.agent_id AND s.user_id = t.user_id AND s.id = t.session_id
                 WHERE s.id IS NULL"""),
            ("source_orphan", "source of a missing {what}",
             """SELECT NULL, 'record ' || s.record_id FROM record_sources s
                  LEFT JOIN records r ON r.id = s.record_id WHERE r.id IS NULL"""),
            ("store_item_orphan", "store item carries a missing {what}",
             """SELECT NULL, 'record ' || i.record_id FROM store_items i
                  LEFT JOIN records r ON r.id = i.record_id
                 WHERE i.record_id IS NOT NULL AND r.id IS NULL"""),
            # An erased record's text is gone; a store item still carrying its value is residue.
            ("store_item_erased", "store item keeps the value of an {what}",
             """SELECT i.record_id, 'erased record' FROM store_items i JOIN records r ON r.id = i.record_id
                 WHERE r.status = 'deleted' AND r.content = ''"""),
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
            await self.db.execute(f"DELETE FROM passage_vectors WHERE record_id IN (SELECT id FROM {table})")
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
