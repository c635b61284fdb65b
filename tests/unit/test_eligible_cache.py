"""The hard filter's cache: reused between writes, never stale across a write, an expiry or a process."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from retold.models import Scope
from retold.store import Store
from retold.testing import FakeClock

from .factories import MakeRecord

USER = Scope("user", "u1")


class Counting:
    """Counts id-set queries on the store's database (the work the cache saves)."""

    def __init__(self, store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
        self.calls = 0
        original = store.db.fetch_column

        async def counted(sql: str, params: Any = None) -> list[Any]:
            if sql.startswith("SELECT r.id FROM records r WHERE"):
                self.calls += 1
            return await original(sql, params)

        monkeypatch.setattr(store.db, "fetch_column", counted)


async def test_same_filter_between_writes_reads_the_ids_once(
    store: Store, clock: FakeClock, make_record: MakeRecord, monkeypatch: pytest.MonkeyPatch
) -> None:
    await store.insert_record(make_record())
    counting = Counting(store, monkeypatch)
    first = await store.eligible_ids([USER], now=clock.now())
    second = await store.eligible_ids([USER], now=clock.advance(minutes=5))
    assert first == second and len(first) == 1 and counting.calls == 1
    other = await store.eligible_ids([USER], now=clock.now(), types=["episodic"])
    assert other == frozenset() and counting.calls == 2  # another filter, another entry


async def test_a_write_or_status_change_is_seen_at_once(
    store: Store, clock: FakeClock, make_record: MakeRecord
) -> None:
    a = make_record()
    await store.insert_record(a)
    assert await store.eligible_ids([USER], now=clock.now()) == {a.id}
    b = make_record()
    await store.insert_record(b)
    assert await store.eligible_ids([USER], now=clock.now()) == {a.id, b.id}
    await store.set_status(a.id, "deleted")
    assert await store.eligible_ids([USER], now=clock.now()) == {b.id}


async def test_an_expiry_passing_drops_the_record_without_any_write(
    store: Store, clock: FakeClock, make_record: MakeRecord
) -> None:
    lasting = make_record()
    fading = make_record(
        status="provisional", source_kind="agent_inference", expires_at=clock.now() + timedelta(hours=1)
    )
    for record in (lasting, fading):
        await store.insert_record(record)
    version = await store.records_version()
    assert await store.eligible_ids([USER], now=clock.now()) == {lasting.id, fading.id}
    assert await store.eligible_ids([USER], now=clock.advance(minutes=59)) == {lasting.id, fading.id}
    assert await store.eligible_ids([USER], now=clock.advance(minutes=1)) == {lasting.id}
    assert await store.records_version() == version
    # A clock set back is not served from an entry computed later.
    clock.set(clock.now() - timedelta(hours=2))
    assert await store.eligible_ids([USER], now=clock.now()) == {lasting.id, fading.id}


async def test_another_process_writing_invalidates_the_entry(
    store: Store, store_path: Path, clock: FakeClock, make_record: MakeRecord
) -> None:
    a = make_record()
    await store.insert_record(a)
    assert await store.eligible_ids([USER], now=clock.now()) == {a.id}
    other = await Store.open(store_path, clock=clock)  # its own connections, like another process
    try:
        b = make_record()
        await other.insert_record(b)
    finally:
        await other.close()
    assert await store.eligible_ids([USER], now=clock.now()) == {a.id, b.id}
