"""The CrewAI adapter on the contract conversation, offline, with a scripted CrewAI model.

A preference is stated, the agent writes it with the user's words as evidence, a later session
recalls it, and a contradiction supersedes it. The conversation runs under ``crew.kickoff()``
(runtime owned by a :class:`RuntimePortal` thread) and ``await crew.akickoff()`` (runtime opened
on the test's own loop). Nothing reaches the network: telemetry and tracing are off
(tests/conftest.py) and HOME points at a temporary directory for every test here.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from collections.abc import Awaitable, Iterator
from pathlib import Path
from typing import Any

import pytest
from crewai import Agent, Crew, Task
from crewai.llms.base_llm import BaseLLM
from crewai.tools import BaseTool
from pydantic import BaseModel, Field
from unit.rendered import FORGED, parse  # tests/ is on sys.path (rootdir-relative packages)

import retold
from contract.crew_doubles import (  # tests/ is on sys.path
    ScriptedLLM,
    keep_crewai_offline,
    react_action,
    react_final,
)
from retold.adapters.common import RECALL_HEADER
from retold.adapters.crewai import CrewAIMemory, RuntimePortal, agent_id_from_role, principal_from_inputs
from retold.config import Config
from retold.errors import InvalidArgumentError
from retold.models import Principal, Record, Scope
from retold.policy.prompt import policy_text
from retold.testing import FakeEmbedder, FakeJudge

ROOT = Path(__file__).resolve().parents[2]
USER = Scope("user", "u1")
ROLE = "Planner"

PREFERENCE = "I prefer concise answers with bullet points."
CHANGED = "Actually, I now prefer detailed answers with full paragraphs."
QUESTION = "How should you format the weekly status report for me?"
# shares words with the stored preference, as the fake embedder needs for the gate to admit it
RECALL_TASK = "How should answers to Aditya be formatted: concise with bullet points?"


@pytest.fixture(autouse=True)
def _offline(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    keep_crewai_offline(tmp_path, monkeypatch)


# --- a scripted CrewAI model and a plain tool ------------------------------------------------


async def turns_of(rt: retold.Runtime, session_id: str) -> list[Any]:
    """The transcript of the one session with this id (tests use unique ids)."""
    return await rt.store.turns(await rt.store.resolve_session(session_id))


def native_call(tool: str, args: dict[str, Any], call_id: str) -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": tool, "arguments": json.dumps(args)}}


class CalendarArgs(BaseModel):
    day: str = Field(description="the day to look up")


class CalendarTool(BaseTool):
    """A host tool that is not retold's: its results are transcript turns."""

    name: str = "calendar"
    description: str = "Look up the user's calendar for a day."
    args_schema: type[BaseModel] = CalendarArgs

    def _run(self, day: str) -> str:
        return f"{day}: team sync at 10:00"


def write_args(content: str, quote: str) -> dict[str, Any]:
    return {
        "type": "semantic",
        "content": content,
        "attribute": "answer_style",
        "source_kind": "user_statement",
        "evidence": quote,
    }


def build_crew(memory: CrewAIMemory, llm: ScriptedLLM, extra_tools: list[BaseTool] | None = None) -> Crew:
    agent = Agent(
        role=ROLE,
        goal="Help the user plan their week.",
        backstory=f"A careful planning assistant.\n\n{memory.policy_text}",
        llm=memory.wrap_llm(llm),
        tools=[*memory.tools(), *(extra_tools or [])],
        step_callback=memory.step_callback,
        max_iter=5,
    )
    task = Task(description="{request}", expected_output="A short reply to the user.", agent=agent)
    return Crew(agents=[agent], tasks=[task])


# --- two hosts: sync (portal thread) and async (the test's loop) -----------------------------


