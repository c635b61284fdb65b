"""A Deep Agents agent with retold memory, offline: a scripted model stands in for a real one.

    python examples/deepagents_memory.py [store.sqlite]

Two sessions of one planning agent in hybrid mode: the user states a preference and the
agent saves it with the user's words as evidence; in the next session the host's search
appends the preference as "recalled memory" before the model answers, then the user
changes their mind and the new preference supersedes the old one. For a real model, pass
``init_chat_model("anthropic:...")`` instead of ``ScriptedChatModel`` and drop the fake
embedder and judge.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

os.environ.setdefault("LANGSMITH_TRACING", "false")

from langchain_core.messages import AIMessage, HumanMessage
from langgraph.checkpoint.memory import InMemorySaver

import retold
from retold import Scope
from retold.adapters.deepagents import create_memory_agent, end_session
from retold.adapters.offline import ScriptedChatModel, run_example
from retold.middleware import RetoldContext
from retold.testing import FakeEmbedder, FakeJudge

OLD, NEW = "Prefers concise answers without preamble.", "Prefers detailed answers with examples."


def write(content: str, quote: str) -> AIMessage:
    args = {"type": "semantic", "content": content, "attribute": "answer_style",
            "source_kind": "user_statement", "evidence": quote}  # fmt: skip
    return AIMessage("", tool_calls=[{"name": "memory_write", "args": args, "id": f"w{len(content)}"}])


async def main(path: Path) -> None:
    judge = FakeJudge({(OLD, NEW): "contradicts"})
    async with retold.open_runtime(path, embedder=FakeEmbedder(), judge=judge) as rt:
        await rt.host.provision_user("u1", aliases=["Aditya"])
        await rt.host.grant("planner", Scope("user", "u1"), read=True, write=True)
        model = ScriptedChatModel(
            responses=[
                write(OLD, "I prefer concise answers without preamble"),
                AIMessage("Noted: concise, no preamble."),
                AIMessage("Here is the summary, short and direct."),
                write(NEW, "I now prefer detailed answers with examples"),
                AIMessage("Understood: detailed, with examples."),
            ]
        )
        agent = create_memory_agent(rt, model, mode="hybrid", checkpointer=InMemorySaver())
        who = RetoldContext(agent_id="planner", user_id="u1")

        async def say(session: str, text: str) -> list[Any]:
            config = {"configurable": {"thread_id": session}}
            out = await agent.ainvoke({"messages": [HumanMessage(text)]}, config, context=who)
            return out["messages"]

        await say("s1", "I prefer concise answers without preamble.")
        await end_session(rt, {"configurable": {"thread_id": "s1"}})
        print("session s1: saved the preference")

        messages = await say("s2", "Summarise the meeting in concise answers without preamble")
        recalled = next(m for m in messages if m.type == "tool" and m.content.startswith("recalled memory"))
        print("session s2 recalled:", recalled.content.splitlines()[3])
        await say("s2", "Actually I now prefer detailed answers with examples.")
        await end_session(rt, {"configurable": {"thread_id": "s2"}})
        for record in await rt.ops.dump_scope(Scope("user", "u1"), all_statuses=True):
            print(f"record: {record.content} [{record.status}]")


if __name__ == "__main__":
    run_example(main)
