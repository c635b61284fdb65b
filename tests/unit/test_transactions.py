"""Atomic writes (spec §3): all of a transaction lands, or none of it, even when cancelled (issue 15);
concurrent writers all land."""

from __future__ import annotations

import asyncio
import itertools
import logging
import sqlite3
import time
from pathlib import Path

import numpy as np
import pytest

from retold.errors import StoreClosedError, StoreError
from retold.store import Store
from retold.store.database import Database

from .cancel_harness import Cut, attempt
from .factories import MakeEntity, MakeRecord


class Boom(Exception):
    pass


async def count(store: Store, table: str) -> int:
    return int(await store.db.fetchval(f"SELECT count(*) FROM {table}"))


async def test_failed_transaction_leaves_no_row_behind(
    store: Store, make_record: MakeRecord, make_entity: MakeEntity
) -> None:
    entity = make_entity()
    await store.insert_entity(entity)
    version_before = await store.records_version()
    record = make_record()

    with pytest.raises(Boom):
        async with store.transaction():
            await store.insert_record(record, links=[(entity.id, "about")])
            await store.append_event("record.created", "planner", record_id=record.id)
            await store.put_embedding(record.id, "fake", "1", np.ones(8, dtype=np.float32) / np.sqrt(8))
            assert await store.get_record(record.id) is not None  # visible inside the transaction
            raise Boom

    assert await store.get_record(record.id) is None
    for table in ("records", "records_fts", "events", "embeddings", "record_entities"):
        assert await count(store, table) == 0, table
    assert await store.get_embedding(record.id) is None
    assert await store.records_version() == version_before
    assert await store.get_entity(entity.id) is not None  # committed before the failed block


async def test_store_stays_usable_after_a_rolled_back_transaction(
    store: Store, make_record: MakeRecord
) -> None:
    with pytest.raises(Boom):
        async with store.transaction():
            await store.insert_record(make_record())
            raise Boom
    record = make_record()
    await store.insert_record(record)
    assert await store.get_record(record.id) is not None
    assert await store.records_version() == 1


async def test_inner_failure_caught_by_outer_keeps_only_outer_writes(
    store: Store, make_record: MakeRecord
) -> None:
    outer_before, inner, outer_after = make_record(), make_record(), make_record()
    async with store.transaction():
        await store.insert_record(outer_before)
        with pytest.raises(Boom):
            async with store.transaction():
                await store.insert_record(inner)
                await store.append_event("record.created", "planner", record_id=inner.id)
                raise Boom
        await store.insert_record(outer_after)

    assert await store.get_record(outer_before.id) is not None
    assert await store.get_record(outer_after.id) is not None
    assert await store.get_record(inner.id) is None
    assert await store.events(record_id=inner.id) == []
    assert await count(store, "records_fts") == 2
    assert await store.records_version() == 2


async def test_outer_failure_drops_a_committed_inner_block(store: Store, make_record: MakeRecord) -> None:
    record = make_record()
    with pytest.raises(Boom):
        async with store.transaction():
            async with store.transaction():
                await store.insert_record(record)
            raise Boom
    assert await store.get_record(record.id) is None


async def test_concurrent_writers_all_land(store: Store, make_record: MakeRecord) -> None:
    records = [make_record(content=f"fact number {i}") for i in range(40)]
    versions = await asyncio.gather(*(store.insert_record(r) for r in records))
    assert sorted(versions) == list(range(1, 41))
    assert await count(store, "records") == 40
    assert await count(store, "records_fts") == 40
    assert await store.records_version() == 40
    assert len(await store.get_records(r.id for r in records)) == 40


async def test_reads_outside_a_transaction_do_not_see_uncommitted_writes(
    store: Store, make_record: MakeRecord
) -> None:
    record = make_record()
    inserted = asyncio.Event()
    release = asyncio.Event()

    async def writer() -> None:
        async with store.transaction():
            await store.insert_record(record)
            inserted.set()
            await release.wait()

    async def reader() -> None:
        await inserted.wait()
        assert await store.get_record(record.id) is None
        assert await store.records_version() == 0
        release.set()

    await asyncio.wait_for(asyncio.gather(writer(), reader()), timeout=10)
    assert await store.get_record(record.id) is not None
    assert await store.records_version() == 1


async def test_second_writer_waits_for_the_first_transaction(store: Store, make_record: MakeRecord) -> None:
    first, second = make_record(), make_record()
    order: list[str] = []
    inside = asyncio.Event()
    release = asyncio.Event()

    async def slow_writer() -> None:
        async with store.transaction():
            await store.insert_record(first)
            inside.set()
            await release.wait()
            order.append("first committed")

    async def queued_writer() -> None:
        await inside.wait()
        task = asyncio.ensure_future(store.insert_record(second))
        await asyncio.sleep(0.05)
        assert not task.done()  # queued behind the open transaction
        release.set()
        await task
        order.append("second committed")

    await asyncio.wait_for(asyncio.gather(slow_writer(), queued_writer()), timeout=10)
    assert order == ["first committed", "second committed"]
    assert (await store.require_record(second.id)).index_version == 2


