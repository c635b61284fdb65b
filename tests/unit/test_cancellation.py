"""Cancellation at every await of every write path (issue 15 item 3).

Each sweep drives one write path through the public API and cancels it after its k-th
await for k = 1, 2, ... until a call completes (:func:`.cancel_harness.sweep`). After
every attempt the runtime must be usable, the store consistent (``retold check``), the
vector index in step with the stored vectors, and the attempt's write whole or absent.
"""

from __future__ import annotations

import asyncio
import contextvars
import itertools
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import retold
from retold.config import Config
from retold.ingest.write.request import WriteRequest
from retold.models import Principal, Scope
from retold.operations import load_snapshot
from retold.store.maintenance import read_snapshot_info
from retold.testing import FakeEmbedder

from .cancel_harness import STRIDE, Attempt, Cut, Shape, attempt, counting_tasks, outcome, settle, sweep
from .extraction_world import USER, XWorld, cand, make_xworld
from .slow import SLOW

_IDS = itertools.count(1)
Call = Callable[[], Awaitable[Any]]
BACKGROUND = "Runtime._extract_in_background"


def unique(prefix: str) -> str:
    """A word no other attempt uses, so each attempt's write is its own."""
    return f"{prefix}{next(_IDS)}q"


async def open_world(path: Path, **overrides: Any) -> XWorld:
    """A runtime on fakes with an extractor and a reviewer; u1 provisioned, planner granted, s1 open.

    Sessions never go idle here: an idle split would end a session and schedule an
    extraction in the background while a sweep is checking the store.
    """
    config = Config().override({"ingestion.session_idle_timeout_minutes": 10**7, **overrides})
    return await make_xworld(path, config=config)


@pytest.fixture
async def xw(tmp_path: Path) -> AsyncIterator[XWorld]:
    w = await open_world(tmp_path / "memory.sqlite")
    try:
        yield w
    finally:
        await w.rt.close()


async def say(w: XWorld, role: str, content: str) -> None:
    w.p = await w.rt.hooks.on_turn(w.p, role, content)


async def statement(w: XWorld, word: str) -> dict[str, Any]:
    """A user turn and the tool payload of a confirmed fact quoting it."""
    await say(w, "user", f"My favourite colour is {word}.")
    return {
        "type": "semantic",
        "content": f"The user's favourite colour is {word}.",
        "attribute": f"colour_{word}",
        "source_kind": "user_statement",
        "evidence": f"My favourite colour is {word}",
    }


async def write(w: XWorld, payload: dict[str, Any], principal: Principal | None = None) -> str:
    result = await w.rt.tools.call(principal or w.p, "memory_write", payload)
    assert result["ok"], result
    return str(result["record_id"])


async def inference(w: XWorld) -> str:
    """A provisional episodic memory (an unsupported agent inference)."""
    return await write(w, {"type": "episodic", "content": f"The user mentioned {unique('topic')} once."})


def completed(a: Attempt, **expected: Any) -> None:
    """The call that completed answered ok (with ``expected`` fields)."""
    if not a.cancelled:
        assert isinstance(a.result, dict) and a.result["ok"], a.result
        for key, value in expected.items():
            assert a.result[key] == value, a.result


async def count(w: XWorld, sql: str, *params: Any) -> int:
    return int(await w.rt.store.db.fetchval(sql, params))


# --- the tools --------------------------------------------------------------------------------


async def test_memory_write_with_evidence_and_a_new_entity(xw: XWorld) -> None:
    async def setup(k: int) -> Call:
        payload = await statement(xw, unique("teal"))
        payload["entities"] = [{"kind": "org", "name": unique("Studio"), "role": "mentions"}]
        return lambda: xw.rt.tools.call(xw.p, "memory_write", payload)

    async def check(a: Attempt) -> None:
        completed(a, outcome="created")

    attempts = await sweep(xw.rt, xw.p, setup, check=check)
    assert len(attempts) > 10


