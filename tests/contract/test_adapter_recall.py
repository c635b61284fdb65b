"""The host-issued recall every adapter shares (spec §14.1): one skip rule, one search, one block."""

from __future__ import annotations

from pathlib import Path

from langchain_core.messages import HumanMessage
from unit.writepath import make_world  # tests/ is on sys.path (rootdir-relative packages)

from retold.adapters.common import RECALL_HEADER, host_recall, recall
from retold.adapters.crewai import CrewAIMemory
from retold.config import Config

QUOTE = "I prefer concise answers without preamble"


async def test_a_blank_task_is_skipped_not_searched_even_with_no_minimum(tmp_path: Path) -> None:
    """With auto_min_query_chars 0 a blank task used to reach SearchRequest and raise mid-run."""
    config = Config().override({"retrieval.trigger.auto_min_query_chars": 0})
    w = await make_world(tmp_path / "m.sqlite", config=config)
    try:
        memory = CrewAIMemory(w.rt, {"user_id": "u1", "session_id": "s1"}, "Planner", mode="auto")
        assert await memory._host_recall("  \n ") is None
        assert await recall(w.rt, w.p, [HumanMessage("   ")]) == []
        events = await w.rt.store.events(kind="trigger.skipped")
        reasons = sorted(e["payload"]["reason"] for e in events)
        assert reasons == [
            "task shorter than trigger.auto_min_query_chars",
            "user turn shorter than trigger.auto_min_query_chars",
        ]
        assert await w.rt.store.latest_search_log() is None  # nothing was searched
        assert await memory.aend_session() is True  # also takes its handlers off CrewAI's event bus
    finally:
        await w.rt.close()


async def test_crewai_and_langgraph_recall_render_the_same_block(tmp_path: Path) -> None:
    w = await make_world(tmp_path / "m.sqlite")
    try:
        await w.say("user", QUOTE + ".")
        written = await w.rt.tools.call(
            w.p,
            "memory_write",
            {"type": "semantic", "content": "Prefers concise answers without preamble.",
             "attribute": "answer_style", "source_kind": "user_statement", "evidence": QUOTE},
        )  # fmt: skip
        assert written["ok"], written
        ask = "Summarise the meeting in concise answers without preamble"
        memory = CrewAIMemory(w.rt, {"user_id": "u1", "session_id": "s2"}, "Planner", mode="hybrid")
        block = await memory._host_recall(ask)
        found = await host_recall(w.rt, w.p, ask, None)
        assert found is not None and block is not None
        payload, text = found
        assert payload == {"queries": [ask], "k": w.rt.config.retrieval.trigger.auto_k}
        assert block == text and block.startswith(f"{RECALL_HEADER}: 1 result")
        assert "Prefers concise answers without preamble." in block
        log = await w.rt.store.latest_search_log()
        assert log is not None and log["trigger"] == "auto"
        assert await memory.aend_session() is True
    finally:
        await w.rt.close()
