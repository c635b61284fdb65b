"""RetoldStore under the real frameworks, unchanged: LangMem's memory tools, Deep Agents' StoreBackend,
``create_agent`` tools using ``runtime.store`` — scripted chat models, offline, both backends."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from deepagents import create_deep_agent
from deepagents.backends import CompositeBackend, StateBackend, StoreBackend
from langchain.agents import create_agent
from langchain.tools import ToolRuntime
from langchain_core.messages import HumanMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langmem import create_manage_memory_tool, create_search_memory_tool

from retold.adapters.langgraph_store import RetoldStore
from retold.middleware import RetoldContext
from retold.models import Scope

from .scripted import Memory, ScriptedChatModel, call, say

LANGMEM_NS = ("memories", "{langgraph_user_id}")


def run_config(user: str, thread: str) -> dict[str, Any]:
    return {"configurable": {"langgraph_user_id": user, "thread_id": thread}}


def tool_texts(messages: list[Any]) -> list[str]:
    return [m.text for m in messages if isinstance(m, ToolMessage)]


async def langmem_agent(store: RetoldStore, script: list[Any]) -> tuple[Any, ScriptedChatModel]:
    model = ScriptedChatModel(script=script)
    tools = [create_manage_memory_tool(namespace=LANGMEM_NS), create_search_memory_tool(namespace=LANGMEM_NS)]
    return create_agent(model, tools, store=store), model


async def test_langmem_tools_create_search_update_delete_on_retold(memory: Memory) -> None:
    await memory.rt.host.provision_user("u2")
    await memory.rt.host.grant("planner", Scope("user", "u2"), read=True, write=True)
    store = RetoldStore(memory.rt, agent_id="planner")
    agent, _ = await langmem_agent(
        store,
        [
            call("manage_memory", {"content": "Prefers aisle seats on trains.", "action": "create"}, "c1"),
            call("search_memory", {"query": "aisle seats trains"}, "c2"),
            say("Noted."),
        ],
    )
    out = await agent.ainvoke({"messages": [HumanMessage("I like aisle seats")]}, run_config("u1", "t1"))
    created, found = tool_texts(out["messages"])
    assert created.startswith("created memory ")
    key = created.removeprefix("created memory ")
    hits = json.loads(found)
    assert [h["key"] for h in hits] == [key] and hits[0]["value"] == {
        "content": "Prefers aisle seats on trains."
    }
    assert hits[0]["namespace"] == ["memories", "u1"] and isinstance(hits[0]["score"], float)

    # The sync side of the same tools, from a worker thread (agent.invoke), updates then deletes.
    agent, _ = await langmem_agent(
        store,
        [
            call("manage_memory", {"content": "Prefers window seats.", "action": "update", "id": key}, "c3"),
            call("search_memory", {"query": "window seats"}, "c4"),
            call("manage_memory", {"action": "delete", "id": key}, "c5"),
            call("search_memory", {"query": "window seats"}, "c6"),
            say("Done."),
        ],
    )
    out = await asyncio.to_thread(
        agent.invoke, {"messages": [HumanMessage("Actually window")]}, run_config("u1", "t2")
    )
    updated, found, deleted, after = tool_texts(out["messages"])
    assert updated == f"updated memory {key}" and deleted == f"Deleted memory {key}"
    assert [h["value"]["content"] for h in json.loads(found)] == ["Prefers window seats."]
    assert json.loads(after) == []

    # A second user, same tools and store: never sees the first user's memories.
    await store.aput(("memories", "u1"), "keep", {"content": "Allergic to shellfish."})
    agent, _ = await langmem_agent(
        store, [call("search_memory", {"query": "allergic to shellfish"}, "d1"), say("-")]
    )
    out = await agent.ainvoke({"messages": [HumanMessage("hi")]}, run_config("u2", "t3"))
    assert json.loads(tool_texts(out["messages"])[0]) == []
    agent, _ = await langmem_agent(
        store, [call("search_memory", {"query": "allergic to shellfish"}, "d2"), say("-")]
    )
    out = await agent.ainvoke({"messages": [HumanMessage("hi")]}, run_config("u1", "t4"))
    assert [h["key"] for h in json.loads(tool_texts(out["messages"])[0])] == ["keep"]
    # Writes went through the write path with the run's thread as the session.
    rows = await memory.rt.store.db.fetchall(
        "SELECT DISTINCT session_id FROM record_sources WHERE agent_id = ?", ("planner",)
    )
    assert {"t1", "t2"} <= {r[0] for r in rows}


async def test_deep_agents_store_backend_shares_files_across_threads(memory: Memory) -> None:
    store = RetoldStore(memory.rt, agent_id="planner")

    def backend() -> CompositeBackend:
        return CompositeBackend(
            default=StateBackend(),
            routes={"/memories/": StoreBackend(namespace=lambda rt: ("memories", rt.context.user_id))},
        )

    note = "Trip plan: Lisbon in May.\nBudget: moderate."
    writer = ScriptedChatModel(
        script=[call("write_file", {"file_path": "/memories/trip.md", "content": note}, "w1"), say("Saved.")]
    )
    agent = create_deep_agent(
        writer, backend=backend(), store=store, context_schema=RetoldContext, checkpointer=InMemorySaver()
    )
    ctx = RetoldContext(agent_id="planner", user_id="u1")
    await agent.ainvoke(
        {"messages": [HumanMessage("save my plan")]}, {"configurable": {"thread_id": "a"}}, context=ctx
    )

    reader = ScriptedChatModel(
        script=[call("read_file", {"file_path": "/memories/trip.md"}, "r1"), say("Here it is.")]
    )
    agent = create_deep_agent(
        reader, backend=backend(), store=store, context_schema=RetoldContext, checkpointer=InMemorySaver()
    )
    out = await agent.ainvoke(
        {"messages": [HumanMessage("what was my plan?")]}, {"configurable": {"thread_id": "b"}}, context=ctx
    )
    (text,) = tool_texts(out["messages"])
    assert "Lisbon in May." in text and "Budget: moderate." in text
    hits = await store.asearch(("memories", "u1"), query="Lisbon trip plan")
    assert hits and hits[0].value["content"] == note
    # Another user's agent reads nothing there.
    other = create_deep_agent(
        ScriptedChatModel(script=[call("read_file", {"file_path": "/memories/trip.md"}, "r2"), say("-")]),
        backend=backend(), store=store, context_schema=RetoldContext, checkpointer=InMemorySaver(),
    )  # fmt: skip
    await memory.rt.host.provision_user("u2")
    await memory.rt.host.grant("planner", Scope("user", "u2"), read=True, write=True)
    out = await other.ainvoke(
        {"messages": [HumanMessage("read it")]}, {"configurable": {"thread_id": "c"}},
        context=RetoldContext(agent_id="planner", user_id="u2"),
    )  # fmt: skip
    assert "Lisbon" not in tool_texts(out["messages"])[0]


@tool
async def remember(fact: str, runtime: ToolRuntime[RetoldContext]) -> str:
    """Remember a fact about the user."""
    assert runtime.store is not None
    await runtime.store.aput(("memories", runtime.context.user_id), "fact", {"content": fact})
    return "ok"


@tool
def recall(runtime: ToolRuntime[RetoldContext]) -> str:
    """Recall the remembered fact (a sync tool: runs in a worker thread)."""
    assert runtime.store is not None
    item = runtime.store.get(("memories", runtime.context.user_id), "fact")
    return item.value["content"] if item else "nothing"


async def test_create_agent_tools_use_runtime_store(memory: Memory) -> None:
    store = RetoldStore(memory.rt, agent_id="planner")
    model = ScriptedChatModel(
        script=[call("remember", {"fact": "Speaks Portuguese."}, "m1"), call("recall", {}, "m2"), say("ok")]
    )
    agent = create_agent(model, [remember, recall], store=store, context_schema=RetoldContext)
    out = await agent.ainvoke(
        {"messages": [HumanMessage("remember")]}, {"configurable": {"thread_id": "s1"}},
        context=RetoldContext(agent_id="planner", user_id="u1"),
    )  # fmt: skip
    assert tool_texts(out["messages"]) == ["ok", "Speaks Portuguese."]
    row = await memory.rt.store.store_item_row('["memories","u1"]', "fact")
    assert row is not None and row.record_id is not None
