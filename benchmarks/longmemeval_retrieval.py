"""LongMemEval_S retrieval quality: retold's search beside BM25, dense and plain RRF, per question type.

The second benchmark beside LoCoMo's (``locomo_retrieval.py``), of a different kind: one user
talking to an assistant over ~50 sessions per question, long user turns, questions about that
user. The protocol is the shared data's README ("LongMemEval_S, a development split"):

* per question a fresh store (a new SQLite file, the same loaded model); every haystack session
  is recorded as a session through the session hooks (user and assistant turns, the session at
  its ``haystack_dates`` date), and every user turn is written through ``memory_write`` as an
  episodic ``user_statement`` quoting itself, ``event_at`` = the session's date (the tool takes
  an RFC 3339 ``event_at``); turns over 1,000 characters are written in 1,000-character pieces,
  pieces under 3 words or 15 characters skipped (``longmemeval_data``);
* the question is then searched once, at its ``question_date`` (or just after a session the data
  dates later that day: ``LmeQuestion.search_at``), with the run's configuration
  (the default unless ``--set``) and ``k`` = 25, as LoCoMo's harness asks: ``hybrid, gate on``
  is what the search returned; ``hybrid, gate off`` is the same search's fused,
  freshness-adjusted candidates before the gate, read back from ``search_log`` as LoCoMo's
  harness reads them (one search, so both rankings come from the same query);
* baselines in the same run over the same stored records and the same embedder: ``bm25``
  (LoCoMo's: ``bm25s``, English stop words, Snowball stemming), ``dense`` (exact cosine of the
  question against each record's own vector) and ``rrf`` (plain reciprocal-rank fusion of
  those two, unweighted, ``rrf_k`` as retold's config).

Every ranking is cut at 25 records and mapped to the records' sessions in rank order (first
occurrence; a record the ingestor merged stands for every session it came from). Scored at the
session level as the official evaluation does, for k = 5 and 10: ``recall_any@k`` (a gold
session in the top k), ``recall_all@k`` (every gold session in the top k), ``ndcg_any@k``
(binary relevance, the official DCG ``rel_1 + sum rel_i / log2 i``), and ``empty``, the share of
questions answered with nothing. Abstention questions (``_abs``) are left out of recall and
reported for emptiness alone.

    python benchmarks/longmemeval_retrieval.py --sample 20 --embed-cache /tmp/lme-vectors.npz
    python benchmarks/longmemeval_retrieval.py --json --markdown benchmarks/results/longmemeval.md
    python benchmarks/longmemeval_retrieval.py --limit 3 --set retrieval.rrf_k=20 --dump ranks.jsonl

Questions run one after another (each opens its own store); the model embeds the next
question's texts in a worker thread while the current one is written and searched, which is
the one overlap that is simple and safe (every model call takes the embedder's lock).
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import json
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Sequence
from contextlib import nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:  # importable from anywhere; as a script its folder is already first
    sys.path.insert(0, str(HERE))
ROOT = HERE.parent

from common import Target, check_targets, machine, percentile  # noqa: E402
from locomo_hosted import ReplayClock  # noqa: E402

# Imported first among the harness's own: it sets HF_HUB_OFFLINE / TRANSFORMERS_OFFLINE before any model.
from locomo_retrieval import DEPTH, GATE_ON, Bm25, Dense, finite, mean, progress_bar  # noqa: E402
from longmemeval_data import (  # noqa: E402
    ABSTENTION,
    CachedEmbedder,
    EmbedCache,
    LmeQuestion,
    Stored,
    ingest_question,
    load_questions,
    question_texts,
    stratified_sample,
)
from rich.console import Console  # noqa: E402

import retold  # noqa: E402
from retold.config import Config  # noqa: E402
from retold.index.embedding_backend import build_embedder  # noqa: E402
from retold.models import Principal, SearchRequest  # noqa: E402
from retold.retrieve.fusion import rrf  # noqa: E402
from retold.retrieve.replay import candidates_from_log  # noqa: E402

AGENT, USER = "longmemeval-bench", "lme-user"
GATE_OFF = "hybrid, gate off"
BASELINES = ("bm25", "dense", "rrf")
SYSTEMS = (*BASELINES, GATE_OFF, GATE_ON)
KS = (5, 10)
METRICS = [f"{m}@{k}" for m in ("recall_any", "recall_all", "ndcg_any") for k in KS]
ALL = "all"  # every answerable question
TYPES = ("single-session-user", "single-session-assistant", "single-session-preference", "multi-session",
         "knowledge-update", "temporal-reasoning")  # fmt: skip
GROUPS = (ALL, *TYPES, ABSTENTION)
DEFAULT_JSON = ROOT / "benchmarks" / "results" / "longmemeval_retrieval.json"


@dataclass
class Asked:
    """One question: every system's session ranking (best first), its record count, and timings."""

    question: LmeQuestion
    rankings: dict[str, list[str]] = field(default_factory=dict)
    records: dict[str, int] = field(default_factory=dict)  # records each system returned (cut at DEPTH)
    timings: dict[str, float] = field(default_factory=dict)
    stored: Stored = field(default_factory=Stored)


