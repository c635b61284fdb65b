"""``benchmarks/portal_overhead.py`` runs on a few calls, so it cannot rot unnoticed."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

ROOT = Path(__file__).parents[2]


def test_portal_overhead_benchmark_runs(tmp_path: Path) -> None:
    out = tmp_path / "portal.json"
    proc = subprocess.run(
        [
            sys.executable,
            str(ROOT / "benchmarks" / "portal_overhead.py"),
            "--calls",
            "80",
            "--json",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    results = json.loads(out.read_text())["results"]
    assert set(results) == {"nothing", "one anyio.to_thread call"}
    for ways in results.values():
        assert set(ways) == {"hand-made loop thread", "RuntimePortal.run", "anyio portal.call"}
        assert all(way["p50_us"] > 0 for way in ways.values())
