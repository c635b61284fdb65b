"""retold's memory tools bound to hosted chat models, offline: what Claude and GPT would be sent.

    python examples/hosted_tools.py [store.sqlite]

Builds the agent's tool list from retold (the middleware's LangChain tools) and binds it
to ``ChatAnthropic`` and to ``ChatOpenAI`` with strict function calling, exactly as an
agent would before its first model call, then checks every tool payload the model
would receive against the provider's documented schema rules. Dummy API keys, no
network: ``bind_tools`` only, never ``invoke``. For OpenAI's ``strict=True`` the
middleware publishes its ``openai_strict`` dialect (every field required, optional ones
nullable); the handlers read a null optional field as absent. See docs/tools.md.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

os.environ.setdefault("LANGSMITH_TRACING", "false")

from langchain_anthropic import ChatAnthropic
from langchain_openai import ChatOpenAI

import retold
from retold import Principal, Scope
from retold.adapters.offline import run_example
from retold.middleware import RetoldMiddleware
from retold.testing import FakeEmbedder
from retold.tools import portability


def check(problems: list[str], what: str) -> None:
    """Stop the example with the provider's complaint if a payload would be refused."""
    if problems:
        raise SystemExit(f"{what}: {problems}")


async def main(path: Path) -> None:
    async with retold.open_runtime(path, embedder=FakeEmbedder()) as rt:
        await rt.host.provision_user("u1", aliases=["Aditya"])
        await rt.host.grant("planner", Scope("user", "u1"), read=True, write=True)
        await rt.host.grant("planner", Scope("project", "p1"), read=True, write=True)
        principal = Principal("planner", "u1", "s1", project_id="p1")
        narrowed = await rt.tools.atool_schemas(principal)  # as the middleware narrows per call
        portable = {t["name"]: t["input_schema"] for t in narrowed}

        # Claude: the tools as RetoldMiddleware registers them with create_agent.
        claude = ChatAnthropic(model="claude-sonnet-4-5", api_key="dummy-key")
        bound: Any = claude.bind_tools(RetoldMiddleware(rt).memory_tools)
        sent: list[dict[str, Any]] = bound.kwargs["tools"]
        for tool in sent:
            check(portability.portable_problems(tool["input_schema"]), f"anthropic {tool['name']}")
        print(f"anthropic: {len(sent)} tools, every input_schema portable")
        revise = next(t for t in sent if t["name"] == "memory_revise")
        print(
            "anthropic: memory_revise actions",
            ", ".join(revise["input_schema"]["properties"]["action"]["enum"]),
        )

        # GPT with strict function calling: the middleware's openai_strict dialect.
        gpt = ChatOpenAI(model="gpt-4.1", api_key="dummy-key")
        strict_tools = RetoldMiddleware(rt, schema_dialect="openai_strict").memory_tools
        bound = gpt.bind_tools(strict_tools, strict=True)
        functions = [t["function"] for t in bound.kwargs["tools"]]
        for function in functions:
            check(portability.openai_strict_problems(function["parameters"]), f"openai {function['name']}")
            check(portability.strict_keeps_meaning(portable[function["name"]], function["parameters"]),
                  f"openai {function['name']}")  # fmt: skip
        print(f"openai strict: {len(functions)} tools, every schema strict and nullable where optional")
        search = next(f for f in functions if f["name"] == "memory_search")
        print("openai strict: memory_search requires", ", ".join(search["parameters"]["required"]))

        # Per principal, as the middleware narrows before each model call: the write targets.
        write = next(t for t in narrowed if t["name"] == "memory_write")
        check(portability.portable_problems(write["input_schema"]), "memory_write")
        targets = write["input_schema"]["properties"]["write_target"]["enum"]
        print("per principal:", ", ".join(targets), "offered to memory_write")


if __name__ == "__main__":
    run_example(main)