async def test_a_write_cancelled_during_its_commit_still_informs_the_next_decision(xw: XWorld) -> None:
    """The cancelled write committed but its in-process index update never ran; the next
    write about the same subject must still judge it at its true cosine, not at 0."""
    first = await statement(xw, "amber")
    first["attribute"] = "colour"
    task = asyncio.ensure_future(xw.rt.tools.call(xw.p, "memory_write", first))
    xw.rt.store.db.tracer = lambda sql, params: task.cancel() if sql == "COMMIT" else None
    with pytest.raises(asyncio.CancelledError):
        await task
    xw.rt.store.db.tracer = None
    committed = await xw.rt.store.db.fetch_column(
        "SELECT id FROM records WHERE content = ?", (first["content"],)
    )
    assert len(committed) == 1  # whole, although its caller was cancelled
    assert xw.rt.index.vector_for(committed[0]) is None  # the update after the commit was skipped

    second = await statement(xw, "amber and teal")
    second["attribute"] = "colour"
    written = await xw.rt.tools.call(xw.p, "memory_write", second)
    assert written["ok"], written
    (event,) = await xw.rt.store.events(kind="record.created", record_id=written["record_id"])
    (verdict,) = [v for v in event["payload"]["verdicts"] if v["record_id"] == committed[0]]
    assert verdict["cosine"] > 0.5, verdict


async def test_memory_write_reinforcing_a_stored_fact(xw: XWorld) -> None:
    async def setup(k: int) -> Call:
        colour = unique("amber")
        payload = await statement(xw, colour)
        await write(xw, payload)
        await say(xw, "user", f"Yes, {colour} is still my favourite colour.")  # the claim again, later
        again = {**payload, "evidence": f"{colour} is still my favourite colour"}
        return lambda: xw.rt.tools.call(xw.p, "memory_write", again)

    await sweep(xw.rt, xw.p, setup, check=lambda a: completed(a, outcome="reinforced"))


async def test_memory_revise_confirm_expire_and_supersede(xw: XWorld) -> None:
    for action in ("confirm", "expire", "supersede"):

        async def setup(k: int, action: str = action) -> Call:
            payload: dict[str, Any] = {
                "id": await inference(xw),
                "action": action,
                "reason": "the user said so",
            }
            if action == "supersede":
                payload["content"] = f"The user mentioned {unique('subject')} twice."
            return lambda: xw.rt.tools.call(xw.p, "memory_revise", payload)

        await sweep(xw.rt, xw.p, setup, check=lambda a: completed(a))


async def test_memory_revise_merging_two_entities(xw: XWorld) -> None:
    schema = next(s for s in xw.rt.tools.tool_schemas(xw.p) if s["name"] == "memory_revise")
    actions = schema["input_schema"]["properties"].get("action", {}).get("enum", [])
    merge_action = next((a for a in actions if "merge" in a), None)

    async def entity(name: str) -> str:
        record_id = await write(
            xw,
            {
                "type": "episodic",
                "content": f"The user visited {name}.",
                "entities": [{"kind": "org", "name": name, "role": "mentions"}],
            },
        )
        ((entity_id, _),) = [
            link for link in await xw.rt.store.record_links(record_id) if link[1] == "mentions"
        ]
        return entity_id

    async def setup(k: int) -> Call:
        payload = {"entity_id": await entity(unique("Acme")), "merge_into": await entity(unique("Acme")),
                   "reason": "one company"}  # fmt: skip
        if merge_action is not None:
            payload["action"] = merge_action
        return lambda: xw.rt.tools.call(xw.p, "memory_revise", payload)

    await sweep(xw.rt, xw.p, setup, check=lambda a: completed(a))


async def test_memory_forget(xw: XWorld) -> None:
    async def setup(k: int) -> Call:
        payload = {"id": await inference(xw), "reason": "the user asked"}
        return lambda: xw.rt.tools.call(xw.p, "memory_forget", payload)

    await sweep(xw.rt, xw.p, setup, check=lambda a: completed(a, changed=True))


# --- the session hooks ------------------------------------------------------------------------


async def test_session_start_turn_and_end(xw: XWorld) -> None:
    # The session ends without scheduling an extraction (as XWorld.end does): the sweep of
    # the background extraction is below.
    xw.rt.hooks.on_end = _no_extraction
    principals: list[Principal] = []

    async def start(k: int) -> Call:
        principals.append(Principal("planner", "u1", unique("sess")))
        return lambda: xw.rt.hooks.on_session_start(principals[-1])

    async def turn(k: int) -> Call:
        return lambda: xw.rt.hooks.on_turn(xw.p, "user", f"I like {unique('jazz')}.")

    async def end(k: int) -> Call:
        p = Principal("planner", "u1", unique("sess"))
        await xw.rt.hooks.on_session_start(p)
        await xw.rt.hooks.on_turn(p, "user", "Hello there.")
        return lambda: xw.rt.hooks.on_session_end(p)

    for setup in (start, turn, end):
        await sweep(xw.rt, xw.p, setup)


