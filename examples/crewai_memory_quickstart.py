"""CrewAI's own memory on retold, offline: ``Crew(memory=RetoldCrewMemory(...))``.

    python examples/crewai_memory_quickstart.py [store.sqlite]

The first kickoff's agent saves a preference with CrewAI's built-in "Save to memory" tool
(retold's write path: dedup, provenance, audit); the second kickoff's task starts with it
recalled by retold's search graph, as retold's quoted block; the same agent working for another
user recalls nothing. A scripted model stands in for a real one and ``FakeEmbedder`` for the
packaged embedding model, so this runs in seconds with no network. For a real crew, drop them:
``Agent(llm="openai/gpt-4o-mini")`` and ``RuntimePortal.open(path)``.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

for _key, _value in {
    "CREWAI_DISABLE_TELEMETRY": "true",
    "CREWAI_TRACING_ENABLED": "false",
    "OTEL_SDK_DISABLED": "true",
}.items():
    os.environ.setdefault(_key, _value)  # before crewai is imported: nothing leaves the machine

from crewai import Agent, Crew, Task  # noqa: E402
from crewai.llms.base_llm import BaseLLM  # noqa: E402
from pydantic import Field  # noqa: E402

from retold import Scope  # noqa: E402
from retold.adapters.crewai_memory import RetoldCrewMemory, RuntimePortal  # noqa: E402
from retold.testing import FakeEmbedder, FakeJudge  # noqa: E402

PREFERENCE = "Aditya prefers concise answers with bullet points."


class ScriptedLLM(BaseLLM):
    """A stand-in CrewAI model that answers with prepared ReAct text and keeps the prompts."""

    replies: list[str] = Field(default_factory=list)
    prompts: list[str] = Field(default_factory=list)

    def call(self, messages: Any, *args: Any, **kwargs: Any) -> str:
        texts = [messages] if isinstance(messages, str) else [str(m["content"]) for m in messages]
        self.prompts.append("\n".join(texts))
        return self.replies.pop(0)


def kickoff(memory: RetoldCrewMemory, task: str, replies: list[str]) -> tuple[str, ScriptedLLM]:
    llm = ScriptedLLM(model="scripted", replies=replies)
    agent = Agent(role="Planner", goal="Help the user.", backstory="A careful planner.", llm=llm)
    crew = Crew(agents=[agent], tasks=[Task(description=task, expected_output="A reply.", agent=agent)],
                memory=memory)  # fmt: skip
    return crew.kickoff().raw, llm


def main(path: str) -> None:
    with RuntimePortal.open(path, embedder=FakeEmbedder(), judge=FakeJudge()) as portal:
        rt = portal.runtime
        assert rt is not None
        for user in ("u1", "u2"):  # the host decides what the planner may read and write
            portal.run(rt.host.grant("planner", Scope("user", user), read=True, write=True))
        memory = RetoldCrewMemory(rt, agent_id="planner", user_id="u1")

        save = "Thought: I should save this.\nAction: Save to memory\nAction Input: " + json.dumps(
            {"contents": [PREFERENCE]}
        )
        answer, _ = kickoff(memory, "Remember how Aditya likes answers formatted.",
                            [save, "Thought: Done.\nFinal Answer: Saved."])  # fmt: skip
        print(f"kickoff 1: {answer}")

        question = "How should answers to Aditya be formatted: concise with bullet points?"
        answer, llm = kickoff(
            memory, question, ["Thought: I know.\nFinal Answer: Concise, with bullet points."]
        )
        recalled = [line for line in llm.prompts[0].splitlines() if line.startswith("> ")]
        print(f"kickoff 2 recalled: {'; '.join(recalled)}")
        print(f"kickoff 2: {answer}")

        stranger = RetoldCrewMemory(rt, agent_id="planner", user_id="u2")
        found = stranger.recall("How should answers to Aditya be formatted?")
        print(f"u2 recalled: {'; '.join(m.record.content for m in found) or 'nothing'}")


if __name__ == "__main__":
    if len(sys.argv) > 1:
        main(sys.argv[1])
    else:
        with tempfile.TemporaryDirectory() as tmp:
            main(str(Path(tmp) / "memory.sqlite"))
