"""What a crew saves, the crew recalls by what it later asks, not by the saved wording (issue 47).

The packaged embedder and a real SQLite file: each persona of the blind labelled set
(``tests/data/store_facts_paraphrase.jsonl``: questions that share no content word with
their fact, and questions no fact answers) saves its ten facts through CrewAI's memory API,
then asks. The floors measured here (benchmarks/store_paraphrase.py prints the same figures
through the LangGraph store): the right fact first for at least 7 in 10 paraphrases, nothing
for at least 9 in 10 unrelated questions, and nothing of one user's for another.
"""

from __future__ import annotations

import json
import os
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

os.environ.setdefault("CREWAI_DISABLE_TELEMETRY", "true")
os.environ.setdefault("CREWAI_TRACING_ENABLED", "false")

from crewai import Agent, Crew, Task
from crewai.llms.base_llm import BaseLLM
from pydantic import Field

from retold import Scope
from retold.adapters.crewai_memory import RetoldCrewMemory, RuntimePortal

DATA = Path(__file__).parents[1] / "data" / "store_facts_paraphrase.jsonl"
PERSONAS = ["p1", "p2", "p3"]


def personas() -> dict[str, dict[str, list[dict[str, str]]]]:
    rows: dict[str, dict[str, list[dict[str, str]]]] = defaultdict(lambda: defaultdict(list))
    for line in DATA.read_text().splitlines():
        row = json.loads(line)
        rows[row["persona"]][row["kind"]].append(row)
    return rows


@pytest.fixture(scope="module")
def portal(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RuntimePortal]:
    with RuntimePortal.open(tmp_path_factory.mktemp("crew") / "memory.sqlite") as portal:
        rt = portal.runtime
        assert rt is not None
        portal.run(rt.warm())
        for user in PERSONAS:
            portal.run(rt.host.grant("planner", Scope("user", user), read=True, write=True))
        yield portal


def test_saved_facts_are_recalled_by_paraphrase_and_unrelated_questions_recall_nothing(
    portal: RuntimePortal,
) -> None:
    data = personas()
    first = asked = unrelated_answered = unrelated = 0
    misses = []
    for user in PERSONAS:
        memory = RetoldCrewMemory(portal.runtime, agent_id="planner", user_id=user)
        facts = {row["id"]: row["text"] for row in data[user]["fact"]}
        memory.remember_many(list(facts.values()))
        memory.drain_writes()
        for question in data[user]["question"]:
            found = memory.recall(question["text"])
            asked += 1
            if found and found[0].record.content == facts[question["fact"]]:
                first += 1
            else:
                misses.append((question["text"], [m.record.content for m in found[:1]]))
        for question in data[user]["unrelated"]:
            unrelated += 1
            unrelated_answered += bool(memory.recall(question["text"]))
    assert first / asked >= 0.7, (first, asked, misses)
    assert unrelated_answered / unrelated <= 0.10, (unrelated_answered, unrelated)
    # and another user of the same agent recalls none of it
    stranger = RetoldCrewMemory(portal.runtime, agent_id="planner", user_id="nobody")
    assert all(stranger.recall(q["text"]) == [] for q in data["p1"]["question"])


class ScriptedLLM(BaseLLM):
    """A CrewAI model answering prepared ReAct text, keeping the prompts it was given."""

    replies: list[str] = Field(default_factory=list)
    prompts: list[str] = Field(default_factory=list)

    def call(self, messages: Any, *args: Any, **kwargs: Any) -> str:
        texts = [messages] if isinstance(messages, str) else [str(m["content"]) for m in messages]
        self.prompts.append("\n".join(texts))
        return self.replies.pop(0)


def kickoff(memory: RetoldCrewMemory, task: str, replies: list[str]) -> ScriptedLLM:
    llm = ScriptedLLM(model="scripted", replies=replies)
    agent = Agent(role="Planner", goal="Help the user.", backstory="A careful planner.", llm=llm)
    work = Task(description=task, expected_output="A reply.", agent=agent)
    Crew(agents=[agent], tasks=[work], memory=memory).kickoff()
    return llm


def test_the_next_kickoff_starts_with_the_fact_its_task_paraphrases(portal: RuntimePortal) -> None:
    """The crew's own "Save to memory" in one kickoff; a task in other words in the next."""
    memory = RetoldCrewMemory(portal.runtime, agent_id="planner", user_id="p1")
    fact = "Is allergic to penicillin."
    save = "Thought: I should save this.\nAction: Save to memory\nAction Input: " + json.dumps(
        {"contents": [fact]}
    )
    kickoff(
        memory,
        "The user told me about a drug reaction; keep it.",
        [save, "Thought: Done.\nFinal Answer: Saved."],
    )
    llm = kickoff(
        memory,
        "Which antibiotics must I avoid prescribing for this user?",
        ["Thought: I know.\nFinal Answer: Avoid penicillin."],
    )
    recalled = [line for line in llm.prompts[0].splitlines() if line.startswith("> ")]
    assert any(fact in line for line in recalled), llm.prompts[0]
