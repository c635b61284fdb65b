"""Your own LangGraph ``StateGraph`` with retold's drop-in nodes, offline.

    python examples/custom_graph_memory.py [store.sqlite]

The graph: record the new turns → recall (one host search per user turn) → the model →
run its tool calls (retold's memory tools) and loop, or record the reply and finish. The
model here is scripted; swap in any chat model that supports ``bind_tools``. Identity comes
from the run: ``context=RetoldContext(...)`` and the ``thread_id`` as the session id.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

os.environ.setdefault("LANGSMITH_TRACING", "false")

from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph
from langgraph.prebuilt import ToolNode

import retold
from retold import Principal, Scope
from retold.adapters.common import memory_tools
from retold.adapters.offline import ScriptedChatModel, run_example
from retold.graph_nodes.nodes import (
    RetoldContext,
    RetoldMessagesState,
    end_session_node,
    recall_node,
    record_turns_node,
)
from retold.policy.prompt import policy_text
from retold.testing import FakeEmbedder, FakeJudge


def build(rt: retold.Runtime, model: BaseChatModel) -> Any:
    tools = memory_tools(rt, "hybrid")
    bound = model.bind_tools(tools)
    system = SystemMessage("You are a planning assistant.\n\n" + policy_text("hybrid"))

    async def agent(state: dict[str, Any]) -> dict[str, Any]:
        return {"messages": [await bound.ainvoke([system, *state["messages"]])]}

    def route(state: dict[str, Any]) -> str:
        return "tools" if state["messages"][-1].tool_calls else "record_reply"

    graph = StateGraph(RetoldMessagesState, context_schema=RetoldContext)
    graph.add_node("record", record_turns_node(rt))
    graph.add_node("recall", recall_node(rt))
    graph.add_node("agent", agent)
    graph.add_node("tools", ToolNode(tools))
    graph.add_node("record_reply", record_turns_node(rt))
    graph.add_edge(START, "record")
    graph.add_edge("record", "recall")
    graph.add_edge("recall", "agent")
    graph.add_conditional_edges("agent", route, ["tools", "record_reply"])
    graph.add_edge("tools", "record")
    graph.add_edge("record_reply", END)
    return graph.compile(checkpointer=InMemorySaver())


async def main(path: Path) -> None:
    async with retold.open_runtime(path, embedder=FakeEmbedder(), judge=FakeJudge()) as rt:
        await rt.host.provision_user("u1", aliases=["Aditya"])
        await rt.host.grant("planner", Scope("user", "u1"), read=True, write=True)
        args = {"type": "semantic", "content": "Prefers concise answers without preamble.",
                "attribute": "answer_style", "source_kind": "user_statement",
                "evidence": "I prefer concise answers without preamble"}  # fmt: skip
        model = ScriptedChatModel(
            responses=[
                AIMessage("", tool_calls=[{"name": "memory_write", "args": args, "id": "w1"}]),
                AIMessage("Noted."),
                AIMessage("Here is the summary, short and direct."),
            ]
        )
        app = build(rt, model)
        who = RetoldContext(agent_id="planner", user_id="u1")
        end = end_session_node(rt)
        for session, text in [
            ("s1", "I prefer concise answers without preamble."),
            ("s2", "Summarise the meeting in concise answers without preamble"),
        ]:
            config = {"configurable": {"thread_id": session}}
            out = await app.ainvoke({"messages": [HumanMessage(text)]}, config, context=who)
            recalled = [
                m for m in out["messages"] if m.type == "tool" and m.text.startswith("recalled memory")
            ]
            print(f"{session}: reply {out['messages'][-1].text!r}; recalled blocks: {len(recalled)}")
            await end({"messages": out["messages"]}, config)
        for turn in await rt.hooks.turns(Principal("planner", "u1", "s2")):
            print(f"s2 turn {turn.turn} {turn.role}: {turn.content}")


if __name__ == "__main__":
    run_example(main)
