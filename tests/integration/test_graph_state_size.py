"""Studio's node view stays readable at scale: every search-graph update <= 20 KB at 50K records.

When the graph's state was the whole run, each node's update carried the eligible set:
196-256 KB per node at 5,000 records, megabytes at 50K. The state is now what each stage
decided, capped (retold.retrieve.stage_views), so its size does not grow with the store.
Measured here the way `langgraph dev` streams it (benchmarks/graph_state.py prints the same).
"""

from __future__ import annotations

import sys

import pytest
from benchmark_module import BENCHMARKS, load_benchmark

pytestmark = pytest.mark.integration

if str(BENCHMARKS) not in sys.path:  # the script imports its siblings (search_latency, common)
    sys.path.insert(0, str(BENCHMARKS))


@pytest.mark.sqlite_only("builds its own synthetic 50K-record SQLite store, as the benchmark does")
async def test_every_node_update_stays_under_20_kb_at_50k_records(backend: str) -> None:
    graph_state = load_benchmark("graph_state")
    sizes = await graph_state.node_sizes(records=50_000, searches=5)
    assert list(sizes) == ["prepare", "generate", "rank", "gate", "respond"]
    for node, values in sizes.items():
        assert len(values) == 5 and max(values) <= graph_state.LIMIT_BYTES, (node, values)
    assert max(sizes["generate"]) > 1000  # real candidates were shown, not an empty view
