"""Each benchmark's quick path runs on a tiny input, so none of them can rot unnoticed."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

ROOT = Path(__file__).parents[2]


def test_write_latency_benchmark_runs(tmp_path: Path) -> None:
    out = tmp_path / "write.json"
    proc = subprocess.run(
        [
            sys.executable,
            str(ROOT / "benchmarks" / "write_latency.py"),
            "--records",
            "20",
            "--writes",
            "6",
            "--json",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "embedding share of total write time" in proc.stdout
    data = json.loads(out.read_text())
    assert data["writes"] == 6 and data["summary"]["all"]["total"]["n"] == 6


def test_search_latency_benchmark_runs(tmp_path: Path) -> None:
    out = tmp_path / "search.json"
    proc = subprocess.run(
        [
            sys.executable,
            str(ROOT / "benchmarks" / "search_latency.py"),
            "--quick",
            "--only",
            "scale",
            "--json",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    data = json.loads(out.read_text())
    assert data["scale"]["wall"]["p50"] > 0 and "graph" in data["scale"]


def test_write_latency_size_sweep_runs(tmp_path: Path) -> None:
    out = tmp_path / "sweep.json"
    proc = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "write_latency.py"), "--sizes", "30,300",
         "--writes", "6", "--json", str(out)],
        capture_output=True, text=True, timeout=300, cwd=ROOT,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    sizes = json.loads(out.read_text())["sweep"]["sizes"]
    assert [s["records"] for s in sizes] == [30, 300]
    assert all(s["total_p50"] > 0 and s["embedding_p50"] > 0 for s in sizes)


def test_search_latency_interleaved_case_runs(tmp_path: Path) -> None:
    out = tmp_path / "interleaved.json"
    proc = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "search_latency.py"), "--quick", "--only",
         "interleaved", "--searches", "4", "--json", str(out)],
        capture_output=True, text=True, timeout=300, cwd=ROOT,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    data = json.loads(out.read_text())["interleaved"]
    assert data["wall"]["p50"] > 0 and data["records"] == 5000


def test_cold_start_benchmark_runs(tmp_path: Path) -> None:
    out = tmp_path / "cold.json"
    proc = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "cold_start.py"), "--quick", "--out", str(out)],
        capture_output=True, text=True, timeout=300, cwd=ROOT,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "idle threads=2 wait=PASSIVE" in proc.stdout
    row = json.loads(out.read_text())["median_ms"]["idle threads=2 wait=PASSIVE"]
    assert set(row) >= {"import_retold", "import_torch", "import_st", "load", "first_embed", "wall"}
    assert all(value > 0 for value in row.values())