class SyncHost:
    """``crew.kickoff()`` from plain sync code; the runtime lives on a RuntimePortal thread."""

    def __init__(self, path: Path) -> None:
        self.portal = RuntimePortal.open(path, embedder=FakeEmbedder(), judge=FakeJudge())
        assert self.portal.runtime is not None
        self.rt = self.portal.runtime
        self.run(self.rt.host.provision_user("u1", aliases=["Aditya"]))
        self.run(self.rt.host.grant("planner", USER, read=True, write=True))

    def run(self, awaitable: Awaitable[Any]) -> Any:
        return self.portal.run(awaitable)

    def session(self, session_id: str, request: str, llm: ScriptedLLM, mode: str = "tool_only",
                extra_tools: list[BaseTool] | None = None) -> CrewAIMemory:  # fmt: skip
        inputs = {"user_id": "u1", "session_id": session_id, "request": request}
        memory = CrewAIMemory(self.rt, inputs, ROLE, mode=mode)
        build_crew(memory, llm, extra_tools).kickoff(inputs=inputs)
        assert memory.end_session() is True
        assert memory.end_session() is False  # idempotent
        return memory

    def close(self) -> None:
        self.portal.close()


async def async_session(rt: retold.Runtime, session_id: str, request: str, llm: ScriptedLLM,
                        mode: str = "tool_only") -> CrewAIMemory:  # fmt: skip
    inputs = {"user_id": "u1", "session_id": session_id, "request": request}
    memory = CrewAIMemory(rt, inputs, ROLE, mode=mode)
    await build_crew(memory, llm).akickoff(inputs=inputs)
    assert await memory.aend_session() is True
    assert await memory.aend_session() is False
    return memory


async def open_async(path: Path) -> retold.Runtime:
    rt = await retold.open_runtime(path, embedder=FakeEmbedder(), judge=FakeJudge())
    await rt.host.provision_user("u1", aliases=["Aditya"])
    await rt.host.grant("planner", USER, read=True, write=True)
    return rt


@pytest.fixture
def sync_host(tmp_path: Path) -> Iterator[SyncHost]:
    host = SyncHost(tmp_path / "memory.sqlite")
    try:
        yield host
    finally:
        host.close()


# --- the scripted conversation ----------------------------------------------------------------


def scripts() -> list[tuple[str, str, ScriptedLLM]]:
    """(session id, request, model) for the three sessions of the contract conversation."""
    write = ScriptedLLM(
        model="scripted",
        replies=[
            react_action("memory_write", write_args("Aditya prefers concise answers with bullet points.",
                                                    PREFERENCE)),
            react_final("Noted: concise answers with bullet points."),
        ],
    )  # fmt: skip
    search = ScriptedLLM(
        model="scripted",
        replies=[
            react_action("memory_search", {"queries": ["Aditya answer style preference"]}),
            react_final("I will keep it concise, with bullet points."),
        ],
    )
    change = ScriptedLLM(
        model="scripted",
        replies=[
            react_action("memory_write", write_args("Aditya prefers detailed answers with full paragraphs.",
                                                    "I now prefer detailed answers with full paragraphs")),
            react_final("Understood: detailed answers from now on."),
        ],
    )  # fmt: skip
    return [("s1", PREFERENCE, write), ("s2", QUESTION, search), ("s3", CHANGED, change)]


def observation(llm: ScriptedLLM) -> str:
    """What the model saw from its tool call: the messages its second call added."""
    return "\n".join(str(m.get("content")) for m in llm.seen[1][len(llm.seen[0]) :])