# --------------------------------------------------------------------------- scoring


def sessions_in_order(record_ids: Sequence[str], sessions_of: dict[str, list[str]]) -> list[str]:
    """The sessions of ``record_ids`` in rank order, each at its first occurrence."""
    return list(dict.fromkeys(s for rid in record_ids for s in sessions_of.get(rid, ())))


def dcg(relevances: Sequence[float]) -> float:
    """The official evaluation's DCG: the first gain undiscounted, the i-th divided by log2 i."""
    gains = np.asarray(relevances, dtype=float)
    return float(gains[0] + np.sum(gains[1:] / np.log2(np.arange(2, gains.size + 1)))) if gains.size else 0.0


def score(ranking: Sequence[str], gold: Sequence[str]) -> dict[str, float]:
    """recall_any / recall_all / ndcg_any at each k of one session ranking against the gold sessions."""
    wanted = set(gold)
    out: dict[str, float] = {}
    for k in KS:
        top = ranking[:k]
        out[f"recall_any@{k}"] = float(bool(wanted & set(top)))
        out[f"recall_all@{k}"] = float(wanted <= set(top))
        ideal = dcg([1.0] * min(k, len(wanted)))
        out[f"ndcg_any@{k}"] = dcg([float(s in wanted) for s in top]) / ideal if ideal else 0.0
    return out


def in_group(question: LmeQuestion, group: str) -> bool:
    if group == ABSTENTION:
        return question.abstention
    return not question.abstention and group in (ALL, question.question_type)


def summarise(asked: Sequence[Asked]) -> dict[str, Any]:
    """Per system and group: metric means over the answerable questions, n, and the empty share."""
    out: dict[str, Any] = {}
    for system in SYSTEMS:
        rows: dict[str, Any] = {}
        for group in GROUPS:
            members = [a for a in asked if in_group(a.question, group)]
            scored = [score(a.rankings[system], a.question.gold) for a in members if group != ABSTENTION]
            row: dict[str, Any] = {m: mean(s[m] for s in scored) for m in METRICS}
            row["n"] = len(members)
            row["empty"] = mean(float(not a.rankings[system]) for a in members)
            row["records"] = mean(a.records[system] for a in members)
            rows[group] = row
        out[system] = rows
    return out


# --------------------------------------------------------------------------- one question


async def ask(
    q: LmeQuestion, embedder: CachedEmbedder, qvec: np.ndarray, config: Config, clock: ReplayClock | None,
    path: Path,
) -> Asked:  # fmt: skip
    """One question on its own fresh store: ingest, one search, the three baselines."""
    a = Asked(q)
    async with retold.open_runtime(path, config, embedder=embedder, clock=clock) as rt:
        t0 = time.perf_counter()
        a.stored = await ingest_question(rt, q, AGENT, USER, clock)
        a.timings["write_s"] = time.perf_counter() - t0
        await rt.warm()
        t0 = time.perf_counter()
        with clock.at(q.search_at) if clock is not None else nullcontext():
            response = await rt.search(Principal(AGENT, USER), SearchRequest(queries=[q.question], k=DEPTH))
        a.timings["search_s"] = time.perf_counter() - t0
        row = await rt.store.search_log(response.search_id)
        assert row is not None, "the search wrote no search_log row"
        t0 = time.perf_counter()
        ids = list(a.stored.sessions_of)
        records = {r.id: r for r in await rt.store.get_records(ids)}
        ids = [rid for rid in ids if rid in records]
        ranked = {
            GATE_ON: [r.record.id for r in response.results],
            GATE_OFF: [c.record_id for c in candidates_from_log(row)],
            **baselines(ids, [records[rid].content for rid in ids], rt.embedder, q.question, qvec,
                        config.retrieval.rrf_k),
        }  # fmt: skip
        a.timings["baselines_s"] = time.perf_counter() - t0
    for system, record_ids in ranked.items():
        a.records[system] = len(record_ids[:DEPTH])
        a.rankings[system] = sessions_in_order(record_ids[:DEPTH], a.stored.sessions_of)
    return a


