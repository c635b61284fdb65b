"""The activation policy on labelled claims: how precise and complete is ``ambient``?

Each line of a labelled JSON Lines file is one claim as a model would store it and the
user's own words it was taken from (``tests/data/README.md``):

    {"content": "User prefers concise answers.", "evidence": "I prefer concise answers.",
     "label": "ambient", "category": "communication", "why": "..."}

Every row becomes the facts of a confirmed semantic record with verified user evidence, so
what is measured is the rules alone (category and form), under the default
``ActivationConfig``. Two files are read by default:

* ``activation_tuning.jsonl``: written before the rules and used to develop them (in-sample);
* ``activation_heldout.jsonl``: written independently and never used for tuning, when present.

Precision of ``ambient`` is what matters (a wrong ambient record is in every prompt); recall
second. A review item is not a positive: the record stays conditional until a person decides.

    python benchmarks/activation_policy.py                 # both files, when present
    python benchmarks/activation_policy.py FILE ...        # other files
    python benchmarks/activation_policy.py --check         # exit 1 when held-out precision < 0.95
    python benchmarks/activation_policy.py --json out.json
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from common import machine

from retold.config import ActivationConfig
from retold.policy.activation import ActivationDecision, ActivationFacts, decide_activation

DATA = Path(__file__).resolve().parents[1] / "tests" / "data"
DEFAULT_FILES = (DATA / "activation_tuning.jsonl", DATA / "activation_heldout.jsonl")
HELDOUT = "activation_heldout"
PRECISION_FLOOR = 0.95


@dataclass(frozen=True)
class Row:
    content: str
    evidence: str
    label: str
    category: str | None


@dataclass
class Measured:
    """One file's decisions against its labels."""

    name: str
    rows: list[tuple[Row, ActivationDecision]] = field(default_factory=list)

    def _count(self, label: str, activation: str) -> int:
        return sum(r.label == label and d.activation == activation for r, d in self.rows)

    @property
    def precision(self) -> float:
        called = self._count("ambient", "ambient") + self._count("conditional", "ambient")
        return self._count("ambient", "ambient") / called if called else 1.0

    @property
    def recall(self) -> float:
        positives = sum(r.label == "ambient" for r, _ in self.rows)
        return self._count("ambient", "ambient") / positives if positives else 0.0

    @property
    def f1(self) -> float:
        p, r = self.precision, self.recall
        return 2 * p * r / (p + r) if p + r else 0.0

    @property
    def review_rate(self) -> float:
        return sum(d.review for _, d in self.rows) / len(self.rows) if self.rows else 0.0

    def confusion(self) -> dict[str, dict[str, int]]:
        """Per labelled category: label -> decision counts (``review`` counted apart)."""
        out: dict[str, Counter[str]] = {}
        for row, decision in self.rows:
            call = "review" if decision.review else decision.activation
            out.setdefault(str(row.category), Counter())[f"{row.label}->{call}"] += 1
        return {k: dict(sorted(v.items())) for k, v in sorted(out.items())}

    def category_agreement(self) -> float:
        """Of the rows labelled ambient, how often the policy's category is the labelled one."""
        rows = [(r, d) for r, d in self.rows if r.label == "ambient"]
        return sum(r.category == d.category for r, d in rows) / len(rows) if rows else 0.0

    def false_positives(self) -> list[tuple[Row, ActivationDecision]]:
        return [(r, d) for r, d in self.rows if r.label == "conditional" and d.activation == "ambient"]

    def misses(self) -> list[tuple[Row, ActivationDecision]]:
        return [(r, d) for r, d in self.rows if r.label == "ambient" and d.activation != "ambient"]

    def figures(self) -> dict[str, Any]:
        return {
            "n": len(self.rows), "precision": self.precision, "recall": self.recall, "f1": self.f1,
            "review_rate": self.review_rate, "category_agreement": self.category_agreement(),
            "confusion": self.confusion(), "false_positives": len(self.false_positives()),
        }  # fmt: skip


def load(path: Path) -> list[Row]:
    rows = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        item = json.loads(line)
        if item.get("label") not in ("ambient", "conditional"):
            raise ValueError(f"{path}:{number}: label must be ambient or conditional")
        rows.append(Row(item["content"], item["evidence"], item["label"], item.get("category")))
    return rows


def facts_of(row: Row) -> ActivationFacts:
    """A confirmed semantic record whose evidence the host verified in the user's own turn."""
    return ActivationFacts(
        type="semantic", status="confirmed", content=row.content, evidence=row.evidence,
        source_kind="user_statement", evidence_verified=True,
    )  # fmt: skip


def measure(path: Path, config: ActivationConfig | None = None) -> Measured:
    config = config or ActivationConfig()
    measured = Measured(path.stem)
    for row in load(path):
        measured.rows.append((row, decide_activation(facts_of(row), config)))
    return measured


def report(m: Measured, show_misses: bool) -> None:
    print(
        f"\n{m.name}: n {len(m.rows)}, ambient precision {m.precision:.3f}, recall {m.recall:.3f}, "
        f"F1 {m.f1:.3f}, review rate {m.review_rate:.3f}, category agreement {m.category_agreement():.3f}"
    )
    print("  per labelled category (label->decision):")
    for category, counts in m.confusion().items():
        print(f"    {category:<14} " + ", ".join(f"{k} {v}" for k, v in counts.items()))
    fps = m.false_positives()
    print(f"  false positives ({len(fps)}):")
    for row, decision in fps:
        print(f"    {row.content!r} <- {row.evidence!r}: {decision.reason}")
    if show_misses:
        misses = m.misses()
        print(f"  missed ambient ({len(misses)}):")
        for row, decision in misses:
            print(f"    {row.content!r} <- {row.evidence!r}: {decision.reason}")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("files", nargs="*", type=Path, help="labelled jsonl files (default: both sets)")
    parser.add_argument(
        "--check", action="store_true", help=f"exit 1 when held-out precision < {PRECISION_FLOOR}"
    )
    parser.add_argument("--misses", action="store_true", help="also list the missed ambient rows")
    parser.add_argument("--json", type=Path, default=None, help="write the figures here")
    args = parser.parse_args(argv)
    files = args.files or [p for p in DEFAULT_FILES if p.exists()]
    results = [measure(path) for path in files]
    for m in results:
        report(m, args.misses)
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        figures = {"sets": {m.name: m.figures() for m in results}, "machine": machine()}
        args.json.write_text(json.dumps(figures, indent=2))
    if args.check:
        heldout = [m for m in results if m.name == HELDOUT]
        if not heldout:
            print(f"\n--check: no {HELDOUT}.jsonl was measured", file=sys.stderr)
            return 1
        precision = heldout[0].precision
        if precision < PRECISION_FLOOR:
            print(f"\n--check: held-out precision {precision:.3f} < {PRECISION_FLOOR}", file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
