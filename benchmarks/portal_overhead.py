"""What a blocking call through a loop thread costs: retold's RuntimePortal against the alternatives.

A sync host's every retold call is handed to the event-loop thread that owns the runtime and
waited for. This times that hand-over three ways:

* ``hand-made loop thread``: a thread running ``loop.run_forever()``, calls handed over with
  ``asyncio.run_coroutine_threadsafe`` (RuntimePortal before it moved onto anyio);
* ``RuntimePortal.run``: as this checkout has it (anyio's blocking portal owns the thread and
  its loop; calls handed over with ``asyncio.run_coroutine_threadsafe``, as LoopBridge does);
* ``anyio portal.call``: ``anyio.from_thread.start_blocking_portal(backend="asyncio")``'s own
  hand-over, each call a task in the portal's task group.

Two workloads: a coroutine that does nothing (the hand-over alone), and one that awaits a
single ``anyio.to_thread.run_sync`` (as a search awaits its embedder). On a loop with no
long-lived main task, anyio stops a worker thread when the call that started it ends, so
there every such call starts a new thread.

The shared machines switch between a quiet and a busy regime mid-run (a thread wake-up costs
~20 µs or ~100 µs), so the three ways are timed in interleaved rounds, each round a share of
the calls from one thread (p50, p95 over all rounds) and then from 8 threads at once (µs per
call, median of the rounds).

    python benchmarks/portal_overhead.py               # 10,000 calls per way and workload
    python benchmarks/portal_overhead.py --calls 2000  # quicker
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import threading
import time
from collections.abc import Awaitable, Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack, contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # runnable as `python benchmarks/portal_overhead.py` from a checkout
    sys.path.insert(0, str(ROOT))

import anyio.from_thread  # noqa: E402
import anyio.to_thread  # noqa: E402
from common import machine, percentile  # noqa: E402

from retold.adapters.portal import RuntimePortal  # noqa: E402

RESULTS = ROOT / "benchmarks" / "results" / "portal_overhead.json"
THREADS = 8
ROUNDS = 10

Work = Callable[[], Awaitable[None]]
Call = Callable[[Work], None]


async def _nothing() -> None:
    return None


async def _one_worker_call() -> None:
    await anyio.to_thread.run_sync(int)


WORKLOADS: dict[str, Work] = {"nothing": _nothing, "one anyio.to_thread call": _one_worker_call}


@contextmanager
def _hand_made() -> Iterator[Call]:
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    try:
        yield lambda work: asyncio.run_coroutine_threadsafe(work(), loop).result()
    finally:
        loop.call_soon_threadsafe(loop.stop)
        thread.join()
        loop.close()


@contextmanager
def _retold_portal() -> Iterator[Call]:
    with RuntimePortal() as portal:
        yield lambda work: portal.run(work())


@contextmanager
def _anyio_call() -> Iterator[Call]:
    with anyio.from_thread.start_blocking_portal("asyncio") as portal:
        yield lambda work: portal.call(work)


WAYS = {
    "hand-made loop thread": _hand_made,
    "RuntimePortal.run": _retold_portal,
    "anyio portal.call": _anyio_call,
}


def _round(call: Call, work: Work, calls: int) -> tuple[list[float], float]:
    """One round: ``calls`` timed calls from this thread (µs each), then µs per call from 8 threads."""
    times = []
    for _ in range(calls):
        started = time.perf_counter()
        call(work)
        times.append((time.perf_counter() - started) * 1e6)
    per_thread = max(1, calls // THREADS)

    def worker(_: int) -> None:
        for _ in range(per_thread):
            call(work)

    with ThreadPoolExecutor(THREADS) as pool:
        started = time.perf_counter()
        list(pool.map(worker, range(THREADS)))
        wall = time.perf_counter() - started
    return times, wall * 1e6 / (per_thread * THREADS)


def measure(work: Work, calls: int) -> dict[str, dict[str, float]]:
    """Every way on one workload, in ``ROUNDS`` interleaved rounds."""
    with ExitStack() as stack:
        ways = {name: stack.enter_context(way()) for name, way in WAYS.items()}
        for call in ways.values():  # warm-up: first-call imports, worker threads
            for _ in range(200):
                call(work)
        times: dict[str, list[float]] = {name: [] for name in ways}
        threaded: dict[str, list[float]] = {name: [] for name in ways}
        for _ in range(ROUNDS):
            for name, call in ways.items():
                one, many = _round(call, work, max(1, calls // ROUNDS))
                times[name].extend(one)
                threaded[name].append(many)
    return {
        name: {
            "p50_us": percentile(times[name], 50),
            "p95_us": percentile(times[name], 95),
            f"threads{THREADS}_us_per_call": statistics.median(threaded[name]),
        }
        for name in ways
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=10_000, help="calls per way and workload (10,000)")
    parser.add_argument("--json", type=Path, default=RESULTS, metavar="PATH", help=f"default {RESULTS}")
    args = parser.parse_args(argv)

    results = {}
    for workload, work in WORKLOADS.items():
        results[workload] = measure(work, args.calls)
        print(f"{args.calls} calls, {workload}: µs per call")
        print(f"{'':24} {'p50':>7} {'p95':>7} {f'{THREADS} threads':>10}")
        for name, r in results[workload].items():
            row = f"{r['p50_us']:>7.1f} {r['p95_us']:>7.1f} {r[f'threads{THREADS}_us_per_call']:>10.1f}"
            print(f"{name:24} {row}")
        print()
    payload = {
        "calls": args.calls,
        "rounds": ROUNDS,
        "threads": THREADS,
        "machine": machine(),
        "results": results,
    }
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(payload, indent=2) + "\n", encoding="utf-8")
    print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
