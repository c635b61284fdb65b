"""The ambient profile through CrewAI's ``wrap_llm`` (issue 21), offline, with a scripted CrewAI model.

Sessions of one crew under ``kickoff()`` (runtime on a :class:`RuntimePortal` thread): the user
states a standing preference and the agent writes it; every later model call carries the
profile at the end of CrewAI's system message, the same bytes from session to session; a
correction supersedes it, ``memory_forget`` and an erasure remove it. Then ``akickoff()``,
an agent without a system prompt (a system message is prepended) and
``activation.profile_in_prompt: false`` (the messages CrewAI built go out untouched).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from crewai import Agent, Crew, Task

import retold
from contract.crew_doubles import ScriptedLLM, keep_crewai_offline, react_action, react_final
from contract.profile_script import (
    FRENCH,
    FRENCH_QUOTE,
    FRENCH_TURN,
    GERMAN,
    GERMAN_QUOTE,
    GERMAN_TURN,
    write_args,
)
from retold.adapters.crewai import CrewAIMemory, RuntimePortal
from retold.config import Config
from retold.models import Principal, Scope
from retold.retrieve.profile import PROFILE_HEADER
from retold.testing import FakeEmbedder, FakeJudge

USER = Scope("user", "u1")
ROLE = "Planner"
P = Principal("planner", "u1")


@pytest.fixture(autouse=True)
def _offline(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    keep_crewai_offline(tmp_path, monkeypatch)


def build_crew(memory: CrewAIMemory, llm: ScriptedLLM, *, use_system_prompt: bool = True) -> Crew:
    agent = Agent(
        role=ROLE, goal="Help the user plan their week.",
        backstory=f"A careful planning assistant.\n\n{memory.policy_text}",
        llm=memory.wrap_llm(llm), tools=memory.tools(), step_callback=memory.step_callback,
        max_iter=5, use_system_prompt=use_system_prompt,
    )  # fmt: skip
    task = Task(description="{request}", expected_output="A short reply to the user.", agent=agent)
    return Crew(agents=[agent], tasks=[task])


def system_of(messages: list[dict[str, Any]]) -> str:
    (system,) = [m for m in messages if m.get("role") == "system"]
    assert messages[0] is not None and messages[0].get("role") == "system"
    assert isinstance(system["content"], str)
    return system["content"]


class Host:
    """``crew.kickoff()`` from plain sync code; the runtime lives on a RuntimePortal thread."""

    def __init__(self, path: Path, config: Config | None = None) -> None:
        self.portal = RuntimePortal.open(path, config, embedder=FakeEmbedder(), judge=FakeJudge())
        assert self.portal.runtime is not None
        self.rt: retold.Runtime = self.portal.runtime
        self.portal.run(self.rt.host.provision_user("u1", aliases=["Aditya"]))
        self.portal.run(self.rt.host.grant("planner", USER, read=True, write=True))

    def session(self, session_id: str, request: str, replies: list[str], **crew: Any) -> ScriptedLLM:
        llm = ScriptedLLM(model="scripted", replies=replies)
        inputs = {"user_id": "u1", "session_id": session_id, "request": request}
        memory = CrewAIMemory(self.rt, inputs, ROLE, mode="tool_only", agent_id="planner")
        build_crew(memory, llm, **crew).kickoff(inputs=inputs)
        assert memory.end_session() is True
        return llm

    def profile(self) -> str:
        return self.portal.run(self.rt.profile(P))

    def live_id(self, content: str) -> str:
        records = self.portal.run(self.rt.store.records_in_scope(USER, statuses=("confirmed", "provisional")))
        (record,) = [r for r in records if r.content == content]
        return record.id

    def close(self) -> None:
        self.portal.close()


@pytest.fixture
def host(tmp_path: Path) -> Iterator[Host]:
    h = Host(tmp_path / "memory.sqlite")
    try:
        yield h
    finally:
        h.close()


def test_the_profile_follows_the_conversation_through_wrap_llm(host: Host) -> None:
    s1 = host.session("s1", FRENCH_TURN, [
        react_action("memory_write", write_args(FRENCH, FRENCH_QUOTE)), react_final("D'accord."),
    ])  # fmt: skip
    french = host.profile()
    assert french.startswith(PROFILE_HEADER) and f"> {FRENCH}" in french
    base, with_french = (system_of(m) for m in s1.seen)
    assert PROFILE_HEADER not in base and "Planner" in base  # CrewAI's own system prompt, nothing added
    assert with_french == f"{base}\n\n{french}"  # appended after CrewAI's prompt, a blank line between

    s2 = host.session("s2", "What should I plan for Monday?", [react_final("Rien de spécial.")])
    assert system_of(s2.seen[0]) == with_french  # the same bytes in a later session

    s3 = host.session("s3", GERMAN_TURN, [
        react_action("memory_write", write_args(GERMAN, GERMAN_QUOTE)), react_final("Alles klar."),
    ])  # fmt: skip
    assert '"outcome": "superseded:' in "\n".join(str(m.get("content")) for m in s3.seen[1])
    german = host.profile()
    assert f"> {GERMAN}" in german and FRENCH not in german
    assert [system_of(m) for m in s3.seen] == [with_french, f"{base}\n\n{german}"]

    s4 = host.session("s4", "Please forget my language preference.", [
        react_action("memory_forget", {"id": host.live_id(GERMAN), "reason": "the user asked"}),
        react_final("Vergessen."),
    ])  # fmt: skip
    assert [system_of(m) for m in s4.seen] == [f"{base}\n\n{german}", base]
    assert host.profile() == ""


def test_an_erased_record_leaves_the_crew_prompt(host: Host) -> None:
    s1 = host.session("s1", FRENCH_TURN, [
        react_action("memory_write", write_args(FRENCH, FRENCH_QUOTE)), react_final("D'accord."),
    ])  # fmt: skip
    base, with_french = (system_of(m) for m in s1.seen)
    assert with_french != base
    host.portal.run(host.rt.ops.erase(record=host.live_id(FRENCH), reason="the user asked for erasure"))
    s2 = host.session("s2", "What should I plan for Monday?", [react_final("Nothing.")])
    assert system_of(s2.seen[0]) == base


def test_without_a_system_prompt_one_is_prepended(host: Host) -> None:
    host.session("s1", FRENCH_TURN, [
        react_action("memory_write", write_args(FRENCH, FRENCH_QUOTE)), react_final("D'accord."),
    ])  # fmt: skip
    llm = host.session(
        "s2", "What should I plan for Monday?", [react_final("Rien.")], use_system_prompt=False
    )
    (messages,) = llm.seen
    assert messages[0] == {"role": "system", "content": host.profile()}
    assert [m["role"] for m in messages[1:]] == ["user"]


def test_profile_in_prompt_false_sends_crewais_messages_untouched(tmp_path: Path) -> None:
    off = Host(tmp_path / "off.sqlite", Config().override({"activation.profile_in_prompt": False}))
    try:
        off.session("s1", FRENCH_TURN, [
            react_action("memory_write", write_args(FRENCH, FRENCH_QUOTE)), react_final("D'accord."),
        ])  # fmt: skip
        assert f"> {FRENCH}" in off.profile()  # ambient: only the injection is off
        llm = off.session("s2", "What should I plan for Monday?", [react_final("Rien.")])
        without = off.session("s3", "What should I plan for Monday?", [react_final("Rien.")],
                              use_system_prompt=False)  # fmt: skip
    finally:
        off.close()
    assert PROFILE_HEADER not in system_of(llm.seen[0])
    assert not any(PROFILE_HEADER in str(m.get("content")) for m in llm.seen[0])
    assert [m["role"] for m in without.seen[0]] == ["user"]


async def test_akickoff_adds_the_profile(tmp_path: Path) -> None:
    rt = await retold.open_runtime(tmp_path / "memory.sqlite", embedder=FakeEmbedder(), judge=FakeJudge())
    try:
        await rt.host.provision_user("u1", aliases=["Aditya"])
        await rt.host.grant("planner", USER, read=True, write=True)
        llm = ScriptedLLM(model="scripted", replies=[
            react_action("memory_write", write_args(FRENCH, FRENCH_QUOTE)), react_final("D'accord."),
        ])  # fmt: skip
        inputs = {"user_id": "u1", "session_id": "s1", "request": FRENCH_TURN}
        memory = CrewAIMemory(rt, inputs, ROLE, mode="auto", agent_id="planner")
        await build_crew(memory, llm).akickoff(inputs=inputs)
        await memory.aend_session()
        base, with_french = (system_of(m) for m in llm.seen)
        profile = await rt.profile(P)
        assert f"> {FRENCH}" in profile and with_french == f"{base}\n\n{profile}"
    finally:
        await rt.close()
