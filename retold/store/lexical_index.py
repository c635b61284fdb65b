"""The FTS5 index a search reads (spec §10.2), and the caches that keep it cheap.

Lexical statistics (BM25's document counts and average length, the vocabulary that variant
expansion and common-term selection read) come from one FTS5 index whose every row the
searcher may read: the store's own ``records_fts`` when that holds nothing outside the
searcher's scopes, else a temporary copy of the readable rows
(:meth:`LexicalIndexMixin.lexical_index`). One tenant's words therefore never change
another tenant's expansion, term selection or scores. The copies, the readable-scope sets
and the shared index's vocabulary are cached per store state and brought forward from the
rows a write changed; :mod:`retold.store.search` runs the queries against the index.

One job: the lexical index a search reads and its statistics; it is long because the
per-tenant copies and the caches that bring them forward from each write's changed rows
are what keep that index both isolated and cheap.
"""

from __future__ import annotations

import asyncio
import bisect
import contextlib
import contextvars
from collections import OrderedDict
from collections.abc import AsyncIterator, Iterable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from retold.errors import StoreError
from retold.models import Scope
from retold.store.database import Database
from retold.store.rows import scope_clause
from retold.util import Clock, new_id

__all__ = ["LexicalIndex", "LexicalIndexMixin", "TermStatistics"]

PRIVATE_INDEXES_MAX = 16
"""Readable-set indexes kept per store between writes (least recently used dropped first)."""

PRIVATE_ROWS_MAX = 250_000
"""Rows the kept readable-set indexes may hold together; past it the least recently used go."""


class TermStatistics(NamedTuple):
    total: int  # indexed records
    counts: dict[str, int]  # token -> records containing it
    variants: dict[str, list[tuple[str, int]]]  # stem -> [(indexed term starting with it, records)]
    tokens: int = 0  # tokens in the indexed records, every column: their average length

    @property
    def average_tokens(self) -> float:
        return self.tokens / self.total if self.total else 0.0


@dataclass
class _Vocabulary:
    """Term counts and stem ranges read from one index; lives exactly as long as that index entry."""

    counts: dict[str, int] = field(default_factory=dict)
    variants: dict[str, list[tuple[str, int]]] = field(default_factory=dict)
    limit: int = 0  # the most terms a stem's range was read with (its list is cut there)

    def forget(self, term: str) -> None:
        """Drop what the cache knows of ``term``: its count and every stem range it falls in."""
        self.counts.pop(term, None)
        for end in range(1, len(term) + 1):
            self.variants.pop(term[:end], None)

    def add(self, term: str, records: int) -> None:
        """``records`` more records hold ``term``: exactly what reading the index again would say."""
        if term in self.counts:
            self.counts[term] += records
        for end in range(1, len(term) + 1):
            found = self.variants.get(term[:end])
            if found is None:
                continue
            at = bisect.bisect_left(found, term, key=lambda pair: pair[0])
            if at < len(found) and found[at][0] == term:
                found[at] = (term, found[at][1] + records)
            elif at < len(found) or len(found) < self.limit:  # a range read is cut at ``limit``
                found.insert(at, (term, records))
                del found[self.limit :]
                self.counts.setdefault(term, records)


@dataclass(eq=False)
class LexicalIndex:
    """The FTS5 table one search matches, ranks and reads its vocabulary from.

    ``shared`` is the store's own ``records_fts``, used when the searcher may read every row
    of it; otherwise a ``temp`` copy of the rows in the searcher's readable scopes (same
    columns, tokenizer and rowids). ``rows`` is BM25's N and the common-term base.
    """

    name: str
    schema: str
    rows: int
    shared: bool
    vocabulary: _Vocabulary = field(default_factory=_Vocabulary)
    scopes: tuple[Scope, ...] = ()  # PostgreSQL: the readable scopes its statistics cover
    tokens: int = 0  # the rows' total length, every column (BM25's and the common words' average)

    @property
    def table(self) -> str:
        return f"{self.schema}.{self.name}"

    @property
    def vocab(self) -> str:
        return f"temp.{self.name}_vocab"


