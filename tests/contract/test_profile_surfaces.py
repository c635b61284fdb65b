"""The ambient profile on every LangGraph-side surface (issue 21), offline, real stores.

A scripted conversation through a real Deep Agents graph (``create_memory_agent``): the user
states a standing preference, the agent writes it with the user's words as evidence, and
from the next model call on the profile sits at the end of the system message, the same
bytes on every later call; a correction supersedes it (the new text, not the old), a
``memory_forget`` and an erasure remove it, and ``activation.profile_in_prompt: false``
leaves the system message as it was. Then the sync side (``agent.invoke`` from a thread on
a portal-owned runtime), the drop-in ``profile_node`` and ``RetoldStore``'s read-only access.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest
from deepagents.backends import StoreBackend
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import START, StateGraph

from retold.adapters.deepagents import create_memory_agent
from retold.adapters.langgraph_store import PROFILE_KEY, RetoldStore, StoreRefusedError
from retold.adapters.portal import RuntimePortal
from retold.adapters.profile import messages_with_profile, with_profile
from retold.config import Config
from retold.graph_nodes.nodes import RetoldMessagesState, profile_node, record_turns_node
from retold.middleware import RetoldContext, RetoldMiddleware
from retold.models import Principal, Scope
from retold.policy.prompt import policy_text
from retold.retrieve.profile import PROFILE_HEADER
from retold.testing import FakeEmbedder, FakeJudge

from .profile_script import FRENCH, FRENCH_QUOTE, FRENCH_TURN, GERMAN, GERMAN_QUOTE, GERMAN_TURN, write_args
from .scripted import CONFIG, USER, Memory, ScriptedChatModel, call, open_memory, say, weather

T = TypeVar("T")
CTX = RetoldContext(agent_id="planner", user_id="u1")
P = Principal("planner", "u1")


def system_of(messages: list[BaseMessage]) -> str:
    """The system message's text as the provider receives it (a string system prompt here)."""
    first = messages[0]
    assert isinstance(first, SystemMessage), first
    assert isinstance(first.content, str), first.content
    return first.content


def systems(model: ScriptedChatModel) -> list[str]:
    return [system_of(c) for c in model.calls]


async def ask(agent: Any, text: str, config: Any = CONFIG) -> list[BaseMessage]:
    return (await agent.ainvoke({"messages": [HumanMessage(text)]}, config, context=CTX))["messages"]


async def live_id(m: Memory, content: str) -> str:
    records = await m.rt.store.records_in_scope(USER, statuses=("confirmed", "provisional"))
    (record,) = [r for r in records if r.content == content]
    return record.id


async def make_ambient(
    m: Memory, turn: str = FRENCH_TURN, content: str = FRENCH, quote: str = FRENCH_QUOTE, *, user: str = "u1"
) -> str:
    """A standing preference in ``user``'s own words, written in an earlier session; now ambient."""
    p = await m.rt.hooks.on_session_start(Principal("planner", user, "s0"))
    p = await m.rt.hooks.on_turn(p, "user", turn)
    result = await m.rt.tools.call(p, "memory_write", write_args(content, quote))
    assert result["ok"], result
    profile = await m.rt.profile(Principal("planner", user))
    assert f"> {content}" in profile, (result, profile)
    return str(result["record_id"])


# --- Deep Agents: the scripted conversation -----------------------------------------------------


