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
the (stricter) auto injection target, sweeping also how they rise for a turn that plainly
states (``gate.auto.statements``; ``retold.retrieve.query_kind`` decides, and the logged
search records which floors applied). ``--tune-on 5`` chooses on the first five
conversations' searches and reports the other five apart. The relative floor never empties a non-empty result
(each channel group's top survives it), so those rates cannot choose it: the current default
stays unless it costs more than ``--relative-tolerance`` class-1 recall, at the real clock or
at a clock one day after the conversation's last session (LoCoMo is years old, so at the
real clock every episode sits on the freshness floor and step 2 never meets the spread of
freshness multipliers a live store has). LoCoMo records are all episodic, so the data
calibrates the episodic floor; the semantic, procedural and session-summary floors keep the
spec's offsets from it (stated in the output).

Besides the real gate, two diagnostic views are printed: the entity channel removed (what
the floors alone decide; every LoCoMo question names a speaker, whose 30 newest turns the
entity channel passes unconditionally) and the conversation-end clock.

    python benchmarks/calibrate_gate.py                       # all 10 conversations
    python benchmarks/calibrate_gate.py --conversations 4
    python benchmarks/calibrate_gate.py --quick               # 2 conversations, few questions
    python benchmarks/calibrate_gate.py --json benchmarks/results/gate_calibration.json
    python benchmarks/calibrate_gate.py --store s.sqlite      # keep the store and its search log
    python benchmarks/calibrate_gate.py --from-store s.sqlite # re-sweep a kept log, no searching
    python benchmarks/calibrate_gate.py --tune-on 5           # choose on 1-5, report 6-10 apart

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
from dataclasses import asdict, dataclass, field, replace
from datetime import datetime
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # never reach for a model hub from a benchmark
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

ROOT = Path(__file__).resolve().parents[1]
for entry in (ROOT, ROOT / "benchmarks"):  # runnable as `python benchmarks/calibrate_gate.py`
    if str(entry) not in sys.path:
        sys.path.insert(0, str(entry))

from locomo_data import Conversation, Ingested, ingest_conversations, load_conversations  # noqa: E402

import retold  # noqa: E402
from retold.config import Config, DenseFloors, GateConfig, GateFloors  # noqa: E402
from retold.models import Candidate, Principal, SearchRequest, Trigger  # noqa: E402
from retold.retrieve.freshness import freshness_multiplier  # noqa: E402
from retold.retrieve.gate import GateSubject, cosine, dense_reference, gate  # noqa: E402
from retold.retrieve.replay import candidates_from_log, replay_gate  # noqa: E402
from retold.util import normalize_alias  # noqa: E402

AGENT = "calibrator"
CLASSES = ("present", "absent_cat5", "absent_cross", "ordinary")
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
    "embedding.query_cache_entries": 20_000,  # room to pre-embed every query in one batch
}
GRID_DENSE = [round(float(x), 3) for x in np.arange(0.15, 0.8001, 0.025)]
GRID_FRACTION = [0.0, 0.1, 0.2, 0.25, 0.34, 0.4, 0.5, 0.6, 0.67, 0.75, 1.0]
# Capped at 4: a higher floor switches the plain-word lexical path off for every question of
# fewer terms, a decision LoCoMo's short questions and all-episodic records cannot support.
GRID_MATCHED = [1, 2, 3, 4]
GRID_RELATIVE = [0.0, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9]
COLUMNS = [
    ("f1", "F1"),
    ("precision", "prec"),
    ("class1_recall", "c1 gold"),
    ("class1_any_kept", "c1 any"),
    ("class2_empty", "c2 empty"),
    ("class2a_cat5_empty", "c2a cat5"),
    ("class2b_cross_empty", "c2b cross"),
    ("class3_injection", "c3 inject"),
    ("class1_survivors", "c1 kept#"),
    ("class1_gold_in_first_k", "c1 @k"),
]

Result = tuple["Setting", dict[str, float]]


@dataclass
class Item:
    """One logged search and what the right gate outcome is."""

    cls: str  # one of CLASSES
    sample_id: str  # whose text the query is
    target: str  # whose scope was searched
    query: str
    category: int | None
    gold: list[str] = field(default_factory=list)  # record ids of the evidence turns
    search_id: str = ""


STATEMENTS = Config().retrieval.gate.auto.statements


class Rule(NamedTuple):
    """A search's floors by its logged query kind (``GateFloors.query_kind``): one that asks, one
    that plainly states (auto only) and a question about the searcher (a smaller standout margin)."""

    asking: GateFloors
    stating: GateFloors
    about_self: GateFloors

    @classmethod
    def of(cls, gate_config: GateConfig, trigger: Trigger) -> Rule:
        return cls(
            gate_config.floors_for(trigger),
            gate_config.floors_for(trigger, asks=False),
            gate_config.floors_for(trigger, about_self=True),
        )

    def for_kind(self, kind: int) -> GateFloors:
        return self[kind]


