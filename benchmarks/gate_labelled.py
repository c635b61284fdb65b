"""The relevance gate on a hand-labelled store: relevant queries answered, irrelevant ones silent.

Two labelled sets live in ``tests/data/``, written for retold (no benchmark text), each one
invented user's memories (short and long facts, events, instructions) and queries, half
relevant (naming the records that answer them) and half not (general questions, requests,
chat, questions about the user's life that nothing answers), asked and stated:

* ``calibration`` (``gate_calibration_*.jsonl``): for choosing floors;
* ``separation`` (``gate_separation_*.jsonl``): held out, asserted by
  ``tests/integration/test_gate_separation.py`` (spec §17.5).

Every record is imported through ``rt.host.ingest_many`` with the packaged MiniLM and every
query searched once per trigger. ``--sweep KEY=V1,V2,...`` repeats the searches with one
config key set to each value (the store is written once), so a floor is chosen on one set
and checked on the other:

    python benchmarks/gate_labelled.py                       # calibration set, default config
    python benchmarks/gate_labelled.py --set separation      # the held-out set
    python benchmarks/gate_labelled.py --sweep retrieval.gate.dense_floor.semantic=0.35,0.40,0.45
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import numpy as np

import retold
from retold.config import Config
from retold.ingest.write.request import WriteRequest
from retold.models import EntityMention, Principal, Scope, SearchRequest
from retold.retrieve.query_kind import asks

DATA = Path(__file__).resolve().parents[1] / "tests" / "data"
SETS: dict[str, tuple[str, str]] = {  # name -> (file stem, the user's name as their records say it)
    "calibration": ("gate_calibration", "Priya"),
    "separation": ("gate_separation", "Sam"),
}
WRITER = "importer"
READER = "assistant"
TRIGGERS = ("tool", "auto")
TYPES = ("semantic", "episodic", "procedural", "session_summary")
OPEN_FLOORS: dict[str, Any] = {
    "retrieval.gate.dense_floor": dict.fromkeys(TYPES, 0.0),
    "retrieval.gate.lexical_min_term_fraction": 0.0,
    "retrieval.gate.lexical_min_matched_terms": 1,
    "retrieval.gate.relative_floor": 0.0,
    "retrieval.gate.auto.dense_floor": dict.fromkeys(TYPES, 0.0),
    "retrieval.gate.auto.lexical_min_term_fraction": 0.0,
    "retrieval.gate.auto.lexical_min_matched_terms": 1,
    "retrieval.gate.auto.relative_floor": 0.0,
    "retrieval.gate.auto.statements": {"dense_offset": 0.0, "lexical_min_term_fraction": 0.0},
}
"""Every relevance floor at zero, for both triggers: the control that shows the gate at work."""


@dataclass(frozen=True)
class Query:
    text: str
    relevant: bool
    expected: frozenset[str]  # record ids (the data file's) that answer it


@dataclass
class Outcome:
    query: Query
    returned: list[str]  # data-file record ids, in rank order
    empty_reason: str | None

    @property
    def correct(self) -> bool:
        if self.query.relevant:
            return bool(self.query.expected & set(self.returned))
        return not self.returned


@dataclass
class Measured:
    """One trigger's outcomes over a query set, and its rates."""

    trigger: str
    outcomes: list[Outcome] = field(default_factory=list)

    def _of(self, relevant: bool, asking: bool | None = None) -> list[Outcome]:
        return [
            o
            for o in self.outcomes
            if o.query.relevant is relevant and (asking is None or asks([o.query.text]) is asking)
        ]

    def relevant_answered(self, asking: bool | None = None) -> float:
        rows = self._of(True, asking)
        return sum(o.correct for o in rows) / max(1, len(rows))

    def irrelevant_silent(self, asking: bool | None = None) -> float:
        rows = self._of(False, asking)
        return sum(o.correct for o in rows) / max(1, len(rows))

    def f1(self) -> float:
        """F1 with "returned something" as the positive call (as benchmarks/calibrate_gate.py):
        a true positive is a relevant query whose response holds an expected record."""
        hits = sum(o.correct for o in self._of(True))
        answered = sum(bool(o.returned) for o in self.outcomes)
        precision = hits / answered if answered else 0.0
        recall = hits / max(1, len(self._of(True)))
        return 2 * precision * recall / (precision + recall) if precision + recall else 0.0

    def summary(self) -> str:
        def part(asking: bool) -> str:
            rel, irr = self._of(True, asking), self._of(False, asking)
            return (
                f"{self.relevant_answered(asking):.2f} of {len(rel)} / "
                f"{self.irrelevant_silent(asking):.2f} of {len(irr)}"
            )

        return (
            f"{self.trigger}: relevant answered {self.relevant_answered():.2f}, irrelevant silent "
            f"{self.irrelevant_silent():.2f}, F1 {self.f1():.3f} (questions {part(True)}; "
            f"statements {part(False)})"
        )

    def misses(self) -> str:
        lines = []
        for o in self.outcomes:
            if o.correct:
                continue
            got = ",".join(o.returned) or f"nothing ({o.empty_reason})"
            want = ",".join(sorted(o.query.expected)) or "nothing"
            lines.append(
                f"  [{'rel' if o.query.relevant else 'irr'}] {o.query.text!r}: got {got}; want {want}"
            )
        return "\n".join(lines)


