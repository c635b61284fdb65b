"""Relative-date parsing: retold's grammar against dateparser on the labelled cases.

Runs :func:`retold.ingest.write.temporal.find_expressions` and ``dateparser.search.search_dates``
(the ``dev`` extra) over ``tests/data/relative_dates.jsonl`` (phrases from the temporal tests,
hand-written ones and sentences that name no date) and prints, per parser, how many cases it
gets right, its hits and misses, its false positives on the date-free sentences, and the
time per call.

How a result is scored, the same way for both parsers. A found expression *hits* a labelled
one when their texts overlap in the sentence and every calendar day it resolves to lies
inside one of the labelled spans: the grammar's spans must each fit inside a labelled span
(a whole year does not hit "March"), and dateparser's single datetime must fall on a
labelled day or inside a labelled period (any day of May hits "in May", since
dateparser names one day for a month). Where English allows two readings ("next Friday",
"03/04/2026"), either hits. A case is right when every labelled expression is hit and
nothing else was found. Roles ("since" starts, "until" ends) are the grammar's alone, so they
are not scored here; ``tests/unit/test_relative_dates.py`` holds the grammar to its exact
labels, roles included.

dateparser runs with ``languages=["en"]`` and the turn as ``RELATIVE_BASE``, once with its
default ``PREFER_DATES_FROM`` (``current_period``) and once with ``future``.

Columns: ``right`` cases, ``recall`` (labelled expressions hit), ``precision`` (found
expressions that hit a label), ``neg. FP`` (date-free sentences with any output),
``unmatched`` (found expressions that hit no label: spurious or wrongly dated), and µs per
call (each case's fastest of five calls; p50 and mean over the cases).

    python benchmarks/relative_dates.py                 # prints the table, writes the JSON
    python benchmarks/relative_dates.py --errors        # also every wrong case
    python benchmarks/relative_dates.py --json out.json # the numbers elsewhere
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # runnable as `python benchmarks/relative_dates.py` from a checkout
    sys.path.insert(0, str(ROOT))

from common import machine, percentile  # noqa: E402

from retold.ingest.write.temporal import find_expressions  # noqa: E402

CASES = ROOT / "tests" / "data" / "relative_dates.jsonl"
RESULTS = ROOT / "benchmarks" / "results" / "relative_dates.json"
REPEAT = 5  # calls per case; the fastest is its time

Span = tuple[date, date]
Found = tuple[str, tuple[Span, ...]]  # the matched text and the days it resolves to
Parser = Callable[[str, datetime], list[Found]]


@dataclass(frozen=True)
class Case:
    text: str
    ref: datetime
    expected: tuple[Found, ...]
    source: str


def load_cases(path: Path = CASES) -> list[Case]:
    """One labelled sentence per JSON line: its turn timestamp and the expressions it names."""
    cases = []
    with path.open(encoding="utf-8") as handle:
        for line in handle:
            if not line.strip():
                continue
            row = json.loads(line)
            expected = tuple(
                (e["text"], tuple((date.fromisoformat(a), date.fromisoformat(b)) for a, b in e["spans"]))
                for e in row["expected"]
            )
            cases.append(Case(row["text"], datetime.fromisoformat(row["ref"]), expected, row["source"]))
    return cases


def grammar(text: str, ref: datetime) -> list[Found]:
    return [(e.text, e.spans) for e in find_expressions(text, ref)]


def dateparser_parser(prefer: str) -> Parser:
    """``search_dates`` as a parser: each match becomes its text and the one day it names."""
    try:
        from dateparser.search import search_dates
    except ImportError:
        sys.exit(
            "benchmarks/relative_dates.py needs dateparser, which retold does not depend on: "
            "pip install -e '.[dev]' (or pip install dateparser)"
        )
    languages = ["en"]

    def parse(text: str, ref: datetime) -> list[Found]:
        base = ref.astimezone(UTC).replace(tzinfo=None)
        settings = {"RELATIVE_BASE": base, "PREFER_DATES_FROM": prefer, "RETURN_AS_TIMEZONE_AWARE": False}
        found = search_dates(text, languages=languages, settings=settings) or []
        return [(matched, ((when.date(), when.date()),)) for matched, when in found]

    return parse


def _locate(sentence: str, texts: list[str]) -> list[tuple[int, int]]:
    """Where each text sits in the sentence as whole words, in order (a repeat takes the next one)."""
    out, cursor = [], 0
    for text in texts:
        pattern = re.compile(rf"(?<!\w){re.escape(text)}(?!\w)", re.IGNORECASE)
        match = pattern.search(sentence, cursor) or pattern.search(sentence)
        out.append(match.span() if match else (-1, -1))
        if match:
            cursor = match.end()
    return out


def _inside(spans: tuple[Span, ...], labelled: tuple[Span, ...]) -> bool:
    return bool(spans) and all(any(a <= s and e <= b for a, b in labelled) for s, e in spans)


@dataclass
class Report:
    name: str
    cases: int = 0
    right: int = 0
    expected: int = 0
    hits: int = 0
    found: int = 0
    negatives: int = 0
    negatives_with_output: int = 0
    unmatched_found: int = 0
    micros: list[float] = field(default_factory=list)
    wrong: list[dict[str, Any]] = field(default_factory=list)

    def summary(self) -> dict[str, Any]:
        return {
            "cases": self.cases,
            "right": self.right,
            "accuracy": self.right / self.cases,
            "expected_expressions": self.expected,
            "hits": self.hits,
            "recall": self.hits / self.expected,
            "found_expressions": self.found,
            "precision": self.hits / self.found if self.found else float("nan"),
            "negatives": self.negatives,
            "negatives_with_output": self.negatives_with_output,
            "unmatched_found": self.unmatched_found,
            "us_per_call_p50": percentile(self.micros, 50),
            "us_per_call_p95": percentile(self.micros, 95),
            "us_per_call_mean": sum(self.micros) / len(self.micros),
        }


def evaluate(name: str, parser: Parser, cases: list[Case], repeat: int = REPEAT) -> Report:
    """Score one parser on every case; each case's time is its fastest of ``repeat`` calls."""
    report = Report(name)
    parser(cases[0].text, cases[0].ref)  # warm-up: first-call imports and caches are not per-call cost
    for case in cases:
        best = float("inf")
        for _ in range(repeat):
            started = time.perf_counter()
            found = parser(case.text, case.ref)
            best = min(best, time.perf_counter() - started)
        report.micros.append(best * 1e6)
        where_found = _locate(case.text, [t for t, _ in found])
        where_expected = _locate(case.text, [t for t, _ in case.expected])
        unused = set(range(len(found)))
        hits = 0
        for (start, end), (_, labelled) in zip(where_expected, case.expected, strict=True):
            for i in sorted(unused):
                f_start, f_end = where_found[i]
                if f_start < end and start < f_end and _inside(found[i][1], labelled):
                    unused.discard(i)
                    hits += 1
                    break
        report.cases += 1
        report.expected += len(case.expected)
        report.found += len(found)
        report.hits += hits
        report.unmatched_found += len(unused)
        if not case.expected:
            report.negatives += 1
            report.negatives_with_output += bool(found)
        if hits == len(case.expected) and not unused:
            report.right += 1
        else:
            report.wrong.append(
                {
                    "text": case.text,
                    "ref": case.ref.isoformat(),
                    "expected": [
                        [t, [[a.isoformat(), b.isoformat()] for a, b in s]] for t, s in case.expected
                    ],
                    "found": [[t, [[a.isoformat(), b.isoformat()] for a, b in s]] for t, s in found],
                }
            )
    return report


