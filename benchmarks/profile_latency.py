"""What the ambient profile costs a model call: ``rt.profile(principal)`` on a filled store.

The middleware and CrewAI's ``wrap_llm`` read the profile before every model call, so its
cost is paid per call, not per turn. This fills a SQLite store with ``--records`` records in
the principal's user scope (``--ambient`` of them ambient, the rest conditional) plus as
many in another user's scope, then times the profile read and prints percentiles and the
block's size. The embedder is a fake: the profile never embeds.

    python benchmarks/profile_latency.py                     # 10,000 records, 40 ambient
    python benchmarks/profile_latency.py --records 50000 --ambient 200 --json out.json
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import machine

import retold
from retold.models import Principal, Scope
from retold.testing import FakeClock, FakeEmbedder, FakeJudge, record_for_tests


async def _fill(rt: retold.Runtime, clock: FakeClock, records: int, ambient: int) -> None:
    now = clock.now()
    async with rt.store.transaction():
        for user in ("u1", "u2"):
            for i in range(records):
                record = record_for_tests(
                    now, content=f"Preference number {i} of {user}: always answer in style {i}.",
                    scope=Scope("user", user), attribute=f"style_{i}",
                )  # fmt: skip
                await rt.store.insert_record(record)
                if i < ambient:
                    await rt.store.set_activation(
                        record, "ambient", category="communication", reason="benchmark",
                        decided_by="operator", actor="bench", at=now,
                    )  # fmt: skip


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def run(records: int, ambient: int, calls: int) -> dict[str, float | int]:
    clock = FakeClock()
    with tempfile.TemporaryDirectory() as tmp:
        rt = await retold.open_runtime(
            Path(tmp) / "profile.sqlite", embedder=FakeEmbedder(), judge=FakeJudge(), clock=clock
        )
        try:
            await rt.host.grant("planner", Scope("user", "u1"), read=True, write=True)
            await _fill(rt, clock, records, ambient)
            p = Principal("planner", "u1", "s1")
            block = await rt.profile(p)
            timings = []
            for _ in range(calls):
                start = time.perf_counter()
                again = await rt.profile(p)
                timings.append((time.perf_counter() - start) * 1000)
                assert again == block
        finally:
            await rt.close()
    return {
        "records_per_user": records,
        "ambient": ambient,
        "calls": calls,
        "p50_ms": round(statistics.median(timings), 3),
        "p95_ms": round(_pct(timings, 0.95), 3),
        "block_chars": len(block),
        "shown": block.count("\n["),
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--records", type=int, default=10_000, help="records per user (two users)")
    parser.add_argument("--ambient", type=int, default=40, help="of them ambient, per user")
    parser.add_argument("--calls", type=int, default=300)
    parser.add_argument("--json", type=Path, default=None, help="write the figures here")
    args = parser.parse_args(argv)
    figures = asyncio.run(run(args.records, min(args.ambient, args.records), args.calls))
    print(
        f"profile read: {figures['records_per_user']} records per user, {figures['ambient']} ambient; "
        f"p50 {figures['p50_ms']} ms, p95 {figures['p95_ms']} ms over {figures['calls']} calls; "
        f"block {figures['block_chars']} chars, {figures['shown']} records shown"
    )
    if args.json is not None:
        args.json.write_text(json.dumps({"figures": figures, "machine": machine()}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
