"""Issue 15 item 9 through the LangGraph surfaces: what the model is shown parses to the true records.

A provisional ``agent_inference`` whose content imitates a second, confirmed memory is written;
then the model's own view (the messages a scripted chat model receives) is read back with the
strict parser of tests/unit/rendered.py: the recalled block, the model's ``memory_search``
result and its ``memory_get`` result each show that one record with its real labels.
"""

from __future__ import annotations

import json
from typing import Any

from langchain.agents import create_agent
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph
from unit.rendered import FORGED, parse  # tests/ is on sys.path (rootdir-relative packages)

from retold.adapters.common import RECALL_HEADER, RECALL_MARK
from retold.graph_nodes.nodes import RetoldContext, RetoldMessagesState, recall_node, record_turns_node
from retold.models import Principal

from .scripted import Memory, ScriptedChatModel, call, say

ASK = "How do I handle bank transfers for the user?"
CTX = RetoldContext(agent_id="planner", user_id="u1")


async def write_forged(m: Memory) -> str:
    p = await m.rt.hooks.on_session_start(Principal("planner", "u1", "s0"))
    made = await m.rt.tools.call(
        p, "memory_write", {"type": "semantic", "content": FORGED, "attribute": "payments"}
    )
    assert made["ok"] and made["status"] == "provisional", made
    return made["record_id"]


def shown(text: str, header: str) -> list[tuple[str, str, str, str]]:
    rendered = parse(text)
    assert rendered.header == header
    return [(b.short_id, b.status, b.source_kind, b.content) for b in rendered.blocks]


async def test_middleware_recall_search_and_get_show_one_record_with_its_labels(memory: Memory) -> None:
    from retold.middleware import RetoldMiddleware

    record_id = await write_forged(memory)
    model = ScriptedChatModel(
        script=[
            call("memory_search", {"queries": ["bank transfers"]}, "c1"),
            call("memory_get", {"ids": [record_id[-12:]]}, "c2"),
            say("I will ask before any transfer."),
        ]
    )
    agent = create_agent(
        model, tools=[], middleware=[RetoldMiddleware(memory.rt, "hybrid")], context_schema=RetoldContext,
        checkpointer=InMemorySaver(),
    )  # fmt: skip
    await agent.ainvoke({"messages": [HumanMessage(ASK)]}, {"configurable": {"thread_id": "s1"}}, context=CTX)
    seen = [m for m in model.calls[-1] if isinstance(m, ToolMessage)]
    recalled, searched, got = seen
    assert recalled.additional_kwargs.get(RECALL_MARK) and (searched.name, got.name) == (
        "memory_search",
        "memory_get",
    )
    expected = [(record_id[-12:], "provisional", "agent_inference", FORGED)]
    assert shown(recalled.text, RECALL_HEADER) == expected
    assert shown(searched.text, "memory_search") == expected
    # memory_get is JSON on one line: the content stays inside its string.
    assert got.text.splitlines() == [got.text]
    (record,) = json.loads(got.text)["records"]
    assert (record["status"], record["source_kind"], record["content"]) == (
        "provisional",
        "agent_inference",
        FORGED,
    )


async def test_recall_node_appends_one_record_with_its_labels(memory: Memory) -> None:
    record_id = await write_forged(memory)
    shown_to_model: list[Any] = []

    async def model(state: dict[str, Any]) -> dict[str, Any]:
        shown_to_model.extend(state["messages"])
        return {"messages": [AIMessage("I will ask first.")]}

    g = StateGraph(RetoldMessagesState, context_schema=RetoldContext)
    g.add_node("record", record_turns_node(memory.rt))
    g.add_node("recall", recall_node(memory.rt))
    g.add_node("model", model)
    g.add_edge(START, "record")
    g.add_edge("record", "recall")
    g.add_edge("recall", "model")
    g.add_edge("model", END)
    app = g.compile(checkpointer=InMemorySaver())
    await app.ainvoke({"messages": [HumanMessage(ASK)]}, {"configurable": {"thread_id": "s1"}}, context=CTX)
    (recalled,) = [m for m in shown_to_model if isinstance(m, ToolMessage)]
    assert shown(recalled.text, RECALL_HEADER) == [
        (record_id[-12:], "provisional", "agent_inference", FORGED)
    ]
