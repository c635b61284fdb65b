"""Snapshots: save a consistent copy of an open store, and load one into a closed store.

Snapshots use SQLite's online backup API, which copies every page (FTS shadow tables,
``schema_migrations`` and ``store_meta`` included) under one read transaction, so the
copy is consistent while writers carry on. Given a ``progress(pages done, pages in all)``
callback, the copy runs in about a hundred steps with that read transaction held across
them (another connection's commit between two steps would otherwise restart the copy).
Restoring works on a closed file:
:func:`restore_snapshot` takes SQLite's exclusive lock first, so it refuses while any
other connection (a host, another CLI) holds the store.
"""

from __future__ import annotations

import contextlib
import functools
import os
import sqlite3
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import anyio.from_thread
import anyio.to_thread

from retold.errors import InvalidArgumentError, SchemaVersionError, StoreError
from retold.store.database import Database
from retold.store.migrations import LATEST_VERSION
from retold.util import new_id

__all__ = ["SnapshotInfo", "SnapshotMixin", "on_event_loop", "read_snapshot_info", "restore_snapshot"]

Progress = Callable[[int, int], None]
"""``progress(pages done, pages in all)``, called after each step of a copy."""

# A copy that reports progress runs in about this many steps, whatever the store's size.
_STEPS = 100


@dataclass(frozen=True)
class SnapshotInfo:
    """What a snapshot file holds, read without changing it."""

    path: str
    schema_version: int
    records: int
    bytes: int


class SnapshotMixin:
    """Saving needs the open store's connection; loading (below) must run with none open."""

    db: Database

    async def backup_to(
        self, target: str | os.PathLike[str], *, progress: Progress | None = None
    ) -> SnapshotInfo:
        """Copy the whole store to a new file through SQLite's online backup API.

        The copy is written beside ``target`` and renamed into place, so a failure never
        leaves a half-written snapshot; it is switched to rollback-journal mode so it is
        one self-contained file. Refuses to overwrite an existing file. ``progress`` is
        called on the event loop (a ``:memory:`` store copies in one step, unreported).
        """
        path = Path(target)
        await anyio.to_thread.run_sync(_check_new_file, path)
        partial = path.with_name(f".{path.name}.{new_id()}.partial")
        dest = await anyio.to_thread.run_sync(lambda: sqlite3.connect(partial, check_same_thread=False))
        try:
            await self._copy_into(dest, progress)

            def finish() -> None:
                dest.execute("PRAGMA journal_mode = DELETE").fetchall()
                dest.close()
                os.replace(partial, path)

            await anyio.to_thread.run_sync(finish)
        except BaseException:
            with contextlib.suppress(sqlite3.Error):
                dest.close()
            with contextlib.suppress(OSError):
                partial.unlink()
            raise
        return await anyio.to_thread.run_sync(read_snapshot_info, path)

    async def _copy_into(self, dest: sqlite3.Connection, progress: Progress | None) -> None:
        """The store's committed pages into ``dest``, through a connection of the copy's own.

        So the host's reader stays free for its searches meanwhile. A ``:memory:`` database
        exists only in the writer, which copies it in one step.
        """
        db = self.db
        db._check_open()
        try:
            if db._reader is None:  # a :memory: store (Database belongs to this package)
                assert db._writer is not None
                await db._writer.backup(dest)
                return
            await anyio.to_thread.run_sync(
                _copy_file, db.path, dest, on_event_loop(progress), db.busy_timeout_s
            )
        except sqlite3.Error as exc:
            raise StoreError(f"snapshot failed: {exc}") from exc


def on_event_loop(progress: Progress | None) -> Progress | None:
    """``progress`` for a copy running in an AnyIO worker thread, called back on the event loop."""
    return None if progress is None else functools.partial(anyio.from_thread.run_sync, progress)


def _copy_file(path: str, dest: sqlite3.Connection, progress: Progress | None, timeout_s: float) -> None:
    source = sqlite3.connect(path, timeout=timeout_s)
    try:
        _copy_pages(source, dest, progress)
    finally:
        source.close()