async def test_a_turn_that_splits_an_idle_session(tmp_path: Path) -> None:
    w = await make_xworld(tmp_path / "memory.sqlite")  # the default idle timeout
    w.rt.hooks.on_end = _no_extraction
    idle = timedelta(minutes=w.rt.config.ingestion.session_idle_timeout_minutes + 1)
    try:

        async def setup(k: int) -> Call:
            w.clock.advance(idle)
            return lambda: w.rt.hooks.on_turn(w.p, "user", f"Back again with {unique('news')}.")

        async def check(a: Attempt) -> None:
            if a.cancelled:
                latest = await w.rt.hooks.on_turn(w.p, "user", "Still here.")
                assert latest.session_id is not None
                assert await count(w, "SELECT count(*) FROM sessions WHERE ended_at IS NULL") == 1

        def ended_only(change: Shape) -> bool:
            # The idle session's end commits on its own (it was idle whatever happens next): one
            # session row updated. The continuation, its split event and the turn are one
            # transaction: all of them or none, never a continuation without its turn.
            return change == {"sessions": (1, 1)}

        await sweep(w.rt, w.p, setup, check=check, partial=ended_only)
    finally:
        await w.rt.close()


# --- session extraction -----------------------------------------------------------------------


async def ended_session(w: XWorld) -> Principal:
    """A fresh session with two turns and one candidate waiting for its extraction, ended."""
    p = await chat(w)
    await w.rt.hooks.on_session_end(p)
    return p


async def chat(w: XWorld) -> Principal:
    """A fresh session with two turns and one candidate for its extraction to propose."""
    p = Principal("planner", "u1", unique("chat"))
    await w.rt.hooks.on_session_start(p)
    food = unique("ramen")
    p = await w.rt.hooks.on_turn(p, "user", f"My favourite food is {food}.")
    p = await w.rt.hooks.on_turn(p, "assistant", "Noted, I will remember that.")
    w.propose(cand(f"The user's favourite food is {food}.", f"My favourite food is {food}", 1,
                   attribute=f"food_{food}", entities=[("org", unique("Diner"), "mentions")]))  # fmt: skip
    return p


def claim_only(change: Shape) -> bool:
    """The claim commits on its own; a cancelled run leaves it to expire (then it is reclaimed)."""
    return change == {"sessions": (1, 1)}


async def test_extract_session(xw: XWorld) -> None:
    xw.rt.hooks.on_end = _no_extraction  # this test runs the extraction itself

    async def setup(k: int) -> Call:
        p = await ended_session(xw)
        assert p.session_id is not None
        return lambda: xw.rt.extract_session(p.session_id or "")

    async def check(a: Attempt) -> None:
        if not a.cancelled:
            assert a.result.status == "extracted" and a.result.counts["created"] == 1, a.result
        elif claim_only(a.change) and (a.k % 4 == 0 or SLOW):
            # The left claim expires and the next run reclaims the session and extracts it.
            xw.clock.advance(minutes=xw.rt.config.ingestion.extraction_claim_timeout_minutes + 1)
            session_id = (await xw.rt.store.db.fetchval(
                "SELECT id FROM sessions WHERE extraction_started_at IS NOT NULL AND extracted_at IS NULL"
            ))  # fmt: skip
            again = await xw.rt.extract_session(session_id)
            assert again.status == "extracted" and again.reclaimed, again

    await sweep(xw.rt, xw.p, setup, check=check, partial=claim_only)


async def test_extraction_scheduled_at_session_end(xw: XWorld) -> None:
    async def run_in_background(call: Call, cut: Cut) -> Attempt:
        with counting_tasks({BACKGROUND: cut}):
            await call()  # on_session_end: commits the end, then schedules the extraction
            await xw.rt.join_background()
        (task,) = cut.tasks
        return outcome(cut, task)

    async def setup(k: int) -> Call:
        p = await chat(xw)
        return lambda: xw.rt.hooks.on_session_end(p)

    def ended_or_claimed(change: Shape) -> bool:
        # The end commits before the extraction starts, and the claim before its write.
        return change == {"sessions": (1, 1)} or change == {"sessions": (1, 1), "events": (1, 0)}

    async def check(a: Attempt) -> None:
        if not a.cancelled:
            assert (await xw.events("extraction.run"))[-1]["payload"]["counts"]["created"] == 1

    await sweep(xw.rt, xw.p, setup, run=run_in_background, check=check, partial=ended_or_claimed)