@pytest.mark.parametrize("mode", ["tool_only", "auto", "hybrid"])
async def test_the_profile_follows_the_conversation_in_a_deep_agent(memory: Memory, mode: str) -> None:
    model = ScriptedChatModel(
        script=[
            call("memory_write", write_args(FRENCH, FRENCH_QUOTE), "w1"), say("D'accord."),
            call("weather", {"city": "Oslo"}, "c1"), say("Il fait beau."),
            call("memory_write", write_args(GERMAN, GERMAN_QUOTE), "w2"), say("Alles klar."),
        ]
    )  # fmt: skip
    agent = create_memory_agent(
        memory.rt, model, mode=mode, tools=[weather], checkpointer=InMemorySaver(),
        system_prompt="You plan trips.",
    )  # fmt: skip
    await ask(agent, FRENCH_TURN)
    french = await memory.rt.profile(P)
    assert french.startswith(PROFILE_HEADER) and f"> {FRENCH}" in french

    base, with_french = systems(model)
    # nothing was ambient before the write: the system message is the host's prompt and the policy
    assert base.startswith("You plan trips.") and base.endswith(policy_text(mode))
    assert PROFILE_HEADER not in base
    # from the next model call on, the profile follows everything else, after a blank line
    assert with_french == f"{base}\n\n{french}"

    await ask(agent, "What's the weather in Oslo?")
    assert systems(model)[2:] == [with_french, with_french]  # the same bytes on every later call

    tool_result = (await ask(agent, GERMAN_TURN))[-2]
    assert '"outcome": "superseded:' in tool_result.text, tool_result.text
    german = await memory.rt.profile(P)
    assert f"> {GERMAN}" in german and FRENCH not in german
    before_write, after_write = systems(model)[4:]
    assert before_write == with_french
    assert after_write == f"{base}\n\n{german}" and FRENCH not in after_write

    # memory_forget: the next call carries no profile at all
    model.script += [
        call("memory_forget", {"id": await live_id(memory, GERMAN), "reason": "the user asked"}, "f1"),
        say("Vergessen."),
        say("Bye."),
    ]
    await ask(agent, "Please forget my language preference.")
    await ask(agent, "Thanks!")
    assert systems(model)[6] == after_write
    assert systems(model)[7:] == [base, base]
    assert await memory.rt.profile(P) == ""


async def test_an_erased_record_leaves_the_profile(memory: Memory) -> None:
    model = ScriptedChatModel(
        script=[call("memory_write", write_args(FRENCH, FRENCH_QUOTE), "w1"), say("D'accord."), say("Ok.")]
    )
    agent = create_memory_agent(
        memory.rt, model, checkpointer=InMemorySaver(), system_prompt="You plan trips."
    )
    await ask(agent, FRENCH_TURN)
    base, with_french = systems(model)
    assert with_french == f"{base}\n\n{await memory.rt.profile(P)}" != base

    await memory.rt.ops.erase(record=await live_id(memory, FRENCH), reason="the user asked for erasure")
    await ask(agent, "Hello again")
    assert systems(model)[2] == base
    assert await memory.rt.profile(P) == ""


@pytest.mark.parametrize("mode", ["tool_only", "auto", "hybrid"])
async def test_profile_in_prompt_false_leaves_the_system_message_untouched(
    store_location: Callable[[str], Path | str], mode: str
) -> None:
    off = await open_memory(
        store_location("off.sqlite"), Config().override({"activation.profile_in_prompt": False})
    )
    on = await open_memory(store_location("on.sqlite"))
    try:
        prompts = {}
        for name, m in (("off", off), ("on", on)):
            await make_ambient(m)  # ambient either way: only the prompt injection is switched off
            model = ScriptedChatModel(script=[say("Bonjour."), say("Salut.")])
            agent = create_memory_agent(
                m.rt, model, mode=mode, checkpointer=InMemorySaver(), system_prompt="You plan trips."
            )
            await ask(agent, "Hello there")
            await ask(agent, "Hello again")
            (prompts[name],) = set(systems(model))
        assert PROFILE_HEADER not in prompts["off"] and prompts["off"].endswith(policy_text(mode))
        assert prompts["on"] == f"{prompts['off']}\n\n{await on.rt.profile(P)}"
    finally:
        await off.rt.close()
        await on.rt.close()


async def test_the_profile_is_the_run_callers_own(memory: Memory) -> None:
    """u2's model call carries u2's profile (empty here), never u1's, from the same middleware."""
    await make_ambient(memory)
    await memory.rt.host.provision_user("u2")
    await memory.rt.host.grant("planner", Scope("user", "u2"), read=True, write=True)
    model = ScriptedChatModel(script=[say("Hi u1."), say("Hi u2.")])
    agent = create_memory_agent(
        memory.rt, model, checkpointer=InMemorySaver(), system_prompt="You plan trips."
    )
    await ask(agent, "Hello there")
    other = RetoldContext(agent_id="planner", user_id="u2")
    await agent.ainvoke({"messages": [HumanMessage("Hello there")]}, {"configurable": {"thread_id": "t2"}},
                        context=other)  # fmt: skip
    mine, theirs = systems(model)
    assert f"> {FRENCH}" in mine and PROFILE_HEADER not in theirs
    assert mine == f"{theirs}\n\n{await memory.rt.profile(P)}"


