"""``RetoldMiddleware`` on a runtime owned by a ``RuntimePortal``, driven from other threads and loops.

``langgraph dev`` runs graph invocations on alternating event-loop threads and sync hosts call
``invoke()`` from plain threads; either way retold's calls must run on the loop that owns the
runtime (its aiosqlite connection is bound to it), and every turn must be recorded once.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest
from langchain.agents import create_agent
from langchain_core.language_models.fake_chat_models import FakeMessagesListChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langgraph.checkpoint.memory import InMemorySaver
from unit.writepath import USER, World, make_world  # tests/ is on sys.path (rootdir-relative packages)

import retold
from retold.adapters.crewai import RuntimePortal as CrewAIRuntimePortal
from retold.adapters.deepagents import end_session
from retold.adapters.portal import LoopBridge, RuntimePortal
from retold.middleware import RetoldContext, RetoldMiddleware
from retold.models import Principal, SessionKey
from retold.testing import FakeClock, FakeEmbedder, FakeJudge

T = TypeVar("T")
CTX = RetoldContext(agent_id="planner", user_id="u1")
CONFIG: Any = {"configurable": {"thread_id": "s1"}}
QUOTE = "I prefer concise answers without preamble"
ASK = "Summarise the meeting in concise answers without preamble"
WRITE = {"type": "semantic", "content": "Prefers concise answers without preamble.",
         "attribute": "answer_style", "source_kind": "user_statement", "evidence": QUOTE}  # fmt: skip


class ToolCallingFake(FakeMessagesListChatModel):
    """The langchain-core fake, able to take tools (the replies name the tools they call)."""

    def bind_tools(self, tools: Any, **kwargs: Any) -> ToolCallingFake:
        return self


def call(name: str, args: dict[str, Any], call_id: str) -> AIMessage:
    return AIMessage("", tool_calls=[{"name": name, "args": args, "id": call_id, "type": "tool_call"}])


SCRIPT = [
    call("memory_write", WRITE, "w1"),
    AIMessage("Noted."),
    call("memory_search", {"queries": ["answer style"]}, "q1"),
    AIMessage("Short and direct, as you prefer."),
]
TURNS = [
    ("user", QUOTE),
    ("assistant", "Noted."),
    ("user", ASK),
    ("assistant", "Short and direct, as you prefer."),
]


@pytest.fixture
def portal(tmp_path: Path) -> Iterator[tuple[RuntimePortal, World]]:
    """A runtime on fakes opened by a portal: u1 provisioned, planner granted read-write."""
    clock, judge = FakeClock(), FakeJudge()
    with RuntimePortal.open(
        tmp_path / "memory.sqlite", embedder=FakeEmbedder(), judge=judge, clock=clock
    ) as p:
        rt = p.runtime
        assert rt is not None
        p.run(rt.host.provision_user("u1", aliases=["Aditya"]))
        p.run(rt.host.grant("planner", USER, read=True, write=True))
        yield p, World(rt, judge, clock, Principal("planner", "u1", "s1"))


@pytest.fixture
def loops(portal: tuple[RuntimePortal, World], monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """The running loop of every turn retold records, and a ``"hop"`` per call handed over."""
    _, world = portal
    seen: list[Any] = []
    on_turn = world.rt.hooks.on_turn

    async def spy(principal: Principal, role: str, text: str) -> Principal:
        seen.append(asyncio.get_running_loop())
        return await on_turn(principal, role, text)

    submit = LoopBridge.submit

    def counted(bridge: LoopBridge, factory: Callable[[], Awaitable[T]]) -> Any:
        seen.append("hop")
        return submit(bridge, factory)

    monkeypatch.setattr(world.rt.hooks, "on_turn", spy)
    monkeypatch.setattr(LoopBridge, "submit", counted)
    return seen


def agent(rt: retold.Runtime, mode: str = "hybrid") -> tuple[Any, RetoldMiddleware]:
    middleware = RetoldMiddleware(rt, mode)  # built in plain sync code: the portal's loop is found
    model = ToolCallingFake(responses=list(SCRIPT))
    graph = create_agent(
        model, middleware=[middleware], context_schema=RetoldContext, checkpointer=InMemorySaver()
    )
    return graph, middleware


def in_thread(work: Callable[[], T]) -> T:
    """Run ``work`` on a new plain thread and return its result (or raise its error)."""
    out: dict[str, Any] = {}

    def target() -> None:
        try:
            out["result"] = work()
        except BaseException as exc:
            out["error"] = exc

    thread = threading.Thread(target=target)
    thread.start()
    thread.join()
    if "error" in out:
        raise out["error"]
    return out["result"]


def on_own_loop(work: Callable[[], Awaitable[T]]) -> T:
    """Run ``work`` on a fresh event loop in a thread of its own: a second loop, not the portal's."""
    return in_thread(lambda: asyncio.run(work()))  # type: ignore[arg-type]