class PreEmbedded:
    """The real embedder, answering document calls from one batch encoded beforehand."""

    def __init__(self, inner: Any, texts: list[str]) -> None:
        self.inner = inner
        self._docs = dict(zip(texts, inner.embed_documents(texts), strict=True))

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        if texts and all(t in self._docs for t in texts):
            return np.stack([self._docs[t] for t in texts])
        return self.inner.embed_documents(texts)

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        return self.inner.embed_queries(texts)


def load(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def paths(name: str) -> tuple[Path, Path]:
    stem = SETS[name][0]
    return DATA / f"{stem}_records.jsonl", DATA / f"{stem}_queries.jsonl"


def queries_of(path: Path) -> list[Query]:
    return [Query(row["query"], row["label"] == "relevant", frozenset(row["expected"])) for row in load(path)]


def user_of(set_name: str) -> str:
    """The set's user id: its user's name in lower case."""
    return SETS[set_name][1].lower()


def request(row: dict[str, Any], set_name: str) -> WriteRequest:
    """One record as the host's trusted import writes it: the user's words, dated by session."""
    return WriteRequest(
        type=row["type"],
        content=row["content"],
        scope=Scope("user", user_of(set_name)),
        source_kind="user_statement",
        attribute=row.get("attribute"),  # semantic and procedural records need one
        entities=[EntityMention(e["kind"], e["name"], e["role"]) for e in row["entities"]],
        event_at=datetime.fromisoformat(row["at"]),
        source_ref=f"{set_name}:{row['id']}",
        trusted=True,
    )


async def write(rt: retold.Runtime, set_name: str, records: list[dict[str, Any]]) -> dict[str, str]:
    """Import the records; return store id -> data-file id. Every record must be created."""
    user = user_of(set_name)
    await rt.host.provision_user(user, aliases=[SETS[set_name][1]])
    await rt.host.grant(READER, Scope("user", user), read=True)
    results = await rt.host.ingest_many(Principal(WRITER, user), [request(row, set_name) for row in records])
    ids: dict[str, str] = {}
    for row, result in zip(records, results, strict=True):
        assert result.ok and result.outcome == "created" and result.record_id, (row["id"], result)
        ids[result.record_id] = row["id"]
    return ids


async def search_all(
    rt: retold.Runtime, set_name: str, queries: list[Query], ids: dict[str, str],
    triggers: Sequence[str] = TRIGGERS,
) -> dict[str, Measured]:  # fmt: skip
    await asyncio.to_thread(rt.embedder.embed_queries, [q.text for q in queries])  # one batch, cached
    principal = Principal(READER, user_of(set_name), "s-search")
    measured = {}
    for trigger in triggers:
        m = Measured(trigger)
        for q in queries:
            response = await rt.search(principal, SearchRequest(queries=[q.text], trigger=trigger))  # type: ignore[arg-type]
            returned = [ids.get(r.record.id, r.record.id) for r in response.results]
            m.outcomes.append(Outcome(q, returned, response.empty_reason))
        measured[trigger] = m
    return measured


def embedder() -> Any:
    from retold.index.embedding_backend import build_embedder

    built = build_embedder(Config().embedding)
    built.warm()
    return built


async def measure(
    path: Path, set_name: str, model: Any, configs: Sequence[tuple[str, dict[str, Any]]]
) -> dict[str, dict[str, Measured]]:
    """Write the set's store once at ``path``, then search it under each (label, overrides)."""
    records_path, queries_path = paths(set_name)
    records, queries = load(records_path), queries_of(queries_path)
    model = await asyncio.to_thread(PreEmbedded, model, [row["content"] for row in records])
    async with retold.open_runtime(path, embedder=model) as rt:
        ids = await write(rt, set_name, records)
    out = {}
    for label, overrides in configs:
        async with retold.open_runtime(path, Config().override(overrides), embedder=model) as rt:
            out[label] = await search_all(rt, set_name, queries, ids)
    return out


def _value(text: str) -> Any:
    return json.loads(text) if text[:1] in '0123456789-[{tf"' else text


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--set", dest="set_name", choices=sorted(SETS), default="calibration")
    parser.add_argument(
        "--sweep", default=None, metavar="KEY=V1,V2,...", help="one config key, several values"
    )
    parser.add_argument("--misses", action="store_true", help="list every wrong answer")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args(argv)
    configs: list[tuple[str, dict[str, Any]]] = [("default", {})]
    if args.sweep:
        key, _, values = args.sweep.partition("=")
        parts = key.split(".")
        for value in values.split(","):
            if parts[-1] in TYPES and parts[-2] == "dense_floor":  # one type's floor: keep the others
                node = Config().model_dump()
                for part in parts[:-1]:
                    node = node[part]
                configs.append((f"{key}={value}", {".".join(parts[:-1]): {**node, parts[-1]: _value(value)}}))
            else:
                configs.append((f"{key}={value}", {key: _value(value)}))
    configs.append(("every floor 0", OPEN_FLOORS))
    with tempfile.TemporaryDirectory(prefix="retold-gate-") as tmp:
        results = asyncio.run(measure(Path(tmp) / "memory.sqlite", args.set_name, embedder(), configs))
    report: dict[str, Any] = {}
    for label, measured in results.items():
        print(f"\n{args.set_name} set, {label}")
        for trigger, m in measured.items():
            print(f"  {m.summary()}")
            report.setdefault(label, {})[trigger] = {
                "relevant_answered": m.relevant_answered(), "irrelevant_silent": m.irrelevant_silent(),
                "f1": m.f1(),
            }  # fmt: skip
            if args.misses and label == "default":
                print(m.misses())
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({"set": args.set_name, "results": report}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
