"""Atomic writes (spec §3): all of a transaction lands, or none of it; concurrent writers all land."""

from __future__ import annotations

import asyncio
from pathlib import Path

import numpy as np
import pytest

from retold.errors import StoreClosedError, StoreError
from retold.store import Store

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
