"""Reliability on real files and real processes: crashes, concurrent writers, erasure residue.

The promises these tests prove are listed in docs/reliability.md. Child processes run
``reliability_worker.py`` on the deterministic fakes, so no model loads.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import signal
import subprocess
import sys
import time
from asyncio.subprocess import PIPE
from pathlib import Path
from typing import Any

import pytest

import retold
from retold.models import EntityMention, Principal, Scope, SearchRequest
from retold.testing import FakeClock, FakeEmbedder, FakeJudge

SHARED_NOTE = "The team office is in Lisbon."  # as reliability_worker.py writes it

pytestmark = pytest.mark.integration

WORKER = Path(__file__).with_name("reliability_worker.py")
CRASH_ROUNDS = 20
# (processes, writes each) per backend: PostgreSQL is the backend for many processes.
SIZES = {"sqlite": (3, 300), "postgresql": (4, 500)}
FAKE_CONFIG = "embedding:\n  model: fake-embedder\n  version: '1'\n  dims: 256\n"


def fake_config(tmp_path: Path) -> Path:
    """A config naming the fake embedder, so `retold check` in a subprocess judges the fake vectors."""
    path = tmp_path / "fake.yaml"
    path.write_text(FAKE_CONFIG)
    return path


def retold_cli(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "retold", *map(str, args)], capture_output=True, text=True, timeout=60
    )


def lines(raw: bytes) -> list[dict[str, Any]]:
    """The complete JSON lines a child printed; a line cut short by SIGKILL was never acknowledged."""
    out = []
    for line in raw.decode(errors="replace").splitlines():
        try:
            out.append(json.loads(line))
        except ValueError:
            continue
    return out


# --- crash safety -------------------------------------------------------------------------------


def test_no_acknowledged_write_is_lost_when_the_writer_is_killed(tmp_path: Path, store_location: Any) -> None:
    """SIGKILL at random moments: the store opens, `retold check` is clean, every acked write is there."""
    store, config = store_location("memory.sqlite"), fake_config(tmp_path)
    seed = int(os.environ.get("RETOLD_CRASH_SEED", time.time_ns() % 100_000))
    rng = random.Random(seed)
    acked: dict[str, str] = {}
    for round_no in range(CRASH_ROUNDS):
        child = subprocess.Popen(
            [sys.executable, str(WORKER), "crash", str(store), str(round_no)],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        )  # fmt: skip
        assert child.stdout is not None
        ready = child.stdout.readline()
        assert b"ready" in ready, (ready, child.stderr.read() if child.stderr else b"")
        time.sleep(rng.uniform(0.0, 0.5))
        child.send_signal(signal.SIGKILL)
        out, err = child.communicate(timeout=30)
        assert child.returncode == -signal.SIGKILL, (seed, round_no, err.decode())
        events = lines(out)
        assert not [e for e in events if "error" in e], (seed, events)
        acked.update({e["id"]: e["text"] for e in events if "id" in e})

        if round_no in (0, CRASH_ROUNDS - 1):  # read_back runs the same check every round, in process
            proc = retold_cli("check", "--store", store, "--config", config)
            assert proc.returncode == 0, (seed, round_no, proc.stdout, proc.stderr)
        found, active_tasks = asyncio.run(read_back(store, list(acked)))
        missing = {i for i in acked if found.get(i) != acked[i]}
        assert not missing, (seed, round_no, sorted(missing))
        # A supersession (new value in, old value out) is one transaction: never 0 or 2 live values
        # once one was acknowledged (a kill between commit and print may leave an unacknowledged one).
        task_acked = any(text.startswith("the current task") for text in acked.values())
        assert active_tasks == 1 if task_acked else active_tasks <= 1, (seed, round_no, active_tasks)
    assert len(acked) >= CRASH_ROUNDS, (seed, len(acked))  # the kills did land mid-stream


async def read_back(store: Path | str, ids: list[str]) -> tuple[dict[str, str], int]:
    async with retold.open_runtime(store, embedder=FakeEmbedder(), judge=FakeJudge()) as rt:
        records = await rt.store.get_records(ids)
        active = [
            r for r in await rt.store.records_in_scope(Scope("user", "u1")) if r.attribute == "current_task"
        ]
        assert (await rt.ops.check()).clean
        return {r.id: r.content for r in records}, len(active)


# --- concurrency --------------------------------------------------------------------------------


async def test_concurrent_writers_lose_nothing_and_see_each_other(
    tmp_path: Path, store_location: Any, backend: str
) -> None:
    """Processes write notes and overlapping facts at once, searching as they go: nothing
    acknowledged is lost, the shared sentence is one record, the shared fact one live value
    at the end of a valid supersession chain, and `check` is clean."""
    store, go_file = store_location("memory.sqlite"), tmp_path / "go"
    WRITERS, WRITES_EACH = SIZES[backend]
    async with retold.open_runtime(store, embedder=FakeEmbedder(), judge=FakeJudge()) as rt:
        await rt.host.provision_user("u1")
        for n in range(WRITERS):
            await rt.host.grant(f"w{n}", Scope("user", "u1"), read=True, write=True)
    command = [sys.executable, str(WORKER), "concurrent", str(store)]
    children = [
        await asyncio.create_subprocess_exec(
            *command, str(n), str(WRITES_EACH), str(go_file), str(WRITERS), stdout=PIPE, stderr=PIPE
        )
        for n in range(WRITERS)
    ]
    outputs: dict[int, list[dict[str, Any]]] = {n: [] for n in range(WRITERS)}

    async def follow(n: int) -> None:
        stream = children[n].stdout
        assert stream is not None
        async for raw in stream:
            event = json.loads(raw)
            outputs[n].append(event)
            if "done" in event and all(any("done" in e for e in outputs[m]) for m in range(WRITERS)):
                go_file.touch()

    started = time.monotonic()
    await asyncio.wait_for(asyncio.gather(*(follow(n) for n in range(WRITERS))), timeout=480)
    stderr = [(await c.stderr.read()).decode() for c in children]  # type: ignore[union-attr]
    codes = [await c.wait() for c in children]
    elapsed = time.monotonic() - started
    assert codes == [0] * WRITERS, stderr
    for text in stderr:
        assert "locked" not in text and "Traceback" not in text, text

    written = {n: [e for e in outputs[n] if "id" in e] for n in range(WRITERS)}
    assert [len(written[n]) for n in range(WRITERS)] == [WRITES_EACH] * WRITERS
    for n in range(WRITERS):
        (done,) = [e for e in outputs[n] if "done" in e]
        assert done["own_misses"] == [], (n, done)  # each process finds its own latest write
        (final,) = [e for e in outputs[n] if "searched" in e]
        assert final["missing"] == [], (n, final)  # ... and, next time it searches, the others'
    ids = [e["id"] for n in range(WRITERS) for e in written[n]]
    assert len(set(ids)) == WRITERS * WRITES_EACH
    async with retold.open_runtime(store, embedder=FakeEmbedder(), judge=FakeJudge()) as rt:
        records = await rt.store.get_records(ids)
        assert len(records) == WRITERS * WRITES_EACH
        assert all(r.status == "confirmed" for r in records)
        live = [r for r in await rt.store.records_in_scope(Scope("user", "u1")) if r.type == "semantic"]
        offices = [r for r in live if r.attribute == "office"]
        assert [r.content for r in offices] == [SHARED_NOTE]  # one record, however many wrote it
        standups = [r for r in live if r.attribute == "standup_time"]
        assert len(standups) == 1  # one live value; the others superseded by it, in one chain
        acked_current = {e["current"] for n in range(WRITERS) for e in outputs[n] if "current" in e}
        chain, seen = standups[0], set()
        while chain.supersedes_id is not None and chain.id not in seen:
            seen.add(chain.id)
            previous = await rt.store.get_record(chain.supersedes_id)
            assert previous is not None and previous.status == "superseded"
            chain = previous
        assert (await rt.ops.check()).clean
        assert acked_current <= {r.id for r in await rt.store.get_records(list(acked_current))}
    print(f"{WRITERS} x {WRITES_EACH} writes with searches in {elapsed:.1f}s")


# --- erasure leaves nothing ---------------------------------------------------------------------

# Unique strings seeded into each place a user's text can go. Upper case in the source
# text: FTS stores tokens folded to lower case, so both spellings are looked for.
MARKERS = {
    user: {
        place: f"Qz{user}{place}Mark"
        for place in ("turn", "content", "evidence", "tag", "alias", "search", "private", "project")
    }
    for user in ("u1", "u2")
}


async def seed_user(rt: retold.Runtime, user: str) -> None:
    m = MARKERS[user]
    project = Scope("project", "p1")
    await rt.host.provision_user(user, aliases=[m["alias"]])
    await rt.host.grant("planner", Scope("user", user), read=True, write=True)
    await rt.host.grant("planner", project, read=True, write=True)
    p = await rt.hooks.on_session_start(Principal("planner", user, f"{user}-s1"))
    p = await rt.hooks.on_turn(p, "user", f"Just chatting about {m['turn']} today.")
    quote = f"I always review code with {m['evidence']} first."
    p = await rt.hooks.on_turn(p, "user", quote)
    writes = [
        dict(content=f"{m['alias']} reviews code with {m['content']}.", attribute="review_style",
             tags=[m["tag"]], scope=Scope("user", user)),
        dict(content=f"Planner's own note: {m['private']}.", attribute="planner_note",
             scope=Scope("agent", f"planner/{user}"),
             entities=[EntityMention("person", m["alias"], "about")]),
        dict(content=f"The project review uses {m['project']}.", attribute=f"review_{user}",
             scope=project, entities=[EntityMention("project", "Billing", "about")]),
    ]  # fmt: skip
    for fields in writes:
        result = await rt.ingestor.write(
            p, retold_request(fields, source_kind="user_statement", evidence=quote)
        )
        assert result.ok and result.status == "confirmed", (fields, result)
    response = await rt.search(p, SearchRequest(queries=[f"{m['search']} {m['content']}"]))
    assert response.results, user


def retold_request(fields: dict[str, Any], **more: Any) -> Any:
    from retold.ingest.write.request import WriteRequest

    return WriteRequest(type="semantic", **fields, **more)


def raw_bytes(store: Path) -> bytes:
    data = b""
    for suffix in ("", "-wal", "-journal"):
        path = Path(f"{store}{suffix}")
        if path.exists():
            data += path.read_bytes()
    return data


def places(data: bytes, user: str) -> set[str]:
    """The places (turn, content, ...) whose marker for ``user`` appears in the bytes."""
    return {entry.split(":")[0] for entry in residue(data, user)}


def wal_size(store: Path) -> int:
    wal = Path(f"{store}-wal")
    return wal.stat().st_size if wal.exists() else 0


def residue(data: bytes, user: str) -> list[str]:
    found = []
    for place, marker in MARKERS[user].items():
        for spelling in (marker, marker.lower()):
            if spelling.encode() in data:
                found.append(f"{place}:{spelling}")
    return found


async def test_erasing_a_user_leaves_none_of_their_text_in_the_file_or_wal(tmp_path: Path) -> None:
    store = tmp_path / "memory.sqlite"
    clock = FakeClock()
    async with retold.open_runtime(store, embedder=FakeEmbedder(), judge=FakeJudge(), clock=clock) as rt:
        for user in ("u1", "u2"):
            await seed_user(rt, user)
        assert places(raw_bytes(store), "u1") == set(MARKERS["u1"])  # every marker really landed

        report = await rt.ops.erase(user="u1", reason="deletion request", actor="dpo")

        assert report.compacted is True
        while_open = raw_bytes(store)
        assert residue(while_open, "u1") == []
        assert wal_size(store) == 0
        # Every other user's text is still there, in the file and in search.
        assert places(while_open, "u2") == set(MARKERS["u2"])
        u2 = Principal("planner", "u2", "u2-s1")
        for place in ("content", "private", "project"):
            response = await rt.search(u2, SearchRequest(queries=[MARKERS["u2"][place]]))
            assert any(MARKERS["u2"][place] in r.record.content for r in response.results), place
    after_close = raw_bytes(store)
    assert residue(after_close, "u1") == []
    assert MARKERS["u2"]["content"].encode() in after_close
