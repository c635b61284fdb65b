"""A CrewAI crew with retold memory, offline: a scripted model stands in for a real one.

    python examples/crewai_memory.py [store.sqlite]

Three sessions of one planning agent: the user states a preference and the agent saves it
with the user's words as evidence; a later session recalls it (the host's search appends a
"recalled memory" block to the task, and the model searches too: hybrid mode); then the user
changes their mind and the new preference supersedes the old one. ``crew.kickoff()`` is sync,
so the runtime lives on a :class:`~retold.adapters.crewai.RuntimePortal` thread. For a real
model, pass ``crewai.LLM("...")`` to ``memory.wrap_llm`` and drop the fake embedder and judge.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import warnings
from pathlib import Path
from typing import Any

for _key, _value in {
    "CREWAI_DISABLE_TELEMETRY": "true",
    "CREWAI_TRACING_ENABLED": "false",
    "OTEL_SDK_DISABLED": "true",
}.items():
    os.environ.setdefault(_key, _value)  # before crewai is imported: nothing leaves the machine
# The adapter's step_callback is bound to one session, so a crew using it is not checkpointable.
warnings.filterwarnings("ignore", message=".*callbacks cannot be serialized")

from crewai import Agent, Crew, Task  # noqa: E402
from crewai.llms.base_llm import BaseLLM  # noqa: E402
from pydantic import Field  # noqa: E402

from retold import Principal, Scope  # noqa: E402
from retold.adapters.crewai import CrewAIMemory, RuntimePortal  # noqa: E402
from retold.testing import FakeEmbedder, FakeJudge  # noqa: E402


class ScriptedLLM(BaseLLM):
    """A stand-in CrewAI model that answers with prepared ReAct text, in order."""

    replies: list[str] = Field(default_factory=list)
    seen: list[str] = Field(default_factory=list)

    def call(self, messages: Any, *args: Any, **kwargs: Any) -> str:
        self.seen.append(
            messages if isinstance(messages, str) else "\n".join(str(m["content"]) for m in messages)
        )
        return self.replies.pop(0)


def action(tool: str, args: dict[str, Any]) -> str:
    return f"Thought: I should use {tool}.\nAction: {tool}\nAction Input: {json.dumps(args)}"


def final(text: str) -> str:
    return f"Thought: I can answer now.\nFinal Answer: {text}"


def save(content: str, quote: str) -> str:
    args = {"type": "semantic", "content": content, "attribute": "answer_style",
            "source_kind": "user_statement", "evidence": quote}  # fmt: skip
    return action("memory_write", args)


SESSIONS = [
    ("s1", "I prefer concise answers with bullet points.", [
        save("Aditya prefers concise answers with bullet points.",
             "I prefer concise answers with bullet points."),
        final("Noted: concise answers with bullet points."),
    ]),
    ("s2", "How should answers to Aditya be formatted: concise with bullet points?", [
        action("memory_search", {"queries": ["Aditya answer format preference"]}),
        final("Concise, with bullet points, as you asked earlier."),
    ]),
    ("s3", "Actually, I now prefer detailed answers with full paragraphs.", [
        save("Aditya prefers detailed answers with full paragraphs.",
             "I now prefer detailed answers with full paragraphs"),
        final("Understood: detailed answers from now on."),
    ]),
]  # fmt: skip


async def _turns(rt: Any, session_id: str) -> list[Any]:
    """The transcript of planner's session with u1 under this id."""
    return await rt.hooks.turns(Principal("planner", "u1", session_id))


def run_session(portal: RuntimePortal, session_id: str, request: str, replies: list[str]) -> None:
    """One crew run is one session: identity from the inputs, memory wired into the agent."""
    assert portal.runtime is not None
    inputs = {"user_id": "u1", "session_id": session_id, "request": request}
    memory = CrewAIMemory(portal.runtime, inputs, "Planner", mode="hybrid")
    llm = ScriptedLLM(model="scripted", replies=replies)
    agent = Agent(
        role="Planner",
        goal="Help Aditya plan his week.",
        backstory=f"A careful planning assistant.\n\n{memory.policy_text}",
        llm=memory.wrap_llm(llm),
        tools=memory.tools(),
        step_callback=memory.step_callback,
    )
    task = Task(description="{request}", expected_output="A short reply.", agent=agent)
    result = Crew(agents=[agent], tasks=[task]).kickoff(inputs=inputs)
    memory.end_session()

    print(f"\n== session {session_id}: {request}")
    first, then = llm.seen[0], llm.seen[1]
    if "recalled memory:" in first:  # the host's search, appended to the task prompt
        print("  " + first[first.index("recalled memory:") :].splitlines()[0])
    observed = then[len(first) :]  # what the model saw after its tool call
    print("  tool -> " + observed[observed.index("Observation:") :].splitlines()[0][:160])
    turns = portal.run(_turns(portal.runtime, session_id))
    print("  transcript: " + " | ".join(f"{t.role}: {t.content}" for t in turns))
    print(f"  answer: {result.raw}")


def main(argv: list[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else argv
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(args[0]) if args else Path(tmp) / "memory.sqlite"
        with RuntimePortal.open(path, embedder=FakeEmbedder(), judge=FakeJudge()) as portal:
            rt = portal.runtime
            assert rt is not None
            portal.run(rt.host.provision_user("u1", aliases=["Aditya"]))
            portal.run(rt.host.grant("planner", Scope("user", "u1"), read=True, write=True))
            for session_id, request, replies in SESSIONS:
                run_session(portal, session_id, request, replies)
            records = [
                r
                for r in portal.run(rt.ops.dump_scope(Scope("user", "u1"), all_statuses=True))
                if r.status in ("confirmed", "superseded")
            ]
            print("\n== memory")
            for record in records:
                print(f"  {record.status:>10}: {record.content}  (evidence: {record.evidence!r})")


if __name__ == "__main__":
    main()
