"""Offline chat models and a runtime for the contract suite: scripted replies, recorded requests."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import tool
from langchain_core.utils.function_calling import convert_to_openai_tool
from pydantic import Field

import retold
from retold.config import Config
from retold.models import Principal, Scope
from retold.testing import FakeClock, FakeEmbedder, FakeExtractor, FakeJudge, FakeReviewer

USER = Scope("user", "u1")
PREFERENCE = "Prefers concise answers without preamble."
CONFIG = {"configurable": {"thread_id": "s1"}}


class ScriptedChatModel(BaseChatModel):
    """Replays ``script`` in order and records what each call was shown.

    No langchain_core fake binds tools; this one records the bound tool schemas (as the
    provider would receive them) and fails loudly when the script runs out.
    """

    script: list[AIMessage]
    calls: list[list[BaseMessage]] = Field(default_factory=list)
    bound: list[list[dict[str, Any]]] = Field(default_factory=list)
    position: int = 0

    @property
    def _llm_type(self) -> str:
        return "retold-scripted"

    def bind_tools(self, tools: Any, **kwargs: Any) -> ScriptedChatModel:
        self.bound.append([convert_to_openai_tool(t)["function"] for t in tools])
        return self

    def _generate(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kw: Any
    ) -> ChatResult:
        self.calls.append(list(messages))
        if self.position >= len(self.script):
            raise AssertionError(f"the script has {len(self.script)} replies; call {self.position + 1} came")
        reply = self.script[self.position].model_copy()
        self.position += 1
        return ChatResult(generations=[ChatGeneration(message=reply)])

    @property
    def tool_names(self) -> list[list[str]]:
        return [[t["name"] for t in tools] for tools in self.bound]


@tool
def weather(city: str) -> str:
    """Look up today's weather for a city."""
    return f"Sunny in {city}, 21 degrees."


def call(name: str, args: dict[str, Any], call_id: str) -> AIMessage:
    """A model reply that is one tool call."""
    return AIMessage(
        content="", tool_calls=[{"name": name, "args": args, "id": call_id, "type": "tool_call"}]
    )


def say(text: str) -> AIMessage:
    return AIMessage(content=text)


@dataclass
class Memory:
    rt: retold.Runtime
    clock: FakeClock
    judge: FakeJudge

    async def turns(self, session_id: str = "s1") -> list[tuple[str, str]]:
        return [
            (t.role, t.content)
            for t in await self.rt.store.turns(await self.rt.store.resolve_session(session_id))
        ]

    async def search_logs(self) -> list[dict[str, Any]]:
        rows = await self.rt.store.db.fetchall("SELECT * FROM search_log ORDER BY id")
        return [dict(r) for r in rows]


async def open_memory(path: Path | str, config: Config | None = None, *, extractor: Any = None) -> Memory:
    """A runtime on fakes with user u1 ("Aditya") provisioned and planner granted read-write."""
    clock = FakeClock()
    judge = FakeJudge()
    models: dict[str, Any] = {"extractor": extractor, "reviewer": FakeReviewer()} if extractor else {}
    rt = await retold.open_runtime(path, config, embedder=FakeEmbedder(), judge=judge, clock=clock, **models)
    await rt.host.provision_user("u1", aliases=["Aditya"])
    await rt.host.grant("planner", USER, read=True, write=True)
    return Memory(rt, clock, judge)


async def seed(
    m: Memory,
    content: str = PREFERENCE,
    attribute: str = "answer_style",
    quote: str = "I prefer concise answers without preamble",
) -> str:
    """A confirmed preference written in an earlier session s0, outside any agent."""
    p = await m.rt.hooks.on_session_start(Principal("planner", "u1", "s0"))
    p = await m.rt.hooks.on_turn(p, "user", quote + ".")
    result = await m.rt.tools.call(
        p,
        "memory_write",
        {"type": "semantic", "content": content, "attribute": attribute, "source_kind": "user_statement",
         "evidence": quote},
    )  # fmt: skip
    assert result["ok"] and result["status"] == "confirmed", result
    return result["record_id"]


__all__ = [
    "CONFIG", "PREFERENCE", "USER", "FakeExtractor", "Memory", "ScriptedChatModel", "call", "open_memory",
    "say", "seed", "weather",
]  # fmt: skip