ASKING, STATING, ABOUT_SELF = range(3)
GRID_STATEMENT_OFFSET = [0.0, 0.05, 0.075, 0.1, 0.125, 0.15]
GRID_STATEMENT_FRACTION = [0.5, 0.75, 1.0]


def as_rule(floors: GateFloors | Rule) -> Rule:
    return floors if isinstance(floors, Rule) else Rule(floors, floors, floors)


def logged_kind(row: dict[str, Any] | None) -> int:
    """Which of a rule's floors the logged search had (its floors' query kind; asking when unknown)."""
    kind = None if row is None else _load(row["config_flags"]).get("gate", {}).get("query_kind")
    return {"statement": STATING, "self": ABOUT_SELF}.get(kind or "", ASKING)


@dataclass(frozen=True)
class Setting:
    """One point of the sweep: the episodic floor (the others follow by offset) and the other keys."""

    episodic: float
    fraction: float
    matched: int
    relative: float
    auto: bool = False
    # auto only: how the floors rise for a turn that plainly states (gate.auto.statements)
    statement_offset: float = STATEMENTS.dense_offset
    statement_fraction: float = STATEMENTS.lexical_min_term_fraction

    def dense(self) -> dict[str, float]:
        offsets = AUTO_OFFSETS if self.auto else TOOL_OFFSETS
        return {t: round(min(1.0, self.episodic + offsets[t]), 3) for t in TYPES}

    def floors(self) -> Rule:
        """The floors exactly as ``GateConfig.floors_for`` builds them from this setting, for a
        search that asks, (auto) for one that plainly states and for a question about the searcher."""
        return Rule.of(self.config().retrieval.gate, "auto" if self.auto else "tool")

    def config(self) -> Config:
        """A validated default config carrying this setting under its trigger's keys."""
        prefix = "retrieval.gate.auto" if self.auto else "retrieval.gate"
        keys: dict[str, Any] = {
            f"{prefix}.dense_floor": self.dense(),
            f"{prefix}.lexical_min_term_fraction": self.fraction,
            f"{prefix}.lexical_min_matched_terms": self.matched,
            f"{prefix}.relative_floor": self.relative,
        }
        if self.auto:
            keys[f"{prefix}.statements"] = {
                "dense_offset": self.statement_offset, "lexical_min_term_fraction": self.statement_fraction,
            }  # fmt: skip
        return Config().override(keys)


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
    ingested: list[Ingested],
    *,
    per_conv: int | None,
    cross_per_conv: int,
    turns_per_conv: int,
    min_chars: int,
    seed: int,
) -> list[Item]:
    """The calibration items: questions and ordinary turns, with their gold record ids."""
    rng = random.Random(seed)
    convs = [g.conversation for g in ingested]
    items: list[Item] = []
    for i, g in enumerate(ingested):
        conv = g.conversation
        answerable = [q for q in conv.questions if q.category in (1, 2, 3, 4) and g.gold(q)]
        adversarial = [q for q in conv.questions if q.category == 5]
        if per_conv is not None:
            answerable = rng.sample(answerable, min(per_conv, len(answerable)))
            adversarial = rng.sample(adversarial, min(per_conv, len(adversarial)))
        sid = conv.sample_id
        items += [Item("present", sid, sid, q.question, q.category, sorted(g.gold(q))) for q in answerable]
        items += [Item("absent_cat5", sid, sid, q.question, 5) for q in adversarial]
        other = partner(convs, i)
        if other is None:
            continue
        pool = [q for q in conv.questions if q.category in (1, 2, 3, 4)]
        for q in rng.sample(pool, min(cross_per_conv, len(pool))):
            items.append(Item("absent_cross", sid, other.sample_id, q.question, q.category))
        turns = [t for t in conv.turns if len(" ".join(t.text.split())) >= min_chars]
        for t in rng.sample(turns, min(turns_per_conv, len(turns))):
            items.append(Item("ordinary", sid, other.sample_id, t.text, None))
    return items


async def search_all(args: argparse.Namespace, path: Path) -> dict[str, Any]:
    """Ingest, then search every item once under the permissive gate; writes the items sidecar."""
    conversations = load_conversations(limit=args.conversations)
    timings: dict[str, float] = {}
    async with retold.open_runtime(path, Config().override(PERMISSIVE)) as rt:
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
            ingested,
            per_conv=args.per_conv,
            cross_per_conv=args.cross_per_conv,
            turns_per_conv=args.turns_per_conv,
            min_chars=rt.config.retrieval.trigger.auto_min_query_chars,
            seed=args.seed,
        )
        t0 = time.perf_counter()
        # One batched encode fills the query cache, so each search below finds its vector there.
        await asyncio.to_thread(rt.embedder.embed_queries, list(dict.fromkeys(it.query for it in items)))
        timings["query_embed_s"] = time.perf_counter() - t0
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
    run = {
        "conversations": [c.sample_id for c in conversations],
        "turns_ingested": sum(len(c.turns) for c in conversations),
        "timings": timings,
        "items": [asdict(it) for it in items],
    }
    sidecar(path).write_text(json.dumps(run))
    return run


