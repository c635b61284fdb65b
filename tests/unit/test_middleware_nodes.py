"""The drop-in graph nodes and the shared adapter logic, on langchain-core and langgraph only."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph

from retold.adapters.common import (
    RECALL_MARK,
    merge_recorded,
    run_principal,
    search_context,
    turn_of,
    with_policy,
)
from retold.errors import InvalidArgumentError
from retold.graph_nodes.nodes import (
    RetoldContext,
    RetoldMessagesState,
    end_session_node,
    recall_node,
    record_turns_node,
)
from retold.models import Principal, SessionKey
from retold.policy.prompt import policy_text

from .writepath import World

CTX = RetoldContext(agent_id="planner", user_id="u1")
PREFERENCE = "Prefers concise answers without preamble."
RELEVANT = "Summarise the meeting in concise answers without preamble"


def graph(world: World, replies: list[str], *, recall: bool = True) -> Any:
    """record → recall → model → record_reply, the shape the nodes' docstring shows."""
    script = iter(replies)

    async def model(state: dict[str, Any]) -> dict[str, Any]:
        return {"messages": [AIMessage(next(script))]}

    g = StateGraph(RetoldMessagesState, context_schema=RetoldContext)
    g.add_node("record", record_turns_node(world.rt))
    g.add_node("model", model)
    g.add_node("record_reply", record_turns_node(world.rt))
    g.add_edge(START, "record")
    if recall:
        g.add_node("recall", recall_node(world.rt))
        g.add_edge("record", "recall")
        g.add_edge("recall", "model")
    else:
        g.add_edge("record", "model")
    g.add_edge("model", "record_reply")
    g.add_edge("record_reply", END)
    return g.compile(checkpointer=InMemorySaver())


T1 = SessionKey("planner", "u1", "t1")


async def run(app: Any, text: str, thread: str = "t1", context: Any = CTX) -> list[Any]:
    config = {"configurable": {"thread_id": thread}}
    return (await app.ainvoke({"messages": [HumanMessage(text)]}, config, context=context))["messages"]


async def seed(world: World) -> str:
    await world.say("user", "I prefer concise answers without preamble.")
    result = await world.rt.tools.call(
        world.p,
        "memory_write",
        {"type": "semantic", "content": PREFERENCE, "attribute": "answer_style",
         "source_kind": "user_statement", "evidence": "I prefer concise answers without preamble"},
    )  # fmt: skip
    assert result["ok"], result
    return result["record_id"]


async def search_triggers(world: World) -> list[str]:
    rows = await world.rt.store.db.fetchall("SELECT trigger FROM search_log ORDER BY id")
    return [r["trigger"] for r in rows]


async def test_record_turns_node_records_each_message_once_in_order(world: World) -> None:
    app = graph(world, ["Hello.", "Bye."], recall=False)
    await run(app, "good morning")
    await run(app, "good night")
    turns = [(t.role, t.content) for t in await world.rt.store.turns(T1)]
    assert turns == [
        ("user", "good morning"),
        ("assistant", "Hello."),
        ("user", "good night"),
        ("assistant", "Bye."),
    ]


async def test_recall_node_appends_a_marked_pair_that_is_never_recorded(world: World) -> None:
    record_id = await seed(world)
    messages = await run(graph(world, ["Short summary."]), RELEVANT)
    assert [m.type for m in messages] == ["human", "ai", "tool", "ai"]
    call, result = messages[1], messages[2]
    assert call.additional_kwargs[RECALL_MARK] and result.additional_kwargs[RECALL_MARK]
    assert result.tool_call_id == call.tool_calls[0]["id"]
    assert result.content.startswith("recalled memory: 1 result") and record_id[-12:] in result.content
    turns = [(t.role, t.content) for t in await world.rt.store.turns(T1)]
    assert turns == [("user", RELEVANT), ("assistant", "Short summary.")]
    assert await search_triggers(world) == ["auto"]


async def test_recall_node_skips_short_turns_and_logs_empty_searches(world: World) -> None:
    await seed(world)
    app = graph(world, ["Welcome.", "Notes."])
    short = await run(app, "ok thx")
    assert [m.type for m in short] == ["human", "ai"] and await search_triggers(world) == []
    (event,) = await world.rt.store.events(kind="trigger.skipped")
    assert event["payload"]["chars"] == 6 and event["payload"]["session_id"] == "t1"
    empty = await run(app, "Write the release notes for version two")
    assert [m.type for m in empty] == ["human", "ai", "human", "ai"]
    assert await search_triggers(world) == ["auto"]


