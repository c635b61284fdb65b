"""The §17.2 evidence suite, run through both write paths: the memory_write tool and session extraction.

Both paths apply one evidence rule (spec §6.6, ``retold.ingest.write.evidence``). They differ in
one place on purpose, and the suite pins it: an explicit write with a missing or absent
quote is stored as an expiring inference, while an extracted candidate — untrusted model
output whose contract requires a verbatim quote (§8.3) — is rejected and logged (§8.2
"Candidate validation", §17.3).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

import pytest

from retold.ingest.write.evidence import NOTE_NOT_FOUND, NOTE_NOT_PROVIDED
from retold.models import Record

from .extraction_world import USER, XWorld, cand, make_xworld

CONTENT = "The user prefers concise answers."


@dataclass
class Written:
    record: Record | None  # the stored semantic record, if any
    note: str | None  # the note its record.created event carries
    rejected: str | None  # the extraction rejection reason, if rejected


Path_ = Callable[[XWorld, str | None, int | None, str], Awaitable[Written]]


async def _created(w: XWorld) -> Written:
    records = [r for r in await w.rt.store.records_in_scope(USER) if r.type == "semantic"]
    if not records:
        return Written(None, None, None)
    [record] = records
    [event] = await w.rt.store.events(kind="record.created", record_id=record.id)
    return Written(record, event["payload"]["note"], None)


async def via_tool(w: XWorld, quote: str | None, turn: int | None, source_kind: str) -> Written:
    payload = {
        "type": "semantic",
        "content": CONTENT,
        "attribute": "answer_style",
        "source_kind": source_kind,
    }
    if quote is not None:
        payload["evidence"] = quote
    if turn is not None:
        payload["evidence_turn"] = turn
    result = await w.rt.tools.call(w.p, "memory_write", payload)
    assert result["ok"], result
    written = await _created(w)
    assert written.record is not None and written.record.id == result["record_id"]
    assert result["note"] == written.note
    return written


async def via_extraction(w: XWorld, quote: str | None, turn: int | None, source_kind: str) -> Written:
    w.propose(cand(CONTENT, quote or "", turn or 1, source_kind=source_kind))
    await w.end()
    result = await w.extract()
    assert result.status == "extracted"
    written = await _created(w)
    if written.record is None:
        return Written(None, None, result.candidates[0]["reason"])
    return written


PATHS: dict[str, Path_] = {"tool": via_tool, "extraction": via_extraction}


@pytest.fixture(params=sorted(PATHS))
def path(request: pytest.FixtureRequest) -> tuple[str, Path_]:
    return request.param, PATHS[request.param]


@pytest.fixture
async def w(tmp_path: Path) -> AsyncIterator[XWorld]:
    world = await make_xworld(tmp_path / "memory.sqlite")
    await world.say("user", "Please, I prefer concise answers from now on.")
    await world.say("assistant", "You seem to prefer concise answers, so I will be brief.")
    await world.say("tool", "profile lookup: answer_style = concise answers")
    try:
        yield world
    finally:
        await world.rt.close()


async def test_a_quote_absent_from_the_session(w: XWorld, path: tuple[str, Path_]) -> None:
    name, write = path
    out = await write(w, "I have never typed these words", 1, "user_statement")
    if name == "tool":  # downgraded to an expiring inference with no source
        assert out.record is not None
        assert (out.record.source_kind, out.record.source_ref, out.note) == (
            "agent_inference",
            None,
            NOTE_NOT_FOUND,
        )
        assert out.record.status == "provisional" and out.record.expires_at is not None
    else:  # an extracted candidate is rejected and logged
        assert (out.record, out.rejected) == (None, "evidence_not_found")


async def test_no_evidence(w: XWorld, path: tuple[str, Path_]) -> None:
    name, write = path
    out = await write(w, None, None, "user_statement")
    if name == "tool":
        assert out.record is not None
        assert (out.record.source_kind, out.record.source_ref, out.note) == (
            "agent_inference",
            None,
            NOTE_NOT_PROVIDED,
        )
        ttl = timedelta(days=w.rt.config.ingestion.provisional_ttl_days)
        assert out.record.status == "provisional" and out.record.expires_at == out.record.created_at + ttl
    else:
        assert (out.record, out.rejected) == (None, "evidence_not_provided")


async def test_a_user_statement_backed_by_an_assistant_turn_is_downgraded_with_a_note(
    w: XWorld, path: tuple[str, Path_]
) -> None:
    _, write = path
    out = await write(w, "You seem to prefer concise answers", 2, "user_statement")
    assert out.record is not None
    assert (out.record.source_kind, out.record.status) == ("agent_inference", "provisional")
    assert out.note is not None and "downgraded from user_statement" in out.note


async def test_a_tool_turn_supports_tool_result(w: XWorld, path: tuple[str, Path_]) -> None:
    _, write = path
    out = await write(w, "answer_style = concise answers", 3, "tool_result")
    assert out.record is not None and (out.record.source_kind, out.note) == ("tool_result", None)


async def test_a_tool_turn_does_not_support_a_user_statement(w: XWorld, path: tuple[str, Path_]) -> None:
    _, write = path
    out = await write(w, "answer_style = concise answers", 3, "user_statement")
    assert out.record is not None and out.record.source_kind == "tool_result"
    assert out.note is not None and "downgraded from user_statement" in out.note


async def test_a_lower_claim_than_the_turn_allows_is_kept(w: XWorld, path: tuple[str, Path_]) -> None:
    _, write = path
    out = await write(w, "I prefer concise answers", 1, "agent_inference")
    assert out.record is not None
    assert (out.record.source_kind, out.record.status) == ("agent_inference", "provisional")


async def test_source_ref_points_to_the_matched_turn(w: XWorld, path: tuple[str, Path_]) -> None:
    _, write = path
    out = await write(w, "I prefer concise answers", 1, "user_statement")
    assert out.record is not None
    assert (out.record.source_kind, out.record.source_ref) == ("user_statement", "session:s1<turn:1>")
    assert out.record.evidence == "I prefer concise answers"
