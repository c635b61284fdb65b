"""A PostgreSQL server behind psycopg 3's async pool, with SQLite's :class:`Database` contract.

The store's code runs unchanged on either backend because this class keeps every promise
:class:`retold.store.database.Database` makes:

* **One writer at a time.** Every write transaction takes a transaction-scoped advisory lock
  (:data:`WRITE_LOCK`) right after ``BEGIN``, so writers queue across processes and hosts as
  SQLite's ``BEGIN IMMEDIATE`` makes them queue on one file, and the write path's decisions
  (dedup, supersession, reinforcement, idempotency keys, extraction claims) see the state
  they decide on. ``lock_timeout`` plays ``busy_timeout``'s part. Inside the process an
  asyncio lock keeps waiting writers to one pooled connection.
* **Reads outside a transaction** run in autocommit mode on any pooled connection, so they
  never see another task's uncommitted work; inside one they use the transaction's.
* **Atomic, nested and cancellable.** Nested transactions are savepoints; ``COMMIT``,
  ``ROLLBACK`` and ``RELEASE`` run to their end whatever happens to the caller
  (:func:`~retold.store.database.run_to_completion`), and a connection whose statement was
  interrupted is rolled back, or closed if it cannot be, before it returns to the pool.
* **The same SQL.** Statements are written in the dialect both engines share and translated
  once (:mod:`retold.store.postgres.dialect`); rows answer to both ``row[0]`` and
  ``row["name"]`` like ``sqlite3.Row``.

Temporary id tables (:meth:`PgDatabase.temp_ids`) live on one connection, so outside a
transaction the block pins a pooled connection to the task for as long as it lasts.

One job: :class:`PgDatabase`, the :class:`~retold.store.database.Database` contract on
PostgreSQL; it is long because each promise above (the writer lock, savepoints, commits
that survive cancellation, pinned temporary tables) needs its own care on a pool.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

from retold.errors import StoreClosedError, StoreError
from retold.store.database import Params, run_to_completion
from retold.store.postgres.dialect import translate
from retold.util import new_id

__all__ = ["WRITE_LOCK", "PgDatabase", "PgRow", "redact_url"]

logger = logging.getLogger(__name__)

WRITE_LOCK = 0x7265746F6C64  # "retold": the advisory lock every write transaction holds
"""Key of the transaction-scoped advisory lock that serialises writers across processes."""


class PgRow:
    """A result row addressed by position or by column name, like ``sqlite3.Row``."""

    __slots__ = ("_index", "_values")

    def __init__(self, values: Sequence[Any], index: dict[str, int]) -> None:
        self._values = tuple(values)
        self._index = index

    def __getitem__(self, key: Any) -> Any:
        if isinstance(key, str):
            try:
                return self._values[self._index[key]]
            except KeyError:
                raise IndexError(f"no such column: {key}") from None
        return self._values[key]

    def __iter__(self) -> Any:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, PgRow) and self._values == other._values and self._index == other._index

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"PgRow({dict(zip(self._index, self._values, strict=False))!r})"

    def keys(self) -> list[str]:
        return list(self._index)


def _row_factory(cursor: Any) -> Callable[[Sequence[Any]], PgRow]:
    description = cursor.description or ()
    index = {column.name: i for i, column in enumerate(description)}
    return lambda values: PgRow(values, index)


@dataclass(eq=False)
class _Frame:
    """One level of a task's transaction on one pooled connection (0: outer, n: savepoint n)."""

    db: PgDatabase
    depth: int
    task: asyncio.Task[Any] | None
    conn: Any  # psycopg.AsyncConnection
    pinned: bool = False  # a connection held for temp tables outside any transaction
    on_commit: list[Callable[[], None]] = field(default_factory=list)
    before_commit: dict[str, Callable[[], Awaitable[None]]] = field(default_factory=dict)


_current: contextvars.ContextVar[_Frame | None] = contextvars.ContextVar("retold_pg_tx", default=None)