def _copy_pages(source: sqlite3.Connection, dest: sqlite3.Connection, progress: Progress | None) -> None:
    """Copy ``source`` into ``dest`` as of one moment: one step, or steps under one read transaction."""
    if progress is None:
        source.backup(dest)
        return
    report = progress  # bound for the closure below
    source.execute("BEGIN")  # held across the steps: the copy sees one snapshot and never restarts
    try:
        total = int(source.execute("PRAGMA page_count").fetchone()[0])  # starts the read transaction
        report(0, total)
        source.backup(
            dest,
            pages=max(1, -(-total // _STEPS)),
            progress=lambda _status, remaining, count: report(count - remaining, count),
        )
    finally:
        source.execute("ROLLBACK")


# --- snapshots of closed files (no Store open) --------------------------------------------------


def _check_new_file(path: Path) -> None:
    if path.exists():
        raise InvalidArgumentError(f"snapshot target {str(path)!r} already exists; choose a new path")
    if not path.parent.is_dir():
        raise InvalidArgumentError(f"snapshot folder {str(path.parent)!r} does not exist")


def _open_read_only(path: Path) -> sqlite3.Connection:
    uri = f"file:{path.resolve().as_posix()}?mode=ro"
    try:
        conn = sqlite3.connect(uri, uri=True)
        conn.execute("SELECT count(*) FROM sqlite_master").fetchall()
        return conn
    except sqlite3.DatabaseError as exc:
        raise InvalidArgumentError(f"{str(path)!r} is not a readable SQLite database ({exc})") from exc


def read_snapshot_info(path: str | os.PathLike[str]) -> SnapshotInfo:
    """Validate a snapshot file and describe it: a retold store at a schema this code can open.

    Raises :class:`InvalidArgumentError` for a missing, unreadable, corrupt or non-retold
    file and :class:`SchemaVersionError` for one written by a newer retold.
    """
    file = Path(path)
    if not file.is_file():
        raise InvalidArgumentError(f"snapshot {str(file)!r} does not exist")
    conn = _open_read_only(file)
    try:
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        if not {"schema_migrations", "records", "store_meta"} <= tables:
            raise InvalidArgumentError(f"{str(file)!r} is not a retold store (it has no retold schema)")
        version = int(conn.execute("SELECT coalesce(max(version), 0) FROM schema_migrations").fetchone()[0])
        if version > LATEST_VERSION:
            raise SchemaVersionError(
                f"snapshot {str(file)!r} is at schema version {version}, newer than this retold "
                f"understands ({LATEST_VERSION}); upgrade retold to load it"
            )
        if version < 1:
            raise InvalidArgumentError(f"snapshot {str(file)!r} records no applied schema migration")
        check = conn.execute("PRAGMA quick_check").fetchall()
        if [r[0] for r in check] != ["ok"]:
            raise InvalidArgumentError(f"snapshot {str(file)!r} is corrupt: {check[0][0]}")
        records = int(conn.execute("SELECT count(*) FROM records").fetchone()[0])
    except sqlite3.DatabaseError as exc:
        raise InvalidArgumentError(f"snapshot {str(file)!r} cannot be read ({exc})") from exc
    finally:
        conn.close()
    return SnapshotInfo(path=str(file), schema_version=version, records=records, bytes=file.stat().st_size)


def restore_snapshot(
    store_path: str | os.PathLike[str],
    snapshot_path: str | os.PathLike[str],
    *,
    progress: Progress | None = None,
) -> SnapshotInfo:
    """Replace the store's contents with the snapshot's, atomically, on a store nobody has open.

    The snapshot is validated first (:func:`read_snapshot_info`). Then an exclusive lock
    on the store is taken without waiting: any other open connection holds a shared lock
    in WAL mode, so a running host or CLI makes this fail with :class:`StoreError` before
    anything changes. The copy itself runs through the backup API into the locked
    connection, as one transaction; ``progress(pages done, pages in all)`` is called from
    this function's thread after each step.
    """
    store, snapshot = Path(store_path), Path(snapshot_path)
    if store.exists() and snapshot.exists() and store.resolve() == snapshot.resolve():
        raise InvalidArgumentError("the snapshot and the store are the same file")
    info = read_snapshot_info(snapshot)
    try:
        dest = sqlite3.connect(store, timeout=0, isolation_level=None)
    except sqlite3.Error as exc:
        raise StoreError(f"cannot open the store {str(store)!r}: {exc}") from exc
    try:
        try:
            dest.execute("PRAGMA locking_mode = EXCLUSIVE").fetchall()
            dest.execute("BEGIN EXCLUSIVE")
            dest.execute("COMMIT")
        except sqlite3.OperationalError as exc:
            raise StoreError(
                f"another connection holds the store {str(store)!r} ({exc}); stop every host and command "
                "using it, then load the snapshot again"
            ) from exc
        source = _open_read_only(snapshot)
        try:
            _copy_pages(source, dest, progress)
        except sqlite3.Error as exc:
            raise StoreError(
                f"loading snapshot {str(snapshot)!r} failed, the store is unchanged: {exc}"
            ) from exc
        finally:
            source.close()
        dest.execute("PRAGMA journal_mode = WAL").fetchall()
    finally:
        dest.close()
    return info
