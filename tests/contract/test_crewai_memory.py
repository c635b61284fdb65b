"""retold as CrewAI's unified memory: ``Crew(memory=RetoldCrewMemory(...))`` and the ``StorageBackend``.

Real crews with a scripted CrewAI model, under ``kickoff()`` and ``akickoff()``: a memory saved
through CrewAI's own "Save to memory" tool in one kickoff is recalled into the next kickoff's
task prompt, as retold's quoted block, and never into another user's. Offline: telemetry and
tracing are off (tests/conftest.py), HOME is a temporary directory, sockets are refused.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from crewai import Agent, Crew, Task
from crewai.memory.storage import factory as storage_factory
from crewai.memory.storage.backend import EmbeddingDimensionMismatchError, StorageBackend
from crewai.memory.types import MemoryRecord
from crewai.memory.unified_memory import Memory
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from unit.rendered import FORGED, parse  # tests/ is on sys.path (rootdir-relative packages)

import retold
from contract.crew_doubles import (  # tests/ is on sys.path
    ScriptedLLM,
    keep_crewai_offline,
    react_action,
    react_final,
)
from retold.adapters.crewai_memory import (
    CrewMemoryRefusedError,
    RetoldCrewMemory,
    RetoldEmbedder,
    RetoldMemoryMatch,
    RetoldStorageBackend,
    crew_path,
    map_path,
    parse_task_dump,
    register_storage,
    unregister_storage,
)
from retold.adapters.portal import RuntimePortal
from retold.config import Config
from retold.errors import InvalidArgumentError
from retold.models import CandidateRecord, ExtractionOutput, Principal, Scope
from retold.policy.grants import readable_scopes
from retold.testing import FakeEmbedder, FakeExtractor, FakeJudge, FakeReviewer

ROOT = Path(__file__).resolve().parents[2]
FACT = "Aditya prefers concise answers with bullet points."
RECALL_TASK = "How should answers to Aditya be formatted: concise with bullet points?"
HEADER = 'Relevant memories: 1 result; searched for: "task"\n\n'
"""Stands in for retold's search header, which CrewAI replaces with its own line."""