@dataclass
class _LexicalState:
    """Per-store lexical caches, all valid for one ``token`` (records_version and the FTS index's state)."""

    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    token: tuple[Any, ...] | None = None
    shared: LexicalIndex | None = None
    # Brought forward across writes (see SearchMixin._advance_lexical): the scopes holding a
    # live record, and the shared index's vocabulary, each as of one records_version.
    present: set[tuple[str, str]] | None = None
    present_version: int | None = None
    carried: tuple[tuple[Any, ...], _Vocabulary] | None = None  # (the token it reflects, vocabulary)
    readable: dict[tuple[Scope, ...], bool] = field(default_factory=dict)
    private: OrderedDict[tuple[Scope, ...], LexicalIndex] = field(default_factory=OrderedDict)
    doomed: list[str] = field(default_factory=list)  # temp tables to drop (stale or evicted)
    drops: set[asyncio.Task[None]] = field(default_factory=set)


_ADVANCE_MAX = 500
"""Changed rows the lexical caches are brought forward over; past it they are read anew."""


def _fts_averages(averages: bytes | None) -> list[int]:
    """FTS5's averages record (``%_data`` id 1): rows, then tokens in each column.

    SQLite varints (big-endian groups of 7 bits, a ninth byte whole); an empty or missing
    record is an empty index.
    """
    values: list[int] = []
    data, at = averages or b"", 0
    while at < len(data):
        value = 0
        for i in range(9):
            byte = data[at + i]
            if i == 8:
                value, at = (value << 8) | byte, at + 9
                break
            value = (value << 7) | (byte & 0x7F)
            if not byte & 0x80:
                at += i + 1
                break
        values.append(value)
    return values or [0]


def fts_tokens_total(averages: bytes | None) -> int:
    """The tokens of every column together, from the same record."""
    return sum(_fts_averages(averages)[1:])


def _fts_rows(averages: bytes | None) -> int:
    """The row count FTS5 keeps at the head of its averages record."""
    return _fts_averages(averages)[0]


def _index_name() -> str:
    return "lexical_" + new_id().replace("-", "")