async def check_conversation(rt: retold.Runtime, llms: list[ScriptedLLM]) -> None:
    """The records, transcripts and search log the conversation must leave, whichever host ran it."""
    write, search, change = llms
    assert '"outcome": "created"' in observation(write), observation(write)
    assert "concise answers with bullet points" in observation(search), observation(search)
    assert '"outcome": "superseded:' in observation(change), observation(change)

    records: list[Record] = await rt.store.records_in_scope(
        USER, statuses=("confirmed", "provisional", "superseded")
    )
    by_content = {r.content: r for r in records}
    old = by_content["Aditya prefers concise answers with bullet points."]
    new = by_content["Aditya prefers detailed answers with full paragraphs."]
    assert (old.status, new.status) == ("superseded", "confirmed")
    assert new.supersedes_id == old.id
    assert (old.source_kind, old.evidence) == ("user_statement", PREFERENCE)
    assert old.source_ref == "session:s1<turn:1>"
    assert new.source_ref == "session:s3<turn:1>" and new.creator_agent_id == "planner"

    for session_id, request, final in [
        ("s1", PREFERENCE, "Noted: concise answers with bullet points."),
        ("s2", QUESTION, "I will keep it concise, with bullet points."),
        ("s3", CHANGED, "Understood: detailed answers from now on."),
    ]:
        turns = await rt.store.turns(await rt.store.resolve_session(session_id))
        # retold's own tool results are not turns; the task is the user turn, the finish the assistant's
        assert [(t.role, t.content) for t in turns] == [("user", request), ("assistant", final)]
        assert (await rt.store.get_session(await rt.store.resolve_session(session_id))).ended_at is not None  # type: ignore[union-attr]
    log = await rt.store.latest_search_log()
    assert log is not None and log["trigger"] == "tool"


def test_conversation_under_kickoff(sync_host: SyncHost) -> None:
    llms = []
    for session_id, request, llm in scripts():
        sync_host.session(session_id, request, llm)
        llms.append(llm)
    sync_host.run(check_conversation(sync_host.rt, llms))


async def run_contract_conversation(rt: retold.Runtime) -> list[ScriptedLLM]:
    """The three sessions under ``await crew.akickoff()`` on ``rt`` (user u1, agent planner granted).

    Reusable by the cross-adapter equivalence test: it leaves the records that
    :func:`check_conversation` describes.
    """
    llms = []
    for session_id, request, llm in scripts():
        await async_session(rt, session_id, request, llm)
        llms.append(llm)
    return llms


async def test_conversation_under_akickoff(tmp_path: Path) -> None:
    rt = await open_async(tmp_path / "memory.sqlite")
    try:
        await check_conversation(rt, await run_contract_conversation(rt))
    finally:
        await rt.close()


def test_akickoff_on_another_loop_routes_to_the_portal(sync_host: SyncHost) -> None:
    """A runtime owned by a portal also serves a crew awaited on some other loop."""
    [(session_id, request, llm), *_] = scripts()
    asyncio.run(async_session(sync_host.rt, session_id, request, llm))
    turns = sync_host.run(turns_of(sync_host.rt, session_id))
    assert [t.role for t in turns] == ["user", "assistant"]
    assert '"outcome": "created"' in observation(llm)


# --- tool turns, native tool calls ----------------------------------------------------------


def test_react_host_tool_result_is_a_tool_turn(sync_host: SyncHost) -> None:
    llm = ScriptedLLM(
        model="scripted",
        replies=[react_action("calendar", {"day": "Monday"}), react_final("Monday has a team sync.")],
    )
    sync_host.session("s1", "What is on my calendar on Monday?", llm, extra_tools=[CalendarTool()])
    turns = sync_host.run(turns_of(sync_host.rt, "s1"))
    assert [(t.role, t.content) for t in turns] == [
        ("user", "What is on my calendar on Monday?"),
        ("tool", "Monday: team sync at 10:00"),
        ("assistant", "Monday has a team sync."),
    ]


def test_native_tool_calls_are_recorded_once(sync_host: SyncHost) -> None:
    llm = ScriptedLLM(
        model="scripted",
        native=True,
        replies=[
            native_call("memory_write", write_args("Aditya prefers concise answers with bullet points.",
                                                   PREFERENCE), "c1"),
            native_call("calendar", {"day": "Monday"}, "c2"),
            "Saved your preference; Monday has a team sync.",
        ],
    )  # fmt: skip
    sync_host.session("s1", PREFERENCE, llm, extra_tools=[CalendarTool()])
    turns = sync_host.run(turns_of(sync_host.rt, "s1"))
    assert [(t.role, t.content) for t in turns] == [
        ("user", PREFERENCE),
        ("tool", "Monday: team sync at 10:00"),
        ("assistant", "Saved your preference; Monday has a team sync."),
    ]
    records = sync_host.run(sync_host.rt.store.records_in_scope(USER))
    assert [(r.source_kind, r.evidence) for r in records] == [("user_statement", PREFERENCE)]


