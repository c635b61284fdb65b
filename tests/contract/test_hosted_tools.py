"""Issue 15 item 1 through langchain's own converters: what each hosted chat model would send.

An agent runs with :class:`RetoldMiddleware` and a scripted model that keeps the tools the
middleware hands it for the model call (narrowed to the run's principal). Those tools are
then bound to ``ChatAnthropic``, ``ChatOpenAI`` (``strict=True``, with the middleware's
``openai_strict`` dialect) and ``ChatGoogleGenerativeAI`` with dummy keys; nothing is
invoked. Each bound payload (``kwargs["tools"]``) must pass the provider's documented
rules (:mod:`retold.tools.portability`), for every principal shape: personal only, with a
project, with a host-offered private target, and read-only (no ``memory_write``).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_anthropic import ChatAnthropic
from langchain_anthropic.chat_models import convert_to_anthropic_tool
from langchain_core.messages import HumanMessage
from langchain_google_genai import ChatGoogleGenerativeAI

# The converter ChatGoogleGenerativeAI applies to bound tools when it builds a request.
from langchain_google_genai._function_utils import convert_to_genai_function_declarations
from langchain_openai import ChatOpenAI
from pydantic import Field

from retold.middleware import RetoldContext, RetoldMiddleware
from retold.models import Principal, Scope
from retold.tools import TOOL_NAMES, portability, schemas

from .scripted import Memory, ScriptedChatModel, say
from .test_examples import run_example

PROJECT = Scope("project", "p1")


class Recording(ScriptedChatModel):
    """Also keeps the tool objects themselves, as the middleware passed them for the call."""

    raw: list[list[Any]] = Field(default_factory=list)

    def bind_tools(self, tools: Any, **kwargs: Any) -> Recording:
        self.raw.append(list(tools))
        super().bind_tools(tools, **kwargs)
        return self


async def personal(m: Memory) -> RetoldContext:
    return RetoldContext(agent_id="planner", user_id="u1")


async def with_project(m: Memory) -> RetoldContext:
    await m.rt.host.grant("planner", PROJECT, read=True, write=True)
    return RetoldContext(agent_id="planner", user_id="u1", project_id="p1")


async def private_offer(m: Memory) -> RetoldContext:
    m.rt.tools.offer_target("private", lambda p: p.private_scope)
    return RetoldContext(agent_id="planner", user_id="u1")


async def read_only(m: Memory) -> RetoldContext:
    await m.rt.host.grant("reader", Scope("user", "u1"), read=True, write=False)
    return RetoldContext(agent_id="reader", user_id="u1")


SHAPES: dict[str, Callable[[Memory], Awaitable[RetoldContext]]] = {
    "personal": personal, "project": with_project, "private": private_offer, "read_only": read_only,
}  # fmt: skip


async def agent_tools(m: Memory, shape: str, dialect: str = "portable") -> tuple[list[Any], Principal]:
    """The memory tools the middleware gives the model for one call of this principal."""
    context = await SHAPES[shape](m)
    model = Recording(script=[say("Hello.")])
    agent = create_agent(model, middleware=[RetoldMiddleware(m.rt, schema_dialect=dialect)],
                         context_schema=RetoldContext)  # fmt: skip
    await agent.ainvoke({"messages": [HumanMessage("hello there")]}, {"configurable": {"thread_id": "s1"}},
                        context=context)  # fmt: skip
    (tools,) = model.raw
    names = [t.name for t in tools]
    assert names == [n for n in TOOL_NAMES if shape != "read_only" or n != "memory_write"], names
    return tools, Principal(context.agent_id, context.user_id, "s1", context.project_id)


def published(m: Memory, principal: Principal) -> dict[str, dict[str, Any]]:
    return {t["name"]: t["input_schema"] for t in m.rt.tools.tool_schemas(principal)}


@pytest.mark.parametrize("shape", SHAPES)
async def test_chat_anthropic_sends_portable_input_schemas(memory: Memory, shape: str) -> None:
    tools, principal = await agent_tools(memory, shape)
    bound: Any = ChatAnthropic(model="claude-sonnet-4-5", api_key="x").bind_tools(tools)
    sent = bound.kwargs["tools"]
    assert sent == [convert_to_anthropic_tool(t) for t in tools]
    expected = published(memory, principal)
    for tool in sent:
        assert set(tool) == {"name", "description", "input_schema"}
        assert portability.anthropic_problems(tool["input_schema"]) == [], tool["name"]
        assert portability.portable_problems(tool["input_schema"]) == [], tool["name"]
        assert tool["input_schema"] == expected[tool["name"]]  # sent as retold publishes it
        assert tool["description"] == schemas.DESCRIPTIONS[tool["name"]]


@pytest.mark.parametrize("shape", SHAPES)
async def test_chat_openai_strict_sends_strict_schemas_that_keep_optional_fields_optional(
    memory: Memory, shape: str
) -> None:
    tools, principal = await agent_tools(memory, shape, dialect="openai_strict")
    bound: Any = ChatOpenAI(model="gpt-4.1", api_key="x").bind_tools(tools, strict=True)
    sent = bound.kwargs["tools"]
    portable = published(memory, principal)
    for tool in sent:
        function = tool["function"]
        assert tool["type"] == "function" and function["strict"] is True
        assert portability.openai_strict_problems(function["parameters"]) == [], function["name"]
        assert portability.strict_keeps_meaning(portable[function["name"]], function["parameters"]) == []
        assert function["parameters"] == schemas.openai_strict(portable[function["name"]])


@pytest.mark.parametrize("shape", SHAPES)
async def test_chat_google_declarations_keep_every_field_enum_and_requirement(
    memory: Memory, shape: str
) -> None:
    tools, principal = await agent_tools(memory, shape)
    bound: Any = ChatGoogleGenerativeAI(model="gemini-2.5-flash", api_key="x").bind_tools(tools)
    (declared,) = convert_to_genai_function_declarations(bound.kwargs["tools"])
    portable = published(memory, principal)
    assert [d.name for d in declared.function_declarations or []] == list(portable)
    for declaration in declared.function_declarations or []:
        schema, params = portable[declaration.name or ""], declaration.parameters
        assert params is not None and params.type is not None and params.type.value == "OBJECT"
        assert portability.gemini_problems(schema) == []
        assert set(params.properties or {}) == set(schema["properties"])
        assert sorted(params.required or []) == sorted(schema["required"])
        for name, prop in schema["properties"].items():
            if "enum" in prop:
                assert (params.properties or {})[name].enum == prop["enum"], (declaration.name, name)
        if declaration.name == "memory_write":
            entity = (params.properties or {})["entities"].items
            assert entity is not None and sorted(entity.required or []) == ["kind", "role"]
            assert set(entity.properties or {}) == {"kind", "name", "role", "entity_id"}


async def test_the_converted_revise_tool_offers_every_action(memory: Memory) -> None:
    tools, _ = await agent_tools(memory, "personal")
    revise = next(t for t in tools if t.name == "memory_revise")
    anthropic = convert_to_anthropic_tool(revise)["input_schema"]
    assert anthropic["properties"]["action"]["enum"] == list(schemas.REVISE_ACTIONS)
    assert anthropic["required"] == ["action", "reason"]


def test_hosted_tools_example(tmp_path: Path) -> None:
    assert run_example("hosted_tools.py", tmp_path) == [
        "anthropic: 5 tools, every input_schema portable",
        "anthropic: memory_revise actions confirm, supersede, expire, merge_entities",
        "openai strict: 5 tools, every schema strict and nullable where optional",
        "openai strict: memory_search requires queries, types, entities, since, until, k, include_history, "
        "explain",
        "per principal: personal, current_project offered to memory_write",
    ]
