"""Bulk embedding reads for the in-memory vector index (spec §7): full loads and deltas.

Both reads return the durable ``records_version`` read *before* the rows. Every write
transaction bumps that counter while it holds SQLite's write lock, so versions are
assigned in commit order: rows read afterwards may be newer than the counter (the index
then takes the highest version it saw) but can never be older, and nothing committed
at or below the counter can be missing from them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from retold.store.database import Database
from retold.util import Clock

__all__ = ["VectorChange", "VectorChanges", "VectorRows", "VectorsMixin"]

# A vector is compatible when its model, version and width match the index's and its blob
# holds exactly that many float32 values (a truncated blob would decode to garbage).
_COMPATIBLE = "e.model = :model AND e.version = :version AND e.dims = :dims AND length(e.vector) = 4 * :dims"


@dataclass(frozen=True)
class VectorRows:
    """Every compatible stored vector, for a full (re)load of the index."""

    records_version: int  # read before the rows
    ids: list[str]
    index_versions: list[int]  # embeddings.index_version of each row
    blobs: list[bytes]  # float32, ``dims`` values each


@dataclass(frozen=True)
class VectorChange:
    """One record whose record or embedding row changed after a given version."""

    record_id: str
    index_version: int  # the highest of the record's and its embedding's index_version
    vector: bytes | None  # the compatible float32 blob; None when gone or incompatible (remove it)


@dataclass(frozen=True)
class VectorChanges:
    records_version: int  # read before the rows
    changes: list[VectorChange]  # ordered by index_version, oldest first
    complete: bool  # False when ``limit`` cut the list short


class VectorsMixin:
    db: Database
    clock: Clock

    async def _durable_version(self) -> int:
        return int(await self.db.fetchval("SELECT value FROM store_meta WHERE key = 'records_version'"))

    async def load_vectors(self, model: str, version: str, dims: int) -> VectorRows:
        """Read every vector made by ``(model, version, dims)``; rows of other models are skipped."""
        records_version = await self._durable_version()
        rows = await self.db.fetchall(
            f"""SELECT e.record_id, e.index_version, e.vector FROM embeddings e
                  JOIN records r ON r.id = e.record_id
                 WHERE {_COMPATIBLE} AND r.status != 'deleted'""",
            {"model": model, "version": version, "dims": dims},
        )
        return VectorRows(
            records_version=records_version,
            ids=[r[0] for r in rows],
            index_versions=[int(r[1]) for r in rows],
            blobs=[bytes(r[2]) for r in rows],
        )

    async def vector_changes(
        self, since: int, model: str, version: str, dims: int, *, limit: int | None = None
    ) -> VectorChanges:
        """Records changed after ``since``, found through the two ``index_version`` indexes.

        A record appears once, with its newest version and its compatible vector, or
        ``None`` when its embedding row is gone or was made by another model (the index
        removes it). ``limit`` bounds the rows read, so a caller that will rebuild anyway
        past some delta size does not first fetch every changed vector.
        """
        records_version = await self._durable_version()
        # One extra row tells a cut list from a full one; "no limit" is a bound both engines accept.
        fetch = 2**62 if limit is None else limit + 1
        rows = await self.db.fetchall(
            f"""WITH changed(id) AS (
                    SELECT id FROM records WHERE index_version > :since
                    UNION
                    SELECT record_id FROM embeddings WHERE index_version > :since
                )
                SELECT c.id,
                       max(coalesce(r.index_version, 0), coalesce(e.index_version, 0)) AS v,
                       CASE WHEN {_COMPATIBLE} AND r.status != 'deleted' THEN e.vector END AS vector
                  FROM changed c
                  LEFT JOIN records r ON r.id = c.id
                  LEFT JOIN embeddings e ON e.record_id = c.id
                 ORDER BY v, c.id
                 LIMIT :fetch""",
            {"since": since, "model": model, "version": version, "dims": dims, "fetch": fetch},
        )
        complete = limit is None or len(rows) <= limit
        changes = [
            VectorChange(r[0], int(r[1]), None if r[2] is None else bytes(r[2]))
            for r in (rows if complete else rows[:limit])
        ]
        return VectorChanges(records_version=records_version, changes=changes, complete=complete)

    searches_vectors = False
    """True where the store answers the dense search itself (PostgreSQL's pgvector)."""

    async def vectors_for(
        self, record_ids: Sequence[str], model: str, version: str, dims: int
    ) -> dict[str, bytes]:
        """The compatible float32 blobs of a few records (a shortlist's), by id."""
        ids = list(dict.fromkeys(record_ids))
        if not ids:
            return {}
        marks = ", ".join(f":id{i}" for i in range(len(ids)))
        rows = await self.db.fetchall(
            f"SELECT e.record_id, e.vector FROM embeddings e WHERE e.record_id IN ({marks})"
            f" AND {_COMPATIBLE}",
            {"model": model, "version": version, "dims": dims, **{f"id{i}": v for i, v in enumerate(ids)}},
        )
        return {r[0]: bytes(r[1]) for r in rows}

    async def has_passages(self) -> bool:
        """Whether any record has passage vectors (a store of short records has none)."""
        return bool(await self.db.fetchval("SELECT EXISTS (SELECT 1 FROM passage_vectors)"))

    async def passage_vectors_for(
        self, record_ids: Sequence[str], model: str, version: str, dims: int
    ) -> dict[str, list[bytes]]:
        """The compatible float32 blobs of a few records' passages, in passage order, by id;
        records without passages (short ones) are absent."""
        ids = list(dict.fromkeys(record_ids))
        if not ids:
            return {}
        marks = ", ".join(f":id{i}" for i in range(len(ids)))
        rows = await self.db.fetchall(
            f"""SELECT e.record_id, e.vector FROM passage_vectors e WHERE e.record_id IN ({marks})
                   AND {_COMPATIBLE} ORDER BY e.record_id, e.ordinal""",
            {"model": model, "version": version, "dims": dims, **{f"id{i}": v for i, v in enumerate(ids)}},
        )
        found: dict[str, list[bytes]] = {}
        for record_id, blob in rows:
            found.setdefault(record_id, []).append(bytes(blob))
        return found