def baselines(
    ids: list[str], texts: list[str], embedder: Any, question: str, qvec: np.ndarray, rrf_k: int
) -> dict[str, list[str]]:
    """BM25, dense and plain RRF of the two, each over every record of the store (full depth)."""
    if not ids:
        return {name: [] for name in BASELINES}
    lexical = Bm25(ids, texts).rank(question, len(ids))
    dense = Dense(ids, embedder.embed_documents(texts)).rank(qvec, len(ids))
    return {"bm25": lexical, "dense": dense, "rrf": list(rrf([lexical, dense], rrf_k))}


# --------------------------------------------------------------------------- the run


def overrides_from(items: Sequence[str]) -> dict[str, Any]:
    """``--set KEY=VALUE`` items as config overrides, the value read as LoCoMo's harness reads it."""
    out: dict[str, Any] = {}
    for item in items:
        key, _, value = item.partition("=")
        out[key] = json.loads(value) if value[:1] in '0123456789-[{tf"' else value
    return out


def select(questions: list[LmeQuestion], args: argparse.Namespace) -> list[LmeQuestion]:
    """``--sample N`` (seeded, stratified) or ``--limit N`` (the first N), else every question."""
    if args.sample is not None:
        questions = stratified_sample(questions, args.sample, args.seed)
    return questions[: args.limit] if args.limit is not None else questions


async def run(args: argparse.Namespace, store_dir: Path) -> dict[str, Any]:
    """Every selected question in turn, the next one's texts embedded while the current one runs."""
    questions = select(load_questions(args.data), args)
    config = Config().override(overrides_from(args.set))
    console = Console(stderr=True)
    timings: dict[str, float] = {}
    t0 = time.perf_counter()
    inner = build_embedder(config.embedding)
    await asyncio.to_thread(inner.warm)
    timings["model_load_s"] = time.perf_counter() - t0
    cache = EmbedCache(args.embed_cache, f"{inner.name}@{inner.version}") if args.embed_cache else None
    clock = None if args.real_clock else ReplayClock()
    passage_chars = config.embedding.passage_chars

    def prefill(q: LmeQuestion) -> tuple[CachedEmbedder, np.ndarray, float]:
        started = time.perf_counter()
        embedder = CachedEmbedder(inner, cache)
        embedder.prefill(question_texts(q, passage_chars))
        qvec = np.asarray(inner.embed_queries([q.question]))[0]  # also fills the query cache the search reads
        return embedder, qvec, time.perf_counter() - started

    asked: list[Asked] = []
    started = time.perf_counter()
    with progress_bar(console) as bar:
        task = bar.add_task("questions", total=len(questions))
        pending = asyncio.create_task(asyncio.to_thread(prefill, questions[0])) if questions else None
        for i, q in enumerate(questions):
            assert pending is not None
            embedder, qvec, embed_s = await pending
            nxt = questions[i + 1] if i + 1 < len(questions) else None
            pending = asyncio.create_task(asyncio.to_thread(prefill, nxt)) if nxt is not None else None
            a = await ask(q, embedder, qvec, config, clock, store_dir / f"q{i}.sqlite")
            (store_dir / f"q{i}.sqlite").unlink(missing_ok=True)
            a.timings["embed_s"] = embed_s
            a.timings["misses"] = embedder.misses
            asked.append(a)
            bar.advance(task)
            if cache is not None and (i + 1) % 20 == 0:  # a long cold run keeps what it embedded
                cache.save()
    timings["questions_s"] = time.perf_counter() - started
    if cache is not None:
        cache.save()
    for key in ("embed_s", "write_s", "search_s", "baselines_s"):
        values = [a.timings[key] for a in asked]
        timings[f"{key[:-2]}_total_s"] = sum(values)
        timings[f"{key[:-2]}_p50_s"] = percentile(values, 50)
    timings["per_question_s"] = timings["questions_s"] / max(1, len(asked))
    if args.dump:
        write_dump(args.dump, asked)
    outcomes: Counter[str] = sum((a.stored.outcomes for a in asked), Counter())
    return {
        "questions": len(asked),
        "answerable": sum(not a.question.abstention for a in asked),
        "question_ids": [a.question.question_id for a in asked],
        "sessions": sum(len(a.question.sessions) for a in asked),
        "pieces": sum(a.stored.pieces for a in asked),
        "records": sum(len(a.stored.sessions_of) for a in asked),
        "outcomes": dict(outcomes),
        "unbatched_document_embeds": int(sum(a.timings["misses"] for a in asked)),
        "embed_cache": cache and {"path": str(cache.path), "hits": cache.hits, "added": cache.added},
        "clock": "real"
        if clock is None
        else "replayed: sessions at their dates, questions at LmeQuestion.search_at",
        "timings_s": timings,
        "retrieval_config": config.retrieval.model_dump(mode="json"),
        "metrics": summarise(asked),
    }


