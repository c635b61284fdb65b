"""``RetoldMiddleware``: turn capture, identity from the run, grants, the sync side, session end."""

from __future__ import annotations

import asyncio
import json
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.messages import HumanMessage
from langgraph.checkpoint.memory import InMemorySaver

from retold.errors import InvalidArgumentError
from retold.middleware import RetoldContext, RetoldMiddleware
from retold.models import ExtractionOutput, Scope
from retold.testing import FakeExtractor
from retold.tools.schemas import TOOL_NAMES

from .scripted import CONFIG, Memory, ScriptedChatModel, call, open_memory, say, weather

CTX = RetoldContext(agent_id="planner", user_id="u1")
QUOTE = "I prefer concise answers without preamble"
WRITE = {
    "type": "semantic",
    "content": "Prefers concise answers without preamble.",
    "attribute": "answer_style",
    "source_kind": "user_statement",
    "evidence": QUOTE,
}


def build(
    m: Memory, model: ScriptedChatModel, mode: str = "tool_only", *, checkpointer: bool = True
) -> tuple[Any, RetoldMiddleware]:
    middleware = RetoldMiddleware(m.rt, mode)
    agent = create_agent(
        model,
        tools=[weather],
        middleware=[middleware],
        context_schema=RetoldContext,
        checkpointer=InMemorySaver() if checkpointer else None,
        system_prompt="You are a careful assistant.",
    )
    return agent, middleware


async def ask(agent: Any, text: str, *, context: Any = CTX, config: Any = CONFIG) -> dict[str, Any]:
    return await agent.ainvoke({"messages": [HumanMessage(text)]}, config, context=context)


async def test_every_new_message_becomes_one_turn_in_order_exactly_once(memory: Memory) -> None:
    model = ScriptedChatModel(
        script=[
            call("weather", {"city": "Lisbon"}, "c1"),
            call("memory_write", WRITE, "c2"),
            say("Sunny, and noted."),
            say("Bye."),
        ]
    )
    agent, _ = build(memory, model, "hybrid")
    await ask(agent, f"{QUOTE}. What's the weather in Lisbon?")
    await ask(agent, "Thanks, that is all for today")
    # Tool turns carry the result; the model's tool calls and retold's own tool results are not turns.
    assert await memory.turns() == [
        ("user", f"{QUOTE}. What's the weather in Lisbon?"),
        ("tool", "Sunny in Lisbon, 21 degrees."),
        ("assistant", "Sunny, and noted."),
        ("user", "Thanks, that is all for today"),
        ("assistant", "Bye."),
    ]


async def test_identity_comes_from_the_run_never_from_tool_input(memory: Memory) -> None:
    smuggled = {**WRITE, "user_id": "someone-else"}
    script = [call("memory_write", smuggled, "c1"), call("memory_write", WRITE, "c2"), say("Ok.")]
    model = ScriptedChatModel(script=script)
    agent, _ = build(memory, model)
    out = await ask(agent, f"{QUOTE}, please.")
    refused, written = (json.loads(m.content) for m in out["messages"] if m.type == "tool")
    assert refused["ok"] is False and refused["error"] == "invalid_input"
    record = await memory.rt.store.require_record(written["record_id"])
    assert record.scope == Scope("user", "u1") and record.source_kind == "user_statement"
    assert record.source_ref == "session:s1<turn:1>"


async def test_a_run_without_identity_or_thread_is_refused_with_a_fix(memory: Memory) -> None:
    agent, _ = build(memory, ScriptedChatModel(script=[say("never")]), checkpointer=False)
    with pytest.raises(InvalidArgumentError, match="RetoldContext"):
        await ask(agent, "hello there", context=None)
    with pytest.raises(InvalidArgumentError, match="thread_id"):
        await ask(agent, "hello there", config={})
    assert await memory.rt.store.sessions_named("s1") == []


async def test_memory_write_is_offered_only_while_the_caller_can_write(memory: Memory) -> None:
    await memory.rt.host.grant("reader", Scope("user", "u1"), read=True, write=False)
    model = ScriptedChatModel(script=[say("One."), say("Two.")])
    agent, _ = build(memory, model)
    reader = RetoldContext(agent_id="reader", user_id="u1")
    await ask(agent, "first question here", context=reader)
    await memory.rt.host.grant("reader", Scope("user", "u1"), read=True, write=True)
    await ask(agent, "second question here", context=reader)
    assert model.tool_names == [
        [*(n for n in TOOL_NAMES if n != "memory_write"), "weather"],
        [*TOOL_NAMES, "weather"],
    ]
    write_schema = next(t for t in model.bound[1] if t["name"] == "memory_write")
    assert write_schema["parameters"]["properties"]["write_target"]["enum"] == ["personal"]


async def test_sync_invoke_from_a_worker_thread_runs_on_the_runtime_loop(memory: Memory) -> None:
    model = ScriptedChatModel(script=[call("memory_write", WRITE, "c1"), say("Noted.")])
    agent, _ = build(memory, model)
    out = await asyncio.to_thread(agent.invoke, {"messages": [HumanMessage(QUOTE)]}, CONFIG, context=CTX)
    written = json.loads(out["messages"][2].content)
    assert written["ok"] and written["status"] == "confirmed"
    assert await memory.turns() == [("user", QUOTE), ("assistant", "Noted.")]


async def test_sync_invoke_on_the_runtime_loop_says_to_use_ainvoke(memory: Memory) -> None:
    agent, _ = build(memory, ScriptedChatModel(script=[say("never")]))
    with pytest.raises(RuntimeError, match="ainvoke"):
        agent.invoke({"messages": [HumanMessage("hello there")]}, CONFIG, context=CTX)


async def test_end_session_is_idempotent_and_schedules_extraction_once(tmp_path: Path) -> None:
    extractor = FakeExtractor(ExtractionOutput([], None))
    m = await open_memory(tmp_path / "x.sqlite", extractor=extractor)
    try:
        agent, middleware = build(m, ScriptedChatModel(script=[say("Hello.")]))
        await ask(agent, "hello, I am back again")
        assert await middleware.end_session(CONFIG) is True
        assert await middleware.end_session(CONFIG) is False
        await m.rt.join_background()
        assert len(extractor.calls) == 1
        assert len(await m.rt.store.events(kind="extraction.run")) == 1
    finally:
        await m.rt.close()


async def test_an_idle_thread_continues_under_a_derived_session(memory: Memory) -> None:
    model = ScriptedChatModel(script=[say("Hi."), call("memory_write", WRITE, "c1"), say("Noted.")])
    agent, _ = build(memory, model)
    await ask(agent, "good morning to you")
    memory.clock.advance(timedelta(minutes=31))
    out = await ask(agent, f"{QUOTE}.")
    assert await memory.turns("s1") == [("user", "good morning to you"), ("assistant", "Hi.")]
    assert await memory.turns("s1~2") == [("user", f"{QUOTE}."), ("assistant", "Noted.")]
    written = json.loads(out["messages"][-2].content)
    record = await memory.rt.store.require_record(written["record_id"])
    assert record.source_kind == "user_statement" and record.source_ref == "session:s1~2<turn:1>"
