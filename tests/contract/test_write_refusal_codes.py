"""Issue 45 item 9a: every write surface answers the spec's code for a refused write (§8.1, §17.2).

``scope_not_writable`` when the session may write nowhere at all (whatever target or path the
caller names); ``invalid_write_target`` only for a name (or CrewAI path) the session does not
offer while something else is writable. Each surface is driven through its real framework —
the tools, MCP's SDK client, langchain's ``create_agent`` with the middleware, Deep Agents,
the drop-in LangGraph nodes, CrewAI's memory and the LangGraph store — on both backends, and
a refused write leaves the store unchanged.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import ToolMessage

from retold.adapters.crewai_binding import CrewMemoryRefusedError
from retold.adapters.crewai_memory import RetoldCrewMemory
from retold.adapters.langgraph_store import RetoldStore, StoreRefusedError
from retold.models import Principal

from .crew_doubles import keep_crewai_offline
from .scripted import USER, Memory, ScriptedChatModel, call, open_memory, say
from .test_adapter_equivalence import via_deepagents, via_middleware, via_nodes
from .test_mcp_langchain import mcp_session

CONTENT = "We chose Postgres for the Atlas service."
EPISODE = {"type": "episodic", "content": CONTENT}
P = Principal("planner", "u1", "s1")
# What each case asks for: nothing writable, or a target the session does not offer.
NAMED = {"nothing_writable": "personal", "unoffered_name": "team"}
EXPECTED = {"nothing_writable": "scope_not_writable", "unoffered_name": "invalid_write_target"}

Attempt = Callable[[Memory, str, Path], Awaitable[str]]


async def via_tools(m: Memory, target: str, tmp_path: Path) -> str:
    result = await m.rt.tools.call(P, "memory_write", {**EPISODE, "write_target": target})
    assert result["ok"] is False
    return str(result["error"])


async def via_mcp(m: Memory, target: str, tmp_path: Path) -> str:
    async with mcp_session(m.rt, P) as client:
        out = (await client.call_tool("memory_write", {**EPISODE, "write_target": target})).model_dump(
            by_alias=True, mode="json", exclude_none=True
        )
    assert out.get("isError") is True
    return str(out["structuredContent"]["error"])


def via_agent(build: Callable[[Memory, ScriptedChatModel], Any]) -> Attempt:
    """A model that calls memory_write anyway (it is not offered when nothing is writable)."""

    async def attempt(m: Memory, target: str, tmp_path: Path) -> str:
        model = ScriptedChatModel(
            script=[call("memory_write", {**EPISODE, "write_target": target}, "w1"), say("Done.")]
        )
        ask, _end = build(m, model)
        messages = await ask("s1", "Note that we chose Postgres for the Atlas service.")
        (answer,) = [msg for msg in messages if isinstance(msg, ToolMessage) and msg.name == "memory_write"]
        result = json.loads(str(answer.content))
        assert result["ok"] is False
        return str(result["error"])

    return attempt


async def via_crewai(m: Memory, target: str, tmp_path: Path) -> str:
    memory = RetoldCrewMemory(m.rt, agent_id="planner", user_id="u1", session_id="s1", write_target=target)
    with pytest.raises(CrewMemoryRefusedError) as refused:
        await memory.aremember(CONTENT)
    return refused.value.code


async def via_crewai_path(m: Memory, target: str, tmp_path: Path) -> str:
    """A CrewAI path naming no memory of this session (another user's)."""
    memory = RetoldCrewMemory(m.rt, agent_id="planner", user_id="u1", session_id="s1")
    with pytest.raises(CrewMemoryRefusedError) as refused:
        await memory.aremember(CONTENT, scope="/user/u2")
    return refused.value.code


SURFACES: dict[str, Attempt] = {
    "tools": via_tools,
    "mcp": via_mcp,
    "middleware": via_agent(via_middleware),
    "deepagents": via_agent(via_deepagents),
    "nodes": via_agent(via_nodes),
    "crewai": via_crewai,
    "crewai_path": via_crewai_path,
}


async def nothing_writable(m: Memory) -> None:
    await m.rt.host.grant("planner", USER, read=True, write=False)
    assert await m.rt.tools.write_targets(P) == {}


@pytest.mark.parametrize("case", list(EXPECTED))
@pytest.mark.parametrize("surface", list(SURFACES))
async def test_a_refused_write_answers_the_spec_code_on_every_surface(
    store_location: Callable[[str], Path | str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    surface: str,
    case: str,
) -> None:
    if surface.startswith("crewai"):
        keep_crewai_offline(tmp_path, monkeypatch)
    m = await open_memory(store_location("memory.sqlite"))
    try:
        await m.rt.hooks.on_session_start(P)
        if case == "nothing_writable":
            await nothing_writable(m)
        version = await m.rt.store.records_version()
        code = await SURFACES[surface](m, NAMED[case], tmp_path)
        assert code == EXPECTED[case], (surface, case, code)
        assert await m.rt.store.records_version() == version
        assert await m.rt.store.records_in_scope(USER) == []
    finally:
        await m.rt.close()


async def test_the_store_adapter_agrees_when_nothing_is_writable(
    store_location: Callable[[str], Path | str],
) -> None:
    """The LangGraph store has no symbolic names: a namespace it cannot write is scope_not_writable."""
    m = await open_memory(store_location("memory.sqlite"))
    try:
        await nothing_writable(m)
        store = RetoldStore(m.rt, agent_id="planner")
        with pytest.raises(StoreRefusedError) as refused:
            await store.aput(("memories", "u1"), "k", {"content": CONTENT})
        assert refused.value.code == "scope_not_writable"
        assert await m.rt.store.records_in_scope(USER) == []
    finally:
        await m.rt.close()
