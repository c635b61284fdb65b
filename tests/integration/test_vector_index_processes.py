"""Two OS processes on one SQLite file: the parent's VectorIndex catches up with the child's writes."""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import AsyncIterator
from datetime import datetime
from pathlib import Path

import numpy as np
import pytest

from retold.index.vector import VectorIndex
from retold.models import Record, Scope
from retold.store import Store
from retold.testing import FakeEmbedder
from retold.util import new_id

pytestmark = pytest.mark.integration

MODEL, VERSION, DIMS = "fake-embedder", "1", 64
RELOAD_MAX = 4
WRITER = Path(__file__).with_name("vector_writer.py")
EMBEDDER = FakeEmbedder(dims=DIMS, name=MODEL, version=VERSION)


async def child_writes(path: Path, *texts: str, pause: float = 0.0) -> list[dict[str, object]]:
    """Run the writer in a separate Python process and return what it committed."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable, str(WRITER), str(path), MODEL, VERSION, str(DIMS), *texts, "--pause", str(pause),
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    stdout, stderr = await asyncio.wait_for(proc.communicate(), timeout=60)
    assert proc.returncode == 0, stderr.decode()
    return [json.loads(line) for line in stdout.decode().splitlines()]


def query(text: str) -> np.ndarray:
    return EMBEDDER.embed_queries([text])[0]


def parent_record(text: str, now: datetime) -> Record:
    return Record(
        id=new_id(), type="semantic", version=1, content=text, subject="-", subject_entity_id=None,
        attribute=None, scope=Scope("user", "u1"), source_kind="user_statement", source_ref=None,
        creator_agent_id="parent", evidence=None, created_at=now, event_at=now, expires_at=None,
        valid_from=None, valid_until=None, review_at=None, review_flagged_at=None, confidence=0.9,
        status="confirmed", supersedes_id=None, reinforcements=0, last_reinforced_at=None, tags=[],
        entity_ids=[],
    )  # fmt: skip


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[Store]:
    opened = await Store.open(tmp_path / "memory.sqlite")
    try:
        yield opened
    finally:
        await opened.close()


async def test_refresh_sees_another_processes_writes_as_delta_reload_or_current(store: Store) -> None:
    path = Path(store.path)
    index = VectorIndex(MODEL, VERSION, DIMS)
    assert await index.refresh(store, RELOAD_MAX) == "loaded"
    assert len(index) == 0

    # One write by the child: a delta, and the new record is searchable at once.
    [written] = await child_writes(path, "the deploy failed on friday")
    assert await index.refresh(store, RELOAD_MAX) == "delta"
    assert index.search(query("deploy friday"), {written["id"]}, k=1)[0][0] == written["id"]
    assert index.loaded_version == written["version"]
    assert await index.refresh(store, RELOAD_MAX) == "current"

    # A burst larger than incremental_reload_max: rebuilt from the file.
    burst = await child_writes(path, *(f"release note number {n}" for n in range(RELOAD_MAX + 2)))
    assert await index.refresh(store, RELOAD_MAX) == "reloaded"
    assert set(index.ids) == {written["id"]} | {w["id"] for w in burst}
    assert index.loaded_version == burst[-1]["version"]

    # The parent's own writes, applied in-process with their committed versions: current.
    for text in ("prefers concise answers", "works in UTC"):
        record = parent_record(text, store.clock.now())
        await store.insert_record(record)
        vector = EMBEDDER.embed_documents([text])[0]
        version = await store.put_embedding(record.id, MODEL, VERSION, vector)
        assert index.upsert(record.id, vector, version)
    assert await index.refresh(store, 0) == "current"  # even with a zero limit: nothing is new
    assert index.loaded_version == await store.records_version()
    assert len(index) == RELOAD_MAX + 5


async def test_refreshing_while_the_child_writes_converges_to_a_fresh_load(store: Store) -> None:
    index = VectorIndex(MODEL, VERSION, DIMS)
    await index.load(store)
    texts = [f"fact {n} about project atlas" for n in range(12)]
    writer = asyncio.create_task(child_writes(Path(store.path), *texts, pause=0.02))
    outcomes: set[str] = set()
    while not writer.done():
        outcomes.add(await index.refresh(store, 3))
        await asyncio.sleep(0.01)
    written = await writer
    outcomes.add(await index.refresh(store, 3))
    assert outcomes <= {"current", "delta", "reloaded"}
    assert "delta" in outcomes or "reloaded" in outcomes

    fresh = VectorIndex(MODEL, VERSION, DIMS)
    await fresh.load(store)
    assert sorted(index.ids) == sorted(fresh.ids) == sorted(w["id"] for w in written)
    assert index.loaded_version == fresh.loaded_version
    for item in written:
        np.testing.assert_allclose(index.vector_for(item["id"]), fresh.vector_for(item["id"]), rtol=1e-6)
