"""Small stores, real embedder: a warm search against its floor (issue 48, goal 1).

The floor is what any dense memory pays for the same answer: the query's embedding by the same
model plus an exact numpy top-k over the same records' vectors. Each size builds one SQLite
store of one user's records (the records `import_speed.py` writes: facts, events, procedures)
through ``retold import``, then times, alternately and with the query cache cleared before each,
``rt.search`` of one fresh question and the floor of the same question. It prints p50/p95 of
both, their ratio, and retold's per-stage p50 from the search's own ``timings_ms``.

    python benchmarks/small_store_latency.py                  # 300 and 3,000 records
    python benchmarks/small_store_latency.py --sizes 300 --searches 60 --json out.json
    python benchmarks/small_store_latency.py --check          # exit 1 when the target is missed
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).resolve().parent))

import numpy as np
from common import Target, check_targets, machine, percentile
from import_speed import CITIES, PEOPLE, PROJECTS, records, retold

import retold as retold_lib
from retold.models import Principal, SearchRequest

TARGET_RATIO = 1.15
QUESTIONS = [
    "which editor does {p} use",
    "what is {p}'s timezone",
    "does {p} eat meat",
    "how does {p} like their coffee",
    "where does {p} live",
    "what is {p}'s job on the team",
    "when does {p} like to have meetings",
    "when did the user go to {c}",
    "who reviewed code on {j}",
    "what happened with the {j} launch",
    "how do we deploy {j}",
    "who needs to approve changes to {j}",
    "what should I do in a {j} incident",
    "which language does {p} script in",
]


def questions(n: int, seed: int) -> list[str]:
    """``n`` distinct questions over the stores' people, projects and cities."""
    rng = random.Random(seed)
    seen: dict[str, None] = {}
    while len(seen) < n:
        q = rng.choice(QUESTIONS).format(p=rng.choice(PEOPLE), j=rng.choice(PROJECTS), c=rng.choice(CITIES))
        seen[q if q not in seen else f"{q} again {len(seen)}"] = None
    return list(seen)


def one_user(n: int) -> list[dict[str, Any]]:
    """``n`` records of `import_speed.records`, all in one user's scope (a small store is one user's)."""
    out = records(n, seed=11)
    for line in out:
        line["scope"] = "user:u1"
    return out


async def measure(store: Path, searches: int, k: int) -> dict[str, Any]:
    principal = Principal(agent_id="planner", user_id="u1", session_id="s1")
    async with retold_lib.open_runtime(store) as rt:
        texts, ids = [], []
        for record in await rt.store.records_in_scope(retold_lib.Scope("user", "u1")):
            texts.append(record.content)
            ids.append(record.id)
        embedder = rt.embedder
        matrix = embedder.embed_documents(texts)
        asked = questions(searches + 10, seed=len(texts))
        for q in asked[:10]:  # warm: model, caches, SQLite pages
            await rt.search(principal, SearchRequest(queries=[q], k=k))
            embedder.embed_queries([q])
        ours: list[float] = []
        floor: list[float] = []
        stages: dict[str, list[float]] = {}
        for q in asked[10:]:
            embedder.clear_cache()
            started = time.perf_counter()
            vec = embedder.embed_queries([q])[0]
            scores = matrix @ vec
            top = np.argpartition(-scores, min(k, len(scores) - 1))[:k]
            _ = [ids[i] for i in top[np.argsort(-scores[top])]]
            floor.append((time.perf_counter() - started) * 1000)
            embedder.clear_cache()
            started = time.perf_counter()
            response = await rt.search(principal, SearchRequest(queries=[q], k=k))
            ours.append((time.perf_counter() - started) * 1000)
            for stage, ms in response.timings_ms.items():
                stages.setdefault(stage, []).append(ms)
    p50, f50 = statistics.median(ours), statistics.median(floor)
    return {
        "records": len(texts), "searches": searches,
        "search_ms": {"p50": round(p50, 2), "p95": round(percentile(ours, 95), 2)},
        "floor_ms": {"p50": round(f50, 2), "p95": round(percentile(floor, 95), 2)},
        "ratio_p50": round(p50 / f50, 3),
        "stages_p50_ms": {s: round(statistics.median(v), 2) for s, v in stages.items()},
    }  # fmt: skip


def build(n: int, folder: Path) -> Path:
    store, file = folder / f"small_{n}.sqlite", folder / f"small_{n}.jsonl"
    file.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in one_user(n)), encoding="utf-8")
    steps = (
        ("migrate", "--store", store),
        ("grant", "planner", "user:u1", "--read", "--store", store),  # the user scope is shared: granted
        ("import", file, "--store", store, "--json"),
    )
    for args in steps:
        proc, _ = retold(*args)
        if proc.returncode != 0:
            raise SystemExit(f"retold {args[0]} failed: {proc.stdout[-1000:]} {proc.stderr[-1000:]}")
    return store


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="300,3000", help="comma-separated record counts")
    parser.add_argument("--searches", type=int, default=100)
    parser.add_argument("--k", type=int, default=10)
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--check", action="store_true", help="exit 1 when a target is missed")
    args = parser.parse_args()
    report: dict[str, Any] = {**machine(), "target_ratio": TARGET_RATIO, "sizes": []}
    with tempfile.TemporaryDirectory() as tmp:
        for n in (int(s) for s in args.sizes.split(",")):
            row = asyncio.run(measure(build(n, Path(tmp)), args.searches, args.k))
            report["sizes"].append(row)
            top = sorted(row["stages_p50_ms"].items(), key=lambda kv: -kv[1])[:8]
            print(f"{row['records']:>6,} records: search p50 {row['search_ms']['p50']:.1f} ms "
                  f"(p95 {row['search_ms']['p95']:.1f}), floor p50 {row['floor_ms']['p50']:.1f} ms "
                  f"(p95 {row['floor_ms']['p95']:.1f}), ratio x{row['ratio_p50']:.2f} "
                  f"(target <= x{TARGET_RATIO})")  # fmt: skip
            print("        stages p50 ms: " + ", ".join(f"{s} {ms:.2f}" for s, ms in top))
    if args.json:
        args.json.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    targets = [
        Target(f"search p50 / floor p50 at {i['records']:,} records",
               lambda r, n=n: r["sizes"][n]["ratio_p50"], TARGET_RATIO, "<=", unit="x")
        for n, i in enumerate(report["sizes"])
    ]  # fmt: skip
    failed = check_targets(targets, report)
    return failed if args.check else 0


if __name__ == "__main__":
    sys.exit(main())
