"""Dense search inside PostgreSQL: pgvector's ``embedding`` column and its HNSW indexes.

The float32 bytes in ``embeddings.vector`` stay the record of truth (every statement the
backends share reads and writes them); ``embedding`` is derived from them just before the
writing transaction commits, as the lexical tokens are, so a committed row always has both.

Searching (spec §10.1's dense generator):

* the hard filter of the search (scopes, status, validity, types, time — the eligible set's
  own predicate) is in the same statement as the ordering, so no ineligible row takes a
  place in the top ``k``;
* a small eligible set is scanned exactly: every eligible vector is compared, no index;
* a large one walks the HNSW index (cosine) with pgvector 0.8's iterative scan, which keeps
  reading the graph while the filter rejects rows, so a selective filter never starves the
  top ``k`` (up to ``max_scan_tuples`` visited rows);
* each query vector is searched on its own and a record keeps its best cosine over them,
  as the in-process index does.

One HNSW index per dimension (a partial expression index ``embedding::vector(d)`` where
``dims = d``), created by the first write of a vector of that size: a model change with a
different size gets its own index and never mixes with the old rows.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

import anyio
import numpy as np

from retold.store.postgres.database import PgDatabase

__all__ = ["VectorSearchSettings", "ensure_hnsw", "fill_pending", "search_vectors"]

_FILL_BATCH = 1_000


@dataclass(frozen=True)
class VectorSearchSettings:
    """How a dense search uses the index (config ``store.hnsw_*`` / ``store.exact_search_max``)."""

    ef_search: int = 100
    max_scan_tuples: int = 20_000
    exact_search_max: int = 2_000


def _literal(vec: np.ndarray) -> str:
    """pgvector's text form; float32 values print exactly with ``repr`` of their float."""
    return "[" + ",".join(map(repr, np.asarray(vec, dtype=np.float32).tolist())) + "]"


async def fill_pending(
    db: PgDatabase, indexed_dims: set[int], *, m: int = 16, ef_construction: int = 64
) -> None:
    """Give every row without ``embedding`` (new, re-embedded, copied) its pgvector value.

    Runs inside the writing transaction; creates the HNSW index of a dimension the first
    time a vector of that size is written.
    """
    new_dims: set[int] = set()
    after = ""
    while True:
        # Onward from the last row filled (see lexicon.tokenize_pending: no rescans of filled rows).
        rows = await db.fetchall(
            f"""SELECT record_id, dims, vector FROM embeddings WHERE embedding IS NULL AND record_id > ?
                 ORDER BY record_id LIMIT {_FILL_BATCH}""",
            (after,),
        )
        if not rows:
            break
        after = rows[-1][0]
        new_dims |= {int(r[1]) for r in rows} - indexed_dims
        await db.execute(
            """UPDATE embeddings e SET embedding = v.embedding::vector
                 FROM unnest(?::text[], ?::text[]) AS v(embedding, record_id)
                WHERE e.record_id = v.record_id""",
            (await anyio.to_thread.run_sync(_literals, rows), [r[0] for r in rows]),
        )
    # After the rows: building an index over many rows at once is faster than inserting each.
    for dims in sorted(new_dims):
        await ensure_hnsw(db, dims, m=m, ef_construction=ef_construction)
        indexed_dims.add(dims)


def _literals(rows: list[Any]) -> list[str]:
    """pgvector's text form of each row's stored bytes (CPU work: run in a worker thread)."""
    return [_literal(np.frombuffer(bytes(r[2]), dtype=np.float32, count=int(r[1]))) for r in rows]


def _index_name(dims: int) -> str:
    return f"embeddings_hnsw_{int(dims)}"