async def test_event_appended_outside_a_transaction_queues_behind_an_open_one(
    store_path: Path, make_record: MakeRecord
) -> None:
    # A short busy timeout: a write that bypassed the in-process queue would fail on the file lock.
    store = await Store.open(store_path, busy_timeout_s=0.2)
    try:
        record = make_record()
        inside = asyncio.Event()

        async def slow_writer() -> None:
            async with store.transaction():
                await store.insert_record(record)
                inside.set()
                await asyncio.sleep(0.6)

        async def event_writer() -> None:
            await inside.wait()
            await store.append_event("record.created", "planner", record_id=record.id)

        await asyncio.wait_for(asyncio.gather(slow_writer(), event_writer()), timeout=10)
        assert len(await store.events(record_id=record.id)) == 1
    finally:
        await store.close()


async def test_closing_mid_transaction_surfaces_the_original_error(
    store_path: Path, make_record: MakeRecord
) -> None:
    store = await Store.open(store_path)
    record = make_record()
    with pytest.raises(StoreClosedError):
        async with store.transaction():
            await store.insert_record(record)
            await store.close()
            await store.insert_record(make_record())
    reopened = await Store.open(store_path)
    try:
        assert await reopened.get_record(record.id) is None  # the open transaction died with the connection
    finally:
        await reopened.close()


async def test_a_task_started_inside_a_transaction_cannot_use_it(
    store: Store, make_record: MakeRecord
) -> None:
    async with store.transaction():
        child = asyncio.create_task(store.insert_record(make_record()))
        with pytest.raises(StoreError, match="task started inside a store transaction"):
            await child
    assert await count(store, "records") == 0


# --- cancellation (issue 15): a cancelled write never leaves the connection in a transaction ---


def writer_in_transaction(store: Store) -> bool:
    """Whether a connection of the store is inside a transaction (SQLite: the writer's state;
    PostgreSQL: any session of the database idle in a transaction, as the server sees it)."""
    if store.dialect == "postgresql":
        import psycopg

        with psycopg.connect(store.db.url, autocommit=True) as conn:
            row = conn.execute(
                """SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()
                    AND pid != pg_backend_pid() AND state LIKE 'idle in transaction%'"""
            ).fetchone()
        return bool(row and row[0])
    assert store.db._writer is not None
    return store.db._writer.in_transaction


async def settled(store: Store) -> None:
    """Wait out a rollback still running behind a cancelled ``BEGIN``: it finishes in the
    background holding the write lock (``Database.transaction``), so no write can start on
    the connection before it is idle again, but a check made at once can see it mid-way."""
    async with store.db._write_lock:  # the invariant under test is internal to Database
        pass
    # A reader's id table is emptied in the background once its caller is done (temp_ids).
    await emptied(store.db)


async def emptied(db: Database) -> None:
    """Wait until no id table is being emptied (done tasks leave ``_finishing`` by a callback,
    which awaiting an already finished gather never gives the loop a turn to run)."""
    while pending := [t for t in getattr(db, "_finishing", ()) if not t.done()]:
        await asyncio.gather(*pending, return_exceptions=True)


async def temp_id_tables(store: Store) -> list[str]:
    """Id tables left holding ids on any connection of the store.

    SQLite pools its emptied id tables per connection (never dropping them: see
    ``Database.temp_ids``), so an empty one is not left behind; at most a few exist.
    """
    if store.dialect == "postgresql":
        rows = await store.db.fetchall(
            "SELECT relname FROM pg_class WHERE relpersistence = 't' AND relname LIKE 'ids^_%' ESCAPE '^'"
        )
        return [r[0] for r in rows]
    names = []
    for conn in (store.db._reader, store.db._writer):
        assert conn is not None
        listed = await conn.execute_fetchall("SELECT name FROM sqlite_temp_master WHERE type = 'table'")
        tables = [r[0] for r in listed]
        assert len(tables) <= 4, tables  # pooled, not one per use
        for table in tables:
            held = await conn.execute_fetchall(f"SELECT 1 FROM temp.{table} LIMIT 1")
            if table.startswith("ids_") and held:
                names.append(table)
    return names


