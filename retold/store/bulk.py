"""Bulk loading (imports, benchmarks, fixtures): many new records in one transaction.

Row-at-a-time inserts cost one round trip per statement; a 200K-record import through
them takes minutes. This path writes records, FTS rows, entity links and embeddings with
``executemany`` and bumps ``records_version`` once, giving every row the same
``index_version`` — the whole batch is one durable change for the vector index.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from retold.models import Record
from retold.store.database import Database
from retold.store.rows import RECORD_COLUMNS, record_to_params
from retold.util import Clock

__all__ = ["FTS_ROW_SQL", "BulkMixin"]

FTS_ROW_SQL = """INSERT INTO records_fts(record_id, content, subject, aliases)
    SELECT r.id, r.content, r.subject,
           coalesce((SELECT group_concat(a.alias_norm, ' ')
                       FROM record_entities l JOIN entity_aliases a ON a.entity_id = l.entity_id
                      WHERE l.record_id = r.id), '')
      FROM records r WHERE r.id = ? AND r.status != 'deleted'"""
"""One record's FTS row: its content, subject and the aliases of every linked entity."""


class BulkMixin:
    db: Database
    clock: Clock

    async def bulk_insert(
        self,
        records: Sequence[Record],
        vectors: np.ndarray,
        *,
        model: str,
        version: str,
        links: Sequence[Sequence[tuple[str, str]]] | None = None,
    ) -> int:
        """Insert new records with their vectors (row i of ``vectors``) and links; return the version."""
        if len(records) != len(vectors):
            raise ValueError("bulk_insert needs one vector per record")
        links = links or [()] * len(records)
        vecs = np.asarray(vectors, dtype=np.float32)
        async with self.db.transaction():
            version_no = await self._bump()  # type: ignore[attr-defined]
            rows = []
            for record in records:
                params = record_to_params(record)
                params["index_version"] = version_no
                rows.append(params)
            columns = ", ".join(RECORD_COLUMNS)
            await self.db.executemany(
                f"INSERT INTO records({columns}) VALUES ({', '.join(':' + c for c in RECORD_COLUMNS)})", rows
            )
            await self.db.executemany(
                "INSERT INTO record_entities(record_id, entity_id, role) VALUES (?, ?, ?)",
                [(r.id, e, role) for r, pairs in zip(records, links, strict=True) for e, role in pairs],
            )
            await self.db.executemany(FTS_ROW_SQL, [(r.id,) for r in records])
            await self.db.executemany(
                """INSERT INTO embeddings(record_id, model, version, dims, vector, index_version)
                   VALUES (?, ?, ?, ?, ?, ?)""",
                [
                    (r.id, model, version, int(vecs.shape[1]), vecs[i].tobytes(), version_no)
                    for i, r in enumerate(records)
                ],
            )
        for record, pairs in zip(records, links, strict=True):
            record.index_version = version_no
            record.entity_ids = [e for e, _ in pairs]
        return version_no
