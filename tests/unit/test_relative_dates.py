"""The temporal grammar meets its labelled set, ``tests/data/relative_dates.jsonl``, exactly.

The same cases score the grammar against dateparser in ``benchmarks/relative_dates.py``;
here every expression's text, role and spans must match its label.
"""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from retold.ingest.write.temporal import find_expressions

CASES = [
    json.loads(line)
    for line in (Path(__file__).resolve().parents[1] / "data" / "relative_dates.jsonl")
    .read_text(encoding="utf-8")
    .splitlines()
    if line.strip()
]


def test_the_set_has_phrases_from_the_tests_written_ones_and_dateless_sentences() -> None:
    assert len(CASES) >= 80
    assert {c["source"] for c in CASES} >= {"tests/unit/test_temporal.py", "written"}
    assert sum(not c["expected"] for c in CASES) >= 20


@pytest.mark.parametrize("case", CASES, ids=[f"{c['text']} @ {c['ref'][:10]}" for c in CASES])
def test_the_grammar_meets_its_label(case: dict[str, Any]) -> None:
    found = [
        {"text": e.text, "role": e.role, "spans": [[a.isoformat(), b.isoformat()] for a, b in e.spans]}
        for e in find_expressions(case["text"], datetime.fromisoformat(case["ref"]))
    ]
    assert found == case["expected"]
