"""The benchmark tier: the LoCoMo-backed benchmarks' quick paths, end to end on LoCoMo itself.

LoCoMo lives beside the checkout (``../shared``, or ``$RETOLD_LOCOMO``), never in a clone of
this repository, so these tests sit outside ``tests/`` and run only in ``make test-locomo``
(``.ci/run``). Without the data they fail, never skip.
"""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.locomo

ROOT = Path(__file__).resolve().parents[2]
LOCOMO = Path(
    os.environ.get(
        "RETOLD_LOCOMO",
        ROOT.parent / "shared" / "benchmarks" / "locomo" / "locomo10.json",
    )
)


def tiny_locomo(path: Path, sessions: int = 2) -> str:
    """The first conversation cut to ``sessions`` sessions, one turn repeated; returns the copy's dia_id."""
    sample = copy.deepcopy(json.loads(LOCOMO.read_text())[0])
    conv = sample["conversation"]
    for key in [k for k in conv if k.startswith("session_")]:
        number = int(key.split("_")[1])
        if number > sessions:
            del conv[key]
    first = conv["session_1"]
    repeat = {"speaker": first[2]["speaker"], "dia_id": "D1:900", "text": first[2]["text"]}
    first.append(repeat)
    kept = {f"D{s}:" for s in range(1, sessions + 1)}
    qa = [q for q in sample["qa"] if q.get("evidence") and all(e[:3] in kept for e in q["evidence"])]
    qa.append({"question": f"What did {repeat['speaker']} say: {repeat['text']}", "answer": "x",
               "evidence": ["D1:900"], "category": 4})  # fmt: skip
    qa += [q for q in sample["qa"] if q["category"] == 5][:4]
    sample["qa"] = qa
    path.write_text(json.dumps([sample]))
    return "D1:900"


def test_locomo_retrieval_quick(tmp_path: Path) -> None:
    data, out, md = tmp_path / "tiny.json", tmp_path / "locomo.json", tmp_path / "table.md"
    tiny_locomo(data)
    proc = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "locomo_retrieval.py"), "--quick", "--questions", "30",
         "--data", str(data), "--json", str(out), "--markdown", str(md)],
        capture_output=True, text=True, timeout=240, cwd=ROOT,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "hybrid, gate off" in proc.stdout and "targets:" in proc.stdout
    result = json.loads(out.read_text())
    assert result["meta"]["embedder"] and result["meta"]["commit"]
    assert result["outcomes"].get("reinforced", 0) >= 1  # the repeated turn merged into the original
    assert result["records"] < result["turns"]
    assert result["unbatched_document_embeds"] == 0  # every write found its vector in the batch
    metrics = result["metrics"]
    for system in ("bm25", "dense", "hybrid, gate off", "hybrid, gate on"):
        row = metrics[system]["1-4"]
        assert row["n"] > 0 and 0.0 <= row["recall@10"] <= 1.0 and 0.0 <= row["mrr"] <= 1.0
    assert 0.0 <= metrics["hybrid, gate on"]["5"]["empty"] <= 1.0
    assert "| hybrid, gate on |" in md.read_text()


def test_calibrate_gate_quick(tmp_path: Path) -> None:
    out, store = tmp_path / "calibration.json", tmp_path / "calib.sqlite"
    proc = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "calibrate_gate.py"), "--quick", "--json", str(out),
         "--store", str(store)],
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
    # The scorer probe reads the kept log: the shipped gate's row, the floors and both scorers.
    probe = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "gate_scorer_probe.py"), str(store), "--tune-on", "1"],
        capture_output=True, text=True, timeout=240, cwd=ROOT,
    )  # fmt: skip
    assert probe.returncode == 0, probe.stderr[-2000:]
    lines = probe.stdout.splitlines()
    assert any(line.strip().startswith("shipped gate") for line in lines)
    assert "logistic:" in lines and "boosted trees (depth 3):" in lines
    assert sum(line.strip().startswith("p >= ") for line in lines) >= 2 * 10  # both models swept
