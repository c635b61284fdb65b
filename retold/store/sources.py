"""Every source that supports a record (``record_sources``), and the queries over them.

A record's own columns keep its strongest source (spec §6.4: a higher-ranked
reinforcement takes over the provenance); this table keeps all of them, so
reinforcement never drops a contributor and erasing one user removes only that
user's support. ``origin`` is a source's owner-qualified identity
(:func:`retold.ingest.write.sources.source_origin`): two principals' ``session:t1<turn:3>``
are different sources.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

from retold.models import Record, RecordSource, Scope, SessionKey
from retold.store.database import Database
from retold.store.rows import source_from_row
from retold.util import format_ts

__all__ = ["SourcesMixin"]

_SOURCES_PER_QUERY = 400  # each binds up to two parameters (its origin and its text)


class SourcesMixin:
    db: Database

    if TYPE_CHECKING:  # provided by Store

        async def get_records(self, record_ids: Iterable[str]) -> list[Record]: ...

    async def add_source(self, source: RecordSource) -> bool:
        """Record one supporting source; False when this origin already supports the record."""
        row = (
            source.record_id, source.origin, source.source_kind, source.source_ref,
            source.agent_id, source.user_id, source.session_id, source.evidence,
            source.content, format_ts(source.added_at), int(source.counted),
        )  # fmt: skip
        changed = await self.db.execute(
            """INSERT OR IGNORE INTO record_sources(record_id, origin, source_kind, source_ref,
                      agent_id, user_id, session_id, evidence, content, added_at, counted)
               VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)""",
            row,
        )
        return bool(changed)

    async def sources_of(self, record_id: str) -> list[RecordSource]:
        """The record's supporting sources, oldest first."""
        rows = await self.db.fetchall(
            "SELECT * FROM record_sources WHERE record_id = ? ORDER BY added_at, rowid", (record_id,)
        )
        return [source_from_row(r) for r in rows]

    async def counted_origins(self, record_id: str) -> set[str]:
        """Origins already counted for a record: a repeat of one is not independent (§6.4)."""
        rows = await self.db.fetchall(
            "SELECT origin FROM record_sources WHERE record_id = ? AND counted = 1", (record_id,)
        )
        return {r[0] for r in rows}

    async def live_records_with_origin(self, scope: Scope, origin: str) -> list[Record]:
        """Active records in the scope that this exact owned source already supports."""
        rows = await self.db.fetchall(
            # The source's few rows first (MATERIALIZED fixes the order): left to itself, SQLite
            # walks every live record of the scope and probes each one's sources.
            """WITH mine AS MATERIALIZED (SELECT DISTINCT record_id FROM record_sources WHERE origin = ?)
               SELECT r.id FROM mine JOIN records r ON r.id = mine.record_id
                WHERE r.scope_kind = ? AND r.scope_id = ?
                  AND r.status IN ('provisional', 'confirmed') ORDER BY r.id""",
            (origin, scope.kind, scope.id),
        )
        return await self.get_records(r[0] for r in rows)

    async def records_with_sources(self, sources: Iterable[tuple[str, str]]) -> dict[tuple[str, str], str]:
        """The record each ``(origin, content)`` source already supports, for those that support one.

        ``content`` is the text the source supplied, as ``record_sources`` keeps it for every
        write (a reinforcement included); it is matched exactly. Where one source supplied the
        same text to several records, the earliest-added row's record is given.
        """
        wanted = sorted(set(sources))
        found: dict[tuple[str, str], str] = {}
        for start in range(0, len(wanted), _SOURCES_PER_QUERY):
            part = wanted[start : start + _SOURCES_PER_QUERY]
            origins, texts = sorted({o for o, _ in part}), sorted({t for _, t in part})
            rows = await self.db.fetchall(
                f"""SELECT origin, content, record_id FROM record_sources
                     WHERE origin IN ({", ".join("?" for _ in origins)})
                       AND content IN ({", ".join("?" for _ in texts)})
                     ORDER BY added_at, rowid""",
                [*origins, *texts],
            )
            for origin, content, record_id in rows:
                found.setdefault((origin, content), record_id)
        return {pair: found[pair] for pair in wanted if pair in found}

    async def source_origin_of(self, record_id: str) -> str | None:
        """The origin of the record's own (strongest) source, as its ``source_origin`` column keeps it."""
        return await self.db.fetchval("SELECT source_origin FROM records WHERE id = ?", (record_id,))

    async def sources_from_user(self, user_id: str) -> list[RecordSource]:
        """Every source a user's sessions supplied, in any scope."""
        rows = await self.db.fetchall(
            "SELECT * FROM record_sources WHERE user_id = ? ORDER BY record_id, rowid", (user_id,)
        )
        return [source_from_row(r) for r in rows]

    async def sources_from_sessions(self, keys: Sequence[SessionKey]) -> list[RecordSource]:
        """Every source supplied inside one of the sessions (their owners' sessions only)."""
        found: list[RecordSource] = []
        for key in keys:
            rows = await self.db.fetchall(
                """SELECT * FROM record_sources WHERE agent_id = ? AND user_id = ? AND session_id = ?
                    ORDER BY record_id, rowid""",
                (key.agent_id, key.user_id, key.session_id),
            )
            found += [source_from_row(r) for r in rows]
        return found

    async def remove_sources(self, record_id: str, origins: Iterable[str]) -> None:
        for origin in origins:
            await self.db.execute(
                "DELETE FROM record_sources WHERE record_id = ? AND origin = ?", (record_id, origin)
            )