def write_dump(path: Path, asked: Sequence[Asked]) -> None:
    """One JSON line per question: its gold sessions and every system's sessions, best first."""
    with path.open("w") as out:
        for a in asked:
            q = a.question
            row = {"question_id": q.question_id, "question_type": q.question_type, "question": q.question,
                   "abstention": q.abstention, "gold": list(q.gold), "rankings": a.rankings,
                   "records": a.records, "timings_s": a.timings}  # fmt: skip
            out.write(json.dumps(row) + "\n")


# --------------------------------------------------------------------------- reporting

COLUMNS = [(f"{m}@{k}", f"{label}@{k}") for m, label in (("recall_any", "any"), ("recall_all", "all"),
           ("ndcg_any", "ndcg")) for k in KS]  # fmt: skip


def table(metrics: dict[str, Any]) -> str:
    """The printed table: per group (all answerable, each type, abstention), every system side by side."""
    head = f"{'group':<27}{'system':<18}{'n':>4}" + "".join(f"{label:>9}" for _, label in COLUMNS)
    head += f"{'empty':>8}{'recs':>6}"
    lines = [head, "-" * len(head)]
    for group in GROUPS:
        for system in SYSTEMS:
            row = metrics[system][group]
            if not row["n"]:
                continue
            cells = "".join(f"{'':>9}" if group == ABSTENTION else f"{row[key]:>9.3f}" for key, _ in COLUMNS)
            tail = f"{row['empty']:>8.3f}{row['records']:>6.1f}"
            lines.append(f"{group:<27}{system:<18}{row['n']:>4}{cells}{tail}")
        if lines[-1]:
            lines.append("")
    return "\n".join(lines)


def markdown(result: dict[str, Any]) -> str:
    """The tables docs/benchmarks.md keeps: all answerable questions, then ndcg_any@5 per type."""
    m = result["metrics"]
    out = ["| LongMemEval_S | " + " | ".join(label for _, label in COLUMNS) + " | empty |",
           "|---" * (len(COLUMNS) + 2) + "|"]  # fmt: skip
    for system in SYSTEMS:
        row = m[system][ALL]
        cells = [f"{row[key]:.3f}" for key, _ in COLUMNS] + [f"{row['empty']:.3f}"]
        out.append(f"| {system} | " + " | ".join(cells) + " |")
    types = [t for t in TYPES if m[GATE_ON][t]["n"]]
    out += ["", "| ndcg_any@5 | " + " | ".join(f"{t} ({m[GATE_ON][t]['n']})" for t in types) + " |",
            "|---" * (len(types) + 1) + "|"]  # fmt: skip
    for system in SYSTEMS:
        out.append(f"| {system} | " + " | ".join(f"{m[system][t]['ndcg_any@5']:.3f}" for t in types) + " |")
    return "\n".join(out) + "\n"


def _lead(metric: str) -> Callable[[dict[str, Any]], float | None]:
    """Gate on's lead on ``metric`` over the best of BM25 / dense / RRF in the same run (points)."""

    def figure(result: dict[str, Any]) -> float | None:
        m = result["metrics"]
        if not m[GATE_ON][ALL]["n"]:
            return None
        return 100 * (m[GATE_ON][ALL][metric] - max(m[b][ALL][metric] for b in BASELINES))

    return figure


def _figure(system: str, key: str, scale: float = 1.0) -> Callable[[dict[str, Any]], float | None]:
    def figure(result: dict[str, Any]) -> float | None:
        row = result["metrics"][system][ALL]
        return scale * row[key] if row["n"] else None

    return figure


