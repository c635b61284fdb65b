"""The relevance gate separates relevant from irrelevant queries with the real embedder (spec §17.5).

A hand-written store of one user's memories (``tests/data/gate_separation_records.jsonl``:
facts, events and instructions about "Sam", their family, work, health and hobbies, each
dated by its session) is written through the host's write API with the packaged
all-MiniLM-L6-v2. Then a labelled 50/50 set of queries
(``tests/data/gate_separation_queries.jsonl``) is searched through ``Runtime.search``:

* 50 ``relevant`` queries, paraphrases that share few words with their records, each naming
  the record ids that answer it; correct = the response contains at least one of them;
* 50 ``irrelevant`` queries, general-knowledge questions, requests and ordinary chat turns
  that nothing in the store answers; correct = the response is empty.

Both sets mix questions and statements ("My ankle still hurts from that football injury."),
because a host-issued (``trigger="auto"``) search raises its floors for a turn that plainly
states (``retold.retrieve.query_kind``). Every query is searched as the model's tool would
(``trigger="tool"``, the default config's tool floors) and as a host would on every user turn
(``trigger="auto"``, the auto floors). The thresholds sit a few points under what the default
config measured when the test was written (docs/benchmarks.md, "Shipped separation test"),
so a failure means the gate, the fusion or the embedder moved, and the message says by how
much. A control run with every floor at zero shows the irrelevant queries do find
candidates, so the silence measured above is the gate's doing.

The data was written for this test (no benchmark text) and is never edited to fit the gate.
"""

from __future__ import annotations

import asyncio
import sys
from dataclasses import dataclass
from typing import Any

import pytest
from benchmark_module import BENCHMARKS, load_benchmark

from retold.retrieve.query_kind import asks

if str(BENCHMARKS) not in sys.path:  # the script imports like a sibling of the benchmarks
    sys.path.insert(0, str(BENCHMARKS))
labelled = load_benchmark("gate_labelled")  # the store, the searches and the rates, shared

pytestmark = pytest.mark.integration

TRIGGERS = labelled.TRIGGERS
RECORDS, QUERIES = labelled.paths("separation")
_load = labelled.load

# Lowest acceptable rates per trigger, three queries (0.06) under what the default config
# measures (relevant answered / irrelevant silent / F1): tool 0.94 / 0.92 / 0.931, auto
# 0.70 / 0.98 / 0.814. The semantic floors and the standout rule (gate.standout_*) were chosen
# on the other labelled set (tests/data/gate_calibration_*.jsonl, benchmarks/gate_labelled.py)
# and on LoCoMo, never on this one: before the standout rule this set measured 0.84 / 0.96 /
# 0.894 and 0.62 / 1.00 / 0.765, before the semantic floors (0.45 tool, 0.55 auto, the spec's
# values) 0.66 / 0.96 / 0.776 and 0.42 / 1.00 / 0.592. Auto answers fewer on purpose: its floors
# are stricter, and stricter still for a turn that plainly states (3 of the 11 relevant ones).
MIN_RELEVANT_ANSWERED = {"tool": 0.88, "auto": 0.64}
MIN_IRRELEVANT_SILENT = {"tool": 0.86, "auto": 0.92}
MIN_F1 = {"tool": 0.87, "auto": 0.75}
# With every floor at zero, at most this share of the irrelevant queries may come back empty.
MAX_OPEN_SILENT = 0.1


@dataclass
class Run:
    gated: dict[str, Any]  # trigger -> benchmarks/gate_labelled.Measured
    opened: dict[str, Any]


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Run:
    """The store written once and every query searched per trigger, gated and with open floors."""
    path = tmp_path_factory.mktemp("gate_separation") / "memory.sqlite"
    configs = [("gated", {}), ("open", labelled.OPEN_FLOORS)]
    result = asyncio.run(labelled.measure(path, "separation", labelled.embedder(), configs))
    for trigger in TRIGGERS:
        print(f"\n[gate separation] {result['gated'][trigger].summary()}")
        print(f"[gate separation] floors at zero, {result['open'][trigger].summary()}")
        print(f"[gate separation] {trigger} misses:\n{result['gated'][trigger].misses()}")
    return Run(result["gated"], result["open"])


def test_the_data_is_a_labelled_50_50_set() -> None:
    records = _load(RECORDS)
    ids = [r["id"] for r in records]
    assert len(ids) == len(set(ids)) and 60 <= len(ids) <= 100
    queries = _load(QUERIES)
    relevant = [q for q in queries if q["label"] == "relevant"]
    irrelevant = [q for q in queries if q["label"] == "irrelevant"]
    assert (len(relevant), len(irrelevant)) == (50, 50)
    assert all(q["expected"] and set(q["expected"]) <= set(ids) for q in relevant)
    assert not any(q["expected"] for q in irrelevant)
    for group in (relevant, irrelevant):  # both forms, which the auto gate treats differently
        kinds = [asks([q["query"]]) for q in group]
        assert sum(kinds) >= 10 and len(kinds) - sum(kinds) >= 10, [q["query"] for q in group]


@pytest.mark.parametrize("trigger", TRIGGERS)
def test_the_gate_answers_relevant_queries_and_stays_silent_on_irrelevant_ones(
    run: Run, trigger: str
) -> None:
    m = run.gated[trigger]
    message = f"{m.summary()}\nmisses:\n{m.misses()}"
    assert m.relevant_answered() >= MIN_RELEVANT_ANSWERED[trigger], (
        f"relevant answered {m.relevant_answered():.2f} < {MIN_RELEVANT_ANSWERED[trigger]:.2f}\n{message}"
    )
    assert m.irrelevant_silent() >= MIN_IRRELEVANT_SILENT[trigger], (
        f"irrelevant silent {m.irrelevant_silent():.2f} < {MIN_IRRELEVANT_SILENT[trigger]:.2f}\n{message}"
    )
    assert m.f1() >= MIN_F1[trigger], f"F1 {m.f1():.3f} < {MIN_F1[trigger]:.3f}\n{message}"


@pytest.mark.parametrize("trigger", TRIGGERS)
def test_with_every_floor_at_zero_irrelevant_queries_get_results(run: Run, trigger: str) -> None:
    """The control: the silence above comes from the floors, not from an empty candidate pool."""
    opened, gated = run.opened[trigger], run.gated[trigger]
    assert opened.irrelevant_silent() <= MAX_OPEN_SILENT, opened.summary()
    assert opened.relevant_answered() >= gated.relevant_answered(), (opened.summary(), gated.summary())
