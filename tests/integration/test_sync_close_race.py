"""Calls racing ``SyncRuntime.close()`` get their result or ``StoreClosedError`` (issue 45, item 8).

A call in flight while another thread closed the facade used to raise what the half-closed
store raised: ``sqlite3.ProgrammingError`` ("Cannot operate on a closed database"),
aiosqlite's ``ValueError`` ("Connection closed"), a ``StoreError`` wrapping either, or a
cancelled future. Here eight threads call the facade (search, profile, a tool write, a tool
search) in a tight loop until they are refused, while the main thread closes it after a
varied delay, with and without ``cancel_background``; over dozens of runs on each backend
only results and ``StoreClosedError`` may appear.
"""

from __future__ import annotations

import threading
import time
import traceback
from collections.abc import Callable
from typing import Any

import pytest

import retold
from retold import Principal, Scope, SearchRequest, SearchResponse
from retold.errors import StoreClosedError
from retold.testing import FakeEmbedder, FakeJudge

pytestmark = pytest.mark.integration

RUNS = {"sqlite": 24, "postgresql": 12}
"""Runs per backend: the old code failed nearly every run; a PostgreSQL open costs more."""
THREADS = 8
BUDGET_S = 20.0  # a slow machine stops early rather than run for minutes
FACT = {"type": "semantic", "content": "The user drinks oat milk flat whites.", "attribute": "coffee_order"}
P = Principal("planner", "u1", "s1")


def _open(location: Any) -> retold.SyncRuntime:
    return retold.open_runtime_sync(location, embedder=FakeEmbedder(), judge=FakeJudge())


def _calls(rt: retold.SyncRuntime, k: int) -> Callable[[int], None]:
    """Thread ``k``'s call, each checked to be a real result."""

    def search(i: int) -> None:
        assert isinstance(rt.search(P, SearchRequest(queries=["oat milk"])), SearchResponse)

    def profile(i: int) -> None:
        assert isinstance(rt.profile(P), str)

    def write(i: int) -> None:
        result = rt.tools.call(P, "memory_write", {**FACT, "content": f"The user likes tea number {k}-{i}."})
        assert result["ok"], result

    def tool_search(i: int) -> None:
        result = rt.tools.call(P, "memory_search", {"queries": ["coffee"]})
        assert result["ok"], result

    return (search, profile, write, tool_search)[k % 4]


def _one_run(location: Any, run: int, unexpected: list[str]) -> int:
    """One facade, THREADS callers, one close; returns how many calls completed."""
    rt = _open(location)
    start = threading.Barrier(THREADS + 1)
    completed = [0] * THREADS
    stop_at = time.monotonic() + 5

    def worker(k: int) -> None:
        call = _calls(rt, k)
        start.wait()
        i = 0
        while time.monotonic() < stop_at:
            try:
                call(i)
            except StoreClosedError:
                return
            except BaseException as exc:  # a driver's error, a cancelled future, a bad result
                unexpected.append(
                    f"run {run}, thread {k}: " + "".join(traceback.format_exception(exc))[-1200:]
                )
                return
            completed[k] += 1
            i += 1
        unexpected.append(f"run {run}, thread {k}: never refused after the close")

    threads = [threading.Thread(target=worker, args=(k,), daemon=True) for k in range(THREADS)]
    for thread in threads:
        thread.start()
    start.wait()
    time.sleep(0.002 * (run % 7))  # close at a different point of the calls each run
    rt.close(cancel_background=run % 2 == 1)
    for thread in threads:
        thread.join(10)
        assert not thread.is_alive(), "a call racing close() hung"
    assert rt.closed
    return sum(completed)


def test_calls_racing_close_get_results_or_store_closed_error(store_location: Any, backend: str) -> None:
    location = store_location("race.sqlite")
    with _open(location) as rt:
        rt.host.provision_user("u1")
        rt.host.grant("planner", Scope("user", "u1"), read=True, write=True)
        assert rt.tools.call(P, "memory_write", FACT)["ok"]
    unexpected: list[str] = []
    completed = runs = 0
    deadline = time.monotonic() + BUDGET_S
    while runs < RUNS[backend] and time.monotonic() < deadline:
        completed += _one_run(location, runs, unexpected)
        runs += 1
    assert not unexpected, f"{len(unexpected)} calls raced close() badly:\n" + "\n".join(unexpected[:3])
    assert runs >= 8 and completed > 0, (runs, completed)
    with pytest.raises(StoreClosedError):  # refused up front, and the store is intact
        rt.search(P, SearchRequest(queries=["oat milk"]))
    with _open(location) as again:
        assert again.tools.call(P, "memory_search", {"queries": ["oat milk flat whites"]})["ok"]