@pytest.fixture(autouse=True)
def _offline(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    keep_crewai_offline(tmp_path, monkeypatch)


def prompt_of(llm: ScriptedLLM) -> str:
    """The task prompt of the first model call (CrewAI appends recalled memories to it)."""
    first = llm.seen[0]
    return first[0] if isinstance(first[0], str) else str(first[-1]["content"])


def crew_for(memory: RetoldCrewMemory, task: str, replies: list[str]) -> tuple[Crew, ScriptedLLM]:
    llm = ScriptedLLM(model="scripted", replies=replies)
    agent = Agent(role="Planner", goal="Help the user.", backstory="A planner.", llm=llm, max_iter=4)
    crew = Crew(agents=[agent], tasks=[Task(description=task, expected_output="A reply.", agent=agent)],
                memory=memory)  # fmt: skip
    return crew, llm


def save_then_answer() -> list[str]:
    return [react_action("Save to memory", {"contents": [FACT]}), react_final("Saved.")]


class Host:
    """A runtime on a RuntimePortal thread: the setup for both kickoff() and akickoff()."""

    def __init__(self, location: Path | str, config: Config | None = None, **models: Any) -> None:
        self.portal = RuntimePortal.open(
            location, config, embedder=FakeEmbedder(), judge=FakeJudge(), **models
        )
        assert self.portal.runtime is not None
        self.rt = self.portal.runtime
        for user in ("u1", "u2"):
            self.run(self.rt.host.grant("planner", Scope("user", user), read=True, write=True))

    def run(self, awaitable: Any) -> Any:
        return self.portal.run(awaitable)

    def memory(self, user_id: str = "u1", **kwargs: Any) -> RetoldCrewMemory:
        return RetoldCrewMemory(self.rt, agent_id="planner", user_id=user_id, **kwargs)

    def records(self, user_id: str, statuses: tuple[str, ...] = ("provisional", "confirmed")) -> list[Any]:
        return self.run(self.rt.store.records_in_scope(Scope("user", user_id), statuses=statuses))


@pytest.fixture
def host(tmp_path: Path) -> Iterator[Host]:
    """SQLite only: the tests that run on both backends take :func:`any_backend_host`."""
    h = Host(tmp_path / "memory.sqlite")
    try:
        yield h
    finally:
        h.portal.close()


@pytest.fixture
def any_backend_host(store_location: Callable[[str], Path | str]) -> Iterator[Host]:
    h = Host(store_location("memory.sqlite"))
    try:
        yield h
    finally:
        h.portal.close()


# --- two kickoffs: saved in one, recalled in the next, never for another user ---------------


def check_recalled(llm: ScriptedLLM) -> None:
    prompt = prompt_of(llm)
    assert "Relevant memories:" in prompt, prompt[-800:]
    block = prompt[prompt.index("Relevant memories:\n") + len("Relevant memories:\n") :]
    rendered = parse(HEADER + block.split("\n\n\n")[0].strip())
    assert [(b.content, b.source_kind) for b in rendered.blocks] == [(FACT, "agent_inference")]


def test_two_kickoffs_recall_and_never_cross_users(any_backend_host: Host) -> None:
    host = any_backend_host
    memory = host.memory()
    first_session = memory.principal.session_id
    assert first_session is not None and first_session.startswith("crewai-")
    crew, saver = crew_for(memory, "Remember how Aditya likes answers formatted.", save_then_answer())
    crew.kickoff()
    assert "Observation: Saved to memory (scope=/user/u1" in str(saver.seen[1])
    [record] = host.records("u1")
    assert (record.content, record.source_kind, record.creator_agent_id) == (
        FACT,
        "agent_inference",
        "planner",
    )

    crew, reader = crew_for(memory, RECALL_TASK, [react_final("Concise bullets.")])
    crew.kickoff()
    check_recalled(reader)

    # the kickoff's task and result are its session's turns; drain_writes ended that session
    key = host.run(host.rt.store.resolve_session(first_session))
    turns = host.run(host.rt.store.turns(key))
    assert [(t.role, t.content) for t in turns] == [
        ("user", "Remember how Aditya likes answers formatted."),
        ("assistant", "Saved."),
    ]
    assert host.run(host.rt.store.get_session(key)).ended_at is not None
    assert memory.principal.session_id != first_session  # the next kickoff has its own session

    # the same agent for another user: nothing of u1's reaches its prompt, recall or listing
    other = host.memory("u2")
    crew, stranger = crew_for(other, RECALL_TASK, [react_final("I know nothing yet.")])
    crew.kickoff()
    assert "Relevant memories" not in prompt_of(stranger)
    assert other.recall(RECALL_TASK) == [] and other.recall(FACT, scope="/user/u1") == []
    assert other.list_records() == [] and other.list_records("/user/u1") == []
    assert other.forget(record_ids=[record.id]) == 0 and other.forget(scope="/user/u1") == 0
    with pytest.raises(CrewMemoryRefusedError) as refused:
        other.remember("Aditya prefers long answers.", scope="/user/u1")
    assert refused.value.as_dict()["error"] == "invalid_write_target"
    assert [r.id for r in host.records("u1")] == [record.id] and host.records("u2") == []


async def test_akickoff_recalls_across_kickoffs(host: Host) -> None:
    """``await crew.akickoff()`` on this test's loop; the runtime lives on the portal's."""
    memory = host.memory()
    crew, _ = crew_for(memory, "Remember how Aditya likes answers formatted.", save_then_answer())
    await crew.akickoff()
    crew, reader = crew_for(memory, RECALL_TASK, [react_final("Concise bullets.")])
    await crew.akickoff()
    check_recalled(reader)
    matches = await memory.arecall(RECALL_TASK)
    assert [m.record.content for m in matches] == [FACT]
    assert isinstance(matches[0], RetoldMemoryMatch) and matches[0].explanation.gate


async def test_runtime_on_the_kickoff_loop_refuses_blocking_but_keeps_writes(tmp_path: Path) -> None:
    """An async host whose runtime lives on akickoff's own loop: CrewAI's sync recall is refused
    (CrewAI logs it and runs the task), the async API works, queued writes land."""
    rt = await retold.open_runtime(tmp_path / "m.sqlite", embedder=FakeEmbedder(), judge=FakeJudge())
    try:
        await rt.host.grant("planner", Scope("user", "u1"), read=True, write=True)
        memory = RetoldCrewMemory(rt, agent_id="planner", user_id="u1")
        await memory.aremember(FACT)
        crew, llm = crew_for(memory, RECALL_TASK, [react_final("Concise bullets.")])
        out = await crew.akickoff()
        assert out.raw == "Concise bullets." and "Relevant memories" not in prompt_of(llm)
        with pytest.raises(RuntimeError, match="RuntimePortal"):
            memory.recall(RECALL_TASK)
        assert [m.record.content for m in await memory.arecall(RECALL_TASK)] == [FACT]
        memory.remember_many(["Aditya works from Berlin."])  # queued on this loop
        await memory.adrain_writes()
        contents = {r.content for r in await rt.store.records_in_scope(Scope("user", "u1"))}
        assert contents == {FACT, "Aditya works from Berlin."}
    finally:
        await rt.close()


# --- the Memory surface ---------------------------------------------------------------------


def test_remember_recall_forget_and_refusals(host: Host) -> None:
    memory = host.memory(session_id="s1")
    made = memory.remember(FACT, categories=["style"])
    assert made is not None and made.scope == "/user/u1" and made.categories == ["style"]
    assert made.metadata["retold"]["outcome"] == "created"
    again = memory.remember(FACT)
    assert again is not None and again.id == made.id  # dedup: the same record, reinforced
    # a user statement must quote this session's turns: an agent's claim before the user said it
    unverified = memory.remember("Aditya lives in Berlin.", metadata={"evidence": "I live in Berlin"})
    assert unverified is not None and unverified.metadata["retold"]["source_kind"] == "agent_inference"
    memory.extract_memories("Task: I live in Berlin.\nAgent: Planner\nExpected result: x\nResult: Noted.")
    quoted = memory.remember("Aditya lives in Berlin now.", metadata={"evidence": "I live in Berlin"})
    assert quoted is not None and quoted.metadata["retold"]["source_kind"] == "user_statement"

    [match] = memory.recall("concise bullet points answers", categories=["style"])
    assert match.record.id == made.id and match.score > 0 and "dense" in match.match_reasons
    assert match.format().startswith(f"[{made.id[-12:]}]")
    assert memory.recall("concise bullet points answers", categories=["nothing"]) == []
    assert memory.recall("concise bullet points answers", scope="/agent/planner") == []
    assert memory.recall(FACT, scope="/crew/research") == []  # CrewAI's own paths name nothing here
    # CrewAI's scoped views compose with the mapping: u1's view finds it, a view on u2 finds nothing
    assert [m.record.id for m in memory.scope("/user/u1").recall("concise bullet points answers")] == [
        made.id
    ]
    assert memory.scope("/user/u2").recall("concise bullet points answers") == []

    for bad in (
        lambda: memory.remember("x", private=True),
        lambda: memory.remember("x", metadata={"importance_reason": "y"}),
        lambda: memory.remember("x", scope="/agent/someone-else"),
        lambda: memory.remember("\x07bell"),
        lambda: memory.remember_many(["ok", ""]),
        lambda: memory.update(made.id, scope="/project/p"),
        lambda: memory.remember("x", categories=[{"not": "a tag"}]),  # type: ignore[list-item]
        lambda: memory.remember("x", metadata=["evidence"]),  # type: ignore[arg-type]
        lambda: memory.remember("x", categories=[f"t{i}" for i in range(11)]),  # over retold's tag limit
    ):
        with pytest.raises(CrewMemoryRefusedError):
            bad()
    assert "x" not in {r.content for r in host.records("u1")} and "ok" not in {
        r.content for r in host.records("u1")
    }
    with pytest.raises(CrewMemoryRefusedError, match="scope_not_writable"):
        memory.remember("x", scope="/agent/planner")  # private scope: no tool write target offers it

    newer = memory.update(made.id, content="Aditya prefers concise answers, no bullet points.")
    assert newer.id != made.id
    statuses = {r.id: r.status for r in host.records("u1", ("provisional", "confirmed", "superseded"))}
    assert statuses[made.id] == "superseded"
    assert memory.forget(record_ids=[newer.id, "no-such-id"]) == 1
    assert memory.list_records() == [] or all(r.id != newer.id for r in memory.list_records())
    events = host.run(host.rt.store.events(kind="record.deleted"))
    assert events and events[-1]["record_id"] == newer.id
    assert memory.end_session() is True


def test_extract_memories_records_turns_and_stores_nothing(host: Host) -> None:
    memory = host.memory(session_id="s9")
    dump = "Task: Plan Monday.\nAgent: Planner\nExpected result: A plan.\nResult: Team sync at 10."
    assert memory.extract_memories(dump) == []
    assert memory.extract_memories("A free-form note from a flow.") == []
    memory.drain_writes()  # a pinned session is not ended by the end of a kickoff
    key = host.run(host.rt.store.resolve_session("s9"))
    assert [(t.role, t.content) for t in host.run(host.rt.store.turns(key))] == [
        ("user", "Plan Monday."),
        ("assistant", "Team sync at 10."),
        ("assistant", "A free-form note from a flow."),
    ]
    assert host.records("u1") == []
    assert host.run(host.rt.store.get_session(key)).ended_at is None
    assert memory.end_session() is True and memory.end_session() is False


def test_a_kickoff_is_a_session_that_retold_extracts_from(tmp_path: Path) -> None:
    """No LLM in CrewAI's save path: the task became the user turn, retold's extractor (a fake
    here) proposes a candidate quoting it, and the next kickoff recalls the checked statement."""
    candidate = CandidateRecord(
        type="semantic", content="Aditya prefers tea over coffee.", attribute="drink", entity_mentions=[],
        source_kind="user_statement", evidence="I prefer tea over coffee", evidence_turn=1,
    )  # fmt: skip
    host = Host(tmp_path / "m.sqlite", extractor=FakeExtractor(ExtractionOutput([candidate], None)),
                reviewer=FakeReviewer())  # fmt: skip
    try:
        memory = host.memory()
        task = "I prefer tea over coffee. Plan my afternoon break."
        crew, _ = crew_for(memory, task, [react_final("Tea at 3.")])
        crew.kickoff()
        host.run(host.rt.join_background())  # the extraction the kickoff's session end scheduled
        [record] = host.records("u1")
        assert (record.content, record.source_kind) == ("Aditya prefers tea over coffee.", "user_statement")
        crew, llm = crew_for(memory, "Which drink does Aditya prefer, tea or coffee?", [react_final("Tea.")])
        crew.kickoff()
        assert "> Aditya prefers tea over coffee." in prompt_of(llm)
    finally:
        host.portal.close()


@settings(max_examples=200, deadline=None)
@given(task=st.text(min_size=1), expected=st.text(), answer=st.text(min_size=1))
def test_a_user_turn_never_carries_the_models_text(task: str, expected: str, answer: str) -> None:
    """CrewAI's post-task dump is split so the user turn is the task or a prefix of it, whatever
    the task, expected output or model output contain (a user turn outranks the model's text)."""
    dump = f"Task: {task}\nAgent: Planner\nExpected result: {expected}\nResult: {answer}"
    user, _ = parse_task_dump(dump)
    assert user == task.split("\nAgent: ")[0] and task.startswith(user)
    assert parse_task_dump(answer) == (None, answer) or answer.startswith("Task: ")


def test_construction_needs_no_llm_or_embedder_and_refuses_crewai_knobs(host: Host, tmp_path: Path) -> None:
    memory = host.memory(project_id="acme/web")
    with pytest.raises(RuntimeError, match="no LLM"):
        memory._llm  # noqa: B018 - the property CrewAI would build an OpenAI client from
    with pytest.raises(RuntimeError, match="no CrewAI embedder"):
        memory._embedder  # noqa: B018
    with pytest.raises(InvalidArgumentError):
        host.memory(root_scope="/crew/x")
    for knob in (
        {"consolidation_threshold": 0.5},
        {"llm": "gpt-4o-mini"},
        {"embedder": {"provider": "openai"}},
    ):
        with pytest.raises(InvalidArgumentError):
            host.memory(**knob)
    with pytest.raises(InvalidArgumentError):
        RetoldCrewMemory(host.rt, agent_id="a/b", user_id="u1")  # '/' is reserved for private scopes
    with retold.open_runtime_sync(tmp_path / "sync.sqlite", embedder=FakeEmbedder()) as srt:
        srt.host.grant("planner", Scope("user", "u1"), read=True, write=True)
        via_sync = RetoldCrewMemory(srt, agent_id="planner", user_id="u1")  # a sync host's handle works too
        assert via_sync.remember(FACT) is not None and [m.record.content for m in via_sync.recall(FACT)] == [
            FACT
        ]
    crew, _ = crew_for(memory, "Plan the week.", [])
    assert crew.memory is memory and crew.copy().memory is memory
    assert memory.read_only is False and host.memory(read_only=True).remember(FACT) is None


def test_a_forged_memory_reaches_the_task_prompt_as_one_quoted_record(host: Host) -> None:
    memory = host.memory()
    made = memory.remember(FORGED, metadata={"type": "semantic", "attribute": "payments"})
    assert made is not None
    crew, llm = crew_for(memory, "How do I handle bank transfers for the user?", [react_final("I will ask.")])
    crew.kickoff()
    prompt = prompt_of(llm)
    block = prompt[prompt.index("Relevant memories:\n") + len("Relevant memories:\n") :].split("\n\n\n")[0]
    rendered = parse(HEADER + block.strip())
    assert [(b.short_id, b.content) for b in rendered.blocks] == [(made.id[-12:], FORGED)]


def test_scope_paths() -> None:
    p = Principal("planner", "u1", "s1", "acme/web")
    user, private, project = Scope("user", "u1"), p.private_scope, Scope("project", "acme/web")
    cases = {
        None: (True, None), "/": (True, None), "": (True, None), "/user": (True, user),
        "/user/u1/prefs//": (True, user), "user/u1": (True, user), "/agent/planner/x": (True, private),
        "/project/acme/web/sub": (True, project), "/project": (True, project),
        "/org/o1": (True, Scope("org", "o1")),
        "/user/u2": (False, None), "/agent/other": (False, None), "/project/acme": (False, None),
        "/project/other": (False, None), "/crew/research": (False, None), "/org": (False, None),
        "/user/\x00": (False, None), 42: (False, None),
    }  # fmt: skip
    for path, expected in cases.items():
        assert map_path(path, p) == expected, path
    assert map_path("/project/x", Principal("planner", "u1")) == (False, None)
    assert [crew_path(s) for s in (user, private, project)] == [
        "/user/u1",
        "/agent/planner",
        "/project/acme/web",
    ]


# --- the StorageBackend -------------------------------------------------------------------------


def test_storage_backend_methods(any_backend_host: Host) -> None:
    host = any_backend_host
    backend = RetoldStorageBackend(host.rt, agent_id="planner", user_id="u1", session_id="s1")
    assert isinstance(backend, StorageBackend)
    records = [
        MemoryRecord(content=FACT, categories=["style"]),
        MemoryRecord(
            content="Aditya works from Berlin on Mondays.", scope="/user/u1/places", categories=["place"]
        ),
    ]
    given_ids = [r.id for r in records]
    backend.save(records)
    assert [r.id for r in records] != given_ids  # rewritten to retold's ids
    assert backend.get_record(records[0].id).content == FACT  # type: ignore[union-attr]
    assert backend.get_record("not-an-id") is None
    listed = backend.list_records()
    assert [r.content for r in listed] == ["Aditya works from Berlin on Mondays.", FACT]  # newest first
    assert [r.content for r in backend.list_records(limit=1, offset=1)] == [FACT]
    assert backend.count() == 2 and backend.count("/user/u2") == 0
    assert backend.list_categories() == {"style": 1, "place": 1}
    assert backend.list_scopes("/") == ["/user/u1"] and backend.list_scopes("/user/u1") == []
    info = backend.get_scope_info("/user/u1")
    assert info.record_count == 2 and info.categories == ["place", "style"] and info.oldest_record is not None

    vector = RetoldEmbedder(host.rt)(["concise answers bullet points"])[0]
    hits = backend.search(vector, limit=5)
    assert hits and hits[0][0].content == FACT and 0 < hits[0][1] <= 1.0
    assert backend.search(vector, scope_prefix="/user/u2") == []
    place = RetoldEmbedder(host.rt)(["Aditya works from Berlin on Mondays"])[0]
    assert [r.content for r, _ in backend.search(place, categories=["place"])] == [
        "Aditya works from Berlin on Mondays."
    ]
    with pytest.raises(EmbeddingDimensionMismatchError):
        backend.search([0.1] * 3072)

    changed = records[0].model_copy(update={"content": "Aditya prefers full paragraphs."})
    backend.update(changed)
    assert changed.id != records[0].id and backend.get_record(records[0].id) is None
    with pytest.raises(CrewMemoryRefusedError):
        backend.update(changed.model_copy(update={"scope": "/project/p"}))
    with pytest.raises(CrewMemoryRefusedError):
        backend.save([MemoryRecord(content="x", private=True)])

    assert backend.delete(categories=["place"]) == 1
    backend.reset()
    assert backend.count() == 0


async def test_storage_backend_async_twins(host: Host) -> None:
    backend = RetoldStorageBackend(host.rt, agent_id="planner", user_id="u1")
    record = MemoryRecord(content=FACT, categories=["style"])
    await backend.asave([record])
    assert (await backend.aget_record(record.id)).content == FACT  # type: ignore[union-attr]
    vector = RetoldEmbedder(host.rt)([FACT])[0]
    assert [r.id for r, _ in await backend.asearch(vector)] == [record.id]
    assert await backend.acount() == 1 and await backend.alist_categories() == {"style": 1}
    assert [r.id for r in await backend.alist_records()] == [record.id]
    assert await backend.alist_scopes() == ["/user/u1"]
    assert (await backend.aget_scope_info("/")).record_count == 1
    await backend.aupdate(record.model_copy(update={"content": "Aditya prefers paragraphs."}))
    assert await backend.adelete(record_ids=[record.id]) == 0  # superseded: no longer live
    await backend.areset()
    assert await backend.acount() == 0


def test_storage_spec_string_routes_crewai_memory_to_retold(host: Host) -> None:
    """CrewAI's own ``Memory`` with ``storage="retold:<name>"``: shallow recall is a dense-only search."""
    backend = RetoldStorageBackend(host.rt, agent_id="planner", user_id="u1")
    before = storage_factory._factory
    try:
        spec = register_storage("planner-u1", backend)
        memory = Memory(storage=spec, embedder=RetoldEmbedder(host.rt), llm=ScriptedLLM(model="scripted"))
        assert memory._storage is backend
        backend.save([MemoryRecord(content=FACT)])
        [match] = memory.recall("concise answers with bullet points", depth="shallow")
        assert match.record.content == FACT
        with pytest.raises(ValueError, match="no retold storage is registered as 'unknown'"):
            Memory(storage="retold:unknown", embedder=RetoldEmbedder(host.rt))
    finally:
        assert unregister_storage("planner-u1") and not unregister_storage("planner-u1")
        storage_factory.set_memory_storage_factory(before)


# --- isolation, through both surfaces ------------------------------------------------------------

PATHS = st.sampled_from([None, "/", "/user", "/user/u1", "/user/u2", "/agent/planner", "/agent/other",
                         "/project/p1", "/crew/x", "/user/u1/sub"])  # fmt: skip
WORDS = st.lists(
    st.sampled_from(["alpha", "beta", "gamma", "delta", "berlin", "tea"]), min_size=2, max_size=5
)
OPS = st.lists(
    st.tuples(
        st.sampled_from(["u1", "u2"]),
        st.sampled_from(["remember", "save", "forget", "reset"]),
        PATHS,
        WORDS.map(" ".join),
    ),
    min_size=1,
    max_size=8,
)


@pytest.fixture
def shared_host(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Host]:
    h = Host(tmp_path_factory.mktemp("iso") / "memory.sqlite")
    try:
        yield h
    finally:
        h.portal.close()


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=OPS, probe=WORDS.map(" ".join), path=PATHS)
def test_no_record_reaches_a_principal_who_cannot_read_its_scope(
    shared_host: Host, ops: list[tuple[str, str, Any, str]], probe: str, path: Any
) -> None:
    host = shared_host
    memories = {u: host.memory(u, session_id=f"iso-{u}") for u in ("u1", "u2")}
    backends = {u: RetoldStorageBackend(host.rt, agent_id="planner", user_id=u) for u in ("u1", "u2")}
    for user, op, where, text in ops:
        other = "u2" if user == "u1" else "u1"
        theirs = {r.id: r.status for r in host.records(other, ("provisional", "confirmed", "deleted"))}
        try:
            if op == "remember":
                memories[user].remember(text, scope=where)
            elif op == "save":
                backends[user].save([MemoryRecord(content=text, scope=where or "/")])
            elif op == "forget":
                memories[user].forget(scope=where, record_ids=list(theirs))
            else:
                backends[user].reset(where)
        except CrewMemoryRefusedError:
            pass
        after = {r.id: r.status for r in host.records(other, ("provisional", "confirmed", "deleted"))}
        assert {k: v for k, v in after.items() if k in theirs} == theirs  # nothing of theirs changed
    for user in ("u1", "u2"):
        p = Principal("planner", user)
        allowed = set(host.run(readable_scopes(host.rt.store, p)))
        ids: list[str] = [m.record.id for m in memories[user].recall(probe, scope=path)]
        ids += [r.id for r in memories[user].list_records(scope=path)]
        ids += [
            r.id for r, _ in backends[user].search(RetoldEmbedder(host.rt)([probe])[0], scope_prefix=path)
        ]
        every = host.records("u1") + host.records("u2")
        scopes = {r.id: r.scope for r in every}
        assert all(scopes[i] in allowed for i in ids), (user, path)
        assert all(backends[user].get_record(r.id) is None for r in every if r.scope not in allowed)


# --- the example -----------------------------------------------------------------------------------


def test_quickstart_example_runs_offline(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "crewai_memory_quickstart.py"), str(tmp_path / "m.sqlite")],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
        env={**os.environ, "HOME": str(tmp_path)},
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.splitlines() == [
        "kickoff 1: Saved.",
        "kickoff 2 recalled: > Aditya prefers concise answers with bullet points.",
        "kickoff 2: Concise, with bullet points.",
        "u2 recalled: nothing",
    ], done.stdout


def test_older_than_and_metadata_filters(host: Host) -> None:
    memory = host.memory(session_id="s1")
    made = memory.remember(FACT)
    assert made is not None
    naive_now = datetime.now(UTC).replace(tzinfo=None)  # CrewAI passes naive UTC datetimes
    assert memory.forget(older_than=naive_now - timedelta(days=1)) == 0
    assert memory.forget(metadata_filter={"source_kind": "user_statement"}) == 0
    assert memory.forget(metadata_filter={"source_kind": "agent_inference"}) == 1
    assert memory.list_records() == []
