"""Real concurrency on one SQLite file: each worker is a thread with its own event loop and connections.

Two extraction workers on one session write once (the atomic session claim), and two
temporal reviewers on one due record emit one ``record.review_due`` and set
``review_flagged_at`` once (the conditional flag), without touching the record.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable
from datetime import timedelta
from pathlib import Path
from typing import Any, TypeVar

import pytest

import retold
from retold.config import Config
from retold.ingest.write.temporal_review import review_due
from retold.models import CandidateRecord, ExtractionOutput, Principal, Scope, SessionSummary
from retold.store import Store
from retold.testing import FakeClock, FakeEmbedder, FakeExtractor, FakeJudge, FakeReviewer, record_for_tests

pytestmark = pytest.mark.integration

T = TypeVar("T")
USER = Scope("user", "u1")


def in_threads(count: int, work: Callable[[threading.Barrier], Awaitable[T]]) -> list[T]:
    """Run ``work`` in ``count`` threads at once, each on its own event loop; return the results."""
    barrier = threading.Barrier(count)
    results: list[Any] = [None] * count
    errors: list[BaseException] = []

    def run(index: int) -> None:
        try:
            results[index] = asyncio.run(work(barrier))  # type: ignore[arg-type]
        except BaseException as exc:  # surfaced below, in the test's thread
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    if errors:
        raise errors[0]
    return results


OUTPUT = ExtractionOutput(
    [
        CandidateRecord(
            "semantic", "The user prefers concise answers.", "answer_style", "user_statement",
            "I prefer concise answers", 1, [],
        )
    ],
    SessionSummary("The user asked for concise answers.", [], []),
)  # fmt: skip


async def _prepare_session(path: Path, clock: FakeClock) -> None:
    async with retold.open_runtime(path, embedder=FakeEmbedder(), judge=FakeJudge(), clock=clock) as rt:
        await rt.host.provision_user("u1", aliases=["Aditya"])
        await rt.host.grant("planner", USER, read=True, write=True)
        p = await rt.hooks.on_session_start(Principal("planner", "u1", "s1"))
        p = await rt.hooks.on_turn(p, "user", "Hi. I prefer concise answers, please.")
        p = await rt.hooks.on_turn(p, "assistant", "Understood.")
        await rt.hooks.on_session_end(p)  # no extractor here: nothing is scheduled


@pytest.mark.parametrize("round_", range(3))
def test_two_extraction_workers_on_one_session_write_once(tmp_path: Path, round_: int) -> None:
    path = tmp_path / "memory.sqlite"
    clock = FakeClock()
    asyncio.run(_prepare_session(path, clock))

    async def worker(barrier: threading.Barrier) -> str:
        extractor = FakeExtractor(OUTPUT, delay_s=0.3)
        async with retold.open_runtime(
            path, embedder=FakeEmbedder(), judge=FakeJudge(), clock=clock, extractor=extractor,
            reviewer=FakeReviewer(),
        ) as rt:  # fmt: skip
            barrier.wait()
            result = await rt.extract_session("s1")
            return f"{result.status}:{result.reason}"

    first, second = sorted(in_threads(2, worker))
    assert first == "extracted:None"
    # Usually the loser finds the live claim; on a very slow machine the winner may already be done.
    assert second in ("skipped:claimed_by_other", "skipped:already_extracted")

    async def check() -> None:
        store = await Store.open(path)
        try:
            records = await store.records_in_scope(USER)
            assert sorted(r.source_kind for r in records) == ["session_summary", "user_statement"]
            assert len(await store.events(kind="extraction.run")) == 1
            assert len(await store.events(kind="record.created")) == 2
        finally:
            await store.close()

    asyncio.run(check())


@pytest.mark.parametrize("round_", range(5))
def test_two_temporal_workers_on_one_due_record_emit_one_event(tmp_path: Path, round_: int) -> None:
    path = tmp_path / "memory.sqlite"
    clock = FakeClock()
    now = clock.now()
    record = record_for_tests(
        now - timedelta(days=10), review_at=now - timedelta(minutes=1), status="provisional"
    )

    async def seed() -> Any:
        store = await Store.open(path, clock=clock)
        try:
            async with store.transaction():
                await store.insert_record(record)
            return await store.get_record(record.id)
        finally:
            await store.close()

    before = asyncio.run(seed())
    config = Config()

    async def worker(barrier: threading.Barrier) -> int:
        store = await Store.open(path, clock=clock)
        try:
            barrier.wait()
            return len(await review_due(store, config, clock))
        finally:
            await store.close()

    assert sorted(in_threads(2, worker)) == [0, 1]

    async def check() -> None:
        store = await Store.open(path, clock=clock)
        try:
            events = await store.events(kind="record.review_due")
            assert [e["record_id"] for e in events] == [record.id]
            after = await store.get_record(record.id)
            assert after is not None and after.review_flagged_at == now
            assert (after.content, after.source_kind, after.evidence, after.status, after.version) == (
                before.content, before.source_kind, before.evidence, before.status, before.version,
            )  # fmt: skip
        finally:
            await store.close()

    asyncio.run(check())


def test_four_temporal_workers_share_a_backlog_without_duplicates(tmp_path: Path) -> None:
    path = tmp_path / "memory.sqlite"
    clock = FakeClock()
    now = clock.now()
    records = [record_for_tests(now, review_at=now - timedelta(minutes=i)) for i in range(40)]

    async def seed() -> None:
        store = await Store.open(path, clock=clock)
        try:
            async with store.transaction():
                for r in records:
                    await store.insert_record(r)
        finally:
            await store.close()

    asyncio.run(seed())
    config = Config().override({"ingestion.temporal_review_batch_size": 7})

    async def worker(barrier: threading.Barrier) -> list[str]:
        store = await Store.open(path, clock=clock)
        flagged: list[str] = []
        try:
            barrier.wait()
            while batch := await review_due(store, config, clock):
                flagged += [f.record_id for f in batch]
            return flagged
        finally:
            await store.close()

    per_worker = in_threads(4, worker)
    flagged = [rid for ids in per_worker for rid in ids]
    assert sorted(flagged) == sorted(r.id for r in records)  # every record once, none twice

    async def count() -> int:
        store = await Store.open(path, clock=clock)
        try:
            return len(await store.events(kind="record.review_due"))
        finally:
            await store.close()

    assert asyncio.run(count()) == 40