async def test_native_tool_calls_under_akickoff(tmp_path: Path) -> None:
    rt = await open_async(tmp_path / "memory.sqlite")
    try:
        llm = ScriptedLLM(
            model="scripted",
            native=True,
            replies=[native_call("calendar", {"day": "Monday"}, "c1"), "Monday has a team sync."],
        )
        inputs = {"user_id": "u1", "session_id": "s1", "request": "What is on Monday?"}
        memory = CrewAIMemory(rt, inputs, ROLE)
        await build_crew(memory, llm, [CalendarTool()]).akickoff(inputs=inputs)
        await memory.aend_session()
        assert [(t.role, t.content) for t in await rt.store.turns(await rt.store.resolve_session("s1"))] == [
            ("user", "What is on Monday?"),
            ("tool", "Monday: team sync at 10:00"),
            ("assistant", "Monday has a team sync."),
        ]
    finally:
        await rt.close()


# --- modes: tools offered, host-issued recall ------------------------------------------------


@pytest.mark.parametrize(("mode", "count"), [("tool_only", 5), ("hybrid", 5), ("auto", 4)])
def test_tool_count_per_mode(sync_host: SyncHost, mode: str, count: int) -> None:
    memory = CrewAIMemory(sync_host.rt, {"user_id": "u1", "session_id": "s1"}, ROLE, mode=mode)
    names = [t.name for t in memory.tools()]
    assert len(names) == count and ("memory_search" in names) == (mode != "auto")
    assert all(isinstance(t, BaseTool) for t in memory.tools())
    assert memory.policy_text == policy_text(mode)
    memory.end_session()


def seed_preference(host: SyncHost) -> None:
    [(session_id, request, llm), *_] = scripts()
    host.session(session_id, request, llm)


@pytest.mark.parametrize("mode", ["auto", "hybrid"])
def test_host_recall_appends_the_block_to_the_task_prompt(sync_host: SyncHost, mode: str) -> None:
    seed_preference(sync_host)
    llm = ScriptedLLM(
        model="scripted",
        replies=[react_action("calendar", {"day": "Monday"}), react_final("A concise, bulleted report.")],
    )
    sync_host.session("s2", RECALL_TASK, llm, mode=mode,
                      extra_tools=[CalendarTool()])  # fmt: skip
    first, second = llm.seen
    prompt = first[-1]["content"]
    assert "recalled memory: 1 result" in prompt and "concise answers with bullet points" in prompt
    # appended in place: the task prompt of every later call of the task carries the same bytes
    assert any(m["role"] == "user" and m["content"] == prompt for m in second)
    log = sync_host.run(sync_host.rt.store.latest_search_log())
    assert log["trigger"] == "auto"
    turns = sync_host.run(turns_of(sync_host.rt, "s2"))
    assert turns[0].content == RECALL_TASK  # no block


def test_short_task_skips_the_host_search(sync_host: SyncHost) -> None:
    seed_preference(sync_host)
    llm = ScriptedLLM(model="scripted", replies=[react_final("Hi!")])
    sync_host.session("s2", "Hi", llm, mode="auto")
    assert "recalled memory" not in llm.seen[0][-1]["content"]
    events = sync_host.run(sync_host.rt.store.events(kind="trigger.skipped"))
    assert len(events) == 1 and events[0]["payload"]["session_id"] == "s2"


async def test_hybrid_recall_under_akickoff(tmp_path: Path) -> None:
    rt = await open_async(tmp_path / "memory.sqlite")
    try:
        [(session_id, request, llm), *_] = scripts()
        await async_session(rt, session_id, request, llm)
        recall_llm = ScriptedLLM(model="scripted", replies=[react_final("Concise bullets it is.")])
        await async_session(rt, "s2", RECALL_TASK,
                            recall_llm, mode="hybrid")  # fmt: skip
        assert "recalled memory: 1 result" in recall_llm.seen[0][-1]["content"]
        assert (await rt.store.latest_search_log())["trigger"] == "auto"  # type: ignore[index]
    finally:
        await rt.close()


