"""Re-embedding: swap every stored vector for one from a new model in a single change.

A half-swapped store would mix vectors of two models in one index, so the old vectors
go and the new ones arrive in one transaction, under one ``records_version`` bump that
tells other processes' vector indexes to reload.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from retold.store.database import Database

__all__ = ["ReembedMixin"]


class ReembedMixin:
    """The store side of ``retold reembed``: the embedding itself runs in :mod:`retold.operations`."""

    db: Database

    if TYPE_CHECKING:  # provided by Store

        async def _bump(self) -> int: ...

    async def records_with_text(self) -> list[tuple[str, str]]:
        """``(id, content)`` of every record that still has text (erased tombstones have none)."""
        rows = await self.db.fetchall("SELECT id, content FROM records WHERE content != '' ORDER BY id")
        return [(r[0], r[1]) for r in rows]

    async def replace_all_embeddings(
        self,
        model: str,
        version: str,
        dims: int,
        vectors: Sequence[tuple[str, bytes]],
        passages: Sequence[tuple[str, Sequence[bytes]]] = (),
    ) -> int:
        """Drop every stored vector and write ``vectors`` (and the long records' ``passages``)
        instead, as one change; return its version.

        Records that lose a vector are stamped too, so another process's index drops them.
        """
        async with self.db.transaction():
            index_version = await self._bump()
            await self.db.execute(
                "UPDATE records SET index_version = ? WHERE id IN (SELECT record_id FROM embeddings)",
                (index_version,),
            )
            await self.db.execute("DELETE FROM embeddings")
            await self.db.execute("DELETE FROM passage_vectors")
            await self.db.executemany(
                """INSERT INTO passage_vectors(record_id, ordinal, model, version, dims, vector)
                   VALUES (?, ?, ?, ?, ?, ?)""",
                (
                    (rid, i, model, version, dims, blob)
                    for rid, blobs in passages
                    for i, blob in enumerate(blobs)
                ),
            )
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
