"""Calibrate the relevance gate's floors for the configured embedder on LoCoMo (spec §10.5).

Every search runs once, under a permissive gate (all floors 0), so ``search_log`` keeps
every candidate's scores; the floors are then swept offline from the logged candidates
(``retold.retrieve.replay.candidates_from_log``), never by re-searching. Three classes:

1. evidence present: LoCoMo questions of categories 1-4 (official naming: 1 multi-hop,
   2 temporal, 3 open-domain, 4 single-hop) asked of their own conversation's scope;
   correct = the gate keeps at least one gold-evidence record;
2. evidence absent: (a) category-5 (adversarial) questions of their own conversation and
   (b) category 1-4 questions asked of another conversation's scope whose speakers share
   no name with the asker's; correct = the gate keeps nothing;
3. ordinary turns: turns of one conversation issued as host searches (``trigger="auto"``)
   against another conversation's scope; measured = the injection rate (anything kept).

F1 treats "the gate keeps something" as the positive prediction and counts it correct only
when a gold record survives: precision = gold-kept class-1 items / items with anything kept
(classes 1 and 2), recall = gold-kept class-1 items / class-1 items. The tool floors maximise
F1 subject to a class-3 injection ceiling; the auto floors maximise class-1 recall subject to
the (stricter) auto injection target. LoCoMo records are all episodic, so the data calibrates
the episodic floor; the semantic, procedural and session-summary floors keep the spec's
offsets from it (stated in the output).

    python benchmarks/calibrate_gate.py                       # all 10 conversations
    python benchmarks/calibrate_gate.py --conversations 4
    python benchmarks/calibrate_gate.py --quick               # 2 conversations, few questions
    python benchmarks/calibrate_gate.py --json benchmarks/results/gate_calibration.json

LoCoMo is CC BY-NC 4.0 and is read from the shared data (``RETOLD_LOCOMO`` overrides).
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import itertools
import json
import os
import platform
import random
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # never reach for a model hub from a benchmark
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

ROOT = Path(__file__).resolve().parents[1]
for entry in (ROOT, ROOT / "benchmarks"):  # runnable as `python benchmarks/calibrate_gate.py`
    if str(entry) not in sys.path:
        sys.path.insert(0, str(entry))

import retold  # noqa: E402
from locomo_data import Conversation, Ingested, ingest_conversations, load_conversations  # noqa: E402
from retold.config import Config, GateFloors  # noqa: E402
from retold.models import Candidate, Principal, SearchRequest  # noqa: E402
from retold.retrieve.gate import GateSubject, gate  # noqa: E402
from retold.retrieve.replay import candidates_from_log, replay_gate  # noqa: E402
from retold.util import normalize_alias  # noqa: E402

AGENT = "calibrator"
TYPES = ("semantic", "episodic", "procedural", "session_summary")
# Offsets from the episodic floor, as in the spec's bge-m3 defaults (§2.3): tool semantic and
# procedural +0.05, session summary +0.10; auto semantic and procedural +0.05, summary +0.00.
TOOL_OFFSETS = {"semantic": 0.05, "episodic": 0.0, "procedural": 0.05, "session_summary": 0.10}
AUTO_OFFSETS = {"semantic": 0.05, "episodic": 0.0, "procedural": 0.05, "session_summary": 0.0}
PERMISSIVE = {
    "retrieval.gate.dense_floor": dict.fromkeys(TYPES, 0.0),
    "retrieval.gate.lexical_min_term_fraction": 0.0,
    "retrieval.gate.lexical_min_matched_terms": 1,
    "retrieval.gate.relative_floor": 0.0,
    "retrieval.gate.auto.dense_floor": dict.fromkeys(TYPES, 0.0),
    "retrieval.gate.auto.lexical_min_term_fraction": 0.0,
    "retrieval.gate.auto.lexical_min_matched_terms": 1,
    "retrieval.gate.auto.relative_floor": 0.0,
}
GRID_DENSE = [round(x, 3) for x in np.arange(0.15, 0.8001, 0.025)]
GRID_FRACTION = [0.34, 0.5, 0.6, 0.67, 0.75, 1.0]
GRID_MATCHED = [1, 2, 3]
GRID_RELATIVE = [0.0, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9]


@dataclass
class Item:
    """One logged search and what the right gate outcome is."""

    cls: str  # "present", "absent_cat5", "absent_cross", "ordinary"
    sample_id: str  # whose text the query is
    target: str  # whose scope was searched
    query: str
    category: int | None
    gold: set[str] = field(default_factory=set)
    search_id: str = ""


@dataclass(frozen=True)
class Setting:
    """One point of the sweep: the episodic floor (others follow by offset) and the other keys."""

    episodic: float
    fraction: float
    matched: int
    relative: float
    auto: bool = False

    def dense(self) -> dict[str, float]:
        offsets = AUTO_OFFSETS if self.auto else TOOL_OFFSETS
        return {t: round(min(1.0, self.episodic + offsets[t]), 3) for t in TYPES}

    def config(self) -> Config:
        prefix = "retrieval.gate.auto" if self.auto else "retrieval.gate"
        return Config().override(
            {
                f"{prefix}.dense_floor": self.dense(),
                f"{prefix}.lexical_min_term_fraction": self.fraction,
                f"{prefix}.lexical_min_matched_terms": self.matched,
                f"{prefix}.relative_floor": self.relative,
            }
        )


def default_settings() -> tuple[GateFloors, GateFloors]:
    """The floors the shipped defaults apply to tool and auto searches."""
    gate_cfg = Config().retrieval.gate
    return gate_cfg.floors_for("tool"), gate_cfg.floors_for("auto")


# --------------------------------------------------------------------------- searching


def partner(conversations: list[Conversation], i: int) -> Conversation | None:
    """The next conversation (cyclically) whose speakers share no name with conversation ``i``."""
    names = {normalize_alias(s) for s in conversations[i].speakers}
    n = len(conversations)
    for step in range(1, n):
        other = conversations[(i + step) % n]
        if not names & {normalize_alias(s) for s in other.speakers}:
            return other
    return None


def build_items(
    ingested: list[Ingested], *, per_conv: int | None, cross_per_conv: int, turns_per_conv: int,
    min_chars: int, seed: int,
) -> list[Item]:  # fmt: skip
    """The calibration items: questions and ordinary turns, with their gold record ids."""
    rng = random.Random(seed)
    convs = [g.conversation for g in ingested]
    by_id = {g.conversation.sample_id: g for g in ingested}
    items: list[Item] = []
    for i, g in enumerate(ingested):
        conv = g.conversation
        answerable = [q for q in conv.questions if q.category in (1, 2, 3, 4) and g.gold(q)]
        adversarial = [q for q in conv.questions if q.category == 5]
        if per_conv is not None:
            answerable = rng.sample(answerable, min(per_conv, len(answerable)))
            adversarial = rng.sample(adversarial, min(per_conv, len(adversarial)))
        for q in answerable:
            items.append(Item("present", conv.sample_id, conv.sample_id, q.question, q.category, g.gold(q)))
        for q in adversarial:
            items.append(Item("absent_cat5", conv.sample_id, conv.sample_id, q.question, 5))
        other = partner(convs, i)
        if other is None:
            continue
        pool = [q for q in conv.questions if q.category in (1, 2, 3, 4)]
        for q in rng.sample(pool, min(cross_per_conv, len(pool))):
            items.append(Item("absent_cross", conv.sample_id, other.sample_id, q.question, q.category))
        turns = [t for t in conv.turns if len(" ".join(t.text.split())) >= min_chars]
        for t in rng.sample(turns, min(turns_per_conv, len(turns))):
            items.append(Item("ordinary", conv.sample_id, other.sample_id, t.text, None))
    assert all(it.target in by_id for it in items)
    return items


async def run_searches(args: argparse.Namespace) -> dict[str, Any]:
    """Ingest, search every item once under the permissive gate, and return the logged candidates."""
    conversations = load_conversations(limit=args.conversations)
    path = Path(tempfile.mkdtemp(prefix="retold-calib-")) / "calib.sqlite"
    config = Config().override(PERMISSIVE)
    timings: dict[str, float] = {}
    async with retold.open_runtime(path, config) as rt:
        t0 = time.perf_counter()
        await rt.warm()
        timings["model_load_s"] = time.perf_counter() - t0
        t0 = time.perf_counter()
        ingested = await ingest_conversations(rt, conversations)
        for g in ingested:
            await rt.host.grant(AGENT, g.conversation.scope, read=True)
        await rt.warm()  # load the vector index with every row
        timings["ingest_s"] = time.perf_counter() - t0
        items = build_items(
            ingested, per_conv=args.per_conv, cross_per_conv=args.cross_per_conv,
            turns_per_conv=args.turns_per_conv,
            min_chars=rt.config.retrieval.trigger.auto_min_query_chars, seed=args.seed,
        )  # fmt: skip
        t0 = time.perf_counter()
        for n, item in enumerate(items, start=1):
            trigger = "auto" if item.cls == "ordinary" else "tool"
            response = await rt.search(
                Principal(AGENT, item.target), SearchRequest(queries=[item.query], trigger=trigger)
            )
            item.search_id = response.search_id
            if args.progress and n % 250 == 0:
                print(f"  {n}/{len(items)} searches, {time.perf_counter() - t0:.0f} s", file=sys.stderr)
        timings["search_s"] = time.perf_counter() - t0
        t0 = time.perf_counter()
        rows = {it.search_id: await rt.store.search_log(it.search_id) for it in items}
        records = {
            r.id: r
            for r in await rt.store.get_records(
                {c[0] for row in rows.values() if row for c in json.loads(row["fused"])}
            )
        }
        subjects = {rid: GateSubject(r.type, r.source_kind) for rid, r in records.items()}
        # replay_gate is the public path; check it agrees with the in-memory replay on a few rows.
        check_cfg = Config()
        for it in items[:: max(1, len(items) // 20)]:
            replayed = await replay_gate(rt.store, it.search_id, check_cfg)
            kept, _ = gate(_candidates(rows[it.search_id], subjects), subjects,
                           check_cfg.retrieval.gate.floors_for(rows[it.search_id]["trigger"]))  # fmt: skip
            assert replayed.kept == [c.record_id for c in kept], "replay_gate disagrees with gate()"
        timings["load_log_s"] = time.perf_counter() - t0
    return {
        "conversations": conversations,
        "items": items,
        "rows": rows,
        "subjects": subjects,
        "timings": timings,
        "path": str(path),
    }


def _candidates(row: dict[str, Any] | None, subjects: dict[str, GateSubject]) -> list[Candidate]:
    if row is None:
        return []
    return [c for c in candidates_from_log(row) if c.record_id in subjects]


# --------------------------------------------------------------------------- the offline sweep


class Table:
    """Every logged candidate of every search as flat arrays, so one gate setting costs ~ms."""

    def __init__(self, items: list[Item], rows: dict[str, Any], subjects: dict[str, GateSubject]) -> None:
        sid, dense, matched, total, precise, entity, nch, score, gold, ftype = ([] for _ in range(10))
        for s, item in enumerate(items):
            for c in _candidates(rows.get(item.search_id), subjects):
                subject = subjects[c.record_id]
                sid.append(s)
                dense.append(c.dense.score if c.dense is not None else -np.inf)
                terms = c.lexical_terms if c.lexical is not None else None
                matched.append(len(terms.terms) if terms else 0)
                total.append(terms.total_terms if terms else 0)
                precise.append(bool(terms and any(t.is_identifier or t.is_entity_alias for t in terms.terms)))
                entity.append(c.entity is not None)
                nch.append(sum(h is not None for h in (c.dense, c.lexical, c.entity)))
                score.append(c.score)
                gold.append(c.record_id in item.gold)
                ftype.append(TYPES.index("session_summary" if subject.source_kind == "session_summary"
                                         else subject.type))  # fmt: skip
        self.n = len(items)
        self.sid = np.asarray(sid, dtype=np.int64)
        self.dense = np.asarray(dense, dtype=np.float64)
        self.matched = np.asarray(matched, dtype=np.int64)
        self.total = np.asarray(total, dtype=np.int64)
        self.precise = np.asarray(precise, dtype=bool)
        self.entity = np.asarray(entity, dtype=bool)
        self.nch = np.asarray(nch, dtype=np.int64)
        self.score = np.asarray(score, dtype=np.float64)
        self.gold = np.asarray(gold, dtype=bool)
        self.ftype = np.asarray(ftype, dtype=np.int64)
        with np.errstate(divide="ignore", invalid="ignore"):
            self.fraction = np.where(self.total > 0, self.matched / np.maximum(self.total, 1), 0.0)

    def without_entity(self) -> Table:
        """A diagnostic copy with the entity channel removed (what the floors alone decide)."""
        other = object.__new__(Table)
        other.__dict__ = dict(self.__dict__)
        other.nch = self.nch - self.entity
        other.entity = np.zeros_like(self.entity)
        return other

    def decide(self, floors: GateFloors) -> tuple[np.ndarray, np.ndarray]:
        """(anything kept, a gold record kept) per search, exactly as ``gate()`` decides."""
        dense_floor = np.asarray(
            [floors.dense_floor.for_record("episodic", t) if t == "session_summary"
             else floors.dense_floor.for_record(t) for t in TYPES]
        )  # fmt: skip
        lexical = (
            (self.total > 0)
            & (self.fraction >= floors.lexical_min_term_fraction)
            & ((self.matched >= floors.lexical_min_matched_terms) | self.precise)
        )
        step1 = self.entity | (self.dense >= dense_floor[self.ftype]) | lexical
        if "session_summary" in floors.exclude_source_kinds:
            step1 &= self.ftype != TYPES.index("session_summary")
        key = self.sid * 4 + self.nch
        top = np.zeros(self.n * 4)
        np.maximum.at(top, key[step1], self.score[step1])
        kept = step1 & (self.entity | ~(self.score < floors.relative_floor * top[key]))
        any_kept = np.bincount(self.sid[kept], minlength=self.n) > 0
        gold_kept = np.bincount(self.sid[kept & self.gold], minlength=self.n) > 0
        return any_kept, gold_kept


def metrics(items: list[Item], any_kept: np.ndarray, gold_kept: np.ndarray) -> dict[str, float]:
    """The class rates and F1 for one setting (see the module docstring for the definitions)."""
    cls = np.asarray([it.cls for it in items])
    present, cat5, cross, ordinary = (cls == c for c in ("present", "absent_cat5", "absent_cross", "ordinary"))
    absent = cat5 | cross

    def rate(mask: np.ndarray, values: np.ndarray) -> float:
        return float(values[mask].mean()) if mask.any() else float("nan")

    tp = int((gold_kept & present).sum())
    predicted = int((any_kept & (present | absent)).sum())
    precision = tp / predicted if predicted else 0.0
    recall = tp / int(present.sum()) if present.any() else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return {
        "f1": f1,
        "precision": precision,
        "class1_recall": recall,
        "class1_any_kept": rate(present, any_kept),
        "class2_empty": rate(absent, ~any_kept),
        "class2a_cat5_empty": rate(cat5, ~any_kept),
        "class2b_cross_empty": rate(cross, ~any_kept),
        "class3_injection": rate(ordinary, any_kept),
    }


def sweep(table: Table, items: list[Item], *, auto: bool) -> list[tuple[Setting, dict[str, float]]]:
    """Every grid setting with its metrics; class 3 is replayed under the same floors."""
    out = []
    for episodic, fraction, matched, relative in itertools.product(
        GRID_DENSE, GRID_FRACTION, GRID_MATCHED, GRID_RELATIVE
    ):
        setting = Setting(episodic, fraction, matched, relative, auto=auto)
        floors = GateFloors(
            dense_floor=_dense_floors(setting),
            lexical_min_term_fraction=fraction,
            lexical_min_matched_terms=matched,
            relative_floor=relative,
            exclude_source_kinds=(),
        )
        out.append((setting, metrics(items, *table.decide(floors))))
    return out


def _dense_floors(setting: Setting) -> Any:
    from retold.config import AutoDenseFloors, DenseFloors

    return (AutoDenseFloors if setting.auto else DenseFloors)(**setting.dense())


def floors_of(setting: Setting) -> GateFloors:
    return setting.config().retrieval.gate.floors_for("auto" if setting.auto else "tool")


def choose_tool(results: list[tuple[Setting, dict[str, float]]], ceiling: float) -> tuple[Setting, dict[str, float]]:
    """Highest F1 with class-3 injection under ``ceiling``; ties go to less injection, then recall."""
    ok = [r for r in results if r[1]["class3_injection"] <= ceiling] or results
    return max(ok, key=lambda r: (round(r[1]["f1"], 4), -r[1]["class3_injection"], r[1]["class1_recall"]))


def choose_auto(results: list[tuple[Setting, dict[str, float]]], target: float) -> tuple[Setting, dict[str, float]]:
    """Highest class-1 recall with class-3 injection at or under ``target``; ties to less injection, F1."""
    ok = [r for r in results if r[1]["class3_injection"] <= target] or results
    return max(ok, key=lambda r: (round(r[1]["class1_recall"], 4), -r[1]["class3_injection"], r[1]["f1"]))


def exact_check(items: list[Item], rows: dict[str, Any], subjects: dict[str, GateSubject],
                floors: GateFloors, fast: tuple[np.ndarray, np.ndarray], k: int) -> float:  # fmt: skip
    """Re-decide every search with the real ``gate()``; assert the vectorised sweep agrees.

    Returns the class-1 share with a gold record among the first ``k`` survivors (budget order).
    """
    hits = present = 0
    for s, item in enumerate(items):
        kept, _ = gate(_candidates(rows.get(item.search_id), subjects), subjects, floors)
        ids = [c.record_id for c in kept]
        assert bool(ids) == bool(fast[0][s]), f"sweep disagrees with gate() on {item.search_id}"
        assert bool(set(ids) & item.gold) == bool(fast[1][s]), f"sweep disagrees on gold, {item.search_id}"
        if item.cls == "present":
            present += 1
            hits += bool(set(ids[:k]) & item.gold)
    return hits / present if present else float("nan")


# --------------------------------------------------------------------------- reporting


def describe(floors: GateFloors) -> dict[str, Any]:
    return {
        "dense_floor": floors.dense_floor.model_dump(),
        "lexical_min_term_fraction": floors.lexical_min_term_fraction,
        "lexical_min_matched_terms": floors.lexical_min_matched_terms,
        "relative_floor": floors.relative_floor,
    }


COLUMNS = [
    ("f1", "F1"), ("precision", "prec"), ("class1_recall", "c1 gold"), ("class1_any_kept", "c1 any"),
    ("class2_empty", "c2 empty"), ("class2a_cat5_empty", "c2a cat5"), ("class2b_cross_empty", "c2b cross"),
    ("class3_injection", "c3 inject"),
]  # fmt: skip


def print_table(title: str, rows: list[tuple[str, dict[str, float]]]) -> None:
    print(f"\n{title}")
    print(f"{'setting':<34}" + "".join(f"{label:>10}" for _, label in COLUMNS))
    for name, m in rows:
        print(f"{name:<34}" + "".join(f"{m[key]:>10.3f}" for key, _ in COLUMNS))


def short(floors: GateFloors) -> str:
    d = floors.dense_floor
    return (f"ep {d.episodic:.3f} sem {d.semantic:.3f} frac {floors.lexical_min_term_fraction:g} "
            f"m{floors.lexical_min_matched_terms} rel {floors.relative_floor:g}")  # fmt: skip


def yaml_snippet(tool: GateFloors, auto: GateFloors, embedder: str, version: str) -> str:
    def dense(d: Any, indent: str) -> str:
        return "".join(f"{indent}  {t}: {getattr(d, t):.3f}\n" for t in TYPES)

    return (
        f"# calibrated for {embedder} (embedding.version {version!r}) by benchmarks/calibrate_gate.py\n"
        "retrieval:\n  gate:\n    dense_floor:\n" + dense(tool.dense_floor, "    ")
        + f"    lexical_min_term_fraction: {tool.lexical_min_term_fraction:g}\n"
        f"    lexical_min_matched_terms: {tool.lexical_min_matched_terms}\n"
        f"    relative_floor: {tool.relative_floor:g}\n"
        "    auto:\n      dense_floor:\n" + dense(auto.dense_floor, "      ")
        + f"      lexical_min_term_fraction: {auto.lexical_min_term_fraction:g}\n"
        f"      lexical_min_matched_terms: {auto.lexical_min_matched_terms}\n"
        f"      relative_floor: {auto.relative_floor:g}\n"
    )  # fmt: skip


def commit() -> str:
    try:
        return subprocess.run(
            ["git", "rev-parse", "HEAD"], capture_output=True, text=True, check=True, cwd=ROOT
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--conversations", type=int, default=10, help="LoCoMo conversations to ingest")
    parser.add_argument("--per-conv", type=int, default=None,
                        help="cap class-1 and category-5 questions per conversation (default: all)")
    parser.add_argument("--cross-per-conv", type=int, default=80,
                        help="category 1-4 questions per conversation asked of another conversation")
    parser.add_argument("--turns-per-conv", type=int, default=80, help="ordinary turns per conversation")
    parser.add_argument("--tool-ceiling", type=float, default=0.5,
                        help="class-3 injection ceiling for the tool floors")
    parser.add_argument("--auto-target", type=float, default=0.2, help="class-3 injection target for gate.auto")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--quick", action="store_true", help="2 conversations, 12 items of each class each")
    parser.add_argument("--progress", action="store_true", help="report search progress on stderr")
    parser.add_argument("--json", type=Path, default=None, help="write the figures here")
    args = parser.parse_args()  # fmt: skip
    if args.quick:
        args.conversations, args.per_conv, args.cross_per_conv, args.turns_per_conv = 2, 12, 12, 12

    t_start = time.perf_counter()
    data = asyncio.run(run_searches(args))
    items, rows, subjects = data["items"], data["rows"], data["subjects"]
    t0 = time.perf_counter()
    table = Table(items, rows, subjects)
    tool_results = sweep(table, items, auto=False)
    auto_results = sweep(table, items, auto=True)
    tool_setting, _ = choose_tool(tool_results, args.tool_ceiling)
    auto_setting, _ = choose_auto(auto_results, args.auto_target)
    sweep_s = time.perf_counter() - t0

    default_tool, default_auto = default_settings()
    chosen_tool, chosen_auto = floors_of(tool_setting), floors_of(auto_setting)
    k_tool = Config().retrieval.default_k
    k_auto = Config().retrieval.trigger.auto_k
    report: dict[str, Any] = {}
    views = {"full gate": table, "entity channel removed (diagnostic)": table.without_entity()}
    for view, tab in views.items():
        rows_out = []
        for name, floors, k in (
            ("current defaults, tool", default_tool, k_tool),
            ("chosen, tool", chosen_tool, k_tool),
            ("current defaults, auto", default_auto, k_auto),
            ("chosen, auto", chosen_auto, k_auto),
        ):
            fast = tab.decide(floors)
            m = metrics(items, *fast)
            if tab is table:
                m[f"class1_gold_in_top_{k}"] = exact_check(items, rows, subjects, floors, fast, k)
            rows_out.append((name, m))
        report[view] = dict(rows_out)
        print_table(f"== {view}", rows_out)

    counts = {c: sum(it.cls == c for it in items) for c in ("present", "absent_cat5", "absent_cross", "ordinary")}
    print(f"\nitems: {counts}; conversations: {len(data['conversations'])}; "
          f"turns ingested: {sum(len(c.turns) for c in data['conversations'])}")  # fmt: skip
    for name, key in (("tool", False), ("auto", True)):
        best = tool_results if not key else auto_results
        chosen = tool_setting if not key else auto_setting
        print(f"\n{name}: metrics along the episodic floor (other keys as chosen)")
        print(f"{'episodic':>9}" + "".join(f"{label:>10}" for _, label in COLUMNS))
        for s, m in best:
            if (s.fraction, s.matched, s.relative) == (chosen.fraction, chosen.matched, chosen.relative):
                mark = " <" if s.episodic == chosen.episodic else ""
                print(f"{s.episodic:>9.3f}" + "".join(f"{m[k]:>10.3f}" for k, _ in COLUMNS) + mark)

    print(f"\nchosen tool floors: {short(chosen_tool)} (max F1 with class-3 injection <= {args.tool_ceiling:g})")
    print(f"chosen auto floors: {short(chosen_auto)} (max class-1 recall with class-3 injection "
          f"<= {args.auto_target:g})")  # fmt: skip
    print("semantic/procedural/session_summary floors keep the spec's offsets from episodic "
          f"(tool {TOOL_OFFSETS}, auto {AUTO_OFFSETS}); LoCoMo holds only episodic records.")  # fmt: skip
    timings = {**data["timings"], "sweep_s": sweep_s, "total_s": time.perf_counter() - t_start}
    print("timings: " + ", ".join(f"{k} {v:.1f}" for k, v in timings.items()))
    embedder = Config().embedding
    snippet = yaml_snippet(chosen_tool, chosen_auto, embedder.model, embedder.version)
    print("\nrecommended YAML:\n" + snippet)

    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        top = sorted(tool_results, key=lambda r: -r[1]["f1"])[:10]
        payload = {
            "meta": {
                "machine": platform.platform(),
                "python": sys.version.split()[0],
                "cpus": os.cpu_count(),
                "commit": commit(),
                "embedder": embedder.model,
                "embedding_version": embedder.version,
                "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
                "dataset": "LoCoMo locomo10.json (CC BY-NC 4.0), categories in the official naming",
            },
            "args": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()},
            "counts": {
                **counts,
                "conversations": [c.sample_id for c in data["conversations"]],
                "turns_ingested": sum(len(c.turns) for c in data["conversations"]),
            },
            "definitions": __doc__.split("\n\n")[1:3],
            "grid": {"episodic": GRID_DENSE, "lexical_min_term_fraction": GRID_FRACTION,
                     "lexical_min_matched_terms": GRID_MATCHED, "relative_floor": GRID_RELATIVE,
                     "tool_offsets": TOOL_OFFSETS, "auto_offsets": AUTO_OFFSETS},  # fmt: skip
            "targets": {"tool_class3_ceiling": args.tool_ceiling, "auto_class3_target": args.auto_target},
            "current_defaults": {"tool": describe(default_tool), "auto": describe(default_auto)},
            "chosen": {"tool": describe(chosen_tool), "auto": describe(chosen_auto)},
            "metrics": report,
            "top_tool_by_f1": [{"setting": describe(floors_of(s)), "metrics": m} for s, m in top],
            "curves": {
                name: [
                    {"episodic": s.episodic, **m}
                    for s, m in res
                    if (s.fraction, s.matched, s.relative) == (ch.fraction, ch.matched, ch.relative)
                ]
                for name, res, ch in (("tool", tool_results, tool_setting), ("auto", auto_results, auto_setting))
            },
            "timings_s": timings,
            "yaml": snippet,
        }
        args.json.write_text(json.dumps(payload, indent=2, default=float))


if __name__ == "__main__":
    main()