def sidecar(path: Path) -> Path:
    return path.with_name(path.name + ".items.json")


async def load_logged(
    path: Path, items: list[Item]
) -> tuple[dict[str, Any], dict[str, GateSubject], dict[str, datetime]]:
    """Logged rows, gate subjects and event times of every candidate; checks ``replay_gate`` agrees."""
    async with retold.open_runtime(path, Config().override(PERMISSIVE)) as rt:
        rows = {it.search_id: await rt.store.search_log(it.search_id) for it in items}
        ids = {c[0] for row in rows.values() if row for c in json.loads(row["fused"])}
        records = await rt.store.get_records(ids)
        subjects = {r.id: GateSubject(r.type, r.source_kind, r.event_at) for r in records}
        event_at = {r.id: r.event_at for r in records}
        check = Config()  # the public replay path must reproduce the in-memory replay
        for it in items[:: max(1, len(items) // 25)]:
            row = rows[it.search_id]
            replayed = await replay_gate(rt.store, it.search_id, check)
            floors = Rule.of(check.retrieval.gate, row["trigger"]).for_kind(logged_kind(row))
            kept, _ = gate(candidates(row, subjects), subjects, floors)
            assert replayed.kept == [c.record_id for c in kept], "replay_gate disagrees with gate()"
    return rows, subjects, event_at


def _load(value: Any) -> Any:
    return json.loads(value) if isinstance(value, str) else value


def candidates(row: dict[str, Any] | None, subjects: dict[str, GateSubject]) -> list[Candidate]:
    if row is None:
        return []
    return [c for c in candidates_from_log(row) if c.record_id in subjects]


# --------------------------------------------------------------------------- the offline sweep


@dataclass
class Decision:
    any_kept: np.ndarray  # per search: the gate keeps something
    gold_kept: np.ndarray  # per search: a gold record survives
    survivors: np.ndarray  # per search: how many records survive


class Table:
    """Every logged candidate of every search as flat arrays, so one gate setting costs ~ms."""

    def __init__(self, items: list[Item], rows: dict[str, Any], subjects: dict[str, GateSubject]) -> None:
        self.record_ids: list[str] = []
        cols: list[tuple[Any, ...]] = []
        # A best passage's cosine counts the shipped gate.passage_margin less for every dense floor
        # (gate.cosine), so the sweep reads each cosine as the floors do; the margin is not swept.
        shipped = Config().retrieval.gate.floors_for("tool")  # passage_margin is one for both triggers
        margin = shipped.passage_margin
        # Per search: what a standout stands out from (gate.dense_reference), NaN when nothing.
        self.reference = np.full(len(items), np.nan)
        for s, item in enumerate(items):
            gold = set(item.gold)
            row = rows.get(item.search_id)
            rrf_k = int(_load(row["config_flags"])["rrf_k"]) if row else 60
            searched = candidates(row, subjects)
            reference = dense_reference(searched, margin)
            if reference is not None:
                self.reference[s] = reference.mean
            for position, c in enumerate(searched, start=1):
                subject = subjects[c.record_id]
                kind = "session_summary" if subject.source_kind == "session_summary" else subject.type
                terms = c.lexical_terms if c.lexical is not None else None
                matched, total = terms.counted if terms else (0, 0)  # common words aside, as the gate
                multiplier = c.freshness_multiplier if c.freshness_multiplier is not None else 1.0
                self.record_ids.append(c.record_id)
                cols.append((
                    s,
                    cosine(c, shipped) if c.dense is not None else -np.inf,
                    matched,
                    total,
                    # one match suffices: an identifier, an alias or a rare word (as the gate)
                    bool(terms and any((t.precise or t.rare) and not t.common for t in terms.terms)),
                    c.entity is not None,
                    sum(h is not None for h in (c.dense, c.lexical, c.entity)),
                    c.score,
                    c.rrf_score,
                    multiplier,
                    # the entity channel's share of the RRF score, for the diagnostic view
                    1.0 / (rrf_k + c.entity.rank) if c.entity is not None else 0.0,
                    c.record_id in gold,
                    TYPES.index(kind),
                    c.in_context,
                    subject.event_at.astimezone(dt.UTC).date().toordinal() if subject.event_at else -1,
                    c.in_window,
                    position,
                    bool(terms and terms.total_terms),
                ))  # fmt: skip
        columns = list(zip(*cols, strict=True)) if cols else [()] * 18
        self.n = len(items)
        self.kind = np.asarray([logged_kind(rows.get(it.search_id)) for it in items], dtype=np.int64)
        self.sid = np.asarray(columns[0], dtype=np.int64)
        self.dense = np.asarray(columns[1], dtype=np.float64)
        self.matched = np.asarray(columns[2], dtype=np.int64)
        self.total = np.asarray(columns[3], dtype=np.int64)
        self.precise = np.asarray(columns[4], dtype=bool)
        self.entity = np.asarray(columns[5], dtype=bool)
        self.nch = np.asarray(columns[6], dtype=np.int64)
        self.score = np.asarray(columns[7], dtype=np.float64)
        self.rrf = np.asarray(columns[8], dtype=np.float64)
        self.multiplier = np.asarray(columns[9], dtype=np.float64)
        self.entity_rrf = np.asarray(columns[10], dtype=np.float64)
        self.gold = np.asarray(columns[11], dtype=bool)
        self.ftype = np.asarray(columns[12], dtype=np.int64)
        self.in_context = np.asarray(columns[13], dtype=bool)
        self.day = np.asarray(columns[14], dtype=np.int64)
        self.in_window = np.asarray(columns[15], dtype=bool)
        self.position = np.asarray(columns[16], dtype=np.int64)  # in the search's ranking, from 1
        self.has_terms = np.asarray(columns[17], dtype=bool)  # a lexical match with any query term
        self.fraction = self.matched / np.maximum(self.total, 1)

    def without_entity(self) -> Table:
        """A diagnostic copy as if the entity channel had not run (what the floors alone decide)."""
        other = object.__new__(Table)
        other.__dict__ = dict(self.__dict__)
        other.nch = self.nch - self.entity
        other.score = (self.rrf - self.entity_rrf) * self.multiplier
        other.entity = np.zeros_like(self.entity)
        other.entity_rrf = np.zeros_like(self.entity_rrf)
        return other

    def at_clock(self, items: list[Item], now: dict[str, datetime], event_at: dict[str, datetime]) -> Table:
        """A diagnostic copy whose freshness is recomputed as if searched at ``now[item.target]``.

        LoCoMo's sessions are years old, so at the real clock every episode sits on the
        freshness floor and the relative floor never meets a spread of multipliers; searching
        right after the conversation's last session gives recent and old turns their spread.
        """
        cfg = Config().retrieval.freshness
        other = object.__new__(Table)
        other.__dict__ = dict(self.__dict__)
        multiplier = np.asarray([
            freshness_multiplier(event_at[rid], now[items[s].target], cfg) if t == 1 else 1.0
            for rid, s, t in zip(self.record_ids, self.sid, self.ftype, strict=True)
        ])  # fmt: skip
        other.multiplier = multiplier
        other.score = self.rrf * multiplier
        return other

    def gold_in_first_k(self, items: list[Item], floors: GateFloors | Rule, k: int) -> float:
        """Class-1 share with a gold record among the first ``k`` survivors in score order."""
        kept = self.kept(floors)
        hits = present = 0
        for s, item in enumerate(items):
            if item.cls != "present":
                continue
            present += 1
            mask = kept & (self.sid == s)
            order = np.argsort(-self.score[mask], kind="stable")[:k]
            hits += bool(self.gold[mask][order].any())
        return hits / present if present else float("nan")

    def decide(self, floors: GateFloors | Rule) -> Decision:
        """What ``gate()`` keeps for every search under ``floors``, per search."""
        return self.decision(self.kept(floors))

    def decision(self, kept: np.ndarray) -> Decision:
        """Per search, from which candidates survive."""
        survivors = np.bincount(self.sid[kept], minlength=self.n)
        gold_kept = np.bincount(self.sid[kept & self.gold], minlength=self.n) > 0
        return Decision(survivors > 0, gold_kept, survivors)

    def kept(self, floors: GateFloors | Rule) -> np.ndarray:
        """Per candidate: does ``gate()`` keep it under ``floors`` (steps 1 and 2, vectorised);
        a rule's other floors apply to the searches of their query kind."""
        rule = as_rule(floors)
        kept = self._kept(rule.asking)
        kinds = self.kind[self.sid]
        for kind in (STATING, ABOUT_SELF):
            other = rule.for_kind(kind)
            if other != rule.asking and (kinds == kind).any():
                kept = np.where(kinds == kind, self._kept(other), kept)
        return kept

    def _kept(self, floors: GateFloors) -> np.ndarray:
        dense_floor = np.asarray(
            [
                floors.dense_floor.for_record("episodic", t)
                if t == "session_summary"
                else floors.dense_floor.for_record(t)
                for t in TYPES
            ]
        )
        lexical = (
            self.has_terms
            & (self.fraction >= floors.lexical_min_term_fraction)
            & ((self.matched >= floors.lexical_min_matched_terms) | self.precise)
        )
        dated = self.in_window & (self.dense >= floors.window_floor)
        reference = self.reference[self.sid]
        standout = (
            (floors.standout_floor < 1.0) & ~np.isnan(reference) & (self.dense >= floors.standout_floor)
            & (self.dense - np.nan_to_num(reference, nan=np.inf) >= floors.standout_margin)
        )  # fmt: skip
        step1 = self.entity | (self.dense >= dense_floor[self.ftype]) | dated | standout | lexical
        return self.after_step1(step1, floors)

    def after_step1(self, step1: np.ndarray, floors: GateFloors) -> np.ndarray:
        """The gate's rules after step 1 (context rescue, companions, the relative floor), given
        which candidates pass step 1; the probe of other step-1 rules reuses it."""
        allowed = np.ones_like(step1)
        if "session_summary" in floors.exclude_source_kinds:
            allowed = self.ftype != TYPES.index("session_summary")
            step1 = step1 & allowed
        # Context candidates beside a survivor (gate._context_passes): same search, same day.
        day_key = self.sid * 1_000_000 + self.day
        beside = np.isin(day_key, day_key[step1 & (self.day >= 0)]) & (self.day >= 0)
        context = allowed & self.in_context & beside & (self.dense >= floors.context_floor)
        # Companions near the top of an answered search (gate._companion_passes).
        answered = np.bincount(self.sid[step1], minlength=self.n) > 0
        near = self.position <= floors.companion_rank
        floor = np.where(
            (self.in_context | self.in_window) & (self.ftype == TYPES.index("episodic")),
            min(floors.companion_floor, floors.companion_beside_floor),
            floors.companion_floor,
        )
        companion = floors.companion_floor < 1.0
        step1 = step1 | context | (allowed & answered[self.sid] & near & companion & (self.dense >= floor))
        key = self.sid * 4 + self.nch
        top = np.zeros(self.n * 4)
        np.maximum.at(top, key[step1], self.score[step1])
        return step1 & (self.entity | ~(self.score < floors.relative_floor * top[key]))


def metrics(items: list[Item], d: Decision) -> dict[str, float]:
    """The class rates and F1 for one decision (see the module docstring for the definitions)."""
    cls = np.asarray([it.cls for it in items])
    present, cat5, cross, ordinary = (cls == c for c in CLASSES)
    absent = cat5 | cross

    def rate(mask: np.ndarray, values: np.ndarray) -> float:
        return float(values[mask].mean()) if mask.any() else float("nan")

    tp = int((d.gold_kept & present).sum())
    predicted = int((d.any_kept & (present | absent)).sum())
    precision = tp / predicted if predicted else 0.0
    recall = tp / int(present.sum()) if present.any() else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return {
        "f1": f1,
        "precision": precision,
        "class1_recall": recall,
        "class1_any_kept": rate(present, d.any_kept),
        "class2_empty": rate(absent, ~d.any_kept),
        "class2a_cat5_empty": rate(cat5, ~d.any_kept),
        "class2b_cross_empty": rate(cross, ~d.any_kept),
        "class3_injection": rate(ordinary, d.any_kept),
        "class1_survivors": rate(present, d.survivors.astype(float)),
        "class3_survivors_when_injected": rate(ordinary & d.any_kept, d.survivors.astype(float)),
    }


def sweep(table: Table, items: list[Item], *, auto: bool) -> list[Result]:
    """Every absolute-floor setting (relative floor 0, which cannot change emptiness) with its metrics."""
    return [
        (s, metrics(items, table.decide(s.floors())))
        for s in (
            Setting(e, f, m, 0.0, auto=auto, statement_offset=o, statement_fraction=sf)
            for e, f, m, o, sf in itertools.product(
                GRID_DENSE,
                GRID_FRACTION,
                GRID_MATCHED,
                GRID_STATEMENT_OFFSET if auto else [STATEMENTS.dense_offset],
                GRID_STATEMENT_FRACTION if auto else [STATEMENTS.lexical_min_term_fraction],
            )
        )
    ]


def choose_tool(results: list[Result], ceiling: float) -> Result:
    """Highest F1 with class-3 injection at or under ``ceiling``; ties go to less injection."""
    ok = [r for r in results if r[1]["class3_injection"] <= ceiling] or results
    return max(ok, key=lambda r: (round(r[1]["f1"], 4), -r[1]["class3_injection"], r[1]["class1_recall"]))


def choose_auto(results: list[Result], target: float) -> Result:
    """Highest class-1 recall with class-3 injection at or under ``target``; ties to less injection."""
    ok = [r for r in results if r[1]["class3_injection"] <= target] or results
    return max(ok, key=lambda r: (round(r[1]["class1_recall"], 4), -r[1]["class3_injection"], r[1]["f1"]))


def choose_relative(
    views: list[Table], items: list[Item], chosen: Setting, default: float, tolerance: float
) -> tuple[Setting, list[list[Result]]]:
    """The relative floor at ``chosen``'s absolute floors, and its curve in every view.

    It cannot change whether a result is empty, so the rates above cannot pick it: keep the
    current ``default`` unless it costs more than ``tolerance`` class-1 recall (against
    relative 0) in some view, else take the highest grid value that costs no more in any.
    """
    grid = sorted({*GRID_RELATIVE, default})
    curves = [
        [(s, metrics(items, view.decide(s.floors()))) for s in (replace(chosen, relative=r) for r in grid)]
        for view in views
    ]

    def cost(index: int) -> float:
        return max(curve[0][1]["class1_recall"] - curve[index][1]["class1_recall"] for curve in curves)

    pick = grid.index(default)
    if cost(pick) > tolerance + 1e-12:
        pick = max(i for i in range(len(grid)) if cost(i) <= tolerance + 1e-12)
    return replace(chosen, relative=grid[pick]), curves


def exact_check(
    items: list[Item],
    rows: dict[str, Any],
    subjects: dict[str, GateSubject],
    floors: GateFloors | Rule,
    fast: Decision,
    k: int,
) -> float:
    """Re-decide every search with the real ``gate()``; assert the vectorised sweep agrees.

    Returns the class-1 share with a gold record among the first ``k`` survivors (budget order).
    """
    hits = present = 0
    rule = as_rule(floors)
    for s, item in enumerate(items):
        row = rows.get(item.search_id)
        kept, _ = gate(candidates(row, subjects), subjects, rule.for_kind(logged_kind(row)))
        ids = [c.record_id for c in kept]
        assert len(ids) == fast.survivors[s], f"sweep disagrees with gate() on {item.search_id}"
        assert bool(set(ids) & set(item.gold)) == bool(fast.gold_kept[s]), f"gold differs, {item.search_id}"
        if item.cls == "present":
            present += 1
            hits += bool(set(ids[:k]) & set(item.gold))
    return hits / present if present else float("nan")


# --------------------------------------------------------------------------- reporting


def describe(floors: GateFloors | Rule) -> dict[str, Any]:
    asking, stating, about_self = as_rule(floors)
    out: dict[str, Any] = {
        "dense_floor": asking.dense_floor.model_dump(),
        "lexical_min_term_fraction": asking.lexical_min_term_fraction,
        "lexical_min_matched_terms": asking.lexical_min_matched_terms,
        "relative_floor": asking.relative_floor,
    }
    if stating != asking:
        out["statements"] = {
            "dense_floor": stating.dense_floor.model_dump(),
            "lexical_min_term_fraction": stating.lexical_min_term_fraction,
        }
    if about_self.standout_margin != asking.standout_margin:
        out["self_question_margin"] = about_self.standout_margin
    return out


def short(floors: GateFloors | Rule) -> str:
    asking, stating, _ = as_rule(floors)
    d = asking.dense_floor
    text = (
        f"episodic {d.episodic:.3f}, semantic {d.semantic:.3f}, lexical fraction "
        f"{asking.lexical_min_term_fraction:g} x {asking.lexical_min_matched_terms} terms, "
        f"relative {asking.relative_floor:g}"
    )
    if stating != asking:
        text += (
            f"; a turn that plainly states: episodic {stating.dense_floor.episodic:.3f}, "
            f"lexical fraction {stating.lexical_min_term_fraction:g}"
        )
    return text


def print_rows(title: str, first: str, rows: list[tuple[str, dict[str, float]]]) -> None:
    print(f"\n{title}")
    print(f"{first:<26}" + "".join(f"{label:>10}" for _, label in COLUMNS))
    for name, m in rows:
        print(f"{name:<26}" + "".join(f"{m.get(key, float('nan')):>10.3f}" for key, _ in COLUMNS))


def yaml_snippet(tool: Rule, auto_rule: Rule, embedder: str, version: str) -> str:
    tool_floors, auto, stating = tool.asking, auto_rule.asking, auto_rule.stating
    offset = round(stating.dense_floor.episodic - auto.dense_floor.episodic, 3)

    def dense(d: DenseFloors, indent: str) -> str:
        return "".join(f"{indent}  {t}: {getattr(d, t):.3f}\n" for t in TYPES)

    return (
        f"# calibrated for {embedder} (embedding.version {version!r}) by benchmarks/calibrate_gate.py\n"
        "retrieval:\n  gate:\n    dense_floor:\n"
        + dense(tool_floors.dense_floor, "    ")
        + f"    lexical_min_term_fraction: {tool_floors.lexical_min_term_fraction:g}\n"
        f"    lexical_min_matched_terms: {tool_floors.lexical_min_matched_terms}\n"
        f"    relative_floor: {tool_floors.relative_floor:g}\n"
        "    auto:\n      dense_floor:\n"
        + dense(auto.dense_floor, "      ")
        + f"      lexical_min_term_fraction: {auto.lexical_min_term_fraction:g}\n"
        f"      lexical_min_matched_terms: {auto.lexical_min_matched_terms}\n"
        f"      relative_floor: {auto.relative_floor:g}\n"
        f"      statements:\n        dense_offset: {offset:g}\n"
        f"        lexical_min_term_fraction: {stating.lexical_min_term_fraction:g}\n"
    )


def commit() -> str:
    try:
        return subprocess.run(
            ["git", "rev-parse", "HEAD"], capture_output=True, text=True, check=True, cwd=ROOT
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add = parser.add_argument
    add("--conversations", type=int, default=10, help="LoCoMo conversations to ingest")
    add("--per-conv", type=int, default=None, help="cap class-1 and category-5 questions per conversation")
    add("--cross-per-conv", type=int, default=80, help="category 1-4 questions asked of another conversation")
    add("--turns-per-conv", type=int, default=80, help="ordinary turns per conversation")
    add("--tool-ceiling", type=float, default=0.5, help="class-3 injection ceiling for the tool floors")
    add("--auto-target", type=float, default=0.2, help="class-3 injection target for gate.auto")
    add("--relative-tolerance", type=float, default=0.005, help="class-1 recall the relative floor may cost")
    add("--seed", type=int, default=7)
    add("--quick", action="store_true", help="2 conversations, 12 items of each class each")
    add("--progress", action="store_true", help="report search progress on stderr")
    add("--store", type=Path, default=None, help="keep the store (and its search log) here")
    add("--from-store", type=Path, default=None, help="re-sweep a store kept with --store; no searching")
    add("--json", type=Path, default=None, help="write the figures here")
    add("--tune-on", type=int, default=None, metavar="N",
        help="choose the floors on the first N conversations only; report the others separately")  # fmt: skip
    args = parser.parse_args()
    if args.quick:
        args.conversations, args.per_conv, args.cross_per_conv, args.turns_per_conv = 2, 12, 12, 12
    return args


def main() -> None:
    args = parse_args()
    t_start = time.perf_counter()
    if args.from_store:
        path = args.from_store
        run = json.loads(sidecar(path).read_text())
    else:
        path = args.store or Path(tempfile.mkdtemp(prefix="retold-calib-")) / "calib.sqlite"
        if path.exists():
            raise SystemExit(f"{path} exists; --store wants a new file")
        run = asyncio.run(search_all(args, path))
    items = [Item(**it) for it in run["items"]]
    t0 = time.perf_counter()
    rows, subjects, event_at = asyncio.run(load_logged(path, items))
    load_s = time.perf_counter() - t0
    held_out: list[Item] = []
    if args.tune_on is not None:  # choose on the first N conversations' scopes, report the rest apart
        tuning = set(run["conversations"][: args.tune_on])
        held_out = [it for it in items if it.target not in tuning]
        items = [it for it in items if it.target in tuning]

    t0 = time.perf_counter()
    defaults = Config().retrieval.gate
    ends = {
        c.sample_id: max(t.at for t in c.turns) + dt.timedelta(days=1)
        for c in load_conversations()
        if c.sample_id in run["conversations"]
    }
    table = Table(items, rows, subjects)
    views = {
        "full gate": table,
        "entity channel removed (diagnostic)": table.without_entity(),
        "clock 1 day after the conversation (diagnostic)": table.at_clock(items, ends, event_at),
    }
    rel_views = [views["full gate"], views["clock 1 day after the conversation (diagnostic)"]]
    tool_results, auto_results = sweep(table, items, auto=False), sweep(table, items, auto=True)
    tool_setting, tool_rel = choose_relative(
        rel_views, items, choose_tool(tool_results, args.tool_ceiling)[0], defaults.relative_floor,
        args.relative_tolerance,
    )  # fmt: skip
    auto_setting, auto_rel = choose_relative(
        rel_views, items, choose_auto(auto_results, args.auto_target)[0], defaults.auto.relative_floor,
        args.relative_tolerance,
    )  # fmt: skip
    best_f1 = max(tool_results, key=lambda r: r[1]["f1"])
    sweep_s = time.perf_counter() - t0

    chosen_tool = tool_setting.floors()
    chosen_auto = auto_setting.floors()
    k_tool, k_auto = Config().retrieval.default_k, Config().retrieval.trigger.auto_k
    plan = [
        ("current defaults, tool", Rule.of(defaults, "tool"), k_tool),
        ("chosen, tool", chosen_tool, k_tool),
        (
            "current defaults, auto",
            Rule.of(defaults, "auto"),
            k_auto,
        ),
        ("chosen, auto", chosen_auto, k_auto),
        ("max F1, no ceiling, tool", best_f1[0].floors(), k_tool),
    ]
    report: dict[str, dict[str, dict[str, float]]] = {}
    for view, tab in views.items():
        out = {}
        for name, floors, k in plan:
            fast = tab.decide(floors)
            m = metrics(items, fast)
            if tab is table:  # the real gate() must agree with the sweep, search by search
                m["class1_gold_in_first_k"] = exact_check(items, rows, subjects, floors, fast, k)
            else:
                m["class1_gold_in_first_k"] = tab.gold_in_first_k(items, floors, k)
            out[name] = m
        report[view] = out
        print_rows(f"== {view}", "setting", list(out.items()))
    if held_out:
        held_table = Table(held_out, rows, subjects)
        out = {name: metrics(held_out, held_table.decide(floors)) for name, floors, _ in plan}
        report["held-out conversations"] = out
        print_rows("== held-out conversations (not used to choose)", "setting", list(out.items()))

    counts = {c: sum(it.cls == c for it in items) for c in CLASSES}
    print(
        f"\nitems: {counts}; conversations: {len(run['conversations'])}; "
        f"turns ingested: {run['turns_ingested']}"
    )
    curves: dict[str, list[dict[str, float]]] = {}
    for name, results, chosen, rel_curves in (
        ("tool", tool_results, tool_setting, tool_rel),
        ("auto", auto_results, auto_setting, auto_rel),
    ):
        rows_out = [
            (f"{s.episodic:.3f}" + (" <" if s.episodic == chosen.episodic else ""), m)
            for s, m in results
            if (s.fraction, s.matched) == (chosen.fraction, chosen.matched)
        ]
        print_rows(f"{name}: along the episodic floor (lexical as chosen, relative 0)", "episodic", rows_out)
        for label, rel_curve in zip(("real clock", "clock at conversation end"), rel_curves, strict=True):
            print_rows(
                f"{name}: along the relative floor (absolute floors as chosen; {label})",
                "relative",
                [
                    (f"{s.relative:g}" + (" <" if s.relative == chosen.relative else ""), m)
                    for s, m in rel_curve
                ],
            )
        curves[name] = [
            {"episodic": s.episodic, **m}
            for s, m in results
            if (s.fraction, s.matched) == (chosen.fraction, chosen.matched)
        ]
        for label, rel_curve in zip(("real_clock", "conversation_end_clock"), rel_curves, strict=True):
            curves[f"{name}_relative_{label}"] = [{"relative_floor": s.relative, **m} for s, m in rel_curve]

    rel_rule = (
        f"relative floor: the current default unless it costs > {args.relative_tolerance:g} class-1 recall "
        "at the real clock or at the conversation-end clock"
    )
    print(
        f"\nchosen tool floors: {short(chosen_tool)}\n  (max F1 on classes 1+2 with class-3 injection "
        f"<= {args.tool_ceiling:g}; {rel_rule})"
    )
    print(
        f"chosen auto floors: {short(chosen_auto)}\n  (max class-1 recall with class-3 injection "
        f"<= {args.auto_target:g}; same relative-floor rule)"
    )
    print(f"unconstrained F1 optimum (tool): {short(best_f1[0].floors())}")
    print(
        "semantic/procedural/session_summary floors keep the spec's offsets from episodic "
        f"(tool {TOOL_OFFSETS}, auto {AUTO_OFFSETS}); LoCoMo holds only episodic records."
    )
    timings = {
        **run["timings"],
        "load_log_s": load_s,
        "sweep_s": sweep_s,
        "this_run_s": time.perf_counter() - t_start,
    }
    print("timings (s): " + ", ".join(f"{k} {v:.1f}" for k, v in timings.items()))
    embedding = Config().embedding
    snippet = yaml_snippet(chosen_tool, chosen_auto, embedding.model, embedding.version)
    print("\nrecommended YAML:\n" + snippet)

    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        top = sorted(tool_results, key=lambda r: -r[1]["f1"])[:10]
        payload = {
            "meta": {
                "machine": platform.platform(),
                "processor": platform.processor() or platform.machine(),
                "python": sys.version.split()[0],
                "cpus": os.cpu_count(),
                "commit": commit(),
                "embedder": embedding.model,
                "embedding_version": embedding.version,
                "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
                "dataset": "LoCoMo locomo10.json (CC BY-NC 4.0); categories in the official naming",
            },
            "args": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()},
            "counts": {
                **counts,
                "conversations": run["conversations"],
                "turns_ingested": run["turns_ingested"],
            },
            "definitions": (__doc__ or "").split("\n\n")[1:3],
            "grid": {
                "episodic": GRID_DENSE,
                "lexical_min_term_fraction": GRID_FRACTION,
                "lexical_min_matched_terms": GRID_MATCHED,
                "relative_floor": GRID_RELATIVE,
                "tool_offsets": TOOL_OFFSETS,
                "auto_offsets": AUTO_OFFSETS,
            },
            "targets": {
                "tool_class3_ceiling": args.tool_ceiling,
                "auto_class3_target": args.auto_target,
                "relative_tolerance": args.relative_tolerance,
            },
            "current_defaults": {
                "tool": describe(defaults.floors_for("tool")),
                "auto": describe(Rule.of(defaults, "auto")),
            },
            "chosen": {"tool": describe(chosen_tool), "auto": describe(chosen_auto)},
            "metrics": report,
            "top_tool_by_f1": [{"setting": describe(s.floors()), "metrics": m} for s, m in top],
            "curves": curves,
            "timings_s": timings,
            "yaml": snippet,
        }
        args.json.write_text(json.dumps(payload, indent=2))


if __name__ == "__main__":
    main()
