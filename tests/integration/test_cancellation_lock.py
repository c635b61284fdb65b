"""A write cancelled while another OS process holds the SQLite write lock (issue 15 item 3).

The runtime's ``BEGIN IMMEDIATE`` waits (up to ``busy_timeout``) on its connection's thread
while the other process holds the lock; ``asyncio.wait_for`` gives up first. The caller
must get its timeout at once, and once the other process lets go the runtime must write,
search and log searches as before, with no transaction left open and nothing of the
cancelled write stored.
"""

from __future__ import annotations

import asyncio
import sys
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

import retold
from retold.models import Principal, Scope
from retold.testing import FakeClock, FakeEmbedder

pytestmark = pytest.mark.integration

USER = Scope("user", "u1")

# Holds BEGIN IMMEDIATE on the file until a line arrives on stdin, then commits or rolls back.
LOCKER = """
import sqlite3, sys
conn = sqlite3.connect(sys.argv[1], isolation_level=None)
conn.execute("BEGIN IMMEDIATE")
conn.execute("INSERT INTO store_meta(key, value) VALUES ('locker', 1)")
print("locked", flush=True)
end = sys.stdin.readline().strip()
conn.execute(end)
print("released", flush=True)
"""


@dataclass
class Locker:
    proc: asyncio.subprocess.Process

    async def release(self, end: str) -> None:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(f"{end}\n".encode())
        await self.proc.stdin.drain()
        assert (await asyncio.wait_for(self.proc.stdout.readline(), timeout=30)).strip() == b"released"
        assert await asyncio.wait_for(self.proc.wait(), timeout=30) == 0


async def lock(path: Path) -> Locker:
    """Another Python process that holds the store's write lock."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-c", LOCKER, str(path), stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE
    )
    assert proc.stdout is not None
    assert (await asyncio.wait_for(proc.stdout.readline(), timeout=30)).strip() == b"locked"
    return Locker(proc)


@pytest.fixture
async def rt(tmp_path: Path) -> AsyncIterator[retold.Runtime]:
    runtime = await retold.open_runtime(
        tmp_path / "memory.sqlite", embedder=FakeEmbedder(), clock=FakeClock()
    )
    await runtime.host.provision_user("u1")
    await runtime.host.grant("planner", USER, read=True, write=True)
    try:
        yield runtime
    finally:
        await runtime.close()


P = Principal("planner", "u1", "s1")


def episode(word: str) -> dict[str, Any]:
    return {"type": "episodic", "content": f"The user mentioned {word} today."}


async def assert_sound(rt: retold.Runtime) -> None:
    """Writes, searches and search logging work; no transaction is open; the store checks clean."""
    db = rt.store.db
    async with db._write_lock:  # once the lock is free, the connection must be out of its transaction
        assert db._writer is not None and not db._writer.in_transaction
    written = await rt.tools.call(P, "memory_write", episode("saffron"))
    assert written["ok"], written
    logged = await db.fetchval("SELECT count(*) FROM search_log")
    found = await rt.tools.call(P, "memory_search", {"queries": ["user mentioned saffron"]})
    assert found["ok"] and written["record_id"] in str(found), found
    assert await db.fetchval("SELECT count(*) FROM search_log") == logged + 1
    assert not (await rt.ops.check()).findings


@pytest.mark.parametrize("end", ["COMMIT", "ROLLBACK"])
async def test_a_write_timed_out_behind_another_process_leaves_the_runtime_usable(
    rt: retold.Runtime, tmp_path: Path, end: str
) -> None:
    await rt.hooks.on_session_start(P)
    locker = await lock(tmp_path / "memory.sqlite")
    started = time.monotonic()
    with pytest.raises(TimeoutError):
        await asyncio.wait_for(rt.tools.call(P, "memory_write", episode("turmeric")), timeout=0.5)
    assert time.monotonic() - started < 5  # not the 30 s busy timeout
    await locker.release(end)
    await assert_sound(rt)
    stored = await rt.store.db.fetchval("SELECT count(*) FROM records WHERE content LIKE '%turmeric%'")
    assert stored == 0  # the cancelled write left nothing
    locked_row = await rt.store.db.fetchval("SELECT count(*) FROM store_meta WHERE key = 'locker'")
    assert locked_row == (1 if end == "COMMIT" else 0)  # the other process's write is its own


async def test_turns_and_searches_timed_out_behind_another_process(
    rt: retold.Runtime, tmp_path: Path
) -> None:
    await rt.hooks.on_session_start(P)
    written = await rt.tools.call(P, "memory_write", episode("cardamom"))
    assert written["ok"], written
    locker = await lock(tmp_path / "memory.sqlite")
    with pytest.raises(TimeoutError):
        await asyncio.wait_for(rt.hooks.on_turn(P, "user", "I like cardamom."), timeout=0.5)
    logged = await rt.store.db.fetchval("SELECT count(*) FROM search_log")
    with pytest.raises(TimeoutError):  # the search itself reads; its log row waits for the lock
        await asyncio.wait_for(rt.tools.call(P, "memory_search", {"queries": ["cardamom"]}), timeout=0.5)
    await locker.release("ROLLBACK")
    await assert_sound(rt)
    # The cancelled log insert ran whole once the lock was free, or not at all.
    assert await rt.store.db.fetchval("SELECT count(*) FROM search_log") in (logged + 1, logged + 2)