# --- the sync side: agent.invoke from a thread on a portal-owned runtime ------------------------


def in_thread(work: Callable[[], T]) -> T:
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


@pytest.fixture
def portal(tmp_path: Path) -> Iterator[RuntimePortal]:
    with RuntimePortal.open(tmp_path / "memory.sqlite", embedder=FakeEmbedder(), judge=FakeJudge()) as p:
        rt = p.runtime
        assert rt is not None
        p.run(rt.host.provision_user("u1", aliases=["Aditya"]))
        p.run(rt.host.grant("planner", USER, read=True, write=True))
        yield p


def test_the_sync_wrap_model_call_adds_the_profile(portal: RuntimePortal) -> None:
    rt = portal.runtime
    assert rt is not None
    model = ScriptedChatModel(
        script=[call("memory_write", write_args(FRENCH, FRENCH_QUOTE), "w1"), say("D'accord."), say("Oui.")]
    )
    graph = create_agent(
        model, middleware=[RetoldMiddleware(rt, "tool_only")], context_schema=RetoldContext,
        checkpointer=InMemorySaver(), system_prompt="You plan trips.",
    )  # fmt: skip

    def invoke(text: str) -> Any:
        return graph.invoke({"messages": [HumanMessage(text)]}, CONFIG, context=CTX)

    in_thread(lambda: invoke(FRENCH_TURN))
    in_thread(lambda: invoke("Hello again"))
    profile = portal.run(rt.profile(P))
    base, with_french, again = systems(model)
    assert base == f"You plan trips.\n\n{policy_text('tool_only')}"
    assert with_french == again == f"{base}\n\n{profile}" and f"> {FRENCH}" in profile


# --- drop-in nodes --------------------------------------------------------------------------------


async def test_profile_node_writes_the_block_to_state_for_the_model_node(memory: Memory) -> None:
    seen: list[list[BaseMessage]] = []

    async def call_model(state: dict[str, Any], config: RunnableConfig) -> dict[str, Any]:
        system = with_profile(SystemMessage("You plan trips."), state.get("retold_profile", ""))
        seen.append([system, *state["messages"]])
        return {"messages": [AIMessage("Ok.")]}

    g = StateGraph(RetoldMessagesState, context_schema=RetoldContext)
    g.add_node("record", record_turns_node(memory.rt))
    g.add_node("profile", profile_node(memory.rt))
    g.add_node("model", call_model)
    g.add_edge(START, "record")
    g.add_edge("record", "profile")
    g.add_edge("profile", "model")
    graph = g.compile(checkpointer=InMemorySaver())

    first = await graph.ainvoke({"messages": [HumanMessage("Hello")]}, CONFIG, context=CTX)
    assert first["retold_profile"] == "" and system_of(seen[0]) == "You plan trips."
    await make_ambient(memory)
    second = await graph.ainvoke({"messages": [HumanMessage("Hello again")]}, CONFIG, context=CTX)
    profile = await memory.rt.profile(P)
    assert second["retold_profile"] == profile and f"> {FRENCH}" in profile
    assert system_of(seen[1]) == f"You plan trips.\n\n{profile}"
    # the block lives in its own key, replaced, never in the messages
    assert not any(PROFILE_HEADER in m.text for m in second["messages"])


async def test_profile_node_honours_profile_in_prompt(store_location: Callable[[str], Path | str]) -> None:
    m = await open_memory(
        store_location("off.sqlite"), Config().override({"activation.profile_in_prompt": False})
    )
    try:
        await make_ambient(m)
        node = profile_node(m.rt)
        assert await node({}, {"configurable": {"agent_id": "planner", "user_id": "u1"}}) == {
            "retold_profile": ""
        }
    finally:
        await m.rt.close()


