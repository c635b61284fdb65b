"""The LoCoMo retrieval benchmark's quick path runs end to end on a tiny slice of LoCoMo.

The slice is the first conversation's first two sessions plus one repeated turn, so the
ingestor's duplicate merge is exercised: the merged record must count for both ``dia_id``s.
"""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from benchmark_module import load_benchmark

pytestmark = pytest.mark.integration

ROOT = Path(__file__).parents[2]
BENCHMARK = ROOT / "benchmarks" / "locomo_retrieval.py"
LOCOMO = Path(
    os.environ.get(
        "RETOLD_LOCOMO",
        Path(__file__).resolve().parents[3] / "shared" / "benchmarks" / "locomo" / "locomo10.json",
    )
)
needs_locomo = pytest.mark.locomo  # the benchmark tier; it fails, not skips, without the data


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


def test_scoring_counts_a_merged_record_for_every_dia_id() -> None:
    bench = load_benchmark("locomo_retrieval")
    question = bench.Question("conv", "q?", "a", ("D1:1", "D2:5"), 4)
    asked = bench.Asked(question, {"D1:1", "D2:5"})
    absorbed = {"r1": ["D1:1", "D2:5"], "r2": ["D1:2"]}
    m = bench.score(asked, ["r2", "r1"], absorbed)
    assert m["recall@5"] == 1.0 and m["all@5"] == 1.0 and m["session@5"] == 1.0 and m["mrr"] == 0.5
    m = bench.score(asked, ["r2"], absorbed)
    assert m["recall@5"] == 0.0 and m["any@5"] == 0.0 and m["mrr"] == 0.0


def test_evidence_ids_are_normalised() -> None:
    load_benchmark("locomo_retrieval")
    locomo_data = sys.modules["locomo_data"]  # on sys.path once the benchmark is loaded
    assert locomo_data.evidence_ids(["D8:6; D9:17", "D30:05", "D", "D1:3", "D1:3"]) == (
        "D8:6", "D9:17", "D30:5", "D", "D1:3",
    )  # fmt: skip


@needs_locomo
def test_locomo_retrieval_quick(tmp_path: Path) -> None:
    data, out, md = tmp_path / "tiny.json", tmp_path / "locomo.json", tmp_path / "table.md"
    tiny_locomo(data)
    proc = subprocess.run(
        [sys.executable, str(BENCHMARK), "--quick", "--questions", "30", "--data", str(data),
         "--json", str(out), "--markdown", str(md)],
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
