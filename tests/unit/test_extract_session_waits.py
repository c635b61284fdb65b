"""Issue 45 item 9b: ``extract_session`` right after ``on_session_end`` waits for the scheduled run.

``on_session_end`` schedules extraction in the background; that run holds the session's claim.
A call in the same runtime must wait for it and return its result ("run now and wait for it"),
never ``skipped / claimed_by_other`` before anything is written. A second runtime on the same
store is another worker: it still finds the live claim.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import retold
from retold.testing import FakeEmbedder, FakeExtractor, FakeJudge, FakeReviewer

from .extraction_world import USER, XWorld, cand, make_xworld

QUOTE = "I prefer concise answers"


async def _world_with_a_session(store_path: Path | str, *, delay_s: float) -> XWorld:
    w = await make_xworld(store_path, extractor=FakeExtractor(delay_s=delay_s))
    await w.say("user", "Hi. I prefer concise answers, please.")
    await w.say("assistant", "Understood.")
    w.propose(cand("The user prefers concise answers.", QUOTE, 1))
    return w


async def test_extract_session_after_on_session_end_returns_the_scheduled_run(store_path: Path | str) -> None:
    w = await _world_with_a_session(store_path, delay_s=0.2)
    try:
        assert await w.rt.hooks.on_session_end(w.p)  # schedules the background run
        result = await w.extract()
        assert (result.status, result.reason) == ("extracted", None), result
        # It returned after the run wrote: the record, the summary and one run event are there.
        kinds = sorted(r.source_kind for r in await w.records())
        assert kinds == ["session_summary", "user_statement"]
        assert (await w.session()).extracted_at is not None
        assert len(await w.events("extraction.run")) == 1
        assert len(w.extractor.calls) == 1  # the waiting call did not run the model again
        await w.rt.join_background()
        assert len(await w.events("extraction.run")) == 1
    finally:
        await w.rt.close()


async def test_concurrent_calls_in_one_runtime_share_one_run(store_path: Path | str) -> None:
    w = await _world_with_a_session(store_path, delay_s=0.2)
    try:
        await w.end()
        first, second = await asyncio.gather(w.extract(), w.extract())
        assert (first.status, second.status) == ("extracted", "extracted"), (first, second)
        assert first.event_id == second.event_id and len(w.extractor.calls) == 1
    finally:
        await w.rt.close()


async def test_a_forced_call_waits_then_reruns(store_path: Path | str) -> None:
    w = await _world_with_a_session(store_path, delay_s=0.1)
    try:
        await w.end()
        assert (await w.extract()).status == "extracted"
        w.extractor.delay_s = 0.2
        assert await w.rt.hooks.on_session_end(w.p) is False  # already ended: nothing scheduled
        plain, forced = await asyncio.gather(w.extract(), w.extract(force=True))
        # The plain call and the forced one both see the session extracted; the forced one re-ran it.
        assert (forced.status, forced.rerun) == ("extracted", True), forced
        assert (plain.status, plain.reason) in (("skipped", "already_extracted"), ("extracted", None))
    finally:
        await w.rt.close()


async def test_another_runtime_still_finds_the_live_claim(store_path: Path | str) -> None:
    w = await _world_with_a_session(store_path, delay_s=0.5)
    other_extractor = FakeExtractor()
    other = await retold.open_runtime(
        store_path, embedder=FakeEmbedder(), judge=FakeJudge(), clock=w.clock, extractor=other_extractor,
        reviewer=FakeReviewer(),
    )  # fmt: skip
    try:
        assert await w.rt.hooks.on_session_end(w.p)
        await asyncio.sleep(0.2)  # the background run has claimed the session and waits on the model
        elsewhere = await other.extract_session(w.p.session_id or "")
        assert (elsewhere.status, elsewhere.reason) == ("skipped", "claimed_by_other"), elsewhere
        assert other_extractor.calls == []
        here = await w.extract()
        assert here.status == "extracted", here
        assert len(await w.records(USER)) == 2
    finally:
        await other.close()
        await w.rt.close()