class LexicalIndexMixin:
    db: Database
    clock: Clock

    # --- the index a search reads ----------------------------------------------------------------

    @asynccontextmanager
    async def lexical_index(self, scopes: Sequence[Scope]) -> AsyncIterator[LexicalIndex]:
        """The FTS5 index whose every row the searcher (reading ``scopes``) may read.

        BM25's IDF and average length, the vocabulary that variant expansion reads and the
        counts common-term selection uses are properties of the whole index FTS5 searches.
        Over the store's ``records_fts`` they would mix every tenant's words: u1's private
        ``connect0…`` tokens would crowd u2's "connected" out of the expansion of "connect",
        and u2 could probe u1's vocabulary through its own results. So when the store holds
        records outside ``scopes``, the search runs over a temporary copy of the readable
        rows; when it holds none (a single-tenant store), ``records_fts`` itself is that
        index and nothing is copied.

        The copy and every cached statistic are valid for one state of the store: any write
        in any process (``records_version``, or FTS5's own averages and structure records)
        makes them stale, and a commit in this process drops them at once
        (:meth:`forget_lexical_caches`), so forgotten and erased words leave with their
        rows. Searches hold a lock while they read an index, so none is dropped under them.
        """
        key = tuple(sorted(set(scopes), key=lambda s: (s.kind, s.id)))
        if self.db.in_transaction or self.db.path == ":memory:":
            # The writer's uncommitted state (or the one connection of an in-memory store, which
            # another task's transaction may be using): nothing cached, nothing kept.
            index = await self._fresh_lexical_index(key)
            try:
                yield index
            finally:
                if not index.shared:
                    await self._drop_tables([index.name])
            return
        state = self._lexical_state()
        async with state.lock:
            doomed, state.doomed = state.doomed, []
            await self._drop_tables(doomed)
            token = await self._lexical_token()
            if token != state.token:
                await self._advance_lexical(state, token)
            # A commit of another task may retire the caches while this search awaits: it goes
            # on with the state it read, as a search holding a retired index does.
            yield await self._cached_lexical_index(state, key, token, state.present)

    def forget_lexical_caches(self, *, words_removed: bool = False) -> None:
        """Drop the readable-set indexes: a commit changed the records.

        Runs after each commit of this process (``_bump`` registers it); quick and
        synchronous, it clears the Python caches now and drops the ``temp`` copies in a
        background task (or at the next search, whichever comes first). The shared index's
        vocabulary is set aside for the next search to bring forward, unless the commit
        removed words (a forget or an erasure registers ``words_removed``): then it goes too,
        so no forgotten word outlives its commit in this process.
        """
        state = self._lexical_state()
        self._set_aside(state)
        if words_removed:
            state.carried = None
            state.present = None
        self._retire(state)
        if not state.doomed:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # no loop: the next search drops them
            return
        # A fresh context: this runs after a commit, and the committed transaction's context
        # must not follow the task (the store would refuse it the connection).
        task = loop.create_task(self._drop_doomed(state), context=contextvars.Context())
        state.drops.add(task)
        task.add_done_callback(state.drops.discard)

    def _lexical_state(self) -> _LexicalState:
        state: _LexicalState | None = getattr(self, "_lexical", None)
        if state is None:
            state = _LexicalState()
            self._lexical = state
        return state

    @staticmethod
    def _set_aside(state: _LexicalState) -> None:
        """Keep the shared index's vocabulary, with the records_version it reflects, for later."""
        if state.shared is not None and state.token is not None:
            state.carried = (state.token, state.shared.vocabulary)

    @staticmethod
    def _retire(state: _LexicalState) -> None:
        state.token = None
        state.shared = None
        state.readable.clear()
        state.doomed.extend(index.name for index in state.private.values())
        state.private.clear()

    async def _drop_doomed(self, state: _LexicalState) -> None:
        with contextlib.suppress(Exception):  # a closed store took its temp tables with it
            async with state.lock:
                doomed, state.doomed = state.doomed, []
                await self._drop_tables(doomed)

    async def _drop_tables(self, names: Iterable[str]) -> None:
        """Drop retired index copies; one SQLite will not drop yet waits for the next search.

        SQLite refuses ``DROP TABLE`` (SQLITE_LOCKED, "database table is locked") while
        another statement on the connection is between its first and last row, which
        concurrent searches on the shared reader make routine. Dropping is cleanup: a
        search never fails for it, and the name goes back to the list of tables to drop.
        """
        state = self._lexical_state()
        for name in names:
            if self.db.closed:
                return
            try:
                await self.db.execute(f"DROP TABLE IF EXISTS temp.{name}_vocab")
                await self.db.execute(f"DROP TABLE IF EXISTS temp.{name}")
            except StoreError:
                state.doomed.append(name)

    async def _advance_lexical(self, state: _LexicalState, token: tuple[Any, ...]) -> None:
        """Move the caches to the store state ``token`` names: from the rows changed since, or anew.

        A write changes a few records, yet recounting which scopes hold live records and
        re-reading the vocabulary from FTS5 cost a search after every write ~25 ms at 50K
        records. Every record change (status, text, its FTS row's aliases) stamps the row
        with its ``index_version``, so the rows above the cached version are all that
        changed: their scopes join the present set, and the vocabulary is brought forward
        (:meth:`_carry_vocabulary`). Everything is read anew instead when a row was deleted
        (its words must leave), when many changed, or when the FTS index changed without a
        version (a repair).
        """
        self._set_aside(state)
        carried, state.carried = state.carried, None
        self._retire(state)
        state.token = token
        version = int(token[0])
        changed = None
        since = state.present_version if state.present is not None else None
        if since is not None and version > since:
            changed = await self.db.fetchall(
                "SELECT id, status, scope_kind, scope_id FROM records WHERE index_version > ? LIMIT ?",
                (since, _ADVANCE_MAX + 1),
            )
            if len(changed) > _ADVANCE_MAX or any(row[1] == "deleted" for row in changed):
                changed = None
        if changed is None:
            rows = await self.db.fetchall(
                "SELECT DISTINCT scope_kind, scope_id FROM records WHERE status != 'deleted'"
            )
            state.present = {(r[0], r[1]) for r in rows}
        else:
            assert state.present is not None
            state.present |= {(r[2], r[3]) for r in changed}
            if carried is not None and int(carried[0][0]) == since:
                carried_token, vocabulary = carried
                if await self._carry_vocabulary(vocabulary, carried_token, token, [r[0] for r in changed]):
                    state.carried = (token, vocabulary)
        state.present_version = version
        if state.carried is not None and await self._lexical_token() != token:
            # A commit landed between the reads above: the vocabulary may count it already, so
            # it is read anew. (The present scopes are a set: a superset is still correct.)
            state.carried = None

    async def _carry_vocabulary(
        self, vocabulary: _Vocabulary, before: tuple[Any, ...], after: tuple[Any, ...], changed: list[str]
    ) -> bool:
        """Bring ``vocabulary`` from the index state ``before`` to ``after``; False to read it anew.

        A changed record's FTS row is either new (its rowid is above the highest one of
        ``before``: rewritten rows keep theirs) or rewritten. FTS5 itself tokenizes the new
        rows in a scratch table, and its counts are added (:meth:`_Vocabulary.add`), which
        is what a fresh read would return. A rewritten row after a status change holds the
        same words; FTS5's own totals (rows and tokens per column, in its averages record)
        tell when that is so: if the totals moved by exactly the new rows', nothing else
        changed size, else the rewritten rows' terms are forgotten (an alias added to them).
        """
        rows = await self.db.fetchall(
            f"SELECT id, c0 FROM records_fts_content WHERE c0 IN ({', '.join('?' for _ in changed)})",
            changed,
        )
        highest = int(before[3] or 0)
        fresh = [rowid for rowid, _ in rows if rowid > highest]
        rewritten = [rid for rowid, rid in rows if rowid <= highest]
        added, totals = await self._fts_terms(fresh)
        old, new = _fts_averages(before[1]), _fts_averages(after[1])
        if len(old) != len(new) or len(totals) not in (0, len(old)):
            return False
        grown = [o + t for o, t in zip(old, totals or [0] * len(old), strict=True)]
        if grown != new:
            forgotten, _ = await self._fts_terms([rowid for rowid, _ in rows if rowid <= highest])
            if not rewritten:
                return False  # the totals moved with no row to account for it
            for term in forgotten:
                vocabulary.forget(term)
        for term, records in added.items():
            vocabulary.add(term, records)
        return True

    async def _fts_terms(self, rowids: Sequence[int]) -> tuple[dict[str, int], list[int]]:
        """``({term: rows holding it}, averages)`` of these FTS rows, as FTS5 tokenizes them.

        The rows are copied into a scratch FTS5 table with ``records_fts``'s definition, read
        through its vocabulary and its averages record (rows, tokens per column), and removed.
        """
        if not rowids:
            return {}, []
        using, columns = await self._fts_definition()
        await self.db.execute(f"CREATE VIRTUAL TABLE IF NOT EXISTS temp.retold_terms{using}")
        await self.db.execute(
            "CREATE VIRTUAL TABLE IF NOT EXISTS temp.retold_terms_vocab "
            "USING fts5vocab(temp, retold_terms, row)"
        )
        listed = ", ".join(columns)
        try:
            await self.db.execute(
                f"""INSERT INTO temp.retold_terms({listed}) SELECT {listed} FROM main.records_fts
                     WHERE rowid IN ({", ".join("?" for _ in rowids)})""",
                list(rowids),
            )
            terms = {
                r[0]: int(r[1])
                for r in await self.db.fetchall("SELECT term, doc FROM temp.retold_terms_vocab")
            }
            averages = _fts_averages(
                await self.db.fetchval("SELECT block FROM temp.retold_terms_data WHERE id = 1")
            )
            return terms, averages
        finally:
            await self.db.execute("DELETE FROM temp.retold_terms")

    async def _lexical_token(self) -> tuple[Any, ...]:
        """What a cached index depends on: ``records_version`` and FTS5's averages and structure.

        ``records_version`` moves with every record change; the two FTS5 records move with
        every insert into or delete from ``records_fts`` (including alias rewrites and
        repairs), in any process.
        """
        row = await self.db.fetchone(
            """SELECT (SELECT value FROM store_meta WHERE key = 'records_version'),
                      (SELECT block FROM records_fts_data WHERE id = 1),
                      (SELECT block FROM records_fts_data WHERE id = 10),
                      (SELECT max(id) FROM records_fts_content)"""
        )
        assert row is not None
        return (row[0], row[1], row[2], row[3])

    async def _cached_lexical_index(
        self, state: _LexicalState, key: tuple[Scope, ...], token: tuple[Any, ...],
        present: set[tuple[str, str]] | None,
    ) -> LexicalIndex:  # fmt: skip
        readable = state.readable.get(key)
        if readable is None:
            if present is not None:
                # Every live record lies in the searcher's scopes (FTS rows exist for live records only).
                readable = present <= {(s.kind, s.id) for s in key}
                rows, tokens = _fts_rows(token[1]), fts_tokens_total(token[1])
            else:  # the caches were dropped under this search: count instead
                readable, rows = await self._store_index_readable(key)
                tokens = await self._fts_tokens("main.records_fts") if readable else 0
            state.readable[key] = readable
            if readable and state.shared is None:
                carried = state.carried
                vocabulary = carried[1] if carried and carried[0] == token else _Vocabulary()
                state.shared = LexicalIndex(
                    "records_fts", "main", rows, shared=True, vocabulary=vocabulary, tokens=tokens
                )
        if readable:
            assert state.shared is not None
            return state.shared
        index = state.private.get(key)
        if index is not None:
            state.private.move_to_end(key)
            return index
        name = _index_name()
        state.doomed.append(name)  # dropped later unless the build completes (a cancelled search)
        index = await self._build_lexical_index(key, name)
        state.doomed.remove(name)
        state.private[key] = index
        while len(state.private) > PRIVATE_INDEXES_MAX or (
            len(state.private) > 1 and sum(i.rows for i in state.private.values()) > PRIVATE_ROWS_MAX
        ):
            _, evicted = state.private.popitem(last=False)
            state.doomed.append(evicted.name)
        return index

    async def _fresh_lexical_index(self, key: tuple[Scope, ...]) -> LexicalIndex:
        readable, rows = await self._store_index_readable(key)
        if readable:
            return LexicalIndex(
                "records_fts", "main", rows, shared=True, tokens=await self._fts_tokens("main.records_fts")
            )
        name = _index_name()
        try:
            return await self._build_lexical_index(key, name)
        except BaseException:
            with contextlib.suppress(Exception):
                await self._drop_tables([name])
            raise

    async def _store_index_readable(self, key: tuple[Scope, ...]) -> tuple[bool, int]:
        """Whether every ``records_fts`` row belongs to a record in ``key``'s scopes; its row count.

        FTS rows are written for non-deleted records only (``FTS_ROW_SQL``) and removed when
        a record is deleted or erased, so equal counts of FTS rows, non-deleted records and
        non-deleted records in the scopes mean the index holds nothing the searcher cannot read.
        """
        scope_sql, params = scope_clause(key, "r.")
        row = await self.db.fetchone(
            f"""SELECT (SELECT count(*) FROM records_fts_docsize),
                       (SELECT count(*) FROM records WHERE status != 'deleted'),
                       (SELECT count(*) FROM records r WHERE {scope_sql} AND r.status != 'deleted')""",
            params,
        )
        assert row is not None
        return row[0] == row[1] == row[2], int(row[0])

    async def _fts_definition(self) -> tuple[str, list[str]]:
        """``records_fts``'s `` USING fts5(...)`` clause and its columns, read once per store.

        A copy or scratch table made from them tokenizes exactly as the store's index does;
        the schema only changes under a migration, which happens before a store is open.
        """
        cached: tuple[str, list[str]] | None = getattr(self, "_fts_schema", None)
        if cached is None:
            ddl = str(await self.db.fetchval("SELECT sql FROM sqlite_master WHERE name = 'records_fts'"))
            columns = [r[1] for r in await self.db.fetchall("PRAGMA main.table_info(records_fts)")]
            cached = (ddl[ddl.upper().index(" USING ") :], columns)
            self._fts_schema = cached
        return cached

    async def _build_lexical_index(self, key: tuple[Scope, ...], name: str) -> LexicalIndex:
        """A ``temp`` FTS5 table with the same definition as ``records_fts`` and its readable rows.

        Rows are copied from FTS5's content table with their rowids, so every token, column
        size and BM25 input is exactly what ``records_fts`` holds for those records. On
        failure the caller drops ``name``.
        """
        using, columns = await self._fts_definition()
        scope_sql, params = scope_clause(key, "r.")
        record_id = f"c.c{columns.index('record_id')}"
        await self.db.execute(f"CREATE VIRTUAL TABLE temp.{name}{using}")
        await self.db.execute(
            f"""INSERT INTO temp.{name}(rowid, {", ".join(columns)})
                SELECT c.id, {", ".join(f"c.c{i}" for i in range(len(columns)))}
                  FROM main.records_fts_content c
                 WHERE {record_id} IN (SELECT r.id FROM records r WHERE {scope_sql})""",
            params,
        )
        rows = int(await self.db.fetchval(f"SELECT count(*) FROM temp.{name}_docsize"))
        return LexicalIndex(name, "temp", rows, shared=False, tokens=await self._fts_tokens(f"temp.{name}"))

    async def _fts_tokens(self, table: str) -> int:
        """The total length FTS5 keeps for ``table`` (its averages record: one row read by key)."""
        return fts_tokens_total(await self.db.fetchval(f"SELECT block FROM {table}_data WHERE id = 1"))