def test_the_prompt_helpers_append_once_and_leave_inputs_alone() -> None:
    block = f"{PROFILE_HEADER}\n\n[abc] communication · scope user:u1\n> Prefers answers in French"
    system = SystemMessage("You plan trips.")
    added = with_profile(system, block)
    assert added is not None and added.content == f"You plan trips.\n\n{block}"
    assert with_profile(added, block) is added and system.content == "You plan trips."
    assert with_profile(system, "") is system and with_profile(None, "") is None
    assert with_profile(None, block) == SystemMessage(block)
    blocks = with_profile(SystemMessage([{"type": "text", "text": "You plan trips."}]), block)
    assert blocks is not None and blocks.content == [
        {"type": "text", "text": "You plan trips."}, {"type": "text", "text": block}
    ]  # fmt: skip

    crew = [
        {"role": "system", "content": "You are a planner.", "cache": True},
        {"role": "user", "content": "Hi"},
    ]
    out = messages_with_profile(crew, block)
    assert out[0] == {"role": "system", "content": f"You are a planner.\n\n{block}", "cache": True}
    assert crew[0]["content"] == "You are a planner." and out[1] is crew[1]
    assert messages_with_profile([{"role": "user", "content": "Hi"}], block) == [
        {"role": "system", "content": block}, {"role": "user", "content": "Hi"}
    ]  # fmt: skip
    assert messages_with_profile("Hi", block) == [
        {"role": "system", "content": block}, {"role": "user", "content": "Hi"}
    ]  # fmt: skip
    assert messages_with_profile(crew, "") is crew


# --- RetoldStore: read-only access ----------------------------------------------------------------


async def test_the_store_shows_the_profile_read_only(memory: Memory) -> None:
    store = RetoldStore(memory.rt, agent_id="planner")
    ns = ("memories", "u1")
    assert await store.aprofile("u1") == "" and await store.aget(ns, PROFILE_KEY) is None
    await make_ambient(memory)
    profile = await memory.rt.profile(P)
    assert await store.aprofile("u1") == profile
    assert await asyncio.to_thread(store.profile, "u1") == profile  # the sync side, from a thread
    item = await store.aget(ns, PROFILE_KEY)
    assert item is not None and item.value["content"] == profile
    assert item.value["_retold"] == {"kind": "profile", "read_only": True}
    file_item = await store.aget((*ns, "filesystem"), "/_retold_profile")  # Deep Agents' file path form
    assert file_item is not None and file_item.value["content"] == profile
    backend = StoreBackend(store=store, namespace=lambda _rt: ("memories", "u1", "filesystem"))
    read = await backend.aread("/_retold_profile")
    assert read.file_data is not None and read.file_data["content"] == profile, read
    # never listed or searched as an item
    assert all(i.key != PROFILE_KEY for i in await store.asearch(ns))

    for attempt in (
        store.aput(ns, PROFILE_KEY, {"content": "Prefers answers in Klingon"}),
        store.adelete(ns, PROFILE_KEY),
        store.aput(ns, "/_retold_profile", {"content": "x"}),
    ):
        with pytest.raises(StoreRefusedError) as refused:
            await attempt
        assert refused.value.code == "invalid_input" and "read-only profile" in refused.value.message
    assert await store.aprofile("u1") == profile

    # another user: nothing of u1's, whether named outside a run or inside u2's own run
    await memory.rt.host.provision_user("u2")
    await memory.rt.host.grant("planner", Scope("user", "u2"), read=True, write=True)
    await make_ambient(memory, GERMAN_TURN, GERMAN, GERMAN_QUOTE, user="u2")
    theirs = await store.aprofile("u2")
    assert f"> {GERMAN}" in theirs and FRENCH not in theirs
    their_item = await store.aget(("memories", "u2"), PROFILE_KEY)
    assert their_item is not None and their_item.value["content"] == theirs
    seen: dict[str, Any] = {}

    async def node(state: dict[str, Any]) -> dict[str, Any]:
        seen["named"] = await store.aprofile("u1")
        seen["item"] = await store.aget(ns, PROFILE_KEY)
        return {}

    g = StateGraph(RetoldMessagesState)
    g.add_node("peek", node)
    g.add_edge(START, "peek")
    await g.compile(store=store).ainvoke(
        {"messages": []}, {"configurable": {"user_id": "u2", "thread_id": "t"}}
    )
    assert seen == {"named": "", "item": None}  # u2's run naming u1: empty, not u1's and not u2's
