"""``create_memory_agent``: retold inside a real Deep Agents graph, subagents included, offline."""

from __future__ import annotations

import json
from typing import Any

import pytest
from langchain_core.messages import HumanMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver

from retold.adapters.deepagents import create_memory_agent, end_session, with_memory_tools
from retold.errors import InvalidArgumentError
from retold.middleware import RetoldContext
from retold.policy.prompt import policy_text
from retold.tools.schemas import TOOL_NAMES

from .scripted import CONFIG, Memory, ScriptedChatModel, call, say, seed, weather

CTX = RetoldContext(agent_id="planner", user_id="u1")


async def ask(agent: Any, text: str) -> list[Any]:
    return (await agent.ainvoke({"messages": [HumanMessage(text)]}, CONFIG, context=CTX))["messages"]


def memory_names(names: list[str]) -> list[str]:
    return [n for n in names if n.startswith("memory_")]


async def test_the_main_agent_gets_tools_policy_and_turn_capture(memory: Memory) -> None:
    model = ScriptedChatModel(script=[call("weather", {"city": "Oslo"}, "c1"), say("Sunny."), say("Bye.")])
    agent = create_memory_agent(
        memory.rt, model, tools=[weather], checkpointer=InMemorySaver(), system_prompt="You plan trips."
    )
    await ask(agent, "What's the weather in Oslo?")
    await ask(agent, "Thanks, goodbye for now")
    assert all(memory_names(names) == list(TOOL_NAMES) for names in model.tool_names)
    systems = {c[0].text for c in model.calls}
    assert len(systems) == 1
    (system,) = systems
    assert system.startswith("You plan trips.") and system.count(policy_text("tool_only")) == 1
    assert await memory.turns() == [
        ("user", "What's the weather in Oslo?"),
        ("tool", "Sunny in Oslo, 21 degrees."),
        ("assistant", "Sunny."),
        ("user", "Thanks, goodbye for now"),
        ("assistant", "Bye."),
    ]
    assert await end_session(memory.rt, CONFIG) is True
    assert await end_session(memory.rt, CONFIG) is False


async def test_the_default_subagent_searches_memory_as_the_caller(memory: Memory) -> None:
    await seed(memory)
    model = ScriptedChatModel(
        script=[
            call(
                "task",
                {"description": "Find how the user likes answers", "subagent_type": "general-purpose"},
                "c1",
            ),
            call("memory_search", {"queries": ["concise answers without preamble"]}, "c2"),
            say("They want concise answers."),
            say("You like concise answers."),
        ]
    )
    agent = create_memory_agent(memory.rt, model, checkpointer=InMemorySaver())
    await ask(agent, "How do I like my answers?")
    (log,) = await memory.search_logs()
    assert (log["agent_id"], log["user_id"], log["session_id"], log["trigger"]) == (
        "planner",
        "u1",
        "s1",
        "tool",
    )
    assert len(json.loads(log["returned"])) == 1
    assert "user: How do I like my answers?" in log["context"]
    subagent_result = model.calls[2][-1]
    assert subagent_result.content.startswith("memory_search: 1 result")
    # The subagent's own task text and tool results are not the user's transcript.
    assert await memory.turns() == [
        ("user", "How do I like my answers?"),
        ("tool", "They want concise answers."),
        ("assistant", "You like concise answers."),
    ]


@pytest.mark.parametrize(
    ("mode", "subagent_memory"), [("tool_only", True), ("auto", True), ("hybrid", False)]
)
async def test_declarative_subagents_get_the_memory_tools(
    memory: Memory, mode: str, subagent_memory: bool
) -> None:
    model = ScriptedChatModel(
        script=[
            call("task", {"description": "Check the weather in Rome", "subagent_type": "researcher"}, "c1"),
            say("Sunny in Rome."),
            say("It is sunny in Rome."),
        ]
    )
    researcher = {
        "name": "researcher",
        "description": "Looks things up.",
        "system_prompt": "You research.",
        "tools": [weather],
    }
    agent = create_memory_agent(
        memory.rt,
        model,
        mode=mode,
        subagents=[researcher],
        subagent_memory=subagent_memory,
        checkpointer=InMemorySaver(),
    )
    await ask(agent, "Is it sunny in Rome today?")
    main_tools, sub_tools = model.tool_names[0], model.tool_names[1]
    expected = [n for n in TOOL_NAMES if mode != "auto" or n != "memory_search"]
    assert memory_names(main_tools) == expected
    assert "weather" in sub_tools and memory_names(sub_tools) == (expected if subagent_memory else [])
    sub_system = model.calls[1][0].text
    assert sub_system.startswith("You research.")
    sub_policy = policy_text("auto" if mode == "auto" else "tool_only")
    assert (sub_policy in sub_system) is subagent_memory


def test_with_memory_tools_adds_only_missing_tools_and_the_policy_once(memory: Memory) -> None:
    spec = {"name": "r", "description": "d", "system_prompt": "You research.", "tools": [weather]}
    once = with_memory_tools(spec, memory.rt, "tool_only")
    twice = with_memory_tools(once, memory.rt, "tool_only")
    assert [t.name for t in twice["tools"]] == ["weather", *TOOL_NAMES]
    assert twice["system_prompt"] == f"You research.\n\n{policy_text('tool_only')}"
    assert spec["tools"] == [weather]  # the caller's spec is not changed
    inherits = with_memory_tools({"name": "r", "description": "d"}, memory.rt)
    assert "tools" not in inherits


def test_a_caller_tool_with_a_memory_tool_name_is_refused(memory: Memory) -> None:
    @tool
    def memory_search(query: str) -> str:
        """Another memory."""
        return ""

    with pytest.raises(InvalidArgumentError, match="memory_search"):
        create_memory_agent(memory.rt, ScriptedChatModel(script=[]), tools=[memory_search])