@pytest.mark.sqlite_only("holds SQLite's file lock; tests/integration/test_postgres.py holds PostgreSQL's")
async def test_cancelled_while_begin_waits_for_another_connection_leaves_no_transaction(
    store_path: Path, make_record: MakeRecord
) -> None:
    store = await Store.open(store_path, busy_timeout_s=5)
    other = sqlite3.connect(store_path, isolation_level=None)
    other.execute("BEGIN IMMEDIATE")  # another connection holds the file's write lock
    try:
        task = asyncio.ensure_future(store.insert_record(make_record()))
        await asyncio.sleep(0.2)  # its BEGIN IMMEDIATE now waits on the writer's thread
        started = time.monotonic()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert time.monotonic() - started < 2  # at once, not after the busy timeout
        other.rollback()  # the queued BEGIN now succeeds; the rollback queued behind it undoes it
        record = make_record()
        await asyncio.wait_for(store.insert_record(record), timeout=10)
        assert await store.get_record(record.id) is not None
        assert await count(store, "records") == 1
        assert not writer_in_transaction(store)
    finally:
        other.close()
        await store.close()


async def test_cancelled_during_commit_the_write_is_whole_and_its_callbacks_ran(
    store: Store, make_record: MakeRecord
) -> None:
    record = make_record()
    ran: list[str] = []

    async def write() -> None:
        async with store.transaction():
            await store.insert_record(record)
            store.db.after_commit(lambda: ran.append("committed"))

    task = asyncio.ensure_future(write())
    store.db.tracer = lambda sql, params: task.cancel() if sql == "COMMIT" else None
    with pytest.raises(asyncio.CancelledError):
        await task
    store.db.tracer = None
    assert ran == ["committed"]  # the commit finished before the cancellation surfaced
    assert await store.get_record(record.id) is not None
    assert not writer_in_transaction(store)
    await store.insert_record(make_record())
    assert await count(store, "records") == 2


async def test_a_second_cancellation_during_the_rollback_still_rolls_back(
    store: Store, make_record: MakeRecord
) -> None:
    record = make_record()
    inside = asyncio.Event()

    async def write() -> None:
        # The inner block is a savepoint: ROLLBACK TO and RELEASE, then the outer ROLLBACK.
        async with store.transaction(), store.transaction():
            await store.insert_record(record)
            inside.set()
            await asyncio.sleep(30)

    task = asyncio.ensure_future(write())
    await inside.wait()
    cleanup: list[str] = []

    def cancel_again(sql: str, params: object) -> None:
        cleanup.append(sql)
        task.cancel()  # every cleanup statement is cancelled once more while it runs

    store.db.tracer = cancel_again
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    store.db.tracer = None
    assert cleanup == ["ROLLBACK TO sp1", "RELEASE sp1", "ROLLBACK"]
    assert await store.get_record(record.id) is None
    assert not writer_in_transaction(store)
    await store.insert_record(make_record())
    assert await count(store, "records") == 1


async def test_a_failed_commit_rolls_back_and_the_next_transaction_starts(tmp_path: Path) -> None:
    db = await Database.open(tmp_path / "fk.sqlite")
    try:
        await db.execute_atomic("CREATE TABLE parent (id INTEGER PRIMARY KEY)")
        await db.execute_atomic(
            "CREATE TABLE child (id INTEGER PRIMARY KEY, parent_id INTEGER "
            "REFERENCES parent(id) DEFERRABLE INITIALLY DEFERRED)"
        )
        with pytest.raises(StoreError, match="FOREIGN KEY"):
            async with db.transaction():  # the deferred check fails at COMMIT
                await db.execute("INSERT INTO child(id, parent_id) VALUES (1, 99)")
        assert db._writer is not None and not db._writer.in_transaction
        async with db.transaction():
            await db.execute("INSERT INTO parent(id) VALUES (99)")
        assert await db.fetchval("SELECT count(*) FROM child") == 0
        assert await db.fetchval("SELECT count(*) FROM parent") == 1
    finally:
        await db.close()


@pytest.mark.sqlite_only("SQLite keeps one writer connection; a pooled PostgreSQL one is reset by the pool")
async def test_a_transaction_left_open_on_the_writer_is_rolled_back_at_the_next_begin(
    store: Store, make_record: MakeRecord, caplog: pytest.LogCaptureFixture
) -> None:
    assert store.db._writer is not None
    await store.db._writer.execute("BEGIN")  # as an unfinished cancelled statement would leave it
    await store.db._writer.execute("UPDATE store_meta SET value = 99 WHERE key = 'records_version'")
    record = make_record()
    with caplog.at_level(logging.WARNING, logger="retold.store.database"):
        await store.insert_record(record)
    assert "left inside a transaction" in caplog.text
    assert await store.records_version() == 1  # the stray update was never acknowledged: discarded
    assert await store.get_record(record.id) is not None