async def test_a_cancelled_session_end_never_strands_its_extraction(xw: XWorld) -> None:
    """Ending twice schedules nothing, so an end that committed must have scheduled its
    extraction by the time its caller sees the cancellation."""

    async def end_then_wait(call: Call, cut: Cut) -> Attempt:
        result = await attempt(call, cut)
        await xw.rt.join_background()  # whatever the end scheduled, finished
        return result

    async def setup(k: int) -> Call:
        p = await chat(xw)
        return lambda: xw.rt.hooks.on_session_end(p)

    async def check(a: Attempt) -> None:
        stranded = await count(
            xw, "SELECT count(*) FROM sessions WHERE ended_at IS NOT NULL AND extracted_at IS NULL"
        )
        assert stranded == 0, f"ended without its extraction (cancelled at suspension {a.at})"

    await sweep(xw.rt, xw.p, setup, run=end_then_wait, check=check)


async def test_closing_the_runtime_cancels_background_extraction_cleanly(tmp_path: Path) -> None:
    """Close at the k-th await of a scheduled extraction; reopened, the store is sound and the
    session is extracted once (reclaimed after the claim expires, or already done)."""
    path = tmp_path / "memory.sqlite"
    counted = Cut(0)
    w = await open_world(path)
    with counting_tasks({BACKGROUND: counted}):
        await ended_session(w)
        await w.rt.join_background()
    await w.rt.close()
    assert counted.suspensions > 10
    for k in range(1, counted.suspensions + 1, 1 if SLOW else STRIDE):
        w = await open_world(path)
        rt = w.rt
        closing: list[asyncio.Task[None]] = []

        def close(rt: retold.Runtime = rt, closing: list[asyncio.Task[None]] = closing) -> None:
            task = asyncio.get_running_loop().create_task(
                rt.close(cancel_background=True), context=contextvars.Context()
            )
            closing.append(task)

        cut = Cut(k, action=close)
        with counting_tasks({BACKGROUND: cut}):
            p = await ended_session(w)
            await rt.join_background()
        await (closing[0] if closing else rt.close())
        assert p.session_id is not None
        w = await open_world(path)
        try:
            assert not (await w.rt.ops.check()).findings, k
            w.clock.advance(minutes=w.rt.config.ingestion.extraction_claim_timeout_minutes + 1)
            again = await w.rt.extract_session(p.session_id)
            assert again.status == "extracted" or again.reason == "already_extracted", (k, again)
        finally:
            await w.rt.close()


# --- the host API -----------------------------------------------------------------------------


async def test_host_writes_grants_and_provisioning(xw: XWorld) -> None:
    host = xw.rt.host

    async def system(k: int) -> Call:
        return lambda: host.write_system(
            USER, f"The user's badge number is {unique('b')}.", attribute=unique("badge")
        )

    async def ingest(k: int) -> Call:
        request = WriteRequest(type="episodic", content=f"The user tried {unique('yoga')}.", scope=USER)
        return lambda: host.ingest(xw.p, request)

    async def grant(k: int) -> Call:
        return lambda: host.grant(unique("helper"), USER, read=True, write=True)

    async def revoke(k: int) -> Call:
        agent = unique("helper")
        await host.grant(agent, USER, read=True)
        return lambda: host.revoke(agent, USER)

    async def provision(k: int) -> Call:
        return lambda: host.provision_user(unique("user"), aliases=[unique("Nick")])

    for setup in (system, ingest, grant, revoke, provision):
        await sweep(xw.rt, xw.p, setup)


# --- operations -------------------------------------------------------------------------------


async def test_expire(tmp_path: Path) -> None:
    w = await open_world(tmp_path / "memory.sqlite", **{"ingestion.provisional_ttl_days": 1})
    try:

        async def setup(k: int) -> Call:
            w.clock.advance(days=2)
            await w.rt.ops.expire()  # everything older (the probes) first, so each run expires one
            await inference(w)
            w.clock.advance(days=2)
            return w.rt.ops.expire

        async def check(a: Attempt) -> None:
            if not a.cancelled:
                assert len(a.result) == 1, a.result

        await sweep(w.rt, w.p, setup, check=check)
    finally:
        await w.rt.close()


async def test_retain(xw: XWorld) -> None:
    days = xw.rt.config.sessions.retain_days

    async def setup(k: int) -> Call:
        await xw.rt.ops.retain()  # an earlier attempt's session, if it was cancelled
        await ended_session(xw)
        await xw.rt.join_background()
        xw.clock.advance(days=days + 1)
        return xw.rt.ops.retain

    async def check(a: Attempt) -> None:
        if not a.cancelled:
            assert len(a.result.sessions) == 1, a.result

    await sweep(xw.rt, xw.p, setup, check=check)


