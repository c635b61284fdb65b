"""One scripted conversation through every LangGraph-side adapter; the memories must be the same.

Session 1 states a preference and the model writes it with the user's quote; session 2 asks
something the preference bears on (the host-issued recall must show it), then contradicts
it, and the model's new write supersedes the old record. Run through langchain's
``create_agent`` + middleware, Deep Agents' ``create_memory_agent`` and a hand-built
``StateGraph`` with the drop-in nodes, the semantic records are compared field by field.
``test_adapter_equivalence`` adds the CrewAI adapter: every adapter replays the CrewAI
suite's three-session conversation and leaves the same records.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.messages import BaseMessage, HumanMessage, SystemMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph
from langgraph.prebuilt import ToolNode

from retold.adapters.common import RECALL_MARK, memory_tools
from retold.adapters.deepagents import create_memory_agent
from retold.graph_nodes.nodes import RetoldMessagesState, end_session_node, recall_node, record_turns_node
from retold.middleware import RetoldContext, RetoldMiddleware
from retold.policy.prompt import policy_text

from .scripted import Memory, ScriptedChatModel, call, open_memory, say

CTX = RetoldContext(agent_id="planner", user_id="u1")
OLD, NEW = "Prefers concise answers without preamble.", "Prefers detailed answers with examples."
STATED = "I prefer concise answers without preamble."
ASKED = "Summarise the meeting in concise answers without preamble"
CHANGED = "Actually I now prefer detailed answers with examples."


def write(content: str, quote: str, call_id: str) -> Any:
    args = {
        "type": "semantic",
        "content": content,
        "attribute": "answer_style",
        "source_kind": "user_statement",
        "evidence": quote,
    }
    return call("memory_write", args, call_id)


def script() -> ScriptedChatModel:
    return ScriptedChatModel(
        script=[
            write(OLD, "I prefer concise answers without preamble", "w1"),
            say("Noted: concise, no preamble."),
            say("Here is a concise summary."),
            write(NEW, "I now prefer detailed answers with examples", "w2"),
            say("Updated: detailed with examples."),
        ]
    )


Ask = Callable[[str, str], Awaitable[list[BaseMessage]]]
End = Callable[[str], Awaitable[Any]]


def via_middleware(m: Memory, model: ScriptedChatModel, mode: str = "hybrid") -> tuple[Ask, End]:
    middleware = RetoldMiddleware(m.rt, mode)
    agent = create_agent(
        model, middleware=[middleware], context_schema=RetoldContext, checkpointer=InMemorySaver()
    )

    async def ask(thread: str, text: str) -> list[BaseMessage]:
        config = {"configurable": {"thread_id": thread}}
        return (await agent.ainvoke({"messages": [HumanMessage(text)]}, config, context=CTX))["messages"]

    return ask, lambda thread: middleware.end_session({"configurable": {"thread_id": thread}})


def via_deepagents(m: Memory, model: ScriptedChatModel, mode: str = "hybrid") -> tuple[Ask, End]:
    from retold.adapters.deepagents import end_session

    agent = create_memory_agent(m.rt, model, mode=mode, checkpointer=InMemorySaver())

    async def ask(thread: str, text: str) -> list[BaseMessage]:
        config = {"configurable": {"thread_id": thread}}
        return (await agent.ainvoke({"messages": [HumanMessage(text)]}, config, context=CTX))["messages"]

    return ask, lambda thread: end_session(m.rt, {"configurable": {"thread_id": thread}})


def via_nodes(m: Memory, model: ScriptedChatModel, mode: str = "hybrid") -> tuple[Ask, End]:
    tools = memory_tools(m.rt, mode)
    system = SystemMessage(policy_text(mode))

    async def agent(state: dict[str, Any]) -> dict[str, Any]:
        return {"messages": [await model.bind_tools(tools).ainvoke([system, *state["messages"]])]}

    def route(state: dict[str, Any]) -> str:
        return "tools" if state["messages"][-1].tool_calls else "record_reply"

    g = StateGraph(RetoldMessagesState, context_schema=RetoldContext)
    g.add_node("record", record_turns_node(m.rt))
    g.add_node("agent", agent)
    g.add_node("tools", ToolNode(tools))
    g.add_node("record_reply", record_turns_node(m.rt))
    g.add_edge(START, "record")
    if mode == "tool_only":
        g.add_edge("record", "agent")
    else:
        g.add_node("recall", recall_node(m.rt))
        g.add_edge("record", "recall")
        g.add_edge("recall", "agent")
    g.add_conditional_edges("agent", route, ["tools", "record_reply"])
    g.add_edge("tools", "record")
    g.add_edge("record_reply", END)
    app = g.compile(checkpointer=InMemorySaver())
    ender = end_session_node(m.rt)

    async def ask(thread: str, text: str) -> list[BaseMessage]:
        config = {"configurable": {"thread_id": thread}}
        return (await app.ainvoke({"messages": [HumanMessage(text)]}, config, context=CTX))["messages"]

    return ask, lambda thread: ender({"messages": []}, {"configurable": {"thread_id": thread}})


ADAPTERS = {"middleware": via_middleware, "deepagents": via_deepagents, "nodes": via_nodes}


async def converse(
    location: Path | str, name: str
) -> tuple[list[tuple[Any, ...]], ScriptedChatModel, Memory]:
    m = await open_memory(location)
    m.judge.table[(OLD, NEW)] = "contradicts"
    model = script()
    ask, end = ADAPTERS[name](m, model)
    await ask("s1", STATED)
    await end("s1")
    await ask("s2", ASKED)
    await ask("s2", CHANGED)
    await end("s2")
    rows = await m.rt.store.db.fetchall(
        "SELECT attribute, content, source_kind, status, evidence, source_ref FROM records "
        "WHERE type = 'semantic' ORDER BY created_at, content"
    )
    return [tuple(r) for r in rows], model, m


@pytest.mark.parametrize("name", list(ADAPTERS))
async def test_the_scripted_conversation_through_each_adapter(store_location: Any, name: str) -> None:
    """On each backend: the same conversation leaves the same records through every adapter."""
    records, model, m = await converse(store_location(f"{name}.sqlite"), name)
    try:
        old_quote, new_quote = (
            "I prefer concise answers without preamble",
            "I now prefer detailed answers with examples",
        )
        assert records == [
            ("answer_style", OLD, "user_statement", "superseded", old_quote, "session:s1<turn:1>"),
            ("answer_style", NEW, "user_statement", "confirmed", new_quote, "session:s2<turn:3>"),
        ]
        # Session 2's first model call saw the earlier preference as recalled memory.
        recall = [msg for msg in model.calls[2] if msg.additional_kwargs.get(RECALL_MARK)]
        assert len(recall) == 2 and OLD in recall[1].text
        assert await m.turns("s2") == [
            ("user", ASKED),
            ("assistant", "Here is a concise summary."),
            ("user", CHANGED),
            ("assistant", "Updated: detailed with examples."),
        ]
        for session_id in ("s1", "s2"):
            session = await m.rt.store.get_session(await m.rt.store.resolve_session(session_id))
            assert session is not None and session.ended_at is not None
    finally:
        await m.rt.close()


async def test_the_langgraph_adapters_agree_in_hybrid_mode(store_location: Any) -> None:
    results = {}
    for name in ADAPTERS:
        records, _, m = await converse(store_location(f"{name}.sqlite"), name)
        await m.rt.close()
        results[name] = records
    assert results["middleware"] == results["deepagents"] == results["nodes"]
    assert len(results["middleware"]) == 2


# --- every adapter, CrewAI included, on the CrewAI suite's contract conversation ----------------

SEMANTIC = (
    "SELECT attribute, content, source_kind, status, evidence, source_ref FROM records "
    "WHERE type = 'semantic' ORDER BY created_at, content"
)


async def test_adapter_equivalence(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The three sessions of ``test_crewai.run_contract_conversation``, through every adapter.

    CrewAI runs them as crews (tool_only); the LangGraph-side adapters replay the same model
    decisions as tool calls. The semantic records they leave are equal field by field.
    """
    monkeypatch.setenv("HOME", str(tmp_path / "home"))  # CrewAI writes under $HOME/.local/share
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "home" / ".local" / "share"))
    from .test_crewai import CHANGED, PREFERENCE, QUESTION, open_async, run_contract_conversation, write_args

    crew_rt = await open_async(tmp_path / "crewai.sqlite")
    try:
        await run_contract_conversation(crew_rt)
        results = {"crewai": [tuple(r) for r in await crew_rt.store.db.fetchall(SEMANTIC)]}
    finally:
        await crew_rt.close()

    old, new = (
        "Aditya prefers concise answers with bullet points.",
        "Aditya prefers detailed answers with full paragraphs.",
    )
    changed_quote = "I now prefer detailed answers with full paragraphs"
    sessions = [
        ("s1", PREFERENCE, [call("memory_write", write_args(old, PREFERENCE), "w1"), say("Noted.")]),
        ("s2", QUESTION, [call("memory_search", {"queries": ["Aditya answer style"]}, "q1"), say("Ok.")]),
        ("s3", CHANGED, [call("memory_write", write_args(new, changed_quote), "w2"), say("Understood.")]),
    ]
    for name, adapter in ADAPTERS.items():
        m = await open_memory(tmp_path / f"tool_only-{name}.sqlite")
        try:
            model = ScriptedChatModel(script=[reply for _, _, replies in sessions for reply in replies])
            ask, end = adapter(m, model, "tool_only")
            for session_id, request, _ in sessions:
                await ask(session_id, request)
                await end(session_id)
            results[name] = [tuple(r) for r in await m.rt.store.db.fetchall(SEMANTIC)]
        finally:
            await m.rt.close()
    assert [r[3] for r in results["crewai"]] == ["superseded", "confirmed"]
    assert results["middleware"] == results["deepagents"] == results["nodes"] == results["crewai"]
