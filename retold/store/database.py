"""One SQLite file behind aiosqlite: a single writer, a separate reader, and atomic transactions.

Every write runs inside :meth:`Database.transaction`, which starts with
``BEGIN IMMEDIATE`` so a writer queues (up to ``busy_timeout``) behind another
process's write instead of failing half-way, and which commits or rolls back as
one unit. Transactions are serialised inside the process by a lock, and nested
ones become savepoints. Reads outside a transaction go to a second connection,
so they never see another coroutine's uncommitted work (datasette's one-writer,
many-readers pattern).

All SQL retold runs passes through :meth:`Database.execute` and friends, which
accept an optional tracer: ``db.tracer = lambda sql, params: print(sql)``.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import sqlite3
from collections.abc import AsyncIterator, Callable, Iterable, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import aiosqlite

from retold.errors import StoreClosedError, StoreError
from retold.util import new_id

__all__ = ["Database", "Row", "translate_error"]

Row = sqlite3.Row
Params = Sequence[Any] | dict[str, Any]

# The transaction this task is inside, if any: (database, savepoint depth, owning task).
_current_tx: contextvars.ContextVar[tuple[Database, int, asyncio.Task[Any] | None] | None] = (
    contextvars.ContextVar("retold_current_tx", default=None)
)


class Database:
    """Async access to one SQLite file. Create with ``await Database.open(path)``."""

    def __init__(self, path: str, busy_timeout_s: float) -> None:
        self.path = path
        self.busy_timeout_s = busy_timeout_s
        self.tracer: Callable[[str, Params | None], None] | None = None
        self._writer: aiosqlite.Connection | None = None
        self._reader: aiosqlite.Connection | None = None
        self._write_lock = asyncio.Lock()
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

    def _tx_depth(self) -> int | None:
        """Savepoint depth of the transaction this task is in, or None outside one.

        Tasks created inside a transaction inherit the context variable but not the
        transaction: sharing one would interleave their statements and savepoints, so
        such a task is refused rather than silently given the writer.
        """
        current = _current_tx.get()
        if current is None or current[0] is not self:
            return None
        if current[2] is not asyncio.current_task():
            raise StoreError(
                "a task started inside a store transaction tried to use it; run the writes in the "
                "transaction's own task (await them in sequence) or give the task its own transaction "
                "after the outer one commits"
            )
        return current[1]

    def _conn(self) -> aiosqlite.Connection:
        """The transaction's connection inside one, else the reader."""
        self._check_open()
        if self._tx_depth() is not None:
            assert self._writer is not None
            return self._writer
        return self._reader or self._writer  # type: ignore[return-value]

    @property
    def in_transaction(self) -> bool:
        return self._tx_depth() is not None

    @asynccontextmanager
    async def transaction(self) -> AsyncIterator[None]:
        """Commit everything inside as one unit, or nothing if it raises.

        Nested use becomes a savepoint, so a helper that needs atomicity can open a
        transaction whether or not its caller already did.
        """
        self._check_open()
        outer = self._tx_depth()
        task = asyncio.current_task()
        if outer is not None:
            depth = outer + 1
            name = f"sp{depth}"
            await self.execute(f"SAVEPOINT {name}")
            token = _current_tx.set((self, depth, task))
            try:
                yield
            except BaseException:
                await self.execute(f"ROLLBACK TO {name}")
                await self.execute(f"RELEASE {name}")
                raise
            else:
                await self.execute(f"RELEASE {name}")
            finally:
                _current_tx.reset(token)
            return

        async with self._write_lock:
            token = _current_tx.set((self, 0, task))
            try:
                await self.execute("BEGIN IMMEDIATE")
                try:
                    yield
                except BaseException:
                    if self._writer is not None:  # closed mid-transaction: nothing left to roll back
                        await self._writer.rollback()
                    raise
                else:
                    await self.execute("COMMIT")
            finally:
                _current_tx.reset(token)

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
        if self._tx_depth() is not None:
            return await self.execute(sql, params)
        async with self._write_lock:
            token = _current_tx.set((self, 0, asyncio.current_task()))
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
        """Load an id set into a uniquely named temporary table and yield its name.

        A join against it replaces ``IN (?, ?, ...)``, which would run out of bound
        parameters for a large eligible set. The table lives on the connection the
        caller is using, so use it within the same transaction (or outside any).
        """
        name = "temp.ids_" + new_id().replace("-", "")
        await self.execute(f"CREATE TABLE {name} (id TEXT PRIMARY KEY)")
        try:
            await self.executemany(f"INSERT OR IGNORE INTO {name}(id) VALUES (?)", ((i,) for i in ids))
            yield name
        finally:
            if not self._closed:
                await self.execute(f"DROP TABLE IF EXISTS {name}")

    async def checkpoint(self) -> None:
        await self.execute("PRAGMA wal_checkpoint(TRUNCATE)")

    async def close(self) -> None:
        """Close both connections; safe to call more than once."""
        if self._closed:
            return
        self._closed = True
        for conn in (self._reader, self._writer):
            if conn is not None:
                with contextlib.suppress(sqlite3.Error, ValueError):
                    await conn.close()
        self._reader = self._writer = None


def translate_error(exc: sqlite3.Error, sql: str) -> StoreError:
    """A sqlite3 error as a :class:`StoreError` naming the statement (and the busy timeout, if locked)."""
    first = " ".join(sql.split())[:120]
    if isinstance(exc, sqlite3.OperationalError) and "locked" in str(exc):
        return StoreError(
            f"the store is locked by another writer and the busy timeout ran out ({exc}); "
            "raise store.busy_timeout_seconds or retry"
        )
    return StoreError(f"SQLite error: {exc} (while running: {first})")