async def test_erase_record_session_and_user(xw: XWorld) -> None:
    ops = xw.rt.ops
    cleared: list[int] = []
    xw.rt.embedder.clear_cache = lambda: cleared.append(1)  # type: ignore[attr-defined]

    async def record(k: int) -> Call:
        record_id = await write(xw, await statement(xw, unique("mauve")))
        return lambda: ops.erase(record=record_id, reason="asked")

    async def session(k: int) -> Call:
        p = Principal("planner", "u1", unique("talk"))
        await xw.rt.hooks.on_session_start(p)
        w = XWorld(xw.rt, xw.clock, xw.judge, xw.extractor, xw.reviewer, p)
        await write(w, await statement(w, unique("ochre")), p)
        return lambda: ops.erase(session=p.session_id, reason="asked")

    async def user(k: int) -> Call:
        user_id = unique("user")
        await xw.rt.host.provision_user(user_id)
        await xw.rt.host.grant("planner", Scope("user", user_id), read=True, write=True)
        p = Principal("planner", user_id, unique("talk"))
        await xw.rt.hooks.on_session_start(p)
        w = XWorld(xw.rt, xw.clock, xw.judge, xw.extractor, xw.reviewer, p)
        await write(w, await statement(w, unique("sepia")), w.p)
        return lambda: ops.erase(user=user_id, reason="asked")

    async def check(a: Attempt) -> None:
        if a.change:  # erased: this process forgot the text at once, cancelled or not
            assert cleared, f"the embedder's cache kept erased text (suspension {a.at})"
            erased = await xw.rt.store.db.fetch_column("SELECT id FROM records WHERE status = 'deleted'")
            positions = xw.rt.index.pos
            for record_id in erased:
                if record_id in positions:
                    assert not np.any(xw.rt.index._state.matrix[positions[record_id]]), record_id
            assert await xw.rt.store.truncate_wal()  # compacted: nothing left to move out of the WAL
        cleared.clear()

    for setup in (record, session, user):
        await sweep(xw.rt, xw.p, setup, check=check)


async def test_reembed(xw: XWorld) -> None:
    embedder = xw.rt.embedder
    for _ in range(3):
        await write(xw, await statement(xw, unique("jade")))

    async def setup(k: int) -> Call:
        return lambda: xw.rt.ops.reembed(embedder.name, embedder.version)

    # Every record's vector is replaced, so the change grows with the probes' records.
    await sweep(xw.rt, xw.p, setup, scaled=True)


async def test_check_repair(xw: XWorld) -> None:
    async def setup(k: int) -> Call:
        record_id = await write(xw, await statement(xw, unique("cyan")))
        await xw.rt.store.db.execute_atomic("DELETE FROM embeddings WHERE record_id = ?", (record_id,))
        return lambda: xw.rt.ops.check(repair=True)

    async def recover(a: Attempt) -> None:
        report = await xw.rt.ops.check(repair=True)  # a cancelled repair is finished by the next
        assert not report.findings, report

    def repaired_without_event(change: Shape) -> bool:
        # Each repair and the store.repaired event after them are transactions of their own.
        return "events" not in change

    await sweep(xw.rt, xw.p, setup, recover=recover, partial=repaired_without_event)


async def test_snapshot_save_and_load(xw: XWorld, tmp_path: Path) -> None:
    await write(xw, await statement(xw, unique("lilac")))
    for k in itertools.count(1):
        target = tmp_path / f"snap{k}.sqlite"
        result = await attempt(lambda target=target: xw.rt.ops.save_snapshot(target), Cut(k))
        await settle(xw.rt)
        left = await asyncio.to_thread(lambda: sorted(p.name for p in tmp_path.glob("snap*")))
        assert left == ([target.name] if target.exists() else []), "a cancelled snapshot left a partial file"
        if target.exists():
            assert read_snapshot_info(target).records >= 1
            target.unlink()
        if not result.cancelled:
            break
    await xw.rt.ops.save_snapshot(tmp_path / "snap.sqlite")
    await xw.rt.close()
    store = tmp_path / "memory.sqlite"
    for k in itertools.count(1):
        result = await attempt(lambda: load_snapshot(store, tmp_path / "snap.sqlite"), Cut(k))
        rt = await retold.open_runtime(store, embedder=FakeEmbedder())
        try:
            assert not (await rt.ops.check()).findings
        finally:
            await rt.close()
        if not result.cancelled:
            break
    xw.rt = await retold.open_runtime(store, embedder=FakeEmbedder())  # the fixture closes it


# --- helpers ----------------------------------------------------------------------------------


async def _no_extraction(session: Any) -> None:
    """A session-end seam that schedules nothing."""
