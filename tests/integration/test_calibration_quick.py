"""The gate calibration sweep's quick path runs end to end on LoCoMo and prints its tables."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

ROOT = Path(__file__).parents[2]
LOCOMO = Path(
    os.environ.get(
        "RETOLD_LOCOMO",
        Path(__file__).resolve().parents[3] / "shared" / "benchmarks" / "locomo" / "locomo10.json",
    )
)


@pytest.mark.locomo  # the benchmark tier (make test-locomo); fails, not skips, without the data
def test_calibrate_gate_quick(tmp_path: Path) -> None:
    out = tmp_path / "calibration.json"
    proc = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "calibrate_gate.py"), "--quick", "--json", str(out)],
        capture_output=True, text=True, timeout=240, cwd=ROOT,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    text = proc.stdout
    assert "== full gate" in text and "current defaults, tool" in text and "chosen, auto" in text
    assert "F1" in text and "c3 inject" in text
    snippet = text.split("recommended YAML:", 1)[1]
    for key in ("retrieval:", "gate:", "dense_floor:", "episodic:", "relative_floor:", "auto:"):
        assert key in snippet
    data = json.loads(out.read_text())
    assert data["counts"]["present"] > 0 and data["counts"]["ordinary"] > 0
    chosen = data["chosen"]["tool"]
    assert 0.0 <= chosen["dense_floor"]["episodic"] <= 1.0
    assert data["meta"]["embedder"] and data["metrics"]["full gate"]["chosen, tool"]["f1"] >= 0.0
