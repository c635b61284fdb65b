"""One SQLite file behind aiosqlite: a single writer, a separate reader, and atomic transactions.

Every write runs inside :meth:`Database.transaction`, which starts with
``BEGIN IMMEDIATE`` so a writer queues (up to ``busy_timeout``) behind another
process's write instead of failing half-way, and which commits or rolls back as
one unit. Transactions are serialised inside the process by a lock, and nested
ones become savepoints. Reads outside a transaction go to a second connection,
so they never see another coroutine's uncommitted work (datasette's one-writer,
many-readers pattern).

Cancellation. aiosqlite runs each statement on the connection's own thread, in the
order it was queued; cancelling the coroutine that awaits a statement does not stop
the statement. So a transaction is finished (``COMMIT``, ``ROLLBACK``, ``RELEASE``)
by a task of its own that runs to its end whatever happens to its caller, and the
write lock passes to the next transaction only once the connection is back in
autocommit mode. A caller cancelled while its ``BEGIN IMMEDIATE`` still waits for
another process's lock gets its ``CancelledError`` at once; the rollback queued behind
that ``BEGIN`` keeps the lock until it has run. A caller cancelled during ``COMMIT``
sees the commit finish first: the write is then whole (and its
:meth:`Database.after_commit` callbacks have run) although the caller was cancelled.

All SQL retold runs passes through :meth:`Database.execute` and friends, which
accept an optional tracer: ``db.tracer = lambda sql, params: print(sql)``.

One job: statements on the one file, whole or not at all, whatever the caller's cancellation;
it is long because each way a statement can be interrupted has its own few lines.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import json
import logging
import sqlite3
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import aiosqlite

from retold.errors import StoreClosedError, StoreError
from retold.util import new_id

__all__ = ["Database", "Row", "run_to_completion", "translate_error"]

logger = logging.getLogger(__name__)

Row = sqlite3.Row
Params = Sequence[Any] | dict[str, Any]
T = TypeVar("T")


@dataclass(eq=False)
class _Frame:
    """One level of the transaction a task is inside: the outer transaction or a savepoint."""

    db: Database
    depth: int  # 0 for the outer transaction, n for savepoint ``sp<n>``
    task: asyncio.Task[Any] | None  # the only task that may use it
    on_commit: list[Callable[[], None]] = field(default_factory=list)


# The transaction (innermost savepoint) this task is inside, if any.
_current_tx: contextvars.ContextVar[_Frame | None] = contextvars.ContextVar("retold_current_tx", default=None)


async def run_to_completion(
    work: Awaitable[T], *, on_cancel: Callable[[], Awaitable[object]] | None = None
) -> T:
    """Await ``work`` to its end even if the caller is cancelled meanwhile, then re-raise that.

    The work runs in a task of its own, so a cancellation reaches only this wait, never the
    statement; every further cancellation while it runs is absorbed into the one raised after.
    ``on_cancel`` (awaited once, at the first cancellation) asks the work to end sooner, e.g. a
    server-side cancel of a statement waiting on a lock; its own failure is ignored.
    """
    task = asyncio.ensure_future(work)
    interrupted: asyncio.CancelledError | None = None
    while not task.done():
        try:
            await asyncio.wait((task,))
        except asyncio.CancelledError as exc:
            first = interrupted is None
            interrupted = exc
            if first and on_cancel is not None and not task.done():
                try:
                    await asyncio.shield(asyncio.ensure_future(on_cancel()))
                except asyncio.CancelledError:
                    pass
                except Exception:  # the work still ends, at its own pace
                    logger.warning("asking a cancelled statement to stop failed", exc_info=True)
    if interrupted is not None:
        failure = None if task.cancelled() else task.exception()
        if failure is not None:
            raise interrupted from failure
        raise interrupted
    return task.result()


class Database:
    """Async access to one SQLite file. Create with ``await Database.open(path)``."""

    dialect = "sqlite"

    def __init__(self, path: str, busy_timeout_s: float) -> None:
        self.path = path
        self.busy_timeout_s = busy_timeout_s
        self.tracer: Callable[[str, Params | None], None] | None = None
        self._writer: aiosqlite.Connection | None = None
        self._reader: aiosqlite.Connection | None = None
        self._write_lock = asyncio.Lock()
        # Rollbacks still finishing for callers cancelled during BEGIN (they hold the lock), and
        # reader id tables being emptied (temp_ids): close() waits for both.
        self._finishing: set[asyncio.Task[None]] = set()
        # Emptied temporary id tables, per connection, for temp_ids to reuse.
        self._temp_tables: dict[int, list[str]] = {}
        self._reader_tables: set[str] = set()  # created on the reader (it never rolls one back)
        self._closed = False

    @classmethod
    async def open(cls, path: str | Path, *, busy_timeout_s: float = 30.0) -> Database:
        db = cls(str(path), busy_timeout_s)
        try:
            db._writer = await db._connect()
            await db._writer.execute_fetchall("PRAGMA journal_mode = WAL")
            if db.path != ":memory:":
                db._reader = await db._connect()
        except sqlite3.Error as exc:
            await db.close()
            raise StoreError(f"cannot open SQLite store {db.path!r}: {exc}") from exc
        return db

    async def _connect(self) -> aiosqlite.Connection:
        conn = await aiosqlite.connect(self.path, isolation_level=None, timeout=self.busy_timeout_s)
        conn.row_factory = sqlite3.Row
        # Every statement's cursor is drained and closed: an unfinished statement keeps its
        # lock on the file, and a second connection would then wait out the busy timeout.
        try:
            for pragma in (
                f"PRAGMA busy_timeout = {int(self.busy_timeout_s * 1000)}",
                "PRAGMA foreign_keys = ON",
                "PRAGMA synchronous = NORMAL",
                "PRAGMA secure_delete = ON",
                # Id sets for joins live in temporary tables; keep them off the disk.
                "PRAGMA temp_store = MEMORY",
                # Up to 64 MB of pages per connection (SQLite's default is 2 MB): a 50K-record
                # store's FTS and index pages stay in memory between searches.
                "PRAGMA cache_size = -65536",
            ):
                await conn.execute_fetchall(pragma)
        except BaseException:
            # Not a database, or unreadable: close it here, or its (non-daemon) connection
            # thread keeps the process alive after the error is reported.
            await conn.close()
            raise
        return conn

    @property
    def closed(self) -> bool:
        return self._closed

    def _check_open(self) -> None:
        if self._closed or self._writer is None:
            raise StoreClosedError(f"store {self.path!r} has been closed")

    def _frame(self) -> _Frame | None:
        """The transaction level this task is in, or None outside one.

        Tasks created inside a transaction inherit the context variable but not the
        transaction: sharing one would interleave their statements and savepoints, so
        such a task is refused rather than silently given the writer.
        """
        current = _current_tx.get()
        if current is None or current.db is not self:
            return None
        if current.task is not asyncio.current_task():
            raise StoreError(
                "a task started inside a store transaction tried to use it; run the writes in the "
                "transaction's own task (await them in sequence) or give the task its own transaction "
                "after the outer one commits"
            )
        return current

    def _conn(self) -> aiosqlite.Connection:
        """The transaction's connection inside one, else the reader."""
        self._check_open()
        if self._frame() is not None:
            assert self._writer is not None
            return self._writer
        return self._reader or self._writer  # type: ignore[return-value]

    @property
    def in_transaction(self) -> bool:
        return self._frame() is not None

    def after_commit(self, callback: Callable[[], None]) -> None:
        """Run ``callback`` once the enclosing transaction commits; drop it if it rolls back.

        For in-process state that mirrors a write (vector index rows, caches of erased
        text): the callback runs as soon as ``COMMIT`` succeeds, even when the caller was
        cancelled meanwhile and never reaches the code after its ``async with``. Inside a
        savepoint it waits for the outer commit. Callbacks must be quick and must not raise;
        one that raises is logged and the others still run.
        """
        frame = self._frame()
        if frame is None:
            raise StoreError("after_commit needs an open transaction: call it inside store.transaction()")
        frame.on_commit.append(callback)

    @asynccontextmanager
    async def transaction(self) -> AsyncIterator[None]:
        """Commit everything inside as one unit, or nothing if it raises or is cancelled.

        Nested use becomes a savepoint, so a helper that needs atomicity can open a
        transaction whether or not its caller already did. Cancellation at any await
        leaves the connection out of the transaction (see the module docstring).
        """
        self._check_open()
        outer = self._frame()
        if outer is not None:
            async with self._savepoint(outer):
                yield
            return

        await self._write_lock.acquire()
        # From here the lock is released by _finish alone, once the connection is idle again.
        frame = _Frame(self, 0, asyncio.current_task())
        token = _current_tx.set(frame)
        try:
            try:
                await self._begin()
            except asyncio.CancelledError:
                # BEGIN may still be waiting for another process's lock on the connection's
                # thread: leave now, and let the rollback queued behind it release the lock.
                self._finish_later(frame)
                raise
            except BaseException:
                await run_to_completion(self._finish(frame, commit=False))
                raise
            try:
                yield
            except BaseException:
                await run_to_completion(self._finish(frame, commit=False))
                raise
            await run_to_completion(self._finish(frame, commit=True))
        finally:
            _current_tx.reset(token)

    async def _begin(self) -> None:
        self._check_open()  # closed while this task waited for the lock
        writer = self._writer
        assert writer is not None
        if writer.in_transaction:
            # Nothing acknowledged is in a transaction left open (a commit returns only once it
            # succeeded), so whatever an earlier failure left behind is discarded, not wedged on.
            logger.warning("the writer of %s was left inside a transaction; rolling it back", self.path)
            await self._rollback(writer)
        await self._on_writer("BEGIN IMMEDIATE")

    async def _finish(self, frame: _Frame, *, commit: bool) -> None:
        """COMMIT or ROLLBACK, run the commit callbacks, then hand the write lock on.

        Runs as a task of its own (see :func:`run_to_completion`). A failed COMMIT leaves the
        transaction open in SQLite, so it is rolled back before the error is raised.
        """
        committed = False
        try:
            writer = self._writer
            if writer is None:  # closed mid-transaction: the connection took the transaction with it
                return
            if commit:
                try:
                    await self._on_writer("COMMIT")
                    committed = True
                finally:
                    if not committed:
                        await self._rollback(writer)
            else:
                await self._rollback(writer)
        finally:
            self._write_lock.release()
        if committed:
            for callback in frame.on_commit:
                try:
                    callback()
                except Exception:
                    logger.exception("an after-commit callback failed on %s", self.path)

    async def _rollback(self, writer: aiosqlite.Connection) -> None:
        """Roll back whatever is open on the writer; a no-op when nothing is (queued after any
        statement still running, so it also catches a cancelled BEGIN that succeeds later)."""
        if self.tracer is not None:
            self.tracer("ROLLBACK", None)
        try:
            await writer.rollback()
        except ValueError:  # aiosqlite: the connection was closed meanwhile
            pass
        except sqlite3.Error as exc:
            raise translate_error(exc, "ROLLBACK") from exc

    def _finish_later(self, frame: _Frame) -> None:
        """Roll back in the background after a cancelled BEGIN; close() waits for it."""
        task = asyncio.get_running_loop().create_task(
            self._finish(frame, commit=False), context=contextvars.Context()
        )
        self._finishing.add(task)
        task.add_done_callback(self._finished)

    def _finished(self, task: asyncio.Task[None]) -> None:
        self._finishing.discard(task)
        if not task.cancelled() and task.exception() is not None:
            failure = task.exception()
            logger.error("rolling back a cancelled transaction on %s failed", self.path, exc_info=failure)

    @asynccontextmanager
    async def _savepoint(self, outer: _Frame) -> AsyncIterator[None]:
        """A nested transaction; its release and rollback run to their end even if cancelled.

        A cancellation that interrupts the savepoint reaches the outer transaction, which
        then rolls back everything, so a savepoint never outlives its failure half-done.
        """
        frame = _Frame(self, outer.depth + 1, outer.task)
        name = f"sp{frame.depth}"
        await self._on_writer(f"SAVEPOINT {name}")
        token = _current_tx.set(frame)
        try:
            try:
                yield
            except BaseException:
                await run_to_completion(self._on_writer(f"ROLLBACK TO {name}", f"RELEASE {name}"))
                raise
            await run_to_completion(self._on_writer(f"RELEASE {name}"))
            outer.on_commit.extend(frame.on_commit)
        finally:
            _current_tx.reset(token)

    async def _on_writer(self, *statements: str) -> None:
        """Transaction-control statements on the writer, each run to completion, in order."""
        writer = self._writer
        if writer is None or self._closed:
            raise StoreClosedError(f"store {self.path!r} has been closed")
        for sql in statements:
            if self.tracer is not None:
                self.tracer(sql, None)
            try:
                await writer.execute_fetchall(sql)
            except sqlite3.Error as exc:
                raise translate_error(exc, sql) from exc

    async def execute(self, sql: str, params: Params | None = None) -> int:
        """Run one statement to completion and return the number of rows it changed."""
        cursor = await self._cursor(sql, params)
        try:
            return cursor.rowcount
        finally:
            await cursor.close()

    async def _cursor(self, sql: str, params: Params | None) -> aiosqlite.Cursor:
        conn = self._conn()
        if self.tracer is not None:
            self.tracer(sql, params)
        try:
            return await conn.execute(sql, params or ())
        except sqlite3.Error as exc:
            raise translate_error(exc, sql) from exc

    async def execute_atomic(self, sql: str, params: Params | None = None) -> int:
        """One statement as its own transaction: two thread hops instead of six.

        SQLite runs a lone statement in autocommit mode atomically, taking the write lock
        (under ``busy_timeout``) as ``BEGIN IMMEDIATE`` would. The write lock is still held so
        the statement cannot land inside another task's open transaction on the writer. Inside
        a transaction it simply joins it.
        """
        if self._frame() is not None:
            return await self.execute(sql, params)
        async with self._write_lock:
            # Cancelled, the statement still runs to its end in autocommit mode, before
            # anything the next lock holder queues: it never leaves a transaction open.
            token = _current_tx.set(_Frame(self, 0, asyncio.current_task()))
            try:
                return await self.execute(sql, params)
            finally:
                _current_tx.reset(token)

    async def executemany(self, sql: str, rows: Iterable[Params]) -> None:
        conn = self._conn()
        if self.tracer is not None:
            self.tracer(sql, None)
        try:
            await conn.executemany(sql, rows)
        except sqlite3.Error as exc:
            raise translate_error(exc, sql) from exc

    async def fetchall(self, sql: str, params: Params | None = None) -> list[sqlite3.Row]:
        """Every row, from one trip to the connection's thread (execute, fetch and close).

        A search reads a dozen small results; three thread hops each (execute, fetch, close)
        cost more than the queries themselves.
        """
        conn = self._conn()
        if self.tracer is not None:
            self.tracer(sql, params)
        try:
            return list(await conn.execute_fetchall(sql, params or ()))
        except sqlite3.Error as exc:
            raise translate_error(exc, sql) from exc

    async def fetchone(self, sql: str, params: Params | None = None) -> sqlite3.Row | None:
        """The first row; the rest are drained so the statement runs to completion (RETURNING)."""
        rows = await self.fetchall(sql, params)
        return rows[0] if rows else None

    async def fetch_column(self, sql: str, params: Params | None = None) -> list[Any]:
        """The first column of every row, fetched without building ``sqlite3.Row`` objects.

        Large id lists (the hard filter at 50K records) spend more time building rows than
        reading them; plain tuples are about twice as fast.
        """
        cursor = await self._cursor(sql, params)
        try:
            cursor.row_factory = None
            return [row[0] for row in await cursor.fetchall()]
        finally:
            await cursor.close()

    async def fetchval(self, sql: str, params: Params | None = None) -> Any:
        row = await self.fetchone(sql, params)
        return None if row is None else row[0]

    @asynccontextmanager
    async def temp_ids(self, ids: Iterable[str]) -> AsyncIterator[str]:
        """Load an id set into a temporary table of its own and yield the table's name.

        A join against it replaces ``IN (?, ?, ...)``, which would run out of bound
        parameters for a large eligible set. The table lives on the connection the
        caller is using, so use it within the same transaction (or outside any).

        Tables are emptied and pooled per connection, never dropped: SQLite refuses
        ``DROP TABLE`` (SQLITE_LOCKED) while any other statement on the connection is
        still reading, which concurrent searches on the shared reader always risk, and
        each drop would also invalidate every cached statement.

        A search loads five or so sets, each once a thread hop of its own cost more than the
        query it serves, so the ids go in as one JSON array (one statement, not one per id),
        and on the reader (no transactions there) a pooled table is created once and emptied
        after the caller is done, off its path: it returns to the pool when the ``DELETE``
        has run. On the writer a rolled-back transaction takes a table it created, and its
        ``DELETE`` too, so there both run each time and the caller waits for them.
        """
        conn = self._conn()
        pool = self._temp_tables.setdefault(id(conn), [])
        name = pool.pop() if pool else "temp.ids_" + new_id().replace("-", "")
        reader = self._reader is not None and conn is self._reader
        try:
            # Inside the try: a cancelled statement still runs on the connection's thread, and
            # the DELETE queued behind it is what empties the table then. IF NOT EXISTS: a rolled
            # back transaction takes a table it created with it.
            if not (reader and name in self._reader_tables):
                await self._on(conn, f"CREATE TABLE IF NOT EXISTS {name} (id TEXT PRIMARY KEY)")
                if reader:
                    self._reader_tables.add(name)
            fill = f"INSERT OR IGNORE INTO {name}(id) SELECT value FROM json_each(?)"
            await self._on(conn, fill, [(json.dumps(list(ids)),)])
            yield name
        finally:
            if not self._closed:
                if reader:
                    self._empty_later(conn, name, pool)
                else:  # pooled only once emptied; a failed or interrupted DELETE leaves it unused
                    await run_to_completion(self._on(conn, f"DELETE FROM {name}"))
                    pool.append(name)

    def _empty_later(self, conn: aiosqlite.Connection, name: str, pool: list[str]) -> None:
        """Empty a reader's id table in the background; it is pooled again once empty."""

        async def empty() -> None:
            await self._on(conn, f"DELETE FROM {name}")
            pool.append(name)

        task = asyncio.get_running_loop().create_task(empty(), context=contextvars.Context())
        self._finishing.add(task)
        task.add_done_callback(self._emptied)

    def _emptied(self, task: asyncio.Task[None]) -> None:
        self._finishing.discard(task)
        if not task.cancelled() and task.exception() is not None:  # the table stays out of the pool
            logger.error("emptying a temporary id table on %s failed", self.path, exc_info=task.exception())

    async def _on(self, conn: aiosqlite.Connection, sql: str, rows: Iterable[Params] | None = None) -> None:
        """One statement (or one per row) on a given connection, run to its end."""
        self._check_open()
        if self.tracer is not None:
            self.tracer(sql, None)
        try:
            if rows is None:
                await conn.execute_fetchall(sql)
            else:
                await conn.executemany(sql, rows)
        except sqlite3.Error as exc:
            raise translate_error(exc, sql) from exc

    async def checkpoint(self) -> None:
        await self.execute("PRAGMA wal_checkpoint(TRUNCATE)")

    async def close(self) -> None:
        """Close both connections; safe to call more than once."""
        if self._closed:
            return
        if self._finishing:  # a cancelled transaction's rollback: let it release the connection first
            await run_to_completion(asyncio.gather(*self._finishing, return_exceptions=True))
        self._closed = True
        for conn in (self._reader, self._writer):
            if conn is not None:
                with contextlib.suppress(sqlite3.Error, ValueError):
                    await conn.close()
        self._reader = self._writer = None
        self._temp_tables.clear()


def translate_error(exc: sqlite3.Error, sql: str) -> StoreError:
    """A sqlite3 error as a :class:`StoreError` naming the statement (and the busy timeout, if locked)."""
    first = " ".join(sql.split())[:120]
    if isinstance(exc, sqlite3.OperationalError) and "locked" in str(exc):
        return StoreError(
            f"the store is locked by another writer and the busy timeout ran out ({exc}); "
            "raise store.busy_timeout_seconds or retry"
        )
    return StoreError(f"SQLite error: {exc} (while running: {first})")
