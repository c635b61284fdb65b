"""The LoCoMo benchmark's own scoring and id handling: pure, no LoCoMo data needed."""

from __future__ import annotations

import sys

import pytest
from benchmark_module import load_benchmark

pytestmark = pytest.mark.integration


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
