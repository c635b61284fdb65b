"""The async Store: every SQLite read and write retold makes goes through here.

Records, their FTS rows, entity links and the ``records_version`` bump that lets
other processes' vector indexes catch up are written in one transaction, so a
crash or an exception leaves either all of them or none.

One job: the Store class every reader and writer calls; it is long because the record reads
and writes that every other part shares live here, while each other area's queries sit in
a mixin of its own (:mod:`retold.store.search`, :mod:`retold.store.audit`, ...).

    store = await Store.open("memory.sqlite")
    async with store.transaction():
        await store.insert_record(record, links=[(entity_id, "about")])
    await store.close()
"""

from __future__ import annotations

import functools
from collections.abc import AsyncIterator, Callable, Iterable, Sequence
from contextlib import asynccontextmanager
from datetime import datetime
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from retold.errors import InvalidArgumentError, MigrationIssuesError, NotFoundError
from retold.models import ACTIVE_STATUSES, Record, RecordSource, Scope
from retold.store.activation import ActivationMixin
from retold.store.audit import AuditMixin
from retold.store.backends import backend_for
from retold.store.bulk import FTS_ROW_AT_SQL, FTS_ROW_SQL, BulkMixin
from retold.store.database import Database
from retold.store.eligible import EligibleCache, EligibleMixin
from retold.store.entities import EntitiesMixin, SessionsMixin
from retold.store.extraction import ExtractionMixin
from retold.store.inspect import InspectMixin
from retold.store.items import StoreItemsMixin
from retold.store.maintenance import MaintenanceMixin
from retold.store.metrics import MetricsMixin
from retold.store.migrations import LATEST_VERSION, current_version, migrate
from retold.store.rows import RECORD_COLUMNS, record_from_row, record_to_params, scope_clause, to_sql
from retold.store.search import SearchMixin
from retold.store.sources import SourcesMixin
from retold.store.vectors import VectorsMixin
from retold.util import Clock, SystemClock, format_ts, parse_ts

__all__ = ["FACT_SNIPPET_CHARS", "RecordFacts", "Store"]

# Columns a caller may change after insert; id, scope and creation facts never change.
_MUTABLE = frozenset(
    {"version", "content", "subject", "subject_entity_id", "attribute", "source_kind", "source_ref",
     "evidence", "event_at", "expires_at", "valid_from", "valid_until", "review_at",
     "review_flagged_at", "confidence", "status", "supersedes_id", "reinforcements",
     "last_reinforced_at", "tags", "source_origin"}
)  # fmt: skip
_FTS_COLUMNS = frozenset({"content", "subject"})
_IN_LIST_MAX = 500  # ids bound as parameters; larger lists go through a temporary table
FACT_SNIPPET_CHARS = 120


class RecordFacts(NamedTuple):
    """A candidate as ranking sees it before it is loaded whole: :meth:`Store.record_facts`."""

    type: str
    source_kind: str
    event_at: datetime
    snippet: str  # the content's first FACT_SNIPPET_CHARS characters


