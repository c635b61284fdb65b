"""``RuntimePortal``'s loop thread (anyio's blocking portal): its loop, its workers, its shutdown."""

from __future__ import annotations

import asyncio
import gc
import threading
from pathlib import Path

import anyio.to_thread

import retold
from retold.adapters.portal import LoopBridge, RuntimePortal
from retold.testing import FakeEmbedder, FakeJudge


def test_the_portal_runs_an_asyncio_loop_on_its_own_thread() -> None:
    portal = RuntimePortal()
    try:
        assert portal.loop.is_running() and portal._thread.name == "retold-portal"
        assert portal.run(_here()) == (portal.loop, portal._thread)
    finally:
        portal.close()
    assert portal.loop.is_closed() and not portal._thread.is_alive()
    portal.close()  # again: nothing to do


async def _here() -> tuple[asyncio.AbstractEventLoop, threading.Thread]:
    return asyncio.get_running_loop(), threading.current_thread()


def test_worker_threads_outlive_a_call() -> None:
    """The loop's main task lives as long as the portal, so anyio.to_thread reuses its workers."""

    async def worker() -> threading.Thread:
        return await anyio.to_thread.run_sync(threading.current_thread)

    portal = RuntimePortal()
    try:
        assert portal.run(worker()) is portal.run(worker())
    finally:
        portal.close()


def test_close_cancels_calls_still_waiting_instead_of_leaving_them_hanging() -> None:
    portal = RuntimePortal()
    pending = LoopBridge(None, portal.loop).submit(lambda: asyncio.sleep(3600))
    portal.close()
    assert pending.cancelled()


def test_a_facade_collected_on_its_own_loop_thread_still_closes(tmp_path: Path) -> None:
    rt = retold.open_runtime_sync(tmp_path / "own.sqlite", embedder=FakeEmbedder(), judge=FakeJudge())
    runtime, loop, thread = rt.runtime, rt._portal.loop, rt._portal._thread
    held = [rt]
    del rt

    async def drop_it_here() -> None:
        held.clear()
        gc.collect()

    asyncio.run_coroutine_threadsafe(drop_it_here(), loop).result()
    thread.join(timeout=30)
    assert runtime.closed and loop.is_closed() and not thread.is_alive()
