"""``benchmarks/relative_dates.py``: its scoring, and its message when dateparser is missing."""

from __future__ import annotations

import sys
from datetime import UTC, date, datetime

import pytest
from benchmark_module import BENCHMARKS, load_benchmark

if str(BENCHMARKS) not in sys.path:  # the script imports its sibling ``common`` as run from benchmarks/
    sys.path.insert(0, str(BENCHMARKS))
pytestmark = pytest.mark.integration

bench = load_benchmark("relative_dates")
TURN = datetime(2026, 3, 4, 10, 30, tzinfo=UTC)


def test_the_grammar_scores_every_labelled_case_right() -> None:
    report = bench.evaluate("grammar", bench.grammar, bench.load_cases(), repeat=1)
    assert (report.right, report.unmatched_found) == (report.cases, 0)


def test_a_hit_needs_overlapping_text_and_days_inside_the_label() -> None:
    may = (date(2026, 5, 1), date(2026, 5, 31))
    case = bench.Case("in May I move", TURN, (("in May", (may,)),), "test")

    def one_day(text: str, ref: datetime) -> list[tuple[str, tuple[tuple[date, date], ...]]]:
        return [("May", ((date(2026, 5, 4), date(2026, 5, 4)),))]

    def wrong_place(text: str, ref: datetime) -> list[tuple[str, tuple[tuple[date, date], ...]]]:
        return [("I", ((date(2026, 5, 4), date(2026, 5, 4)),))]

    def too_wide(text: str, ref: datetime) -> list[tuple[str, tuple[tuple[date, date], ...]]]:
        return [("in May", ((date(2026, 1, 1), date(2026, 12, 31)),))]

    assert bench.evaluate("one day", one_day, [case], repeat=1).right == 1
    assert bench.evaluate("wrong place", wrong_place, [case], repeat=1).unmatched_found == 1
    assert bench.evaluate("too wide", too_wide, [case], repeat=1).right == 0


def test_without_dateparser_it_says_how_to_install_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "dateparser", None)
    monkeypatch.setitem(sys.modules, "dateparser.search", None)
    with pytest.raises(SystemExit, match=r"needs dateparser.*pip install"):
        bench.dateparser_parser("future")
