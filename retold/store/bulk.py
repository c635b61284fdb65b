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
from retold.util import Clock, format_ts

__all__ = ["FTS_ROW_AT_SQL", "FTS_ROW_SQL", "BulkMixin"]

FTS_ROW_SQL = """INSERT INTO records_fts(record_id, content, subject, aliases)
    SELECT r.id, r.content, r.subject,
           coalesce((SELECT group_concat(a.alias_norm, ' ')
                       FROM record_entities l JOIN entity_aliases a ON a.entity_id = l.entity_id
                      WHERE l.record_id = r.id AND a.scope_kind = r.scope_kind
                        AND a.scope_id = r.scope_id), '')
      FROM records r WHERE r.id = ? AND r.status != 'deleted'"""
"""One record's FTS row: its content, subject and the aliases of its linked entities that are
given in the record's own scope. Index text may hold only names the record's readers may
read: a user's private alias for their person entity never reaches a project record's row."""


FTS_ROW_AT_SQL = FTS_ROW_SQL.replace(
    "INSERT INTO records_fts(record_id,", "INSERT INTO records_fts(rowid, record_id,", 1
).replace("SELECT r.id,", "SELECT ?, r.id,", 1)
""":data:`FTS_ROW_SQL` at a given FTS rowid (its parameters: the rowid, then the record id).

A rewritten row keeps its rowid, so a row above the highest rowid of some earlier moment
is one that was not in the index then (``SearchMixin._advance_lexical`` relies on it)."""


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
            # A bulk import is the host's: each record's one source belongs to no user.
            await self.db.executemany(
                """INSERT OR IGNORE INTO record_sources(record_id, origin, source_kind, source_ref, agent_id,
                          user_id, session_id, evidence, content, added_at, counted)
                   VALUES (?, ?, ?, ?, ?, NULL, NULL, ?, ?, ?, ?)""",
                [
                    (r.id, f"{r.creator_agent_id}//{r.source_ref or '-'}", r.source_kind, r.source_ref,
                     r.creator_agent_id, r.evidence, r.content, format_ts(r.created_at),
                     int(r.source_ref is not None))
                    for r in records
                ],
            )  # fmt: skip
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
