"""Would a learned scorer over the gate's evidence beat its floors? (issue 18, measured once).

The gate's step 1 is an OR of floors (dense cosine, lexical term fraction, a dated match, a
standout). Issue 18 asked whether features beyond floors — agreement across channels, the
margin over the search's other matches, rank — combined in a small scorer would answer as
many answerable questions with less ordinary-turn injection. This probe replaces step 1
(the entity channel still passes) with a scorer fitted on the tuning conversations' logged
candidates of a kept ``calibrate_gate.py --store`` run, keeps the gate's later rules
(``Table.after_step1``), and prints class-1 recall / class-3 injection / class-2 empties
along the scorer's threshold on both halves, beside the real gate at other floors.

    python benchmarks/calibrate_gate.py --tune-on 5 --store s.sqlite
    python benchmarks/gate_scorer_probe.py s.sqlite                  # tool floors' later rules
    python benchmarks/gate_scorer_probe.py s.sqlite --trigger auto --query-form

Positives are gold candidates of class-1 searches; negatives every candidate of class-2 and
class-3 searches (class-1 candidates that are not gold are left out: some answer anyway).
``--query-form`` adds two features of the query rather than of the evidence (whether it asks,
its number of terms), to show how much of a gain comes from the query's form.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
for entry in (ROOT, ROOT / "benchmarks"):
    if str(entry) not in sys.path:
        sys.path.insert(0, str(entry))

import calibrate_gate as cg  # noqa: E402

from retold.config import Config  # noqa: E402

THRESHOLDS = [0.02, 0.03, 0.04, 0.05, 0.06, 0.08, 0.1, 0.12, 0.15, 0.2, 0.25, 0.3]
FLOOR_GRID = [(e, f) for e in (0.55, 0.575, 0.6, 0.625, 0.65) for f in (0.34, 0.5, 0.67)]


def features(t: cg.Table, query_form: bool) -> np.ndarray:
    """Per candidate: what the evidence says (and, optionally, what form the query has)."""
    has_dense = t.dense > -np.inf
    dense = np.where(has_dense, t.dense, 0.0)
    reference = np.nan_to_num(t.reference[t.sid], nan=0.3)
    cols = [
        dense,
        np.where(has_dense, dense - reference, 0.0),  # margin over the search's other matches
        t.fraction,
        np.minimum(t.matched, 5),
        t.precise,
        t.nch - t.entity,  # similarity channels that agree on the candidate
        t.in_window,
        np.log(t.position),
    ]
    if query_form:
        cols += [t.kind[t.sid] != cg.STATING, t.total]
    return np.column_stack(cols).astype(float)


def rates(t: cg.Table, items: list[cg.Item], kept: np.ndarray) -> tuple[float, float, float]:
    """Class-1 recall, class-3 injection, class-2 empties for one step-1 decision."""
    m = cg.metrics(items, t.decision(kept))
    return m["class1_recall"], m["class3_injection"], m["class2_empty"]


def cell(values: tuple[float, float, float]) -> str:
    return " / ".join(f"{v:.3f}" for v in values)


def training_mask(t: cg.Table, items: list[cg.Item]) -> tuple[np.ndarray, np.ndarray]:
    cls = np.asarray([it.cls for it in items])[t.sid]
    use = ((cls != "present") | t.gold) & ~t.entity  # the entity channel passes on its own
    return use, t.gold & (cls == "present")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("store", type=Path, help="a kept calibrate_gate.py --store file")
    parser.add_argument("--tune-on", type=int, default=5)
    parser.add_argument("--trigger", choices=("tool", "auto"), default="tool")
    parser.add_argument("--query-form", action="store_true", help="add whether it asks and its length")
    args = parser.parse_args()

    from sklearn.ensemble import HistGradientBoostingClassifier  # the probe's own need
    from sklearn.linear_model import LogisticRegression

    run = json.loads(cg.sidecar(args.store).read_text())
    items = [cg.Item(**it) for it in run["items"]]
    rows, subjects, _ = asyncio.run(cg.load_logged(args.store, items))
    tuning_ids = set(run["conversations"][: args.tune_on])
    halves = {
        "tuning": [it for it in items if it.target in tuning_ids],
        "held-out": [it for it in items if it.target not in tuning_ids],
    }
    tables = {name: cg.Table(its, rows, subjects) for name, its in halves.items()}
    gate_config = Config().retrieval.gate
    rule = cg.Rule.of(gate_config, args.trigger)
    asking = rule.asking

    def row(label: str, step1: dict[str, np.ndarray]) -> None:
        cells = []
        for name, t in tables.items():
            kept = t.after_step1(t.entity | step1[name], asking)
            cells.append(cell(rates(t, halves[name], kept)))
        print(f"  {label:<22} {cells[0]:<24} {cells[1]}")

    print(f"trigger {args.trigger}; class-1 recall / class-3 injection / class-2 empty")
    print(f"  {'':<22} {'tuning':<24} held-out")
    shipped = [cell(rates(t, halves[n], t.kept(rule))) for n, t in tables.items()]
    print(f"  {'shipped gate':<22} {shipped[0]:<24} {shipped[1]}")
    print("the real gate at other floors (episodic dense, lexical fraction; 2 terms):")
    for e, f in FLOOR_GRID:
        floors = cg.Setting(e, f, 2, gate_config.relative_floor, auto=args.trigger == "auto").floors()
        cells = [cell(rates(t, halves[n], t.kept(floors))) for n, t in tables.items()]
        print(f"  {f'{e} / {f}':<22} {cells[0]:<24} {cells[1]}")
    use, y = training_mask(tables["tuning"], halves["tuning"])
    x = features(tables["tuning"], args.query_form)
    models: dict[str, Any] = {
        "logistic": LogisticRegression(max_iter=2000).fit(x[use], y[use]),
        "boosted trees (depth 3)": HistGradientBoostingClassifier(max_depth=3, random_state=0).fit(
            x[use], y[use]
        ),
    }
    for label, model in models.items():
        print(f"{label}:")
        p = {n: model.predict_proba(features(t, args.query_form))[:, 1] for n, t in tables.items()}
        for threshold in THRESHOLDS:
            row(f"p >= {threshold}", {n: p[n] >= threshold for n in tables})


if __name__ == "__main__":
    main()
