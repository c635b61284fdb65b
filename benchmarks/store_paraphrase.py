"""Short facts saved through a memory API, asked for by paraphrase: retold beside InMemoryStore.

    python benchmarks/store_paraphrase.py [--data tests/data/store_facts_paraphrase.jsonl]
        [--sizes 1,3,10] [--via store|semantic] [--set retrieval.gate.standout_floor=0.25] [--json F]

A user's first store is a handful of facts from one conversation. For each persona of the
labelled set (facts, two paraphrased questions per fact that share none of its words, and
questions no fact answers) and each store size N, stores of N facts are written through
``RetoldStore.aput`` (``--via store``: episodic records, what LangMem and CrewAI write) or
``memory_write`` as semantic facts (``--via semantic``), and every question is asked with the
gate on. Printed per size: how often the right fact comes back first (retold, and LangGraph's
InMemoryStore over the same packaged model, which returns its nearest item for any
question), how often retold answers at all, and how often it answers a question no fact
answers. The parity target (issue 47): retold first ≥ InMemoryStore first, unrelated
answered ≤ 5 %.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import tempfile
from collections import defaultdict
from pathlib import Path
from typing import Any

from langchain_core.embeddings import Embeddings
from langgraph.store.memory import InMemoryStore

import retold
from retold import Principal, Scope, SearchRequest
from retold.adapters.langgraph_store import RetoldStore

ROOT = Path(__file__).parents[1]
DATA = ROOT / "tests" / "data" / "store_facts_paraphrase.jsonl"
UNRELATED_TARGET = 0.05


class SameModel(Embeddings):
    """retold's embedder as LangChain embeddings, so InMemoryStore ranks with the same model."""

    def __init__(self, embedder: Any) -> None:
        self.embedder = embedder

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return self.embedder.embed_documents(texts).tolist()

    def embed_query(self, text: str) -> list[float]:
        return self.embedder.embed_queries([text])[0].tolist()


def load(path: Path) -> dict[str, dict[str, list[dict[str, str]]]]:
    personas: dict[str, dict[str, list[dict[str, str]]]] = defaultdict(lambda: defaultdict(list))
    for line in path.read_text().splitlines():
        if line.strip():
            row = json.loads(line)
            personas[row["persona"]][row["kind"]].append(row)
    return personas


def stores_of(facts: list[dict[str, str]], size: int) -> list[list[dict[str, str]]]:
    """Consecutive slices of ``size`` facts (the last one wraps), so every fact is in one store."""
    if size >= len(facts):
        return [facts]
    return [[facts[(start + i) % len(facts)] for i in range(size)] for start in range(0, len(facts), size)]


async def run(args: argparse.Namespace) -> dict[str, Any]:
    personas = load(Path(args.data))
    overrides = dict(kv.split("=", 1) for kv in args.set)
    config = retold.Config().override({k: json.loads(v) for k, v in overrides.items()}) if overrides else None
    report: dict[str, Any] = {"via": args.via, "overrides": overrides, "sizes": {}}
    with tempfile.TemporaryDirectory() as tmp:
        async with retold.open_runtime(Path(tmp) / "m.sqlite", config) as rt:
            await rt.warm()
            known_embed = SameModel(rt.embedder)
            for size in args.sizes:
                counts = defaultdict(int)
                misses: list[str] = []
                store_no = 0
                for name, rows in sorted(personas.items()):
                    for facts in stores_of(rows["fact"], size):
                        store_no += 1
                        user = f"{name}-{size}-{store_no}"
                        await rt.host.provision_user(user)
                        await rt.host.grant("a", Scope("user", user), read=True, write=True)
                        store = RetoldStore(rt, agent_id="a", default_user_id=user)
                        known = InMemoryStore(
                            index={"dims": 384, "embed": known_embed, "fields": ["content"]}
                        )
                        ns = ("memories", user)
                        principal = Principal(agent_id="a", user_id=user, session_id=f"s{store_no}")
                        if args.via == "semantic":
                            principal = await rt.hooks.on_session_start(principal)
                        for fact in facts:
                            await known.aput(ns, fact["id"], {"content": fact["text"]})
                            if args.via == "store":
                                await store.aput(ns, fact["id"], {"content": fact["text"]})
                            else:
                                out = await rt.tools.call(principal, "memory_write", {
                                    "type": "semantic", "content": fact["text"], "attribute": fact["id"],
                                    "source_kind": "agent_inference"})  # fmt: skip
                                assert out["ok"], out
                        texts = {f["id"]: f["text"] for f in facts}
                        asked = [q for q in rows["question"] if q["fact"] in texts]
                        for question in asked:
                            hits = await _search(rt, store, principal, args.via, ns, question["text"])
                            nearest = await known.asearch(ns, query=question["text"], limit=1)
                            counts["questions"] += 1
                            counts["answered"] += bool(hits)
                            first = bool(hits) and hits[0] == texts[question["fact"]]
                            counts["retold_first"] += first
                            counts["inmemory_first"] += nearest[0].value["content"] == texts[question["fact"]]
                            if not first and len(misses) < args.show:
                                misses.append(f"{question['text']!r} -> {hits[:1] or 'nothing'}")
                        for question in rows["unrelated"]:
                            hits = await _search(rt, store, principal, args.via, ns, question["text"])
                            counts["unrelated"] += 1
                            counts["unrelated_answered"] += bool(hits)
                            if hits and len(misses) < args.show:
                                misses.append(f"unrelated {question['text']!r} -> {hits[0]!r}")
                q, u = counts["questions"], counts["unrelated"]
                row = {
                    "stores": store_no, "questions": q, "retold_first": counts["retold_first"] / q,
                    "inmemory_first": counts["inmemory_first"] / q, "retold_answered": counts["answered"] / q,
                    "unrelated": u, "unrelated_answered": counts["unrelated_answered"] / u, "misses": misses,
                }  # fmt: skip
                row["pass"] = (
                    row["retold_first"] >= row["inmemory_first"]
                    and row["unrelated_answered"] <= UNRELATED_TARGET
                )
                report["sizes"][size] = row
    return report


async def _search(
    rt: retold.Runtime, store: RetoldStore, principal: Principal, via: str, ns: tuple[str, ...], text: str
) -> list[str]:
    if via == "store":
        return [hit.value["content"] for hit in await store.asearch(ns, query=text)]
    response = await rt.search(principal, SearchRequest(queries=[text]))
    return [r.record.content for r in response.results]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", default=str(DATA))
    parser.add_argument("--sizes", default="1,3,10", type=lambda s: [int(x) for x in s.split(",")])
    parser.add_argument("--via", choices=["store", "semantic"], default="store")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=JSON")
    parser.add_argument("--show", type=int, default=0, help="print up to N misses per size")
    parser.add_argument("--json", help="write the report here")
    args = parser.parse_args()
    report = asyncio.run(run(args))
    print(f"via {args.via}; overrides {report['overrides'] or 'none'}")
    print("size  stores  questions  retold-first  InMemoryStore-first  answered  unrelated-answered  target")
    for size, row in report["sizes"].items():
        print(
            f"{size:>4}  {row['stores']:>6}  {row['questions']:>9}  {row['retold_first']:>12.3f}  "
            f"{row['inmemory_first']:>19.3f}  {row['retold_answered']:>8.3f}  "
            f"{row['unrelated_answered']:>18.3f}  {'PASS' if row['pass'] else 'FAIL'}"
        )
        for miss in row["misses"]:
            print("      ", miss)
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=2) + "\n")


if __name__ == "__main__":
    main()
