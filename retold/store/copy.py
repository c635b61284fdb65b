"""Copy a whole store into an empty one, across backends (SQLite ⇄ PostgreSQL).

The destination is written in one transaction: it holds the whole copy or nothing, so an
interrupted copy is simply run again. Rows are read in pages in a stable order (SQLite's
``rowid`` order where the schema keys order by it), so link, alias and source order survive.
Self-references (``records.supersedes_id``, ``entities.merged_into``) are written as NULL
first and set once every row is in, since rows may name rows later in the order. The lexical
index is not copied but rebuilt from the copied rows with the destination's own machinery
(FTS5 on SQLite, the token tables on PostgreSQL); ``records_version`` is carried over so
processes' vector indexes stay comparable.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from retold.errors import InvalidArgumentError
from retold.store.bulk import FTS_ROW_SQL
from retold.store.store import Store

__all__ = ["COPIED_TABLES", "CopyReport", "copy_store", "table_counts"]

PAGE = 2_000
_DERIVED = frozenset({"rowid", "embedding"})  # identities, and pgvector's copy of the vector bytes

# Parents before children; each table's columns are the SQLite schema's (PostgreSQL's extra
# columns are derived or identities). (table, order, self-reference column or None)
COPIED_TABLES: tuple[tuple[str, str, str | None], ...] = (
    ("grants", "agent_id, scope_kind, scope_id", None),
    ("entities", "id", "merged_into"),
    ("entity_aliases", "rowid", None),
    ("records", "id", "supersedes_id"),
    ("record_entities", "rowid", None),
    ("record_conflicts", "record_id, other_id", None),
    ("record_sources", "rowid", None),
    ("embeddings", "record_id", None),
    ("passage_vectors", "record_id, ordinal", None),
    ("migration_issues", "migration_version, record_id", None),
    ("sessions", "agent_id, user_id, id", None),
    ("session_turns", "agent_id, user_id, session_id, turn", None),
    ("events", "id", None),
    ("search_log", "id", None),
    ("store_items", "namespace, key", None),
    ("record_activation", "record_id", None),
    ("activation_reviews", "id", None),
)


@dataclass
class CopyReport:
    source: str
    destination: str
    rows: dict[str, int] = field(default_factory=dict)
    records_version: int = 0


async def _columns(store: Store, table: str) -> list[str]:
    if store.dialect == "postgresql":
        rows = await store.db.fetchall(
            """SELECT column_name FROM information_schema.columns
                WHERE table_schema = current_schema() AND table_name = ? ORDER BY ordinal_position""",
            (table,),
        )
        return [r[0] for r in rows]
    return [r[1] for r in await store.db.fetchall(f"PRAGMA table_info({table})")]


async def copy_store(
    source: Store, destination: Store, *, progress: Callable[[str, int, int], None] | None = None
) -> CopyReport:
    """Copy every row of ``source`` into the empty ``destination``; all or nothing.

    ``progress(table, done, total)`` is called after each page. Refuses (before writing
    anything) when the destination already holds records, entities, grants or sessions,
    or when both are the same store.
    """
    if source.path == destination.path and source.dialect == destination.dialect:
        raise InvalidArgumentError("source and destination are the same store")
    for table in ("records", "entities", "grants", "sessions", "events"):
        if await destination.db.fetchval(f"SELECT count(*) FROM {table}"):
            raise InvalidArgumentError(f"the destination already holds {table}; copy into a new, empty store")
    report = CopyReport(source.path, destination.path)
    totals = {t: int(await source.db.fetchval(f"SELECT count(*) FROM {t}")) for t, _, _ in COPIED_TABLES}
    async with destination.transaction():
        for table, order, self_ref in COPIED_TABLES:
            wanted = await _columns(source, table)
            present = set(await _columns(destination, table))
            columns = [c for c in wanted if c in present and c not in _DERIVED]
            if source.dialect == "postgresql" and order == "rowid":
                order = "rowid"  # PostgreSQL's identity column of the same name
            select = f"SELECT {', '.join(columns)} FROM {table} ORDER BY {order} LIMIT ? OFFSET ?"
            insert = f"INSERT INTO {table}({', '.join(columns)}) VALUES ({', '.join('?' for _ in columns)})"
            deferred: list[tuple[Any, Any]] = []
            done = 0
            while True:
                rows = await source.db.fetchall(select, (PAGE, done))
                if not rows:
                    break
                values = []
                for row in rows:
                    value = [bytes(v) if isinstance(v, memoryview) else v for v in row]
                    if self_ref is not None:
                        at = columns.index(self_ref)
                        if value[at] is not None:
                            deferred.append((value[columns.index(order)], value[at]))
                            value[at] = None
                    values.append(value)
                await destination.db.executemany(insert, values)
                done += len(rows)
                if progress is not None:
                    progress(table, done, totals[table])
            if deferred:
                await destination.db.executemany(
                    f"UPDATE {table} SET {self_ref} = ? WHERE {order} = ?",
                    [(ref, key) for key, ref in deferred],
                )
            report.rows[table] = done
        # Derived: the lexical rows, rebuilt by the destination's own index.
        ids = await destination.db.fetch_column(
            "SELECT id FROM records WHERE status != 'deleted' ORDER BY id"
        )
        await destination.db.executemany(FTS_ROW_SQL, [(i,) for i in ids])
        report.rows["records_fts"] = len(ids)
        report.records_version = await source.records_version()
        await destination.db.execute(
            "UPDATE store_meta SET value = ? WHERE key = 'records_version'", (report.records_version,)
        )
        await destination._bump()  # the destination's caches and lexical index catch up
        await destination.db.execute(
            "UPDATE store_meta SET value = ? WHERE key = 'records_version'", (report.records_version,)
        )
        if progress is not None:
            progress("records_fts", len(ids), len(ids))
    return report


async def table_counts(store: Store, tables: list[str]) -> dict[str, int]:
    """Rows in each of ``tables`` (the names a :class:`CopyReport` lists, never input)."""
    if not all(t.isidentifier() for t in tables):
        raise InvalidArgumentError("table names must be plain identifiers")
    return {t: int(await store.db.fetchval(f"SELECT count(*) FROM {t}")) for t in tables}