# --- more shapes: two tasks in one crew, the async tool side ---------------------------------


def test_each_task_of_a_crew_is_a_user_turn(sync_host: SyncHost) -> None:
    inputs = {"user_id": "u1", "session_id": "s1"}
    memory = CrewAIMemory(sync_host.rt, inputs, ROLE)
    llm = ScriptedLLM(
        model="scripted",
        replies=[react_action("calendar", {"day": "Monday"}), react_final("Monday: team sync."),
                 react_final("Tuesday is free.")],
    )  # fmt: skip
    agent = Agent(role=ROLE, goal="Plan.", backstory=memory.policy_text, llm=memory.wrap_llm(llm),
                  tools=[*memory.tools(), CalendarTool()], step_callback=memory.step_callback)  # fmt: skip
    tasks = [Task(description=d, expected_output="A short reply.", agent=agent)
             for d in ("What is on Monday?", "And on Tuesday?")]  # fmt: skip
    Crew(agents=[agent], tasks=tasks).kickoff(inputs=inputs)
    memory.end_session()
    turns = sync_host.run(turns_of(sync_host.rt, "s1"))
    assert [(t.role, t.content) for t in turns] == [
        ("user", "What is on Monday?"),
        ("tool", "Monday: team sync at 10:00"),
        ("assistant", "Monday: team sync."),
        ("user", "And on Tuesday?"),
        ("assistant", "Tuesday is free."),
    ]


async def test_async_tool_and_llm_side_on_the_owning_loop(tmp_path: Path) -> None:
    rt = await open_async(tmp_path / "memory.sqlite")
    try:
        memory = CrewAIMemory(rt, {"user_id": "u1", "session_id": "s1"}, ROLE, mode="hybrid")
        llm = memory.wrap_llm(ScriptedLLM(model="scripted", replies=["ok"]))
        assert await llm.acall([{"role": "user", "content": PREFERENCE}]) == "ok"
        assert [t.content for t in await rt.store.turns(await rt.store.resolve_session("s1"))] == [PREFERENCE]
        tools = {t.name: t for t in memory.tools()}
        result = json.loads(await tools["memory_write"].arun(
            **write_args("Aditya prefers concise answers with bullet points.", PREFERENCE)))  # fmt: skip
        assert result["outcome"] == "created", result
        rendered = await tools["memory_search"].arun(queries=["Aditya answer style preference"])
        assert rendered.startswith("memory_search: 1 result"), rendered
        assert await memory.aend_session() is True
        with pytest.raises(RuntimeError, match="aend_session"):
            memory.end_session()  # a blocking call on the runtime's own loop is refused, not hung
    finally:
        await rt.close()


# --- identity ---------------------------------------------------------------------------------


def test_principal_from_inputs() -> None:
    inputs = {"user_id": "u1", "session_id": "s1", "project_id": "acme/web", "topic": "x"}
    assert principal_from_inputs(inputs, "Senior Trip/Planner") == Principal(
        "senior-trip-planner", "u1", "s1", "acme/web"
    )
    assert principal_from_inputs({"user_id": "u1", "thread_id": "t9"}, ROLE).session_id == "t9"
    assert agent_id_from_role("  Data  Analyst (v2) ") == "data-analyst-v2"
    for bad in ({"session_id": "s1"}, {"user_id": "u1"}, {"user_id": " ", "session_id": "s1"}):
        with pytest.raises(InvalidArgumentError):
            principal_from_inputs(bad, ROLE)
    with pytest.raises(InvalidArgumentError):
        agent_id_from_role("///")


def test_agent_id_is_explicit_and_the_role_slug_the_fallback(sync_host: SyncHost) -> None:
    inputs = {"user_id": "u1", "session_id": "s1"}
    assert principal_from_inputs(inputs, "Trip Planner", agent_id="planner").agent_id == "planner"
    memory = CrewAIMemory(sync_host.rt, inputs, "Trip Planner", agent_id="planner")
    assert memory.principal.agent_id == "planner"  # the grant's id, whatever the role is called
    assert "memory_write" in [t.name for t in memory.tools()]  # planner holds the write grant
    assert CrewAIMemory(sync_host.rt, inputs, "Trip Planner").principal.agent_id == "trip-planner"
    with pytest.raises(InvalidArgumentError):
        CrewAIMemory(sync_host.rt, inputs, ROLE, agent_id="a/b")  # '/' is reserved for private scopes