def quality_targets() -> list[Target]:
    """Issue 46's targets on this benchmark (``--check`` fails on these)."""
    out = [
        Target(f"gate on {metric} lead over best of bm25/dense/rrf", _lead(metric), 0.0, ">=", "points")
        for metric in ("recall_any@5", "recall_all@5", "ndcg_any@5")
    ]
    out.append(Target("gate on: answerable questions answered with nothing", _figure(GATE_ON, "empty", 100),
                      1.0, "<=", "%"))  # fmt: skip
    return out


def aims() -> list[Target]:
    """Issue 46's aims, which no plain channel reaches: reported, never failed."""
    return [
        Target("aim: gate on ndcg_any@5", _figure(GATE_ON, "ndcg_any@5"), 0.94, ">=", ""),
        Target("aim: gate on recall_all@5", _figure(GATE_ON, "recall_all@5"), 0.95, ">=", ""),
    ]


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    add = parser.add_argument
    add("--data", type=Path, default=None, help="a longmemeval_s-shaped .json or .json.xz (default: shared)")
    add("--limit", type=int, default=None, metavar="N", help="only the first N questions (after --sample)")
    add("--sample", type=int, default=None, metavar="N",
        help="a seeded sample of N questions, stratified by question type (abstention apart)")  # fmt: skip
    add("--seed", type=int, default=7)
    add(
        "--json",
        type=Path,
        nargs="?",
        const=DEFAULT_JSON,
        default=None,
        help=f"write the figures, machine, commit and config (no PATH: {DEFAULT_JSON.relative_to(ROOT)})",
    )
    add("--markdown", type=Path, default=None, help="write the docs/benchmarks.md tables here")
    add("--dump", type=Path, default=None, help="write each question's rankings here (JSON lines)")
    add("--set", action="append", default=[], metavar="KEY=VALUE",
        help="a config override for the run (dotted key; JSON value), e.g. retrieval.rrf_k=20")  # fmt: skip
    add("--check", action="store_true", help="exit 1 when a quality target (issue 46) is missed")
    add(
        "--embed-cache",
        type=Path,
        default=None,
        metavar="PATH",
        help="keep document vectors in this .npz (text hash + model id); re-runs skip the model",
    )
    add(
        "--real-clock",
        action="store_true",
        help="write and search on today's clock, not at the sessions' and the question's dates",
    )
    return parser.parse_args(argv)


def save(path: Path, args: argparse.Namespace, result: dict[str, Any]) -> None:
    """The run's figures as strict JSON, with where, on what code and with which model they were measured."""
    embedding = Config().override(overrides_from(args.set)).embedding
    provenance = machine() | {"date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds")}
    provenance |= {"embedder": embedding.model, "embedding_version": embedding.version, "depth": DEPTH,
                   "dataset": "LongMemEval_S development split of 200 (MIT); session level, official metrics",
                   "bm25": "bm25s, English stop words, PyStemmer english"}  # fmt: skip
    options = {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()}
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        json.dumps(finite({"meta": provenance, "args": options, **result}), indent=2, allow_nan=False) + "\n"
    )


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="retold-longmemeval-") as tmp:
        result = asyncio.run(run(args, Path(tmp)))
    t = result["timings_s"]
    t["total_s"] = time.perf_counter() - started
    print(table(result["metrics"]))
    print(
        f"{result['questions']} questions ({result['answerable']} answerable), "
        f"{result['sessions']} sessions, "
        f"{result['pieces']} user pieces -> {result['records']} records ({result['outcomes']}); "
        f"texts embedded outside the batches {result['unbatched_document_embeds']}; clock {result['clock']}."
    )
    if result["embed_cache"]:
        print(f"embedding cache: {result['embed_cache']}")
    print("timings (s): " + ", ".join(f"{k} {v:.2f}" for k, v in t.items()))
    lines: list[str] = []
    failed = check_targets(quality_targets(), result, lines.append)
    print("targets:\n" + "\n".join(lines))
    aimed: list[str] = []
    check_targets(aims(), result, aimed.append)
    print("aims (reported, not checked):\n" + "\n".join(aimed))
    result["quality_targets"], result["aims"] = lines, aimed
    if args.json:
        save(args.json, args, result)
    if args.markdown:
        args.markdown.write_text(markdown(result))
    return failed if args.check else 0


if __name__ == "__main__":
    raise SystemExit(main())
