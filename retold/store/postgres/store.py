"""The Store on PostgreSQL: SQLite's store with the few parts the engines do differently.

Everything that is plain SQL is inherited from :class:`retold.store.store.Store` and runs
through :class:`~retold.store.postgres.database.PgDatabase`. Overridden here:

* **The lexical index.** FTS5 does not exist; ``records_fts`` is a table whose rows are
  tokenized in Python by the very tokenizer the query side uses
  (:func:`retold.retrieve.query_terms.fts_tokens`, a replica of FTS5's ``unicode61
  remove_diacritics 2``) just before the writing transaction commits, with one
  ``records_terms`` row per distinct token. A search scores candidates with FTS5's own
  ``bm25()`` formula (same k1, b, column weights, IDF floor), and its statistics — N,
  average length, document frequencies, the vocabulary variant expansion reads — come
  from the searcher's readable scopes only, as on SQLite. Same tokens, same formula, same
  statistics: the lexical channel ranks as it does on SQLite (scoring:
  :mod:`retold.store.postgres.bm25`; tokens and statistics: :mod:`~retold.store.postgres.lexicon`).
* **Dense search** in pgvector (:mod:`retold.store.postgres.vectors`).
* Catalogue reads (tables, integrity, the schema version) that SQLite answers from ``sqlite_master``
  and PRAGMAs.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable, Sequence, Set
from contextlib import asynccontextmanager
from datetime import datetime
from typing import Any

from retold.errors import StoreError
from retold.models import Scope
from retold.store.bulk import FTS_ROW_SQL
from retold.store.eligible import UNEXPIRED, EligibleSet, eligible_where
from retold.store.lexical_index import LexicalIndex, TermStatistics, _Vocabulary
from retold.store.postgres.bm25 import Bm25Mixin
from retold.store.postgres.dialect import translate
from retold.store.postgres.lexicon import RECOUNT, STATISTICS_CHECKS, tokenize_pending
from retold.store.postgres.schema import current_version
from retold.store.postgres.vectors import VectorSearchSettings, fill_pending, search_vectors
from retold.store.rows import scope_clause
from retold.store.store import Store
from retold.util import format_ts

__all__ = ["PgStore"]

_ERASURE_TABLES = (
    "records", "records_fts", "records_terms", "records_term_counts", "record_sources", "record_entities",
    "embeddings", "passage_vectors",
    "entities", "entity_aliases", "events", "search_log", "session_turns", "sessions", "record_conflicts",
    "store_items",
)  # fmt: skip


class PgStore(Bm25Mixin, Store):
    """:class:`Store` on PostgreSQL (open with ``Store.open("postgresql://…")``)."""

    async def schema_version(self) -> int:
        return await current_version(self.db)

    # --- writing the lexical index -----------------------------------------------------------

    async def _write_fts(self, record_id: str, *, fresh: bool = False) -> None:
        # An ordinary table indexed on record_id: the row is replaced, tokenized before commit.
        if not fresh:
            await self.db.execute("DELETE FROM records_fts WHERE record_id = ?", (record_id,))
        await self.db.execute(FTS_ROW_SQL, (record_id,))
        self.db.before_commit("tokenize", self._tokenize_pending)

    async def _fts_rowid(self, record_id: str) -> int | None:
        return await self.db.fetchval("SELECT rowid FROM records_fts WHERE record_id = ?", (record_id,))

    async def _bump(self) -> int:
        self.db.before_commit("tokenize", self._tokenize_pending)
        self.db.before_commit("vectors", self._vectorize_pending)
        return await super()._bump()

    async def _vectorize_pending(self) -> None:
        """pgvector's copy of every vector written or changed in this transaction."""
        await fill_pending(self.db, self.__dict__.setdefault("_hnsw_dims", set()))

    # --- dense search ------------------------------------------------------------------------

    searches_vectors = True

    async def vector_nearby(
        self,
        vector: Any,
        scope: Scope,
        record_type: str,
        *,
        now: datetime,
        exclude: Set[str],
        about: str | None,
        k: int,
        model: str,
        version: str,
        settings: VectorSearchSettings,
    ) -> list[tuple[str, float]]:
        """The write path's nearby search: live records of the type in the scope closest to ``vector``.

        Without ``exclude`` and, with ``about``, the records about that entity (already judged).
        The filter is in the statement; no id set is built, however many records the scope holds.
        """
        where, params = eligible_where([scope], types=[record_type])
        where += UNEXPIRED
        params.append(format_ts(now))
        if about is not None:
            where += " AND (r.subject_entity_id IS DISTINCT FROM ? OR r.type != ?)"
            params += [about, record_type]
        if exclude:
            where += " AND r.id <> ALL(?::text[])"
            params.append(sorted(exclude))
        size = int(
            await self.db.fetchval(
                f"SELECT count(*) FROM (SELECT 1 FROM records r WHERE {where} LIMIT ?) x",
                (*params, settings.exact_search_max + 1),
            )
        )
        if self.db.in_transaction:
            await self._vectorize_pending()
        predicate = EligibleSet(where=where, params=tuple(params))
        return await search_vectors(
            self.db, vector, predicate, k, model=model, version=version, settings=settings, size=size
        )

    async def vector_search(
        self,
        queries: Any,
        eligible: Iterable[str],
        k: int,
        *,
        model: str,
        version: str,
        settings: VectorSearchSettings,
    ) -> list[tuple[str, float]]:
        """The ``k`` eligible records nearest the query vectors, searched inside PostgreSQL."""
        if self.db.in_transaction:  # the writer's own rows are searchable too
            await self._vectorize_pending()
        return await search_vectors(
            self.db, queries, eligible, k, model=model, version=version, settings=settings
        )

    async def _tokenize_pending(self) -> None:
        await tokenize_pending(self.db)

    # --- the index a search reads ------------------------------------------------------------

    @asynccontextmanager
    async def lexical_index(self, scopes: Sequence[Scope]) -> AsyncIterator[LexicalIndex]:
        """The statistics of the searcher's readable rows (N and total length), cached per state."""
        key = tuple(sorted(set(scopes), key=lambda s: (s.kind, s.id)))
        if self.db.in_transaction:  # the writer's own uncommitted rows are searchable too
            await self._tokenize_pending()
        cache: dict[tuple[Any, ...], LexicalIndex] = self.__dict__.setdefault("_pg_lexical", {})
        version = await self.records_version()
        index = None if self.db.in_transaction else cache.get((version, key))
        if index is None:
            scope_sql, params = scope_clause(key, "s.")
            row = await self.db.fetchone(
                f"""SELECT coalesce(sum(s.rows), 0), coalesce(sum(s.tokens), 0)
                      FROM records_fts_stats s WHERE {scope_sql}""",
                params,
            )
            assert row is not None
            index = LexicalIndex(
                "records_fts", "public", int(row[0]), shared=False, scopes=key, tokens=int(row[1])
            )
            if not self.db.in_transaction:
                if len(cache) > 64:
                    cache.clear()
                cache[(version, key)] = index
        yield index

    def forget_lexical_caches(self) -> None:
        self.__dict__.get("_pg_lexical", {}).clear()

    async def _scoped_terms(self, index: LexicalIndex) -> tuple[str, list[Any]]:
        """The readable scopes' postings: each carries its record's scope (no join needed)."""
        scope_sql, params = scope_clause(index.scopes, "v.")
        return f"WHERE {scope_sql}", list(params)

    async def term_statistics(
        self, tokens: Sequence[str], stems: Sequence[str] = (), *, index: LexicalIndex, limit: int = 256
    ) -> TermStatistics:
        """Document counts and stem ranges of the readable rows' vocabulary (``records_terms``)."""
        cache: _Vocabulary = index.vocabulary
        # Counts kept by triggers (lexicon.STATISTICS): no posting list is counted here.
        scope_sql, params = scope_clause(index.scopes, "c.")
        for stem in dict.fromkeys(stems):
            if stem in cache.variants:
                continue
            rows = await self.db.fetchall(
                f"""SELECT c.term, sum(c.n) FROM records_term_counts c WHERE {scope_sql}
                       AND c.term >= ? AND c.term < ? GROUP BY c.term ORDER BY c.term LIMIT ?""",
                (*params, stem, stem + "\U0010ffff", limit),
            )
            cache.variants[stem] = [(r[0], int(r[1])) for r in rows]
            for term, n in cache.variants[stem]:
                cache.counts[term] = n
        missing = [t for t in dict.fromkeys(tokens) if t not in cache.counts]
        if missing:
            marks = ", ".join("?" for _ in missing)
            rows = await self.db.fetchall(
                f"""SELECT c.term, sum(c.n) FROM records_term_counts c WHERE {scope_sql}
                       AND c.term IN ({marks}) GROUP BY c.term""",
                (*params, *missing),
            )
            found = {r[0]: int(r[1]) for r in rows}
            for term in missing:
                cache.counts[term] = found.get(term, 0)
        return TermStatistics(
            index.rows,
            {t: cache.counts.get(t, 0) for t in tokens},
            {s: cache.variants.get(s, []) for s in stems},
            index.tokens,
        )

    def _fetch_sync(self, sql: str, params: list[Any]) -> list[Any]:
        """One read on a short-lived connection of its own, for callers that cannot await."""
        import psycopg

        from retold.store.postgres.database import _params, _row_factory, translate_error

        try:
            with psycopg.connect(self.db.url, autocommit=True, connect_timeout=5) as conn:
                conn.read_only = True
                with conn.cursor(row_factory=_row_factory) as cursor:
                    cursor.execute(translate(sql), _params(params))
                    return cursor.fetchall()
        except psycopg.Error as exc:
            raise translate_error(exc, sql, self.db.busy_timeout_s) from exc

    # --- integrity and erasure --------------------------------------------------------------------

    async def sqlite_integrity(self) -> list[str]:
        """The lexical index's own check (the counterpart of FTS5's ``integrity-check``)."""
        problems = []
        pending = int(await self.db.fetchval("SELECT count(*) FROM records_fts WHERE NOT tokenized"))
        if pending:
            problems.append(f"records_fts has {pending} committed row(s) that were never tokenized")
        mismatched = int(
            await self.db.fetchval(
                """SELECT count(*) FROM records_fts f
                    WHERE f.tokenized AND (SELECT count(*) FROM records_terms v WHERE v.fts_rowid = f.rowid)
                          != (SELECT count(DISTINCT t) FROM unnest(coalesce(f.content_tokens, '{}')
                               || coalesce(f.subject_tokens, '{}') || coalesce(f.alias_tokens, '{}')) t)"""
            )
        )
        if mismatched:
            problems.append(
                f"records_fts index does not match its rows ({mismatched} row(s) with other terms)"
            )
        for table, check in STATISTICS_CHECKS.items():
            differ = int(await self.db.fetchval(check))
            if differ:
                problems.append(f"{table} does not match a recount of the lexical index ({differ} row(s))")
        return problems

    async def rebuild_fts_index(self) -> None:
        """Tokenize every lexical row afresh, rewrite its terms and recount the statistics."""
        async with self.db.transaction():
            await self.db.execute("UPDATE records_fts SET tokenized = false")
            await self._tokenize_pending()
            for sql in RECOUNT:
                await self.db.run_raw(sql)

    async def compact(self) -> bool:
        """Rewrite the tables an erasure touched so deleted text leaves their files.

        ``VACUUM FULL`` rewrites each table and its indexes without the dead row versions
        (plain ``VACUUM`` only marks their space reusable). PostgreSQL's WAL, its archive,
        replicas and backups still hold the old text until they recycle: docs/reliability.md
        says what an operator must do. Returns False when a table could not be rewritten
        (another session held a lock past the busy timeout).
        """
        done = True
        for table in _ERASURE_TABLES:
            try:
                await self.db.vacuum(table)
            except StoreError:
                done = False
        return done

    async def truncate_wal(self) -> bool:
        """PostgreSQL recycles its WAL itself after each checkpoint; nothing to do here."""
        return True

    async def backup_to(self, target: Any, *, progress: Any = None) -> Any:
        """Refused: a snapshot is one SQLite file; PostgreSQL has its own tools for this."""
        raise StoreError(
            "snapshots are SQLite files; back up a PostgreSQL store with pg_dump (or pg_basebackup "
            "with WAL archiving for point-in-time recovery)"
        )

    # --- catalogue -------------------------------------------------------------------------------

    async def tables(self) -> list[str]:
        return list(
            await self.db.fetch_column(
                """SELECT tablename FROM pg_tables WHERE schemaname = current_schema()
                    AND tablename NOT IN ('records_terms', 'records_term_counts', 'records_fts_stats')
                  ORDER BY tablename"""
            )
        )