def redact_url(url: str) -> str:
    """The URL with any password replaced, for messages and ``store.path``."""
    try:
        from psycopg.conninfo import conninfo_to_dict, make_conninfo

        params = conninfo_to_dict(url)
    except Exception:
        return "postgresql://…"
    if "password" not in params:
        return url
    params["password"] = "***"
    return make_conninfo(**params)


async def _probe(url: str, shown: str, timeout_s: float) -> None:
    """One connection before the pool: a server's refusal fails at once, in one line.

    The pool retries a failed connection until its timeout, logging each attempt, then
    reports only that it timed out. A database that does not exist, a wrong password or
    an unreachable host is the server's answer, and the caller should get it as it is
    (retold never creates a database).
    """
    import psycopg

    try:
        conn = await psycopg.AsyncConnection.connect(url, connect_timeout=max(1, round(timeout_s)))
    except psycopg.Error as exc:
        reason = " ".join(str(exc).split()) or type(exc).__name__
        raise StoreError(f"cannot open PostgreSQL store {shown}: {reason}") from exc
    await conn.close()


class PgDatabase:
    """Async access to one PostgreSQL database. Create with ``await PgDatabase.open(url)``."""

    dialect = "postgresql"

    def __init__(self, url: str, pool: Any, busy_timeout_s: float) -> None:
        self.url = url
        self.path = redact_url(url)
        self.busy_timeout_s = busy_timeout_s
        self.tracer: Callable[[str, Params | None], None] | None = None
        self._pool = pool
        self._write_lock = asyncio.Lock()
        self._closed = False

    @classmethod
    async def open(
        cls, url: str, *, busy_timeout_s: float = 30.0, pool_min: int = 1, pool_max: int = 10
    ) -> PgDatabase:
        try:
            from psycopg_pool import AsyncConnectionPool
        except ImportError as exc:  # pragma: no cover - the extra is part of the test install
            raise StoreError(
                "the PostgreSQL backend needs retold's postgres extra: pip install 'retold[postgres]'"
            ) from exc

        async def configure(conn: Any) -> None:
            await conn.set_autocommit(True)
            conn.row_factory = _row_factory

        pool = AsyncConnectionPool(
            url,
            min_size=max(1, pool_min),
            max_size=max(pool_min, pool_max, 2),
            timeout=busy_timeout_s,
            configure=configure,
            open=False,
            name="retold",
        )
        db = cls(url, pool, busy_timeout_s)
        await _probe(url, db.path, busy_timeout_s)
        try:
            await pool.open(wait=True, timeout=busy_timeout_s)
        except Exception as exc:
            await pool.close()
            raise StoreError(f"cannot open PostgreSQL store {db.path}: {exc}") from exc
        return db

    @property
    def closed(self) -> bool:
        return self._closed

    def _check_open(self) -> None:
        if self._closed:
            raise StoreClosedError(f"store {self.path} has been closed")

    def _frame(self) -> _Frame | None:
        current = _current.get()
        if current is None or current.db is not self:
            return None
        if current.task is not asyncio.current_task():
            if current.pinned:  # a task started inside a temp_ids block: it reads on its own
                return None
            raise StoreError(
                "a task started inside a store transaction tried to use it; run the writes in the "
                "transaction's own task (await them in sequence) or give the task its own transaction "
                "after the outer one commits"
            )
        return current

    @property
    def in_transaction(self) -> bool:
        frame = self._frame()
        return frame is not None and not frame.pinned

    def after_commit(self, callback: Callable[[], None]) -> None:
        frame = self._frame()
        if frame is None or frame.pinned:
            raise StoreError("after_commit needs an open transaction: call it inside store.transaction()")
        frame.on_commit.append(callback)

    def before_commit(self, key: str, work: Callable[[], Awaitable[None]]) -> None:
        """Run ``work`` inside the enclosing transaction just before it commits (once per ``key``).

        For derived rows written in Python at the end of a write (the lexical index's tokens):
        they commit with the write or not at all.
        """
        frame = self._frame()
        if frame is None or frame.pinned:
            raise StoreError("before_commit needs an open transaction: call it inside store.transaction()")
        frame.before_commit.setdefault(key, work)

    # --- transactions ------------------------------------------------------------------------

    @asynccontextmanager
    async def transaction(self) -> AsyncIterator[None]:
        """Commit everything inside as one unit, or nothing if it raises or is cancelled."""
        self._check_open()
        outer = self._frame()
        if outer is not None and not outer.pinned:
            async with self._savepoint(outer):
                yield
            return
        if outer is not None:
            raise StoreError("a store transaction cannot start inside a temp_ids block; open it first")

        await self._write_lock.acquire()
        try:
            conn = await self._pool.getconn()
        except BaseException as exc:
            self._write_lock.release()
            if isinstance(exc, asyncio.CancelledError):
                raise
            raise StoreError(f"no PostgreSQL connection for {self.path}: {exc}") from exc
        frame = _Frame(self, 0, asyncio.current_task(), conn)
        token = _current.set(frame)
        try:
            try:
                # A writer cancelled while it queues for the write lock stops queueing at once
                # (a server-side cancel) instead of holding its caller until lock_timeout.
                await run_to_completion(self._begin(conn), on_cancel=conn.cancel_safe)
            except BaseException:
                await run_to_completion(self._finish(frame, commit=False))
                raise
            try:
                yield
                while frame.before_commit:
                    _, work = frame.before_commit.popitem()
                    await work()
            except BaseException:
                await run_to_completion(self._finish(frame, commit=False))
                raise
            await run_to_completion(self._finish(frame, commit=True))
        finally:
            _current.reset(token)

    async def _begin(self, conn: Any) -> None:
        self._check_open()
        timeout_ms = max(1, int(self.busy_timeout_s * 1000))
        for sql in (
            "BEGIN",
            f"SET LOCAL lock_timeout = {timeout_ms}",
            f"SELECT pg_advisory_xact_lock({WRITE_LOCK})",
        ):
            await self._run(conn, sql, None)

    async def _finish(self, frame: _Frame, *, commit: bool) -> None:
        """COMMIT or ROLLBACK, hand the connection back, run the commit callbacks, unlock."""
        committed = False
        conn = frame.conn
        try:
            if commit:
                try:
                    await self._run(conn, "COMMIT", None)
                    committed = True
                finally:
                    if not committed:
                        await self._rollback(conn)
            else:
                await self._rollback(conn)
        finally:
            try:
                await self._pool.putconn(conn)
            finally:
                self._write_lock.release()
        if committed:
            for callback in frame.on_commit:
                try:
                    callback()
                except Exception:
                    logger.exception("an after-commit callback failed on %s", self.path)

    async def _rollback(self, conn: Any) -> None:
        """Roll back whatever is open; close a connection that cannot even do that."""
        if conn.closed:
            return
        if self.tracer is not None:
            self.tracer("ROLLBACK", None)
        try:
            await conn.execute("ROLLBACK")
        except Exception:
            logger.warning("rolling back on %s failed; closing the connection", self.path, exc_info=True)
            await conn.close()

    @asynccontextmanager
    async def _savepoint(self, outer: _Frame) -> AsyncIterator[None]:
        frame = _Frame(self, outer.depth + 1, outer.task, outer.conn)
        name = f"sp{frame.depth}"
        await run_to_completion(self._run(outer.conn, f"SAVEPOINT {name}", None))
        token = _current.set(frame)
        try:
            try:
                yield
            except BaseException:
                await run_to_completion(self._control(outer.conn, f"ROLLBACK TO {name}", f"RELEASE {name}"))
                raise
            await run_to_completion(self._run(outer.conn, f"RELEASE {name}", None))
            outer.on_commit.extend(frame.on_commit)
            for key, work in frame.before_commit.items():
                outer.before_commit.setdefault(key, work)
        finally:
            _current.reset(token)

    async def _control(self, conn: Any, *statements: str) -> None:
        for sql in statements:
            await self._run(conn, sql, None)

    # --- statements --------------------------------------------------------------------------

    async def _run(
        self, conn: Any, sql: str, params: Params | None, *, rows: bool = False, raw: bool = False
    ) -> Any:
        """Run one statement on ``conn``: its rows (``rows=True``) or its rowcount."""
        self._check_open()
        if self.tracer is not None:
            self.tracer(sql, params)
        text = sql if raw else translate(sql)
        try:
            cursor = conn.cursor()
            async with cursor:
                await cursor.execute(text, _params(params) if not raw else None)
                if rows:
                    return await cursor.fetchall() if cursor.description is not None else []
                return cursor.rowcount
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            raise translate_error(exc, sql, self.busy_timeout_s) from exc

    @asynccontextmanager
    async def _connection(self) -> AsyncIterator[Any]:
        """The transaction's (or pinned) connection, else a pooled one in autocommit mode."""
        self._check_open()
        frame = self._frame()
        if frame is not None:
            yield frame.conn
            return
        try:
            async with self._pool.connection() as conn:
                yield conn
        except (asyncio.CancelledError, StoreError):
            raise
        except Exception as exc:
            raise translate_error(exc, "(connection)", self.busy_timeout_s) from exc

    async def execute(self, sql: str, params: Params | None = None) -> int:
        async with self._connection() as conn:
            return int(await self._run(conn, sql, params))

    async def execute_atomic(self, sql: str, params: Params | None = None) -> int:
        """One statement as its own transaction (it joins an open one)."""
        if self.in_transaction:
            return await self.execute(sql, params)
        async with self.transaction():
            return await self.execute(sql, params)

    async def executemany(self, sql: str, rows: Iterable[Params]) -> None:
        batch = [_params(r) for r in rows]
        if not batch:
            return
        if self.tracer is not None:
            self.tracer(sql, None)
        async with self._connection() as conn:
            try:
                async with conn.cursor() as cursor:
                    await cursor.executemany(translate(sql), batch)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                raise translate_error(exc, sql, self.busy_timeout_s) from exc

    async def copy_rows(self, table: str, columns: Sequence[str], rows: Iterable[Sequence[Any]]) -> None:
        """Append rows with ``COPY … FROM STDIN``: many times faster than inserting each."""
        if not all(c.replace("_", "").isalnum() for c in (table, *columns)):
            raise StoreError(f"not a table or column name in {table}({', '.join(columns)})")
        sql = f"COPY {table} ({', '.join(columns)}) FROM STDIN"
        if self.tracer is not None:
            self.tracer(sql, None)
        async with self._connection() as conn:
            try:
                async with conn.cursor() as cursor, cursor.copy(sql) as copy:
                    for row in rows:
                        await copy.write_row(row)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                raise translate_error(exc, sql, self.busy_timeout_s) from exc

    async def fetchall(self, sql: str, params: Params | None = None) -> list[PgRow]:
        async with self._connection() as conn:
            return list(await self._run(conn, sql, params, rows=True))

    async def fetchall_with(
        self, settings: dict[str, str], sql: str, params: Params | None = None
    ) -> list[PgRow]:
        """A read under transaction-local settings (``SET LOCAL``: pgvector's scan knobs)."""
        async with self._connection() as conn:
            try:
                async with conn.transaction():  # a savepoint inside an open transaction
                    for name, value in settings.items():
                        await self._run(conn, "SELECT set_config(?, ?, true)", (name, value))
                    return list(await self._run(conn, sql, params, rows=True))
            except asyncio.CancelledError:
                raise
            except StoreError:
                raise
            except Exception as exc:
                raise translate_error(exc, sql, self.busy_timeout_s) from exc

    async def fetchone(self, sql: str, params: Params | None = None) -> PgRow | None:
        rows = await self.fetchall(sql, params)
        return rows[0] if rows else None

    async def fetch_column(self, sql: str, params: Params | None = None) -> list[Any]:
        return [row[0] for row in await self.fetchall(sql, params)]

    async def fetchval(self, sql: str, params: Params | None = None) -> Any:
        row = await self.fetchone(sql, params)
        return None if row is None else row[0]

    async def run_raw(self, sql: str) -> None:
        """A statement sent as written (DDL with its own ``%``, DO blocks), in autocommit or the tx."""
        async with self._connection() as conn:
            await self._run(conn, sql, None, raw=True)

    @asynccontextmanager
    async def temp_ids(self, ids: Iterable[str]) -> AsyncIterator[str]:
        """An id set in a temporary table on this task's connection; yields its name."""
        async with self._pinned():
            frame = self._frame()
            assert frame is not None
            conn = frame.conn
            name = "temp.ids_" + new_id().replace("-", "")
            try:
                await self.execute(f"CREATE TEMP TABLE {name.split('.', 1)[1]} (id TEXT PRIMARY KEY)")
                await self.executemany(f"INSERT OR IGNORE INTO {name}(id) VALUES (?)", ((i,) for i in ids))
                yield name
            finally:
                if not self._closed and not conn.closed:
                    try:
                        # On the connection itself (not through the task's frame): the drop runs
                        # in a task of its own so a cancellation cannot leave the table behind.
                        await run_to_completion(self._run(conn, f"DROP TABLE IF EXISTS {name}", None))
                    except StoreError:
                        # An aborted transaction refuses every statement; its rollback drops
                        # the table it created.
                        if not self.in_transaction:
                            raise

    @asynccontextmanager
    async def _pinned(self) -> AsyncIterator[None]:
        """Keep one connection for this task (outside a transaction) until the block ends."""
        if self._frame() is not None:
            yield
            return
        self._check_open()
        async with self._pool.connection() as conn:
            token = _current.set(_Frame(self, 0, asyncio.current_task(), conn, pinned=True))
            try:
                yield
            finally:
                _current.reset(token)

    async def vacuum(self, table: str) -> None:
        """``VACUUM FULL`` one table (outside any transaction, on a connection of its own)."""
        if self.in_transaction:
            raise StoreError("VACUUM cannot run inside a transaction")
        if not table.replace("_", "").isalnum():
            raise StoreError(f"not a table name: {table!r}")
        async with self._pool.connection() as conn:
            timeout_ms = max(1, int(self.busy_timeout_s * 1000))
            await self._run(conn, f"SET lock_timeout = {timeout_ms}", None, raw=True)
            try:
                await self._run(conn, f"VACUUM (FULL, ANALYZE) {table}", None, raw=True)
            finally:
                await self._run(conn, "RESET lock_timeout", None, raw=True)

    async def checkpoint(self) -> None:
        """Nothing to do: PostgreSQL checkpoints its WAL itself (SQLite's is truncated here)."""

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        await self._pool.close()


def _params(params: Params | None) -> Sequence[Any] | dict[str, Any]:
    if params is None:
        return ()
    if isinstance(params, dict):
        return params
    return tuple(bytes(p) if isinstance(p, memoryview) else p for p in params)


def translate_error(exc: Exception, sql: str, busy_timeout_s: float) -> StoreError:
    """A psycopg error as a :class:`StoreError` naming the statement (and the lock wait, if any)."""
    first = " ".join(sql.split())[:120]
    sqlstate = getattr(exc, "sqlstate", None)
    if sqlstate == "55P03":  # lock_not_available: lock_timeout ran out
        return StoreError(
            f"the store is locked by another writer and the busy timeout ({busy_timeout_s:g} s) ran out "
            "; raise store.busy_timeout_seconds or retry"
        )
    return StoreError(f"PostgreSQL error: {str(exc).strip()} (while running: {first})")
