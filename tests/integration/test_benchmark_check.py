"""``--check`` of the latency benchmarks: a missed documented target exits 1, an unmeasured one is skipped."""

from __future__ import annotations

import sys
from typing import Any

import pytest
from benchmark_module import BENCHMARKS, load_benchmark

if str(BENCHMARKS) not in sys.path:  # the scripts import their sibling ``common`` as run from benchmarks/
    sys.path.insert(0, str(BENCHMARKS))
pytestmark = pytest.mark.integration

search = load_benchmark("search_latency")
write = load_benchmark("write_latency")


def _search_report(records: int, wall: float, rewrite: float = 0.5, graph: float = 1.0) -> dict[str, Any]:
    stages = {"wall": {"p50": wall, "p95": wall}, "rewrite": {"p50": rewrite}, "graph": {"p50": graph}}
    return {"scale": {"records": records, **stages}}


def _check(targets: list[Any], report: dict[str, Any]) -> tuple[int, list[str]]:
    lines: list[str] = []
    code = search.check_targets(targets, report, out=lines.append)
    return code, lines


def test_met_targets_exit_zero() -> None:
    code, lines = _check(search.TARGETS, _search_report(50_000, wall=34.5))
    assert code == 0
    assert [line.split()[0] for line in lines[:2]] == ["PASS", "PASS"]
    assert not any(line.startswith("FAIL") for line in lines)


def test_missed_target_exits_one_with_a_fail_line() -> None:
    code, lines = _check(search.TARGETS, _search_report(50_000, wall=36.2))
    assert code == 1
    assert "FAIL 50K search p50, 25 ms embedder: 36.20 ms vs target <= 35 ms" in lines
    code, lines = _check(search.TARGETS, _search_report(50_000, wall=30.0, graph=3.2))
    assert code == 1 and any(line.startswith("FAIL 50K LangGraph share") for line in lines)


def test_quick_sizes_are_not_measured_and_never_fail() -> None:
    # A quick run measures 5K records: slow there says nothing about the 50K target.
    code, lines = _check(search.TARGETS, _search_report(5000, wall=500.0))
    assert code == 0
    assert all(line.startswith("SKIP") and "not measured" in line for line in lines)
    assert len(lines) == len(search.TARGETS)


def test_scaling_and_backend_figures_are_checked() -> None:
    report = {
        "scaling": {"50000": {"wall": {"p50": 40.0}, "rewrite": {"p50": 0.5}, "graph": {"p50": 1.0}}},
        "backends": {
            "50000": {"sqlite": {"wall": (35.0, 70.0)}, "postgresql": {"wall": (41.3, 45.5)}},
            "1000000": {"postgresql": {"wall": (61.0, 200.0)}},
        },
    }
    code, lines = _check(search.TARGETS, report)
    assert code == 1
    verdicts = {line.split(":")[0] for line in lines}
    assert verdicts == {
        "FAIL 50K search p50, 25 ms embedder",
        "PASS 50K LangGraph share p50 (graph against the stages called directly)",
        "SKIP 50K search p50 with one write before each, 25 ms embedder",
        "PASS 50K PostgreSQL / SQLite search p50",
        "FAIL 1M PostgreSQL search p50",
    }


@pytest.mark.parametrize(("dedup", "persistence", "expected"), [(4.1, 3.2, 0), (5.0, 3.2, 1), (4.1, 4.5, 1)])
def test_write_targets(dedup: float, persistence: float, expected: int) -> None:
    stages = {"dedup_search": dedup, "persistence": persistence, "event_log": 0.6, "transaction": 0.5}
    summary = {"all": {stage: {"p50": value, "p95": value, "n": 6} for stage, value in stages.items()}}
    lines: list[str] = []
    assert write.check_targets(write.TARGETS, summary, out=lines.append) == expected
    assert len(lines) == len(write.TARGETS)
    assert any(line.startswith("FAIL") for line in lines) == bool(expected)


@pytest.mark.parametrize(
    ("small", "large", "embedding", "expected"),
    [(22.0, 25.0, 17.0, 0), (22.0, 27.0, 17.0, 1), (22.0, 25.0, 15.0, 1)],
)
def test_write_sweep_targets(small: float, large: float, embedding: float, expected: int) -> None:
    """Flat in the store's size (largest / smallest ≤ 1.2) and within 8 ms of its one embedding."""
    sizes = [
        {"records": 1000, "total_p50": small, "embedding_p50": embedding},
        {"records": 200_000, "total_p50": large, "embedding_p50": embedding},
    ]
    lines: list[str] = []
    assert write.check_targets(write.SWEEP_TARGETS, {"sizes": sizes}, out=lines.append) == expected
    assert len(lines) == len(write.SWEEP_TARGETS)
