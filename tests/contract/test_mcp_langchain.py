"""``retold mcp``'s tools through langchain-mcp-adapters into a LangGraph agent, offline.

A scripted model writes a memory, then searches for it; the agent's tools are the MCP
tools exactly as the adapter loads them from an SDK client session, and identity stays the
server's: a second agent bound to another user sees nothing of the first.
"""

from __future__ import annotations

import functools
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_mcp_adapters.tools import load_mcp_tools
from mcp.client.session import ClientSession
from mcp.shared.memory import create_client_server_memory_streams

import retold
from retold.adapters.mcp import BoundSession, MemoryMcp
from retold.adapters.offline import ScriptedChatModel
from retold.models import Principal, Scope
from retold.testing import FakeEmbedder, FakeJudge

FACT = "The user drinks oat milk flat whites."


@asynccontextmanager
async def mcp_session(rt: retold.Runtime, principal: Principal) -> AsyncIterator[ClientSession]:
    session = BoundSession(rt, principal)
    server = MemoryMcp(rt, session).build()
    async with create_client_server_memory_streams() as (client, served), anyio.create_task_group() as tg:
        tg.start_soon(functools.partial(server.run, *served, server.create_initialization_options()))
        async with ClientSession(*client) as client_session:
            await client_session.initialize()
            yield client_session
        tg.cancel_scope.cancel()
    await session.close()


def call(name: str, args: dict[str, Any], n: int) -> AIMessage:
    return AIMessage("", tool_calls=[{"name": name, "args": args, "id": f"c{n}", "type": "tool_call"}])


async def run_agent(client: ClientSession, replies: list[AIMessage]) -> list[ToolMessage]:
    tools = await load_mcp_tools(client)
    assert sorted(t.name for t in tools) == sorted(
        ["memory_search", "memory_get", "memory_write", "memory_revise", "memory_forget"]
    )
    agent = create_agent(ScriptedChatModel(responses=replies), tools=tools)
    out = await agent.ainvoke({"messages": [HumanMessage("I only drink oat milk flat whites.")]})
    return [m for m in out["messages"] if isinstance(m, ToolMessage)]


async def test_a_langgraph_agent_writes_and_searches_through_mcp(tmp_path: Path) -> None:
    rt = await retold.open_runtime(tmp_path / "m.sqlite", embedder=FakeEmbedder(), judge=FakeJudge())
    for user in ("u1", "u2"):
        await rt.host.grant("claude", Scope("user", user), read=True, write=True)
    query = {"queries": ["oat milk flat whites coffee"]}
    async with mcp_session(rt, Principal("claude", "u1", "s1")) as client:
        replies = [
            call("memory_write", {"type": "semantic", "content": FACT, "attribute": "coffee_order"}, 1),
            call("memory_search", query, 2),
            call("memory_get", {"ids": ["not-a-real-id"]}, 3),
            AIMessage("Noted: oat milk flat whites."),
        ]
        written, searched, missing = await run_agent(client, replies)
        assert '"outcome": "created"' in written.text
        assert written.artifact["structured_content"]["ok"] is True
        assert searched.text.startswith("memory_search:") and f"> {FACT}" in searched.text
        assert missing.status == "error" and '"error": "not_found"' in missing.text
    async with mcp_session(rt, Principal("claude", "u2", "s2")) as other:
        (searched,) = await run_agent(other, [call("memory_search", query, 1), AIMessage("Nothing.")])
        assert FACT not in searched.text and "no relevant memory" in searched.text
    records = await rt.store.records_in_scope(Scope("user", "u1"))
    assert [r.content for r in records] == [FACT]
    await rt.close()