class Store(
    EligibleMixin,
    AuditMixin,
    EntitiesMixin,
    SessionsMixin,
    VectorsMixin,
    SearchMixin,
    SourcesMixin,
    BulkMixin,
    ExtractionMixin,
    MaintenanceMixin,
    StoreItemsMixin,
    InspectMixin,
    ActivationMixin,
    MetricsMixin,
):
    """Async CRUD over the schema of spec §3. Open with ``await Store.open(path)``."""

    def __init__(self, db: Database, clock: Clock) -> None:
        self.db = db
        self.clock = clock
        self._eligible_cache = EligibleCache()

    @classmethod
    async def open(
        cls,
        path: str | Path,
        *,
        busy_timeout_s: float = 30.0,
        allow_migration_issues: bool = False,
        clock: Clock | None = None,
        pool_min: int = 1,
        pool_max: int = 10,
        migration_progress: Callable[[int, int], None] | None = None,
    ) -> Store:
        """Open (creating if needed) and migrate the store to the latest schema.

        ``migration_progress(done, total)`` hears of each migration applied (``retold migrate``).

        ``path`` is a SQLite file, or a ``postgresql://`` URL for the PostgreSQL backend
        (``pool_min``/``pool_max`` size its connection pool). Refuses, with
        :class:`MigrationIssuesError`, while legacy rows that migration 2 could not map
        remain unresolved, unless ``allow_migration_issues=True``.
        """
        db: Any
        backend = backend_for(path)  # a postgresql:// URL: the PostgreSQL backend (retold.store.backends)
        if backend is not None:
            db = await backend.open_database(
                str(path), busy_timeout_s=busy_timeout_s, pool_min=pool_min, pool_max=pool_max
            )
            migrator: Any = backend.migrate
            if cls is Store:
                cls = backend.store_class
        else:
            db = await Database.open(path, busy_timeout_s=busy_timeout_s)
            migrator = migrate
        try:
            await migrator(db, progress=migration_progress)
            store = cls(db, clock or SystemClock())
            if not allow_migration_issues:
                unresolved = len(await store.migration_issues())
                if unresolved:
                    raise MigrationIssuesError(unresolved, str(path))
        except BaseException:
            await db.close()
            raise
        return store

    @property
    def path(self) -> str:
        return self.db.path

    async def close(self) -> None:
        await self.db.close()

    @asynccontextmanager
    async def transaction(self) -> AsyncIterator[None]:
        async with self.db.transaction():
            yield

    async def schema_version(self) -> int:
        return await current_version(self.db)  # PgStore reads its own schema's version

    @property
    def dialect(self) -> str:
        """``sqlite`` or ``postgresql``: for the few statements the two spell differently."""
        return self.db.dialect

    @staticmethod
    def latest_schema_version() -> int:
        return LATEST_VERSION

    async def tables(self) -> list[str]:
        rows = await self.db.fetchall(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' "
            "AND name NOT LIKE 'records_fts_%' ORDER BY name"
        )
        return [r[0] for r in rows]

    # --- the durable index version ----------------------------------------------------------

    async def records_version(self) -> int:
        return int(await self.db.fetchval("SELECT value FROM store_meta WHERE key = 'records_version'"))

    async def _bump(self) -> int:
        """Advance records_version inside the caller's transaction and return the new value."""
        assert self.db.in_transaction, "records_version must change inside the write transaction"
        self.db.after_commit(self.forget_lexical_caches)  # stale, and may hold forgotten words
        return int(
            await self.db.fetchval(
                "UPDATE store_meta SET value = value + 1 WHERE key = 'records_version' RETURNING value"
            )
        )

    # --- records -----------------------------------------------------------------------------

    async def insert_record(
        self,
        record: Record,
        *,
        links: Sequence[tuple[str, str]] = (),
        source: RecordSource | None = None,
        embedding: tuple[str, str, np.ndarray] | None = None,
        passages: np.ndarray | None = None,
    ) -> int:
        """Insert a record with its entity links, FTS row and source; return its ``index_version``.

        ``links`` are ``(entity_id, role)`` pairs; the record's ``entity_ids`` are set from them.
        ``source`` is the observation that created it (its ``origin`` becomes ``source_origin``).
        ``embedding`` (model, version, vector) is stored under the same ``index_version``, as
        :meth:`put_embedding` would, without a second version of the store for one write, with
        ``passages`` (one row per passage of a long record, retold.index.passages) by the same model.
        """
        async with self.db.transaction():
            version = await self._bump()
            params = record_to_params(record)
            params["index_version"] = version
            params["source_origin"] = source.origin if source is not None else None
            columns = ", ".join((*RECORD_COLUMNS, "source_origin"))
            await self.db.execute(
                f"INSERT INTO records({columns}) VALUES "
                f"({', '.join(':' + c for c in (*RECORD_COLUMNS, 'source_origin'))})",
                params,
            )
            if source is not None:
                await self.add_source(source)
            for entity_id, role in links:
                await self.db.execute(
                    """INSERT INTO record_entities(record_id, entity_id, role) VALUES (?, ?, ?)
                       ON CONFLICT (record_id, entity_id) DO UPDATE SET role = excluded.role""",
                    (record.id, entity_id, role),
                )
            await self._write_fts(record.id, fresh=True)
            if embedding is not None:
                await self._store_vector(record.id, *embedding, version)
                await self._store_passages(record.id, embedding[0], embedding[1], passages, fresh=True)
        record.index_version = version
        # The order get_records reads back: about links (the primary entity) first, then mentions.
        record.entity_ids = [e for e, role in sorted(links, key=lambda link: link[1] == "mentions")]
        return version

    async def update_record(self, record_id: str, **fields: Any) -> int:
        """Change mutable columns of one record; bump ``records_version``; keep FTS in step."""
        bad = set(fields) - _MUTABLE
        if bad:
            raise InvalidArgumentError(f"record column(s) cannot be updated: {', '.join(sorted(bad))}")
        if not fields:
            raise InvalidArgumentError("update_record needs at least one column to change")
        async with self.db.transaction():
            version = await self._bump()
            if fields.get("status") == "deleted" or _FTS_COLUMNS & set(fields):
                # Words may leave the index: no cache may carry them past this commit.
                self.db.after_commit(functools.partial(self.forget_lexical_caches, words_removed=True))
            assignments = ", ".join(f"{c} = :{c}" for c in fields)
            params = {c: to_sql(c, v) for c, v in fields.items()}
            changed = await self.db.execute(
                f"UPDATE records SET {assignments}, index_version = :_v WHERE id = :_id",
                {**params, "_v": version, "_id": record_id},
            )
            if not changed:
                raise NotFoundError(f"no record {record_id!r}")
            # A forgotten record leaves lexical search at once (FTS_ROW_SQL skips deleted rows).
            if _FTS_COLUMNS & set(fields) or "status" in fields:
                await self._write_fts(record_id)
        return version

    async def set_status(self, record_id: str, status: str, **fields: Any) -> int:
        return await self.update_record(record_id, status=status, **fields)

    async def get_record(self, record_id: str) -> Record | None:
        records = await self.get_records([record_id])
        return records[0] if records else None

    async def require_record(self, record_id: str) -> Record:
        record = await self.get_record(record_id)
        if record is None:
            raise NotFoundError(f"no record {record_id!r}")
        return record

    async def record_facts(self, record_ids: Iterable[str]) -> dict[str, RecordFacts]:
        """What ranking and the gate read of a candidate, and a short text for showing it.

        A search scores dozens of candidates and keeps a few; reading these columns for
        the rest costs one small read instead of whole records with their entity links.
        """
        ids = list(dict.fromkeys(record_ids))
        found: dict[str, RecordFacts] = {}
        for start in range(0, len(ids), _IN_LIST_MAX):
            chunk = ids[start : start + _IN_LIST_MAX]
            marks = ", ".join("?" * len(chunk))
            rows = await self.db.fetchall(
                f"""SELECT id, type, source_kind, event_at, substr(content, 1, {FACT_SNIPPET_CHARS})
                      FROM records WHERE id IN ({marks})""",
                chunk,
            )
            for rid, kind, source_kind, event_at, text in rows:
                found[rid] = RecordFacts(kind, source_kind, parse_ts(event_at), text)  # type: ignore[arg-type]
        return found

    async def about_entities(self, record_ids: Iterable[str]) -> dict[str, list[tuple[str, str]]]:
        """record_id -> the (entity id, kind) pairs it is ``about``, for the records that have any."""
        ids = list(dict.fromkeys(record_ids))
        found: dict[str, list[tuple[str, str]]] = {}
        for start in range(0, len(ids), _IN_LIST_MAX):
            chunk = ids[start : start + _IN_LIST_MAX]
            marks = ", ".join("?" * len(chunk))
            rows = await self.db.fetchall(
                f"""SELECT l.record_id, l.entity_id, e.kind FROM record_entities l
                      JOIN entities e ON e.id = l.entity_id
                     WHERE l.record_id IN ({marks}) AND l.role = 'about'
                     ORDER BY l.record_id, l.entity_id""",
                chunk,
            )
            for record_id, entity_id, kind in rows:
                found.setdefault(record_id, []).append((entity_id, kind))
        return found

    async def get_records(self, record_ids: Iterable[str]) -> list[Record]:
        """Records by id, in the order given (unknown ids are skipped)."""
        ids = list(dict.fromkeys(record_ids))
        if not ids:
            return []
        if len(ids) <= _IN_LIST_MAX:  # a search's candidates: two reads, no temp table
            marks = ", ".join("?" for _ in ids)
            rows = await self.db.fetchall(f"SELECT r.* FROM records r WHERE r.id IN ({marks})", ids)
            links = await self.db.fetchall(
                f"""SELECT l.record_id, l.entity_id FROM record_entities l WHERE l.record_id IN ({marks})
                     ORDER BY l.role = 'mentions', l.rowid""",
                ids,
            )
        else:
            async with self.db.temp_ids(ids) as table:
                rows = await self.db.fetchall(f"SELECT r.* FROM records r JOIN {table} t ON t.id = r.id")
                links = await self.db.fetchall(
                    f"""SELECT l.record_id, l.entity_id FROM record_entities l JOIN {table} t
                         ON t.id = l.record_id ORDER BY l.role = 'mentions', l.rowid"""
                )
        by_record: dict[str, list[str]] = {}
        for link in links:
            by_record.setdefault(link[0], []).append(link[1])
        found = {r["id"]: record_from_row(r, by_record.get(r["id"])) for r in rows}
        return [found[i] for i in ids if i in found]

    async def resolve_record_ref(self, ref: str, scopes: Sequence[Scope]) -> list[str]:
        """Ids in ``scopes`` that ``ref`` names: a full id, or the short id results show.

        The short id is the last 12 characters (``substr(id, -12)``, indexed). Records
        outside ``scopes`` never match, so an ambiguous short id can only name records the
        caller may read.
        """
        if not scopes:
            return []
        where, params = scope_clause(scopes)
        exact = await self.db.fetch_column(f"SELECT id FROM records WHERE id = ? AND {where}", (ref, *params))
        if exact or len(ref) != 12:
            return exact
        return await self.db.fetch_column(
            f"SELECT id FROM records WHERE substr(id, -12) = ? AND {where} ORDER BY id", (ref, *params)
        )

    async def records_in_scope(
        self, scope: Scope, *, statuses: Sequence[str] = ACTIVE_STATUSES
    ) -> list[Record]:
        rows = await self.db.fetchall(
            f"""SELECT id FROM records WHERE scope_kind = ? AND scope_id = ?
                 AND status IN ({", ".join("?" for _ in statuses)}) ORDER BY id""",
            (scope.kind, scope.id, *statuses),
        )
        return await self.get_records(r[0] for r in rows)

    async def rival_written(self, record: Record, since_version: int) -> bool:
        """Whether a live record of the same fact as ``record`` was written after ``since_version``.

        Read inside the write transaction (under the write lock), so it sees every other
        process's committed write: same scope and type, and the same subject and attribute
        (semantic and procedural facts) or the same content (any type).
        """
        same = "r.content = ?"
        params: list[Any] = [record.content]
        if record.type != "episodic":
            same = "(r.content = ? OR (r.attribute = ? AND r.subject_entity_id IS ?))"
            params += [record.attribute, record.subject_entity_id]
        row = await self.db.fetchone(
            # The rows written since (a handful, by the index_version index) first; left to
            # itself, SQLite walks every live record of the scope instead.
            f"""WITH recent AS MATERIALIZED (SELECT id FROM records WHERE index_version > ?)
                SELECT 1 FROM recent JOIN records r ON r.id = recent.id
                 WHERE r.scope_kind = ? AND r.scope_id = ? AND r.type = ?
                   AND r.status IN ('provisional', 'confirmed') AND r.id != ? AND {same} LIMIT 1""",
            (since_version, record.scope.kind, record.scope.id, record.type, record.id, *params),
        )
        return row is not None

    async def supersession_chain(self, record_id: str) -> list[str]:
        """Ids this record replaced, newest first, following ``supersedes_id`` back to the origin."""
        rows = await self.db.fetchall(
            """WITH RECURSIVE chain(id, depth) AS (
                   SELECT supersedes_id, 1 FROM records WHERE id = ? AND supersedes_id IS NOT NULL
                   UNION
                   SELECT r.supersedes_id, c.depth + 1 FROM records r JOIN chain c ON r.id = c.id
                    WHERE r.supersedes_id IS NOT NULL AND c.depth < 10000
               ) SELECT id FROM chain ORDER BY depth""",
            (record_id,),
        )
        return [r[0] for r in rows]

    async def superseded_by(self, record_id: str) -> list[str]:
        """Ids of the records that name this one in ``supersedes_id``."""
        rows = await self.db.fetchall(
            "SELECT id FROM records WHERE supersedes_id = ? ORDER BY id", (record_id,)
        )
        return [r[0] for r in rows]

    async def subject_scan(
        self, scope: Scope, record_type: str, entity_id: str, attribute: str, cap: int
    ) -> tuple[list[Record], list[Record], bool]:
        """The attribute scan of spec §6.3 (index ``records_subject``), capped in SQL.

        Returns the ``cap`` most recently reinforced active records about the entity (the
        store's order), every active record under ``attribute`` (rule 1 owes its authority
        incumbent a decision even past the cap), and whether the cap truncated the scan.
        """
        where = """scope_kind = ? AND scope_id = ? AND subject_entity_id = ? AND type = ?
                   AND status IN ('provisional', 'confirmed')"""
        params = (scope.kind, scope.id, entity_id, record_type)
        rows = await self.db.fetchall(
            f"""SELECT id FROM records WHERE {where}
                 ORDER BY coalesce(last_reinforced_at, created_at) DESC, id DESC LIMIT ?""",
            (*params, cap + 1),
        )
        same = await self.db.fetchall(
            f"SELECT id FROM records WHERE {where} AND attribute = ?", (*params, attribute)
        )
        window = await self.get_records(r[0] for r in rows[:cap])
        return window, await self.get_records(r[0] for r in same), len(rows) > cap

    async def subject_record_ids(self, scope: Scope, record_type: str, entity_id: str) -> set[str]:
        """Ids of the active records about one entity (no rows loaded)."""
        rows = await self.db.fetchall(
            """SELECT id FROM records WHERE scope_kind = ? AND scope_id = ? AND subject_entity_id = ?
                 AND type = ? AND status IN ('provisional', 'confirmed')""",
            (scope.kind, scope.id, entity_id, record_type),
        )
        return {r[0] for r in rows}

    async def record_links(self, record_id: str) -> list[tuple[str, str]]:
        rows = await self.db.fetchall(
            "SELECT entity_id, role FROM record_entities WHERE record_id = ? ORDER BY role, rowid",
            (record_id,),
        )
        return [(r[0], r[1]) for r in rows]

    async def _write_fts(self, record_id: str, *, fresh: bool = False) -> None:
        """(Re)write the record's FTS row from its content, subject and linked entities' aliases.

        ``fresh`` (a record inserted in this transaction) has no row to replace. Otherwise the
        row is found through the index on FTS5's content table (migration 9; FTS5 cannot
        index its UNINDEXED ``record_id``), removed, and written again at the same rowid; a
        deleted record's row is only removed (``FTS_ROW_SQL`` skips deleted records).
        """
        rowid = None if fresh else await self._fts_rowid(record_id)
        if rowid is None:
            await self.db.execute(FTS_ROW_SQL, (record_id,))
            return
        await self.db.execute("DELETE FROM records_fts WHERE rowid = ?", (rowid,))
        await self.db.execute(FTS_ROW_AT_SQL, (rowid, record_id))

    async def _fts_rowid(self, record_id: str) -> int | None:
        return await self.db.fetchval("SELECT id FROM records_fts_content WHERE c0 = ?", (record_id,))

    async def rewrite_fts(self, record_ids: Iterable[str]) -> None:
        """Rebuild FTS rows after their entities' aliases changed (alias added, entities merged).

        The rows are stamped with a new ``index_version`` like any other change, so a cache
        brought forward over the records changed since (a lexical vocabulary) sees them.
        """
        ids = list(dict.fromkeys(record_ids))
        if not ids:
            return
        async with self.db.transaction():
            version = await self._bump()
            for record_id in ids:
                await self.db.execute(
                    "UPDATE records SET index_version = ? WHERE id = ?", (version, record_id)
                )
                await self._write_fts(record_id)

    async def fts_row(self, record_id: str) -> dict[str, Any] | None:
        rowid = await self._fts_rowid(record_id)
        if rowid is None:
            return None
        row = await self.db.fetchone("SELECT * FROM records_fts WHERE rowid = ?", (rowid,))
        return None if row is None else dict(row)

    # --- conflicts ----------------------------------------------------------------------------

    async def add_conflict(self, record_id: str, other_id: str, noted_at: datetime) -> None:
        """Record a conflict in both directions (spec §3.3)."""
        async with self.db.transaction():
            for a, b in ((record_id, other_id), (other_id, record_id)):
                await self.db.execute(
                    "INSERT OR IGNORE INTO record_conflicts(record_id, other_id, noted_at) VALUES (?, ?, ?)",
                    (a, b, format_ts(noted_at)),
                )

    async def conflicts_for(self, record_id: str) -> list[str]:
        return (await self.conflicts_of([record_id]))[record_id]

    async def conflicts_of(self, record_ids: Iterable[str]) -> dict[str, list[str]]:
        """Every listed record's conflict partners in one query (a search asks for dozens)."""
        ids = list(dict.fromkeys(record_ids))
        found: dict[str, list[str]] = {rid: [] for rid in ids}
        for start in range(0, len(ids), 500):
            chunk = ids[start : start + 500]
            rows = await self.db.fetchall(
                f"SELECT record_id, other_id FROM record_conflicts WHERE record_id IN "
                f"({', '.join('?' * len(chunk))}) ORDER BY record_id, other_id",
                chunk,
            )
            for record_id, other_id in rows:
                found[record_id].append(other_id)
        return found

    # --- embeddings ---------------------------------------------------------------------------

    async def put_embedding(
        self, record_id: str, model: str, version: str, vector: np.ndarray, passages: np.ndarray | None = None
    ) -> int:
        """Store the record's L2-normalised float32 vector and its passages' (replacing any it had);
        bump and return ``index_version``."""
        async with self.db.transaction():
            index_version = await self._bump()
            await self._store_vector(record_id, model, version, vector, index_version)
            await self._store_passages(record_id, model, version, passages)
            await self.db.execute(
                "UPDATE records SET index_version = ? WHERE id = ?", (index_version, record_id)
            )
        return index_version

    async def _store_vector(
        self, record_id: str, model: str, version: str, vector: np.ndarray, index_version: int
    ) -> None:
        vec = np.asarray(vector, dtype=np.float32).reshape(-1)
        await self.db.execute(
            """INSERT INTO embeddings(record_id, model, version, dims, vector, index_version)
               VALUES (?, ?, ?, ?, ?, ?)
               ON CONFLICT(record_id) DO UPDATE SET model = excluded.model,
                   version = excluded.version, dims = excluded.dims, vector = excluded.vector,
                   index_version = excluded.index_version""",
            (record_id, model, version, int(vec.shape[0]), vec.tobytes(), index_version),
        )

    async def _store_passages(
        self, record_id: str, model: str, version: str, vectors: np.ndarray | None, *, fresh: bool = False
    ) -> None:
        """The record's passage vectors, row ``i`` for passage ``i``; none for a short record."""
        if not fresh:
            await self.db.execute("DELETE FROM passage_vectors WHERE record_id = ?", (record_id,))
        if vectors is None or len(vectors) == 0:
            return
        vecs = np.asarray(vectors, dtype=np.float32)
        await self.db.executemany(
            """INSERT INTO passage_vectors(record_id, ordinal, model, version, dims, vector)
               VALUES (?, ?, ?, ?, ?, ?)""",
            ((record_id, i, model, version, int(vecs.shape[1]), v.tobytes()) for i, v in enumerate(vecs)),
        )

    async def get_embedding(self, record_id: str) -> tuple[str, str, np.ndarray] | None:
        row = await self.db.fetchone(
            "SELECT model, version, dims, vector FROM embeddings WHERE record_id = ?", (record_id,)
        )
        if row is None:
            return None
        return row["model"], row["version"], np.frombuffer(row["vector"], dtype=np.float32, count=row["dims"])

    async def embedding_models(self) -> list[dict[str, Any]]:
        """Which (model, version, dims) made the stored vectors, with counts."""
        rows = await self.db.fetchall(
            "SELECT model, version, dims, count(*) AS n FROM embeddings GROUP BY model, version, dims"
        )
        return [dict(r) for r in rows]

    # --- migration issues ---------------------------------------------------------------------

    async def resolve_migration_issues(self, resolution: str, actor: str) -> int:
        """Retire (``expired``) or acknowledge every unresolved issue; return how many."""
        if resolution not in ("expired", "acknowledged"):
            raise InvalidArgumentError("resolution must be 'expired' or 'acknowledged'")
        now = self.clock.now()
        async with self.db.transaction():
            issues = await self.migration_issues()
            for issue in issues:
                if resolution == "expired":
                    await self.set_status(issue["record_id"], "expired")
                    await self.append_event(
                        "record.status",
                        actor,
                        record_id=issue["record_id"],
                        payload={
                            "from": issue["status"],
                            "to": "expired",
                            "reason": "migration_unmapped",
                            "issue": issue["issue"],
                        },
                        at=now,
                    )
                await self.db.execute(
                    """UPDATE migration_issues SET resolution = ?, resolved_at = ?, resolved_by = ?
                        WHERE migration_version = ? AND record_id = ?""",
                    (resolution, format_ts(now), actor, issue["migration_version"], issue["record_id"]),
                )
        return len(issues)