async def ensure_hnsw(db: PgDatabase, dims: int, *, m: int = 16, ef_construction: int = 64) -> None:
    """The cosine HNSW index over the rows of one dimension (inside the caller's transaction)."""
    dims = int(dims)
    if not 0 < dims <= 16_000:  # pgvector's limit for a stored vector
        return
    if await db.fetchval("SELECT to_regclass(?) IS NOT NULL", (_index_name(dims),)):
        return
    # HNSW indexes at most 2,000 dimensions of `vector`; beyond that searches scan exactly.
    if dims > 2_000:
        return
    # The graph is built in memory while it fits (past that the build slows several-fold):
    # room for the rows there are, between pgvector's usual 64 MB and 2 GB, for this build only.
    rows = int(await db.fetchval("SELECT count(*) FROM embeddings WHERE dims = ?", (dims,)))
    megabytes = min(2048, max(64, rows * (dims * 4 + 8 * m + 64) * 3 // 2 // 2**20))
    await db.run_raw(f"SET LOCAL maintenance_work_mem = '{megabytes}MB'")
    await db.run_raw(
        f"""CREATE INDEX IF NOT EXISTS {_index_name(dims)} ON embeddings
            USING hnsw ((embedding::vector({dims})) vector_cosine_ops)
            WITH (m = {int(m)}, ef_construction = {int(ef_construction)}) WHERE dims = {dims}"""
    )


async def search_vectors(
    db: PgDatabase,
    queries: np.ndarray,
    eligible: Any,
    k: int,
    *,
    model: str,
    version: str,
    settings: VectorSearchSettings,
    size: int | None = None,
) -> list[tuple[str, float]]:
    """The ``k`` eligible records nearest the queries as ``(record_id, cosine)``, best first.

    ``eligible`` is an id set, or carries ``where``/``params`` (a predicate over ``records
    r``); ``size`` is how many records the predicate admits when the ids are not at hand.
    """
    queries = np.asarray(queries, dtype=np.float32)
    if queries.ndim == 1:
        queries = queries[None, :]
    size = len(eligible) if size is None else size
    if k <= 0 or queries.shape[0] == 0 or size <= 0:
        return []
    dims = int(queries.shape[1])
    norms = np.linalg.norm(queries, axis=1, keepdims=True)
    queries = np.divide(queries, norms, out=np.zeros_like(queries), where=norms > 0)
    where: str | None = getattr(eligible, "where", None)
    exact = size <= settings.exact_search_max or dims > 2_000
    if where is not None:
        join = f"JOIN records r ON r.id = e.record_id AND {where}"
        join_params: tuple[Any, ...] = tuple(getattr(eligible, "params", ()))
    else:  # an explicit id set: it is the filter
        join, join_params = "", ()
        exact = True
    literals = [_literal(q) for q in queries]
    # Each row's distance is its closest query's, as the in-process index scores it, whichever
    # query's walk found it.
    closest = "least(" + ", ".join("e.embedding <=> ?::vector" for _ in literals) + ")"
    where_sql = "e.dims = ? AND e.model = ? AND e.version = ? AND e.embedding IS NOT NULL"
    if exact:
        # No index expression in the ORDER BY: every eligible row is compared, in one statement.
        ids = "" if join else "AND e.record_id = ANY(?::text[])"
        rows = await db.fetchall(
            f"""SELECT e.record_id, {closest} AS distance FROM embeddings e {join}
                 WHERE {where_sql} {ids} ORDER BY distance, e.record_id LIMIT ?""",
            (*literals, *join_params, dims, model, version, *([list(eligible)] if not join else []), k),
        )
        return [(r[0], _cosine(r[1])) for r in rows]
    # One HNSW walk per query; rows come nearly in order (relaxed_order), the outer sort fixes it.
    knobs = {
        "hnsw.ef_search": str(max(settings.ef_search, k)),
        "hnsw.iterative_scan": "relaxed_order",
        "hnsw.max_scan_tuples": str(settings.max_scan_tuples),
    }
    statement = f"""WITH nearest AS MATERIALIZED (
          SELECT e.record_id, e.embedding::vector({dims}) <=> ?::vector({dims}) AS walk, {closest} AS distance
            FROM embeddings e {join}
           WHERE {where_sql}
           ORDER BY walk LIMIT ?)
        SELECT record_id, distance FROM nearest ORDER BY walk + 0, record_id"""
    walks = [
        db.fetchall_with(knobs, statement, (literal, *literals, *join_params, dims, model, version, k))
        for literal in literals
    ]
    best = {r[0]: _cosine(r[1]) for rows in await asyncio.gather(*walks) for r in rows}
    return sorted(best.items(), key=lambda hit: (-hit[1], hit[0]))[:k]


def _cosine(distance: Any) -> float:
    return float(np.clip(1.0 - float(distance), -1.0, 1.0))
