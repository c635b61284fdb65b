"""The benchmark tier for LongMemEval_S: the retrieval harness end to end on a cut of the real data.

LongMemEval's development split lives beside the checkout (``../shared``, or
``$RETOLD_LONGMEMEVAL``), never in a clone of this repository, so this test sits outside
``tests/`` and is marked ``locomo``: ``make test-locomo`` (``pytest -m locomo benchmarks/tests``,
the benchmark tier of ``.ci/run``) runs it beside LoCoMo's. Without the data it fails, never skips.

The cut keeps the run to seconds: two answerable questions and one abstention question, each
haystack cut to its gold sessions and two others. One question is asked in the words of one of
its gold user turns, so every baseline must rank that session first: that checks the session
mapping and the baselines, not only that the harness runs.
"""

from __future__ import annotations

import json
import lzma
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.locomo

ROOT = Path(__file__).resolve().parents[2]
DATA = Path(
    os.environ.get(
        "RETOLD_LONGMEMEVAL",
        ROOT.parent / "shared" / "benchmarks" / "longmemeval" / "longmemeval_s_dev200.json.xz",
    )
)
SYSTEMS = ("bm25", "dense", "rrf", "hybrid, gate off", "hybrid, gate on")


def cut(raw: dict[str, Any], others: int = 2) -> dict[str, Any]:
    """``raw`` with its haystack cut to the gold sessions and the first ``others`` other sessions."""
    gold = set(raw["answer_session_ids"])
    keep = [i for i, sid in enumerate(raw["haystack_session_ids"]) if sid in gold]
    keep += [i for i, sid in enumerate(raw["haystack_session_ids"]) if sid not in gold][:others]
    keep.sort()
    out = dict(raw)
    for key in ("haystack_session_ids", "haystack_dates", "haystack_sessions"):
        out[key] = [raw[key][i] for i in keep]
    return out


def tiny_longmemeval(path: Path) -> str:
    """Three cut questions written to ``path``; returns the id of the one asked in a gold turn's words."""
    opener = lzma.open if DATA.suffix == ".xz" else open
    with opener(DATA, "rt", encoding="utf-8") as handle:
        questions = json.load(handle)
    answerable = [q for q in questions if not q["question_id"].endswith("_abs")]
    single = next(q for q in answerable if q["question_type"] == "single-session-user")
    multi = next(q for q in answerable if q["question_type"] == "multi-session")
    abstention = next(q for q in questions if q["question_id"].endswith("_abs"))
    quoted = cut(single)
    gold = quoted["haystack_session_ids"].index(quoted["answer_session_ids"][0])
    said = [t["content"] for t in quoted["haystack_sessions"][gold] if t["role"] == "user"]
    quoted["question"] = next(text for text in said if len(text) > 80)[:300]
    path.write_text(json.dumps([quoted, cut(multi), cut(abstention)]))
    return str(quoted["question_id"])


def test_longmemeval_retrieval_tiny(tmp_path: Path) -> None:
    data, out, md = tmp_path / "tiny.json", tmp_path / "lme.json", tmp_path / "table.md"
    dump, cache = tmp_path / "rankings.jsonl", tmp_path / "vectors.npz"
    quoted = tiny_longmemeval(data)
    proc = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "longmemeval_retrieval.py"), "--data", str(data),
         "--json", str(out), "--markdown", str(md), "--dump", str(dump), "--embed-cache", str(cache),
         "--set", "retrieval.rrf_k=60"],
        capture_output=True, text=True, timeout=240, cwd=ROOT,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    text = proc.stdout
    for system in SYSTEMS:
        assert f"all                        {system}" in text
    assert "targets:" in text and "aims (reported, not checked):" in text
    assert text.count("PASS ") + text.count("FAIL ") == 6  # four targets, two aims, each measured
    result = json.loads(out.read_text())
    assert result["meta"]["embedder"] and result["meta"]["commit"]
    assert result["questions"] == 3 and result["answerable"] == 2
    assert result["retrieval_config"]["rrf_k"] == 60  # --set reached the run's config
    assert result["outcomes"].get("created", 0) > 0 and result["records"] > 0
    assert result["unbatched_document_embeds"] == 0  # every write found its vectors in the batch
    assert result["embed_cache"]["added"] > 0 and cache.exists()
    for key in ("model_load_s", "embed_total_s", "write_total_s", "search_total_s", "per_question_s"):
        assert result["timings_s"][key] >= 0.0
    metrics = result["metrics"]
    for system in SYSTEMS:
        row = metrics[system]["all"]
        assert row["n"] == 2
        for metric in ("recall_any", "recall_all", "ndcg_any"):
            assert 0.0 <= row[f"{metric}@5"] <= row[f"{metric}@10"] <= 1.0
        assert metrics[system]["abstention"]["n"] == 1
    rows = [json.loads(line) for line in dump.read_text().splitlines()]
    assert len(rows) == 3 and all(set(r["rankings"]) == set(SYSTEMS) for r in rows)
    asked = next(r for r in rows if r["question_id"] == quoted)
    for system in ("bm25", "dense", "rrf"):  # the question is a gold turn's own words
        assert asked["rankings"][system][0] in asked["gold"], system
    assert "| hybrid, gate on |" in md.read_text()
