"""Spec §17.4 "Trigger" through ``RetoldMiddleware`` on langchain's ``create_agent``, offline."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langgraph.checkpoint.memory import InMemorySaver

from retold.adapters.common import RECALL_MARK
from retold.config import Config
from retold.models import Principal
from retold.policy.prompt import policy_text
from retold.tools.schemas import TOOL_NAMES

from .scripted import PREFERENCE, Memory, ScriptedChatModel, call, open_memory, say, seed

CTX = {"agent_id": "planner", "user_id": "u1"}
RELEVANT = "Summarise the meeting in concise answers without preamble"
IRRELEVANT = "Write the release notes for version two"


@pytest.fixture
def memory_config() -> Config:
    return Config().override({"retrieval.trigger.auto_k": 3})


def agent_for(m: Memory, model: ScriptedChatModel, mode: str, tools: list[Any] | None = None) -> Any:
    from retold.middleware import RetoldContext, RetoldMiddleware

    return create_agent(
        model,
        tools=tools or [],
        middleware=[RetoldMiddleware(m.rt, mode)],
        context_schema=RetoldContext,
        checkpointer=InMemorySaver(),
        system_prompt="You are a careful assistant.",
    )


async def ask(agent: Any, text: str, thread: str = "s1") -> list[BaseMessage]:
    from retold.middleware import RetoldContext

    out = await agent.ainvoke(
        {"messages": [HumanMessage(text)]},
        {"configurable": {"thread_id": thread}},
        context=RetoldContext(**CTX),
    )
    return out["messages"]


def recalled(messages: list[BaseMessage]) -> list[BaseMessage]:
    return [m for m in messages if m.additional_kwargs.get(RECALL_MARK)]


def serialized(messages: list[BaseMessage]) -> list[str]:
    return [json.dumps(m.model_dump(), sort_keys=True, default=str) for m in messages]


# --- tool_only -------------------------------------------------------------------------------


async def test_tool_only_registers_five_tools_and_never_searches_on_its_own(memory: Memory) -> None:
    await seed(memory)
    model = ScriptedChatModel(script=[say("Sure.")])
    messages = await ask(agent_for(memory, model, "tool_only"), RELEVANT)
    assert model.tool_names == [list(TOOL_NAMES)]
    assert await memory.search_logs() == []
    assert recalled(messages) == [] and [m.type for m in messages] == ["human", "ai"]


# --- auto ------------------------------------------------------------------------------------


async def test_auto_registers_four_tools_and_searches_once_per_user_turn(memory: Memory) -> None:
    record_id = await seed(memory)
    model = ScriptedChatModel(
        script=[call("memory_get", {"ids": [record_id]}, "c1"), say("Done."), say("Again.")]
    )
    agent = agent_for(memory, model, "auto")
    first = await ask(agent, RELEVANT)
    assert model.tool_names == [[n for n in TOOL_NAMES if n != "memory_search"]] * 2
    # Two model calls (the tool loop) for one user turn: one host search, never on AI or tool turns.
    logs = await memory.search_logs()
    assert [log["trigger"] for log in logs] == ["auto"]
    assert json.loads(logs[0]["request"])["queries"] == [RELEVANT]
    assert [m.type for m in first] == ["human", "ai", "tool", "ai", "tool", "ai"]
    assert first[1:3] == recalled(first)  # the pair sits right after the user turn
    await ask(agent, "And now the follow-up notes, concise answers without preamble too")
    assert [log["trigger"] for log in await memory.search_logs()] == ["auto", "auto"]


async def test_auto_skips_a_short_user_turn_with_a_trigger_skipped_event(memory: Memory) -> None:
    await seed(memory)
    model = ScriptedChatModel(script=[say("You're welcome.")])
    messages = await ask(agent_for(memory, model, "auto"), "  ok   thanks ")
    assert await memory.search_logs() == [] and recalled(messages) == []
    (event,) = await memory.rt.store.events(kind="trigger.skipped")
    assert event["actor"] == "planner"
    assert event["payload"]["chars"] == len("ok thanks") < event["payload"]["min_chars"] == 12
    assert event["payload"]["session_id"] == "s1"


# --- hybrid ----------------------------------------------------------------------------------


async def test_hybrid_host_and_model_searches_log_auto_and_tool(memory: Memory) -> None:
    await seed(memory)
    model = ScriptedChatModel(
        script=[call("memory_search", {"queries": ["answer style preference"], "k": 2}, "c1"), say("Ok.")]
    )
    messages = await ask(agent_for(memory, model, "hybrid"), RELEVANT)
    assert model.tool_names == [list(TOOL_NAMES)] * 2
    logs = await memory.search_logs()
    assert [log["trigger"] for log in logs] == ["auto", "tool"]
    assert [json.loads(log["request"])["k"] for log in logs] == [3, 2]  # auto_k vs the model's k
    # The model's own search result is shown rendered; it is not a recall message.
    tool_result = [m for m in messages if isinstance(m, ToolMessage) and not m.additional_kwargs]
    assert tool_result[0].content.startswith("memory_search:")


async def test_host_searches_use_auto_k_and_model_searches_the_default_k(tmp_path: Path) -> None:
    config = Config().override({"retrieval.trigger.auto_k": 2, "retrieval.default_k": 1})
    m = await open_memory(tmp_path / "k.sqlite", config)
    try:
        await seed(m, "Prefers concise answers without preamble.", "answer_style")
        await seed(
            m,
            "Wants concise answers without preamble in code reviews.",
            "review_style",
            "In code reviews I want concise answers without preamble",
        )
        model = ScriptedChatModel(
            script=[
                call("memory_search", {"queries": ["concise answers without preamble"]}, "c1"),
                say("Ok."),
            ]
        )
        messages = await ask(agent_for(m, model, "hybrid"), RELEVANT)
        auto_log, tool_log = await m.search_logs()
        assert (auto_log["trigger"], len(json.loads(auto_log["returned"]))) == ("auto", 2)
        assert (tool_log["trigger"], len(json.loads(tool_log["returned"]))) == ("tool", 1)
        assert recalled(messages)[1].content.startswith("recalled memory: 2 results")
    finally:
        await m.rt.close()


# --- what is appended ------------------------------------------------------------------------


async def test_nonempty_host_search_appends_one_pair_and_an_empty_one_appends_nothing(
    memory: Memory,
) -> None:
    record_id = await seed(memory)
    model = ScriptedChatModel(script=[say("Short summary."), say("Release notes.")])
    agent = agent_for(memory, model, "auto")
    first = await ask(agent, RELEVANT)
    call_msg, result = recalled(first)
    assert isinstance(call_msg, AIMessage) and call_msg.tool_calls[0]["name"] == "memory_search"
    assert isinstance(result, ToolMessage) and result.tool_call_id == call_msg.tool_calls[0]["id"]
    assert result.content.startswith("recalled memory: 1 result")
    assert record_id[-12:] in result.content and PREFERENCE in result.content
    second = await ask(agent, IRRELEVANT)
    assert len(recalled(second)) == 2  # nothing new was appended for the irrelevant turn
    logs = await memory.search_logs()
    assert [log["trigger"] for log in logs] == ["auto", "auto"]
    assert json.loads(logs[1]["returned"]) == []  # the empty search still wrote its row


@pytest.mark.parametrize("mode", ["tool_only", "auto", "hybrid"])
async def test_prompt_prefix_is_byte_identical_and_recall_only_appends(memory: Memory, mode: str) -> None:
    record_id = await seed(memory)
    model = ScriptedChatModel(
        script=[call("memory_get", {"ids": [record_id]}, "c1"), say("First."), say("Second.")]
    )
    agent = agent_for(memory, model, mode)
    await ask(agent, RELEVANT)
    await ask(agent, "Then the follow-up notes, concise answers without preamble as well")
    assert len(model.calls) == 3
    systems = {serialized(c[:1])[0] for c in model.calls}
    assert len(systems) == 1
    (system,) = {c[0].text for c in model.calls}
    profile = await memory.rt.profile(Principal("planner", "u1"))  # the seeded preference is ambient
    assert profile and system == f"You are a careful assistant.\n\n{policy_text(mode)}\n\n{profile}"
    assert len({json.dumps(tools, sort_keys=True) for tools in model.bound}) == 1  # tool schemas too
    for earlier, later in zip(model.calls, model.calls[1:], strict=False):
        assert serialized(later)[: len(earlier)] == serialized(earlier)  # nothing earlier was edited
    if mode == "tool_only":
        assert all(not recalled(c) for c in model.calls)
    else:
        # Each recall pair directly follows the user turn it was searched for.
        last = model.calls[-1]
        humans = [i for i, m in enumerate(last) if isinstance(m, HumanMessage)]
        for i in humans:
            assert recalled(last[i + 1 : i + 3]) == last[i + 1 : i + 3]


async def test_the_mode_defaults_to_the_configured_trigger_mode(tmp_path: Path) -> None:
    from retold.errors import InvalidArgumentError
    from retold.middleware import RetoldMiddleware

    m = await open_memory(tmp_path / "mode.sqlite", Config().override({"retrieval.trigger.mode": "auto"}))
    try:
        assert RetoldMiddleware(m.rt).mode == "auto"
        assert [t.name for t in RetoldMiddleware(m.rt).tools] == [
            n for n in TOOL_NAMES if n != "memory_search"
        ]
        assert RetoldMiddleware(m.rt, "hybrid").mode == "hybrid"
        with pytest.raises(InvalidArgumentError, match="tool_only"):
            RetoldMiddleware(m.rt, "always")
    finally:
        await m.rt.close()
