"""How big each search-graph node's state update is, as Studio and a trace receive it.

Builds the synthetic store of ``search_latency.py`` (``synthetic_store.py``: default 50,000
records, FakeEmbedder), streams searches through the compiled search graph with
``stream_mode="updates"`` (JSON input, as ``langgraph dev`` runs it), serialises every
node's update the way LangGraph's server does, and prints the largest and median size per
node. Target: every update <= 20 KB at 50K records (it was 196-256 KB per node at 5,000
records when the graph's state was the whole run).

    python benchmarks/graph_state.py                 # 50K records, 20 searches
    python benchmarks/graph_state.py --records 5000 --check
"""

from __future__ import annotations

import argparse
import asyncio
import random
import sys
import tempfile
from pathlib import Path
from typing import Any

from common import percentile
from synthetic_store import build_store, queries_for

from retold.testing import FakeEmbedder

LIMIT_BYTES = 20 * 1024


def update_size(update: Any) -> int:
    """Bytes of one node's update as JSON (LangGraph's server falls back to each object's fields)."""
    from langgraph_api.serde import json_dumpb  # the serializer `langgraph dev` streams with

    return len(json_dumpb(update))


async def node_sizes(records: int, searches: int, seed: int = 7) -> dict[str, list[int]]:
    """``{node: [update sizes]}`` over ``searches`` searches of a ``records``-record store."""
    rng = random.Random(seed)
    with tempfile.TemporaryDirectory() as tmp:
        rt, vocab = await build_store(Path(tmp) / "state.sqlite", records, FakeEmbedder(), rng)
        try:
            sizes: dict[str, list[int]] = {}
            for _ in range(searches):
                state = {"agent_id": "bench-agent", "user_id": "bench", "queries": queries_for(rng, vocab)}
                async for chunk in rt.search_graph.astream(state, stream_mode="updates"):
                    for node, update in chunk.items():
                        sizes.setdefault(node, []).append(update_size(update))
            return sizes
        finally:
            await rt.close()


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--records", type=int, default=50_000)
    parser.add_argument("--searches", type=int, default=20)
    parser.add_argument("--check", action="store_true", help="exit 1 when an update exceeds 20 KB")
    args = parser.parse_args()
    sizes = asyncio.run(node_sizes(args.records, args.searches))
    worst = 0
    print(f"search graph state updates at {args.records:,} records, {args.searches} searches")
    for node, values in sizes.items():
        worst = max(worst, max(values))
        print(f"  {node:<9} p50 {percentile(values, 50) / 1024:6.1f} KB   max {max(values) / 1024:6.1f} KB")
    verdict = "ok" if worst <= LIMIT_BYTES else "FAIL"
    print(f"largest update {worst / 1024:.1f} KB (target <= {LIMIT_BYTES // 1024} KB): {verdict}")
    if args.check and worst > LIMIT_BYTES:
        sys.exit(1)


if __name__ == "__main__":
    main()
