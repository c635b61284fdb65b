"""The cold start of the packaged embedder, stage by stage, and the torch thread setting under load.

This is the torch backend (``embedding.backend: torch``); the default ONNX backend's cold start
is measured by ``benchmarks/onnx_embedder.py``.

Every figure comes from a fresh interpreter (a subprocess per run), as a server's first call
pays it: ``import retold``, ``import torch``, ``import sentence_transformers``, loading the
packaged weights (sha256 check included), the first embedding, then the steady cost of a
single query (30 distinct ones, median) and of a batch of 32 documents (5 batches, median).
``wall`` is the parent's clock from spawning the interpreter to its first embedding.

Each run is one of eight settings: torch intra-op threads 1 or 2 (``torch.set_num_threads``
right after ``import torch``, what :func:`retold.index.threads.configure_torch_threads` does),
``OMP_WAIT_POLICY`` unset (libgomp's default) or ``PASSIVE``, under three loads:

* ``idle``: nothing else started (the shared machine's other work still runs);
* ``busy``: one busy-loop process per core, started before the run and stopped after it;
* ``torch``: a second process with the same thread setting embedding batches without pause
  (two retold processes, or a test worker beside a server, on one machine).

The settings are interleaved round by round so a change in the shared machine's load lands
on all of them; the table shows the median over rounds.

    python benchmarks/cold_start.py                          # 3 rounds of the 12 settings
    python benchmarks/cold_start.py --rounds 5 --loads idle,busy
    python benchmarks/cold_start.py --quick                  # one idle run of retold's setting
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # runnable as `python benchmarks/cold_start.py` from a checkout
    sys.path.insert(0, str(ROOT))

from common import machine  # noqa: E402

RESULTS = ROOT / "benchmarks" / "results" / "cold_start.json"
STAGES = ("import_retold", "import_torch", "import_st", "load", "first_embed", "query", "batch32", "wall")
_QUERIES = 30
_BATCHES = 5


def _child(threads: int) -> None:
    """One cold start in this fresh interpreter; prints its stage times (ms) as JSON."""
    ms: dict[str, float] = {}

    def lap(name: str, start: float) -> float:
        now = time.perf_counter()
        ms[name] = (now - start) * 1000
        return now

    t = time.perf_counter()
    import retold  # noqa: F401

    t = lap("import_retold", t)
    import torch

    torch.set_num_threads(threads)
    t = lap("import_torch", t)
    import sentence_transformers  # noqa: F401

    t = lap("import_st", t)
    from retold.config import EmbeddingConfig
    from retold.index.embedding_backend import build_embedder

    embedder = build_embedder(EmbeddingConfig(backend="torch"))  # ONNX's: benchmarks/onnx_embedder.py
    embedder.warm()
    t = lap("load", t)
    embedder.embed_queries(["what answer style does the user prefer?"])
    lap("first_embed", t)
    singles = []
    for i in range(_QUERIES):
        t = time.perf_counter()
        embedder.embed_queries([f"question number {i}: which timezone is the user in, and why?"])
        singles.append((time.perf_counter() - t) * 1000)
    ms["query"] = statistics.median(singles)
    docs = [f"Record {i}: the user prefers detailed answers with worked examples, " * 3 for i in range(32)]
    batches = []
    for b in range(_BATCHES):
        t = time.perf_counter()
        embedder.embed_documents([f"{b} {d}" for d in docs])
        batches.append((time.perf_counter() - t) * 1000)
    ms["batch32"] = statistics.median(batches)
    ms["torch_threads"] = torch.get_num_threads()
    print(json.dumps(ms))


def _spin(threads: int) -> None:
    """The ``torch`` load: embed batches of 32 documents until killed."""
    import torch

    torch.set_num_threads(threads)
    from retold.config import EmbeddingConfig
    from retold.index.embedding_backend import build_embedder

    embedder = build_embedder(EmbeddingConfig(backend="torch"))  # ONNX's: benchmarks/onnx_embedder.py
    embedder.warm()
    print("ready", flush=True)
    docs = [
        f"Record {i}: a competing worker embeds its own documents, over and over. " * 3 for i in range(32)
    ]
    while True:
        embedder.embed_documents(docs)


def _env(policy: str | None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in {"OMP_WAIT_POLICY", "OMP_NUM_THREADS"}}
    env.setdefault("HF_HUB_OFFLINE", "1")
    env.setdefault("TRANSFORMERS_OFFLINE", "1")
    env["RETOLD_TORCH_THREADS"] = "0"  # leave torch alone: the child sets the threads itself
    if policy is not None:
        env["OMP_WAIT_POLICY"] = policy
    return env


def _start_load(load: str, threads: int, env: dict[str, str]) -> list[subprocess.Popen[str]]:
    if load == "busy":
        procs = [
            subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(os.cpu_count() or 1)
        ]
        time.sleep(0.3)  # let the busy loops take their cores
        return procs  # type: ignore[return-value]
    if load == "torch":
        proc = subprocess.Popen(
            [sys.executable, __file__, "--spin", str(threads)], stdout=subprocess.PIPE, text=True, env=env
        )
        assert proc.stdout is not None
        if proc.stdout.readline().strip() != "ready":
            raise RuntimeError("the torch load did not start")
        time.sleep(0.5)
        return [proc]
    return []


def _stop(procs: list[subprocess.Popen[str]]) -> None:
    for proc in procs:
        proc.terminate()
    for proc in procs:
        proc.wait()


def _one(threads: int, policy: str | None, load_kind: str) -> dict[str, float]:
    env = _env(policy)
    load = _start_load(load_kind, threads, env)
    try:
        start = time.perf_counter()
        proc = subprocess.run(
            [sys.executable, __file__, "--child", str(threads)],
            capture_output=True, text=True, env=env, timeout=600, check=False,
        )  # fmt: skip
        wall = (time.perf_counter() - start) * 1000
    finally:
        _stop(load)
    if proc.returncode != 0:
        raise RuntimeError(f"child failed: {proc.stderr[-2000:]}")
    figures: dict[str, float] = json.loads(proc.stdout.strip().splitlines()[-1])
    # the parent's wall includes the steady loops: subtract them to get spawn → first embedding
    figures["wall"] = wall - figures["query"] * _QUERIES - figures["batch32"] * _BATCHES
    return figures


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--child", type=int, default=None, help=argparse.SUPPRESS)
    parser.add_argument("--spin", type=int, default=None, help=argparse.SUPPRESS)
    parser.add_argument("--loads", default="idle,busy,torch", help="comma-separated: idle, busy, torch")
    parser.add_argument(
        "--quick", action="store_true", help="one round, idle, threads=2 wait=PASSIVE only (a smoke test)"
    )
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()
    if args.child is not None:
        _child(args.child)
        return 0
    if args.spin is not None:
        _spin(args.spin)
        return 0
    settings = [
        (load, threads, policy)
        for load in args.loads.split(",")
        for threads in (1, 2)
        for policy in (None, "PASSIVE")
    ]
    if args.quick:
        args.rounds, settings = 1, [("idle", 2, "PASSIVE")]
    runs: dict[str, list[dict[str, float]]] = {}
    for r in range(args.rounds):
        for load, threads, policy in settings:
            key = f"{load} threads={threads} wait={policy or 'default'}"
            runs.setdefault(key, []).append(_one(threads, policy, load))
            print(f"round {r + 1}/{args.rounds} {key}: {runs[key][-1]}", file=sys.stderr)
    table = {
        key: {stage: statistics.median(run[stage] for run in values) for stage in STAGES}
        for key, values in runs.items()
    }
    head = f"{'setting':<32}" + "".join(f"{s:>14}" for s in STAGES)
    print(f"median of {args.rounds} fresh interpreters, ms ({os.cpu_count()} CPUs)")
    print(head)
    for key, row in table.items():
        print(f"{key:<32}" + "".join(f"{row[s]:>14.1f}" for s in STAGES))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(
        json.dumps({"machine": machine(), "rounds": args.rounds, "median_ms": table, "runs": runs}, indent=1)
        + "\n"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