async def test_end_session_node_ends_once(world: World) -> None:
    ended: list[str] = []

    async def on_end(session: Any) -> None:
        ended.append(session.id)

    world.rt.hooks.on_end = on_end
    g = StateGraph(RetoldMessagesState, context_schema=RetoldContext)
    g.add_node("record", record_turns_node(world.rt))
    g.add_node("end", end_session_node(world.rt))
    g.add_edge(START, "record")
    g.add_edge("record", "end")
    g.add_edge("end", END)
    app = g.compile()
    await run(app, "that is all, thanks")
    end = end_session_node(world.rt)
    await end({"messages": []}, {"configurable": {"thread_id": "t1"}})  # identity from the session row
    assert ended == ["t1"]
    session = await world.rt.store.get_session(T1)
    assert session is not None and session.ended_at is not None


async def test_identity_comes_from_context_or_configurable_never_missing(world: World) -> None:
    app = graph(world, ["Hi."], recall=False)
    with pytest.raises(InvalidArgumentError, match="RetoldContext"):
        await run(app, "hello", context=None)
    principal = run_principal(
        None, {"configurable": {"thread_id": "t9", "agent_id": "planner", "user_id": "u1"}}
    )
    assert principal == Principal("planner", "u1", "t9")
    assert run_principal(
        {"agent_id": "a", "user_id": "u", "project_id": "p/x"}, {"configurable": {"thread_id": "t"}}
    ) == (Principal("a", "u", "t", "p/x"))


def test_merge_recorded_appends_without_duplicates() -> None:
    assert merge_recorded(["a", "b"], ["b", "c", "a", "d"]) == ["a", "b", "c", "d"]
    assert merge_recorded(None, None) == []


def test_policy_is_appended_once_and_identically() -> None:
    policy = policy_text("hybrid")
    first = with_policy(SystemMessage("Be brief."), policy)
    assert first.content == f"Be brief.\n\n{policy}"
    assert with_policy(first, policy).content == first.content
    assert with_policy(None, policy).content == policy
    blocks = with_policy(SystemMessage([{"type": "text", "text": "Be brief."}]), policy)
    assert blocks.content[-1] == {"type": "text", "text": policy}


def test_turns_exclude_memory_tool_results_recall_and_summaries() -> None:
    assert turn_of(HumanMessage("  hi  ")) == ("user", "hi")
    assert turn_of(AIMessage("", tool_calls=[{"name": "x", "args": {}, "id": "1"}])) is None
    assert turn_of(ToolMessage("Sunny.", tool_call_id="1", name="weather")) == ("tool", "Sunny.")
    assert turn_of(ToolMessage(json.dumps({"ok": True}), tool_call_id="1", name="memory_write")) is None
    assert turn_of(ToolMessage("recalled", tool_call_id="1", additional_kwargs={RECALL_MARK: True})) is None
    assert turn_of(HumanMessage("summary", additional_kwargs={"lc_source": "summarization"})) is None


def test_search_context_is_the_last_user_and_assistant_turns() -> None:
    messages = [
        HumanMessage("one"),
        AIMessage("two"),
        HumanMessage("three"),
        AIMessage("four"),
        HumanMessage("five"),
    ]
    assert search_context(messages, 1000) == "assistant: four\nuser: five"
    assert search_context(messages, 10) == "user: five"
    assert search_context([], 100) is None


def test_the_nodes_import_no_agent_framework() -> None:
    code = (
        "import sys, retold.graph_nodes.nodes; "
        "print(any(m.split('.')[0] in ('langchain', 'deepagents') for m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


async def test_a_refused_host_search_appends_nothing_and_the_turn_goes_on(
    tmp_path: Any, caplog: pytest.LogCaptureFixture
) -> None:
    from retold.config import Config

    from .writepath import make_world

    w = await make_world(tmp_path / "k.sqlite", config=Config().override({"retrieval.trigger.auto_k": 50}))
    try:
        await seed(w)
        messages = await run(graph(w, ["Fine."]), RELEVANT)  # k=50 is over the tool's maximum of 20
        assert [m.type for m in messages] == ["human", "ai"]
        assert await search_triggers(w) == []
        assert "host-issued memory search refused (invalid_input)" in caplog.text
    finally:
        await w.rt.close()


async def test_a_checkpointed_parent_never_stores_the_search_or_its_records(world: World) -> None:
    """The search graph runs without a checkpointer even nested in one that has a saver.

    Otherwise every recall would copy the memories it read into the agent's checkpoints,
    where erasure cannot reach them.
    """
    await seed(world)
    saver = InMemorySaver()
    app = graph(world, ["Short summary."])
    app = app.copy(update={"checkpointer": saver})
    messages = await run(app, RELEVANT)
    assert messages[2].content.startswith("recalled memory: 1 result")
    namespaces = {ns for thread in saver.storage.values() for ns in thread}
    assert namespaces == {""}  # the parent's own checkpoints only, no subgraph namespace
    written = [key for key in saver.writes if key[1] != ""]
    assert written == []
