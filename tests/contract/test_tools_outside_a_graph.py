"""retold's LangChain tools called outside a LangGraph graph (issue 45, item 5's class).

A ``@tool`` or a runnable invoked on its own has a config but no LangGraph runtime in it:
that is the documented outside-a-run case (the identity comes from ``configurable``), never
an ``AttributeError`` from reading a runtime that is not there.
"""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.runnables import RunnableLambda

from retold.adapters.common import current_context, memory_tools
from retold.errors import InvalidArgumentError

from .scripted import Memory, seed

pytestmark = pytest.mark.usefixtures("memory")

NAMED = {"configurable": {"agent_id": "planner", "user_id": "u1", "thread_id": "t-outside"}}


def search_tool(memory: Memory) -> Any:
    return next(t for t in memory_tools(memory.rt) if t.name == "memory_search")


async def test_the_run_context_outside_a_graph_is_none() -> None:
    assert await RunnableLambda(lambda _: current_context()).ainvoke(None) is None
    assert RunnableLambda(lambda _: current_context()).invoke(None, {"configurable": {"x": 1}}) is None


async def test_a_memory_tool_outside_a_graph_acts_for_the_user_its_config_names(memory: Memory) -> None:
    await seed(memory)
    out = await search_tool(memory).ainvoke({"queries": ["concise answers"]}, config=NAMED)
    assert "1 result" in out and "Prefers concise answers" in out, out  # the rendering, as a model sees it


async def test_a_memory_tool_outside_a_graph_without_a_user_says_what_is_missing(memory: Memory) -> None:
    tool = search_tool(memory)
    for config in (None, {"configurable": {"thread_id": "t"}}):
        with pytest.raises(InvalidArgumentError, match="caller's identity"):
            await tool.ainvoke({"queries": ["concise answers"]}, config=config)