async def test_after_commit_callbacks_follow_the_outer_commit(store: Store, make_record: MakeRecord) -> None:
    ran: list[str] = []
    with pytest.raises(StoreError, match="needs an open transaction"):
        store.db.after_commit(lambda: ran.append("outside"))
    with pytest.raises(Boom):
        async with store.transaction():
            store.db.after_commit(lambda: ran.append("rolled back"))
            raise Boom
    async with store.transaction():
        store.db.after_commit(lambda: ran.append("outer"))
        with pytest.raises(Boom):
            async with store.transaction():
                store.db.after_commit(lambda: ran.append("inner, rolled back"))
                raise Boom
        async with store.transaction():
            store.db.after_commit(lambda: ran.append("inner, released"))
            store.db.after_commit(lambda: 1 / 0)  # logged; the others still run
            store.db.after_commit(lambda: ran.append("after the failing one"))
        assert ran == []  # nothing runs before the outer COMMIT
    assert ran == ["outer", "inner, released", "after the failing one"]


async def test_temporary_id_tables_never_outlive_a_cancelled_use(
    store: Store, make_record: MakeRecord
) -> None:
    """Cancelled at every await, inside a transaction and outside one, no id table stays behind."""
    ids = [make_record().id for _ in range(3)]

    async def use(in_transaction: bool) -> None:
        async def join() -> None:
            async with store.db.temp_ids(ids) as table:
                await store.db.fetchall(f"SELECT id FROM {table}")

        if in_transaction:
            async with store.transaction():
                await join()
        else:
            await join()

    for in_transaction in (False, True):
        for k in itertools.count(1):
            result = await attempt(lambda in_transaction=in_transaction: use(in_transaction), Cut(k))
            await settled(store)
            assert not writer_in_transaction(store)
            assert await temp_id_tables(store) == [], k
            if not result.cancelled:
                break


async def test_a_lone_statement_cancelled_at_any_await_is_whole_or_absent(store: Store) -> None:
    await store.db.execute_atomic("CREATE TABLE marks (id TEXT PRIMARY KEY, a TEXT, b TEXT)")
    insert = "INSERT INTO marks(id, a, b) VALUES (?, 'a', 'b')"
    for k in itertools.count(1):
        result = await attempt(lambda k=k: store.db.execute_atomic(insert, (f"m{k}",)), Cut(k))
        await store.append_event("record.created", "planner")  # the store still writes (and waits)
        assert not writer_in_transaction(store)
        rows = await store.db.fetchall("SELECT a, b FROM marks WHERE id = ?", (f"m{k}",))
        assert [tuple(r) for r in rows] in ([], [("a", "b")])
        if not result.cancelled:
            assert rows
            break


async def test_an_id_table_is_released_while_another_statement_is_still_reading(tmp_path: Path) -> None:
    """Concurrent searches share the reader: releasing one's id table mid-read of another's is safe.

    SQLite refuses DROP TABLE while any statement on the connection is reading, so a search
    finishing while another streamed its rows once failed with "database table is locked".
    """
    db = await Database.open(tmp_path / "ids.sqlite")
    try:
        async with db.temp_ids(f"r{i}" for i in range(500)) as reading:
            cursor = await db._conn().execute(f"SELECT id FROM {reading}")
            assert await cursor.fetchone() is not None  # a statement mid-read on the reader
            async with db.temp_ids(["a", "b"]) as other:
                assert {r[0] for r in await db.fetchall(f"SELECT id FROM {other}")} == {"a", "b"}
            assert len(await cursor.fetchall()) == 499
            await cursor.close()
        async with db.temp_ids(["c"]) as reused:  # emptied and pooled, never another's rows
            assert [r[0] for r in await db.fetchall(f"SELECT id FROM {reused}")] == ["c"]
    finally:
        await db.close()


async def test_a_reader_id_table_is_filled_by_one_statement_and_emptied_after_use(tmp_path: Path) -> None:
    """A search loads several id sets: each costs one statement on its path, the emptying none.

    The table returns to the pool only once its DELETE has run, so a search that starts
    meanwhile gets another table, never one still holding the last caller's ids.
    """
    db = await Database.open(tmp_path / "ids.sqlite")
    seen: list[str] = []
    try:
        async with db.temp_ids(["warm"]):
            pass  # the pooled table is created once on the reader
        await emptied(db)
        db.tracer = lambda sql, _params: seen.append(sql.split()[0])
        async with db.temp_ids(f"r{i}" for i in range(300)) as first:
            assert seen == ["INSERT"]
            assert len(await db.fetchall(f"SELECT id FROM {first}")) == 300
        async with db.temp_ids(["x"]) as second:  # before the first is emptied: another table
            assert second != first
            assert [r[0] for r in await db.fetchall(f"SELECT id FROM {second}")] == ["x"]
        await emptied(db)
        assert await db.fetchall(f"SELECT id FROM {first}") == []
        async with db.temp_ids(["y"]) as reused:
            assert reused in (first, second)
            assert [r[0] for r in await db.fetchall(f"SELECT id FROM {reused}")] == ["y"]
    finally:
        await db.close()