def tool_texts(messages: list[BaseMessage], name: str) -> list[str]:
    return [m.text for m in messages if m.type == "tool" and m.name == name]


def test_async_hooks_on_alternating_foreign_loops_run_on_the_portal_loop(
    portal: tuple[RuntimePortal, World], loops: list[Any]
) -> None:
    p, world = portal
    graph, middleware = agent(world.rt)

    async def ask(text: str) -> list[BaseMessage]:
        return (await graph.ainvoke({"messages": [HumanMessage(text)]}, CONFIG, context=CTX))["messages"]

    first = on_own_loop(lambda: ask(QUOTE))  # one loop thread, then another, as `langgraph dev` does
    second = on_own_loop(lambda: ask(ASK))
    assert '"ok": true' in tool_texts(first, "memory_write")[0]
    (recalled, searched) = tool_texts(second, "memory_search")
    assert recalled.startswith("recalled memory: 1 result") and "Prefers concise answers" in recalled
    assert searched.startswith("memory_search: 1 result")
    assert [(t.role, t.content) for t in p.run(world.rt.store.turns(SessionKey.of(world.p)))] == TURNS
    recorded = [seen for seen in loops if seen != "hop"]
    assert len(recorded) == len(TURNS) and all(loop is p.loop for loop in recorded)
    assert "hop" in loops
    assert on_own_loop(lambda: middleware.end_session(CONFIG)) is True
    assert on_own_loop(lambda: end_session(world.rt, CONFIG)) is False  # the adapter's function hops too


def test_sync_hooks_from_a_plain_thread_run_on_the_portal_loop(
    portal: tuple[RuntimePortal, World], loops: list[Any]
) -> None:
    p, world = portal
    graph, middleware = agent(world.rt, "tool_only")

    def ask(text: str) -> list[BaseMessage]:
        return graph.invoke({"messages": [HumanMessage(text)]}, CONFIG, context=CTX)["messages"]

    in_thread(lambda: ask(QUOTE))
    second = in_thread(lambda: ask(ASK))
    (searched,) = tool_texts(second, "memory_search")
    assert searched.startswith("memory_search: 1 result") and "Prefers concise answers" in searched
    assert [(t.role, t.content) for t in p.run(world.rt.store.turns(SessionKey.of(world.p)))] == TURNS
    assert all(loop is p.loop for loop in loops if loop != "hop")
    assert in_thread(lambda: middleware.end_session_sync(CONFIG)) is True


def test_on_the_owning_loop_async_hooks_await_directly_and_sync_hooks_are_refused(
    portal: tuple[RuntimePortal, World], loops: list[Any]
) -> None:
    p, world = portal
    graph, _ = agent(world.rt, "tool_only")

    async def ask() -> dict[str, Any]:
        return await graph.ainvoke({"messages": [HumanMessage(QUOTE)]}, CONFIG, context=CTX)

    p.run(ask())
    assert [(t.role, t.content) for t in p.run(world.rt.store.turns(SessionKey.of(world.p)))] == TURNS[:2]
    assert loops == [p.loop, p.loop]  # two turns, no hop

    async def blocking() -> Any:
        return graph.invoke({"messages": [HumanMessage(ASK)]}, CONFIG, context=CTX)

    with pytest.raises(RuntimeError, match="ainvoke"):
        p.run(blocking())
    assert CrewAIRuntimePortal is RuntimePortal  # the CrewAI adapter's name still works


def test_a_sync_hook_with_no_owning_loop_says_how_to_get_one(tmp_path: Path) -> None:
    world = asyncio.run(make_world(tmp_path / "memory.sqlite"))  # that loop is gone afterwards
    try:
        graph, _ = agent(world.rt, "tool_only")
        with pytest.raises(RuntimeError, match="RuntimePortal"):
            in_thread(lambda: graph.invoke({"messages": [HumanMessage(QUOTE)]}, CONFIG, context=CTX))
    finally:
        asyncio.run(world.rt.close())
