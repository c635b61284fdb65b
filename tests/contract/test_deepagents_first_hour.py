"""A new user's first Deep Agent: ``user_scope`` grants what it needs; without it, a warning says why."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from pathlib import Path

import pytest
from langgraph.checkpoint.memory import InMemorySaver

import retold
from retold.adapters.deepagents import create_memory_agent
from retold.errors import InvalidArgumentError
from retold.middleware import RetoldContext, RetoldMiddleware
from retold.models import Grant, Scope
from retold.testing import FakeEmbedder
from retold.tools.schemas import TOOL_NAMES

from .scripted import CONFIG, ScriptedChatModel, call, say

QUOTE = "I prefer aisle seats on long flights"
WRITE = {
    "type": "semantic",
    "content": "Prefers aisle seats on long flights.",
    "attribute": "seat_preference",
    "source_kind": "user_statement",
    "evidence": QUOTE,
}
USER = Scope("user", "u1")


def memory_names(names: list[str]) -> list[str]:
    return [n for n in names if n.startswith("memory_")]


async def test_a_first_agent_remembers_with_user_scope_read_write(
    store_location: Callable[[str], Path | str], caplog: pytest.LogCaptureFixture
) -> None:
    model = ScriptedChatModel(script=[call("memory_write", WRITE, "w1"), say("Noted."), say("Hi again.")])
    caplog.set_level(logging.WARNING, logger="retold.middleware")
    # the whole setup: no provisioning, no grant
    rt = await retold.open_runtime(store_location("first.sqlite"), embedder=FakeEmbedder())
    try:
        agent = create_memory_agent(rt, model, user_scope="read_write", checkpointer=InMemorySaver())
        ctx = RetoldContext(agent_id="planner", user_id="u1")
        out = await agent.ainvoke({"messages": [("user", QUOTE)]}, CONFIG, context=ctx)
        await agent.ainvoke({"messages": [("user", "hello again")]}, CONFIG, context=ctx)

        written = json.loads(
            next(m.content for m in out["messages"] if getattr(m, "name", "") == "memory_write")
        )
        assert written["ok"] and written["status"] == "confirmed", written
        assert [r.content for r in await rt.ops.dump_scope(USER)] == [WRITE["content"]]
        assert all(memory_names(names) == list(TOOL_NAMES) for names in model.tool_names)
        assert await rt.host.grants("planner") == [Grant("planner", USER, can_read=True, can_write=True)]
        changes = await rt.store.events(kind="grant.changed")
        assert len(changes) == 1 and changes[0]["actor"] == "retold.middleware"  # audited, granted once
        assert not [r for r in caplog.records if r.name == "retold.middleware"]
    finally:
        await rt.close()


async def test_without_user_scope_memory_write_is_absent_and_a_warning_says_so_once(
    store_location: Callable[[str], Path | str], caplog: pytest.LogCaptureFixture
) -> None:
    model = ScriptedChatModel(script=[say("One."), say("Two.")])
    caplog.set_level(logging.WARNING, logger="retold.middleware")
    rt = await retold.open_runtime(store_location("bare.sqlite"), embedder=FakeEmbedder())
    try:
        agent = create_memory_agent(rt, model, checkpointer=InMemorySaver())
        ctx = RetoldContext(agent_id="planner", user_id="u1")
        await agent.ainvoke({"messages": [("user", "first")]}, CONFIG, context=ctx)
        await agent.ainvoke({"messages": [("user", "second")]}, CONFIG, context=ctx)
        assert all("memory_write" not in names for names in model.tool_names)
        warnings = [r for r in caplog.records if r.name == "retold.middleware"]
        assert len(warnings) == 1 and warnings[0].levelno == logging.WARNING
        assert "memory_write" in warnings[0].getMessage() and "user_scope" in warnings[0].getMessage()
        assert await rt.host.grants("planner") == []
    finally:
        await rt.close()


async def test_user_scope_read_never_narrows_an_existing_grant(
    store_location: Callable[[str], Path | str], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="retold.middleware")
    rt = await retold.open_runtime(store_location("narrow.sqlite"), embedder=FakeEmbedder())
    try:
        await rt.host.grant("planner", USER, read=True, write=True)
        model = ScriptedChatModel(script=[say("One."), say("Two.")])
        agent = create_memory_agent(rt, model, user_scope="read", checkpointer=InMemorySaver())
        ctx = RetoldContext(agent_id="planner", user_id="u1")
        await agent.ainvoke({"messages": [("user", "first")]}, CONFIG, context=ctx)
        assert await rt.host.grants("planner") == [Grant("planner", USER, can_read=True, can_write=True)]
        assert len(await rt.store.events(kind="grant.changed")) == 1
        other = RetoldContext(agent_id="planner", user_id="u2")
        await agent.ainvoke(
            {"messages": [("user", "first")]}, {"configurable": {"thread_id": "s2"}}, context=other
        )
        assert Grant("planner", Scope("user", "u2"), can_read=True, can_write=False) in await rt.host.grants(
            "planner"
        )
        assert memory_names(model.tool_names[1]) == [n for n in TOOL_NAMES if n != "memory_write"]
        assert not [r for r in caplog.records if r.name == "retold.middleware"]  # read-only was asked for
    finally:
        await rt.close()


def test_an_unknown_user_scope_is_refused(tmp_path: Path) -> None:
    with pytest.raises(InvalidArgumentError, match="user_scope"):
        RetoldMiddleware(object(), "tool_only", user_scope="write")  # type: ignore[arg-type]