def _versions() -> dict[str, str]:
    from importlib.metadata import PackageNotFoundError, version

    out = {}
    for package in ("retold", "dateparser"):
        try:
            out[package] = version(package)
        except PackageNotFoundError:
            out[package] = "not installed"
    return out


def format_table(reports: list[Report]) -> str:
    head = (
        f"{'parser':28} {'right':>9} {'recall':>7} {'precision':>9} {'neg. FP':>8} {'unmatched':>9}"
        f" {'µs p50':>8} {'µs mean':>8}"
    )
    lines = [head]
    for r in reports:
        s = r.summary()
        lines.append(
            f"{r.name:28} {s['right']:>4}/{s['cases']:<4} {s['recall']:>7.3f} {s['precision']:>9.3f}"
            f" {s['negatives_with_output']:>3}/{s['negatives']:<4} {s['unmatched_found']:>9}"
            f" {s['us_per_call_p50']:>8.1f} {s['us_per_call_mean']:>8.1f}"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", type=Path, default=RESULTS, metavar="PATH", help=f"default {RESULTS}")
    parser.add_argument("--errors", action="store_true", help="list every case a parser gets wrong")
    args = parser.parse_args(argv)

    cases = load_cases()
    parsers: list[tuple[str, Parser]] = [
        ("grammar (retold.temporal)", grammar),
        ("dateparser current_period", dateparser_parser("current_period")),
        ("dateparser future", dateparser_parser("future")),
    ]
    reports = [evaluate(name, parse, cases) for name, parse in parsers]
    sources = sorted({c.source for c in cases})
    print(f"{len(cases)} cases from {', '.join(sources)}; {sum(not c.expected for c in cases)} name no date")
    print()
    print(format_table(reports))
    if args.errors:
        for r in reports:
            print(f"\n{r.name}: {len(r.wrong)} wrong")
            for w in r.wrong:
                print(f"  {w['text']!r} @ {w['ref'][:10]}: expected {w['expected']}, found {w['found']}")

    payload = {
        "cases": len(cases),
        "scoring": "hit = texts overlap and every resolved day lies inside a labelled span",
        "versions": _versions(),
        "machine": machine(),
        "parsers": {r.name: {**r.summary(), "wrong": r.wrong} for r in reports},
    }
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(payload, indent=2) + "\n", encoding="utf-8")
    print(f"\nwrote {args.json.relative_to(ROOT) if args.json.is_relative_to(ROOT) else args.json}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