def test_wrap_llm_accepts_a_model_name_offline(sync_host: SyncHost) -> None:
    """A model name becomes ``crewai.LLM(model=name)``; building it reaches no network (sockets refused)."""
    memory = CrewAIMemory(sync_host.rt, {"user_id": "u1", "session_id": "s1"}, ROLE)
    wrapped = memory.wrap_llm("openai/gpt-4o-mini")
    assert isinstance(wrapped.inner, BaseLLM) and wrapped.inner.model == "gpt-4o-mini"
    for bad in ("  ", 42):
        with pytest.raises(InvalidArgumentError):
            memory.wrap_llm(bad)  # type: ignore[arg-type]


def test_mode_defaults_to_the_configured_trigger_mode(tmp_path: Path) -> None:
    config = Config().override({"retrieval.trigger.mode": "auto"})
    with RuntimePortal.open(
        tmp_path / "m.sqlite", config, embedder=FakeEmbedder(), judge=FakeJudge()
    ) as portal:
        assert portal.runtime is not None
        memory = CrewAIMemory(portal.runtime, {"user_id": "u1", "session_id": "s1"}, ROLE)
        assert memory.mode == "auto" and "memory_search" not in [t.name for t in memory.tools()]
        assert (
            CrewAIMemory(portal.runtime, {"user_id": "u1", "session_id": "s1"}, ROLE, "hybrid").mode
            == "hybrid"
        )


def test_sync_host_without_a_portal_is_refused(tmp_path: Path) -> None:
    rt = asyncio.run(open_async(tmp_path / "memory.sqlite"))
    try:
        with pytest.raises(InvalidArgumentError, match="RuntimePortal"):
            CrewAIMemory(rt, {"user_id": "u1", "session_id": "s1"}, ROLE)
    finally:
        asyncio.run(rt.close())


# --- the example ------------------------------------------------------------------------------


def test_example_runs_offline(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "crewai_memory.py")],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
        env={**os.environ, "HOME": str(tmp_path)},
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "recalled memory: 1 result" in done.stdout, done.stdout
    assert "superseded: Aditya prefers concise answers with bullet points." in done.stdout, done.stdout


# --- issue 15 item 9: stored text cannot forge a memory in the prompt -------------------------


def test_a_forged_header_in_content_reaches_the_crew_as_one_quoted_record(sync_host: SyncHost) -> None:
    """The recalled block in the task prompt and the ReAct observation each parse to one record."""
    p = sync_host.run(sync_host.rt.hooks.on_session_start(Principal("planner", "u1", "s0")))
    made = sync_host.run(sync_host.rt.tools.call(
        p, "memory_write", {"type": "semantic", "content": FORGED, "attribute": "payments"}
    ))  # fmt: skip
    assert made["ok"] and made["status"] == "provisional", made
    llm = ScriptedLLM(
        model="scripted",
        replies=[react_action("memory_search", {"queries": ["bank transfers"]}), react_final("I will ask.")],
    )
    sync_host.session("s2", "How do I handle bank transfers for the user?", llm, mode="hybrid")
    prompt = llm.seen[0][-1]["content"]
    observation = next(m["content"] for m in llm.seen[1] if m["role"] == "assistant")
    shown = [
        (RECALL_HEADER, prompt[prompt.index(f"{RECALL_HEADER}: ") :]),
        ("memory_search", observation[observation.index("Observation: ") + len("Observation: ") :].rstrip()),
    ]
    for header, text in shown:
        rendered = parse(text)
        assert rendered.header == header
        assert [(b.short_id, b.status, b.source_kind, b.content) for b in rendered.blocks] == [
            (made["record_id"][-12:], "provisional", "agent_inference", FORGED)
        ]
