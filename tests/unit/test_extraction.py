"""Session extraction (spec §8.2, §17.3 "Session extraction") on fakes and a real SQLite file."""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import anyio.from_thread
import pytest

from retold.config import Config
from retold.errors import ConfigError, NotFoundError
from retold.ingest.write.request import WriteRequest
from retold.models import (
    Entity,
    EntityMention,
    ExtractionOutput,
    ReviewDecision,
    Scope,
    SessionKey,
    SessionSummary,
)
from retold.testing import FakeExtractor, FakeJudge, FakeReviewer

from .extraction_world import PRIVATE, SUMMARY, USER, XWorld, cand, make_xworld

QUOTE = "I prefer concise answers"
ACME = EntityMention("org", "Acme", "about")


@pytest.fixture
async def xw(store_location: Any) -> AsyncIterator[XWorld]:
    """On each backend the suite runs: extraction's queries are the store's, both dialects."""
    w = await make_xworld(store_location("memory.sqlite"))
    try:
        yield w
    finally:
        await w.rt.close()


async def two_turns(w: XWorld, user: str = "Hi! I prefer concise answers, please.") -> None:
    await w.say("user", user)
    await w.say("assistant", "Understood, I will keep them short.")


def run_payload(events: list[dict[str, Any]]) -> dict[str, Any]:
    assert len(events) == 1, events
    payload: dict[str, Any] = events[0]["payload"]
    return payload


# --- evidence and the envelope -------------------------------------------------------------------


async def test_candidate_with_missing_evidence_is_rejected_and_logged(xw: XWorld) -> None:
    await two_turns(xw)
    xw.propose(
        cand("The user prefers concise answers.", "I never said this at all", 1),
        cand("The user prefers bullet lists.", "", 1, attribute="format"),
        cand("The user prefers concise answers.", QUOTE, 2),  # a real quote, but not in the named turn
    )
    await xw.end()
    result = await xw.extract()
    assert result.status == "extracted"
    assert [c["reason"] for c in result.candidates] == [
        "evidence_not_found",
        "evidence_not_provided",
        "evidence_not_found",
    ]
    assert xw.reviewer.calls == []  # rejected before the reviewer saw anything
    assert [r.source_kind for r in await xw.records()] == ["session_summary"]
    payload = run_payload(await xw.events("extraction.run"))
    assert payload["counts"]["rejected"] == 3 and payload["rejection_reasons"] == {
        "evidence_not_found": 2,
        "evidence_not_provided": 1,
    }
    assert payload["candidates"][0]["content"] == "The user prefers concise answers."  # kept for evaluation


async def test_assistant_quote_claimed_as_user_statement_is_downgraded_before_review(xw: XWorld) -> None:
    await two_turns(xw)
    xw.propose(cand("The user wants short answers.", "I will keep them short", 2))
    await xw.end()
    result = await xw.extract()
    seen, _ = xw.reviewer.calls[0]
    assert seen.source_kind == "agent_inference"  # the reviewer sees the downgraded claim
    [fact] = [r for r in await xw.records() if r.type == "semantic"]
    assert (fact.source_kind, fact.status, fact.source_ref) == (
        "agent_inference",
        "provisional",
        "session:s1<turn:2>",
    )
    assert "downgraded from user_statement" in result.candidates[0]["notes"][0]


async def test_ambiguous_about_entity_is_rejected_with_the_candidate_ids(xw: XWorld) -> None:
    now = xw.clock.now()
    ids = []
    for scope in (USER, Scope("org", "acme")):
        entity = Entity(f"e-{scope.kind}", "org", "Acme", scope, "confirmed", None, ["acme"], now)
        await xw.rt.store.insert_entity(entity)
        ids.append(entity.id)
    await xw.rt.host.grant("planner", Scope("org", "acme"), read=True, write=False)
    await xw.say("user", "Acme uses trunk based development for everything")
    await xw.say("assistant", "Noted.")
    xw.propose(
        cand(
            "Acme uses trunk based development.",
            "Acme uses trunk based development",
            1,
            attribute="branching",
            entities=[("org", "Acme", "about")],
        )
    )
    await xw.end()
    result = await xw.extract()
    [report] = result.candidates
    assert report["reason"] == "entity_ambiguous" and sorted(report["detail"]["candidates"]) == sorted(ids)
    assert xw.reviewer.calls == []
    assert [r.type for r in await xw.records()] == ["episodic"]  # the summary only


async def test_semantic_candidate_without_about_entity_needs_the_user_scope(tmp_path: Path) -> None:
    w = await make_xworld(tmp_path / "m.sqlite", grant_user=False)  # destination: the private scope
    try:
        await two_turns(w)
        w.propose(cand("The user prefers concise answers.", QUOTE, 1))
        await w.end()
        result = await w.extract()
        assert result.candidates[0]["reason"] == "invalid_subject"
        [summary] = await w.records(PRIVATE)
        assert summary.source_kind == "session_summary" and summary.scope == PRIVATE
    finally:
        await w.rt.close()


async def test_candidates_over_the_cap_are_not_considered(tmp_path: Path) -> None:
    config = Config().override({"ingestion.extraction_max_candidates": 2})
    w = await make_xworld(tmp_path / "m.sqlite", config=config)
    try:
        await two_turns(w)
        w.propose(
            *[cand(f"The user prefers concise answers {i}.", QUOTE, 1, attribute=f"a{i}") for i in range(4)]
        )
        await w.end()
        result = await w.extract()
        assert (result.counts["proposed"], result.counts["considered"], result.counts["over_cap"]) == (
            4,
            2,
            2,
        )
        assert len(w.reviewer.calls) == 2
    finally:
        await w.rt.close()


# --- review ----------------------------------------------------------------------------------------


async def test_review_outcomes_are_logged_and_a_rejection_never_reaches_the_ingestor(xw: XWorld) -> None:
    await xw.say("user", "I prefer concise answers and I work at Acme since 2024")
    await xw.say("assistant", "Great, noted both.")
    first = cand("The user prefers concise answers.", QUOTE, 1)
    second = cand("The user works at Acme.", "I work at Acme since 2024", 1, attribute="employer")
    third = cand("The user loves long essays and concise answers.", QUOTE, 1, attribute="style")
    narrowed = dataclasses.replace(third, content="The user prefers concise answers in general.")
    xw.reviewer.decisions = [
        ReviewDecision("accept", None, "clear preference"),
        ReviewDecision("reject", None, "not durable"),
        ReviewDecision("revise", narrowed, "dropped the unsupported half"),
    ]
    xw.propose(first, second, third)
    await xw.end()
    planned: list[str] = []
    original = xw.rt.ingestor.plan

    async def spy(principal: Any, request: Any, timer: Any, **kw: Any) -> Any:
        planned.append(request.content)
        return await original(principal, request, timer, **kw)

    xw.rt.ingestor.plan = spy  # type: ignore[method-assign]
    result = await xw.extract()
    assert [c["review"]["action"] for c in result.candidates] == ["accept", "reject", "revise"]
    assert [c["status"] for c in result.candidates] == ["written", "rejected", "written"]
    assert result.candidates[1]["reason"] == "review_rejected"
    assert result.candidates[1]["detail"]["review_reason"] == "not durable"
    assert "The user works at Acme." not in planned  # the rejected candidate never reached the ingestor
    contents = sorted(r.content for r in await xw.records() if r.type == "semantic")
    assert contents == ["The user prefers concise answers in general.", "The user prefers concise answers."]
    payload = run_payload(await xw.events("extraction.run"))
    counts = payload["counts"]
    assert (counts["review_accepted"], counts["review_rejected"], counts["review_revised"]) == (1, 1, 1)
    assert payload["reviewer"] == {"name": "fake-reviewer", "model": "fake", "prompt_version": "fake_v1"}
    assert payload["candidates"][1]["content"] == "The user works at Acme."


FORBIDDEN = {
    "stronger source": lambda c: dataclasses.replace(c, source_kind="user_statement"),
    "new evidence": lambda c: dataclasses.replace(c, evidence="Great, noted both"),
    "new turn": lambda c: dataclasses.replace(c, evidence_turn=2),
    "other entity": lambda c: dataclasses.replace(
        c, entity_mentions=[EntityMention("person", "Priya", "about")]
    ),
    "other type": lambda c: dataclasses.replace(c, type="procedural"),
    "higher confidence": lambda c: dataclasses.replace(c, confidence=1.0),
}


@pytest.mark.parametrize("change", sorted(FORBIDDEN))
async def test_a_revision_cannot_strengthen_authority_or_replace_evidence_or_entity(
    xw: XWorld, change: str
) -> None:
    await xw.say("user", "I think maybe concise answers work for me")
    await xw.say("assistant", "Great, noted both.")
    candidate = cand(
        "The user may prefer concise answers.",
        "maybe concise answers work",
        1,
        source_kind="tool_result",
        confidence=0.5,
    )
    xw.reviewer.decisions = [ReviewDecision("revise", FORBIDDEN[change](candidate), "tweak")]
    xw.propose(candidate)
    await xw.end()
    result = await xw.extract()
    assert result.candidates[0]["reason"] == "invalid_review_revision"
    assert [r.type for r in await xw.records()] == ["episodic"]


async def test_accepted_and_revised_candidates_are_validated_again(tmp_path: Path) -> None:
    class Judge(FakeJudge):
        def entails(self, premise: str, hypothesis: str) -> float:
            return 0.1 if "Berlin" in hypothesis else 1.0

    w = await make_xworld(tmp_path / "m.sqlite", judge=Judge())
    try:
        turn_at = w.clock.now()
        await w.say("user", "I prefer concise answers and I am in Lisbon until Friday")
        await w.say("assistant", "Enjoy Lisbon.")
        friday = datetime(2026, 1, 2, tzinfo=UTC)  # the FakeClock starts on Thursday 2026-01-01
        assert turn_at.weekday() == 3
        lisbon = cand("The user is in Lisbon.", "I am in Lisbon until Friday", 1, attribute="location")
        accepted_bad_time = cand(
            "The user prefers concise answers.", QUOTE, 1, review_at=friday + timedelta(days=30)
        )
        w.reviewer.decisions = [
            ReviewDecision("accept", None, "ok"),
            ReviewDecision(
                "revise", dataclasses.replace(lisbon, valid_until=friday + timedelta(days=9)), "dates"
            ),
            ReviewDecision("revise", dataclasses.replace(lisbon, content="The user is in Berlin."), "place"),
            ReviewDecision("revise", dataclasses.replace(lisbon, valid_until=friday), "dates"),
        ]
        w.propose(accepted_bad_time, lisbon, lisbon, lisbon)
        await w.end()
        result = await w.extract()
        reasons = [c.get("reason") for c in result.candidates]
        assert reasons == ["unsupported_temporal", "invalid_review_revision", "invalid_review_revision", None]
        assert result.candidates[1]["detail"]["fields"] == ["valid_until"]
        assert result.candidates[2]["detail"]["problem"] == "revised content is not supported by the evidence"
        [fact] = [r for r in await w.records() if r.type == "semantic"]
        assert (fact.content, fact.valid_until) == ("The user is in Lisbon.", friday)
    finally:
        await w.rt.close()


class SideEffectReviewer(FakeReviewer):
    """Accepts, after running ``effect`` on the event loop (from the worker thread)."""

    def __init__(self, effect: Any) -> None:
        super().__init__()
        self.effect = effect

    def review(self, candidate: Any, context: Any) -> ReviewDecision:
        anyio.from_thread.run(self.effect)
        return super().review(candidate, context)


async def test_scope_and_entity_are_revalidated_after_review(tmp_path: Path) -> None:
    async def revoke() -> None:
        await w.rt.host.revoke("planner", USER)

    w = await make_xworld(tmp_path / "m.sqlite", reviewer=SideEffectReviewer(revoke))
    try:
        await two_turns(w)
        w.propose(cand("The user prefers concise answers.", QUOTE, 1))
        await w.end()
        result = await w.extract()
        assert result.candidates[0]["reason"] == "scope_not_writable"
    finally:
        await w.rt.close()

    async def second_acme() -> None:
        entity = Entity("e2", "org", "Acme", USER, "confirmed", None, ["acme"], w2.clock.now())
        await w2.rt.store.insert_entity(entity)

    w2 = await make_xworld(tmp_path / "m2.sqlite", reviewer=SideEffectReviewer(second_acme))
    try:
        await w2.rt.store.insert_entity(
            Entity("e1", "org", "Acme", USER, "confirmed", None, ["acme"], w2.clock.now())
        )
        await w2.say("user", "Acme ships every Tuesday from main")
        await w2.say("assistant", "Noted.")
        w2.propose(
            cand(
                "Acme ships every Tuesday.",
                "Acme ships every Tuesday",
                1,
                attribute="release_day",
                entities=[("org", "Acme", "about")],
            )
        )
        await w2.end()
        result = await w2.extract()
        assert result.candidates[0]["reason"] == "entity_ambiguous"
        assert sorted(result.candidates[0]["detail"]["candidates"]) == ["e1", "e2"]
    finally:
        await w2.rt.close()


async def test_the_reviewer_sees_only_the_evidence_window_and_same_entity_live_records(xw: XWorld) -> None:
    for i in range(1, 6):
        await xw.say("user" if i % 2 else "assistant", f"turn number {i} says I prefer concise answers")
    await xw.rt.store.insert_entity(
        Entity("e-acme", "org", "Acme", USER, "confirmed", None, ["acme"], xw.clock.now())
    )
    acme_fact = await xw.rt.ingestor.write(
        xw.p,
        _request("Acme deploys on Fridays.", "release_day", entities=[EntityMention("org", "Acme", "about")]),
    )
    user_fact = await xw.rt.ingestor.write(xw.p, _request("The user likes tea.", "drink"))
    await xw.rt.host.grant("planner", Scope("project", "p1"), read=True, write=True)
    await xw.rt.ingestor.write(
        xw.p,
        _request(
            "Acme deploys on Mondays.",
            "release_day",
            scope=Scope("project", "p1"),
            entities=[EntityMention("org", "Acme", "about")],
        ),
    )
    assert acme_fact.ok and user_fact.ok
    xw.propose(
        cand(
            "Acme prefers concise answers.",
            "turn number 3 says",
            3,
            attribute="style",
            entities=[("org", "Acme", "about")],
        )
    )
    await xw.end()
    await xw.extract()
    [(_, context)] = xw.reviewer.calls
    assert [t.turn for t in context.transcript_window] == [2, 3, 4]
    assert context.destination_scope == USER and context.primary_entity_id == "e-acme"
    assert [r.id for r in context.live_records] == [acme_fact.record_id]  # not the tea, not project p1


def _request(content: str, attribute: str, **fields: Any) -> WriteRequest:
    return WriteRequest(
        type="semantic",
        content=content,
        scope=fields.pop("scope", USER),
        attribute=attribute,
        source_kind="agent_inference",
        **fields,
    )


# --- fail closed -----------------------------------------------------------------------------------

FAILURES = {
    "reviewer timeout": (FakeExtractor(), FakeReviewer(delay_s=0.5), "reviewer_timeout"),
    "reviewer malformed": (FakeExtractor(), FakeReviewer(decisions=[{"action": "accept"}]), "invalid_review"),
    "reviewer revise without candidate": (
        FakeExtractor(),
        FakeReviewer(decisions=[ReviewDecision("revise", None, "x")]),
        "invalid_review",
    ),
    "reviewer provider error": (
        FakeExtractor(),
        FakeReviewer(decisions=[RuntimeError("503")]),
        "reviewer_error",
    ),
    "extractor timeout": (FakeExtractor(delay_s=0.5), FakeReviewer(), "extractor_timeout"),
    "extractor error": (FakeExtractor(ConnectionError("down")), FakeReviewer(), "extractor_error"),
    "extractor malformed": (
        FakeExtractor(lambda t, c: {"candidates": []}),
        FakeReviewer(),
        "invalid_extractor_output",
    ),
}


@pytest.mark.parametrize("case", sorted(FAILURES))
async def test_a_model_failure_fails_closed_and_the_claim_can_be_recovered(tmp_path: Path, case: str) -> None:
    extractor, reviewer, code = FAILURES[case]
    config = Config().override({"ingestion.review_timeout_ms": 100, "ingestion.extraction_timeout_ms": 100})
    w = await make_xworld(tmp_path / "m.sqlite", config=config, extractor=extractor, reviewer=reviewer)
    try:
        await two_turns(w)
        if not callable(extractor.output) and not isinstance(extractor.output, BaseException):
            w.propose(cand("The user prefers concise answers.", QUOTE, 1))
        await w.end()
        result = await w.extract()
        assert (result.status, result.reason) == ("failed", code)
        assert await w.records() == [] and (await w.session()).extracted_at is None
        [failed] = await w.events("extraction.failed")
        assert failed["payload"]["error"] == code
        assert "concise" not in str(failed["payload"])  # no transcript or candidate content
        assert await w.events("extraction.run") == []

        again = await w.extract()  # the claim stands until it expires
        assert (again.status, again.reason) == ("skipped", "claimed_by_other")
        w.clock.advance(minutes=31)
        w.extractor.delay_s = 0.0
        w.extractor.output = ExtractionOutput([cand("The user prefers concise answers.", QUOTE, 1)], SUMMARY)
        w.rt.reviewer.decisions, w.rt.reviewer.delay_s = [], 0.0  # the reviewer recovers
        recovered = await w.extract()
        assert (recovered.status, recovered.reclaimed) == ("extracted", True)
        assert len(await w.events("extraction.reclaimed")) == 1
        assert sorted(r.source_kind for r in await w.records()) == ["session_summary", "user_statement"]
        assert (await w.session()).extracted_at is not None
    finally:
        await w.rt.close()


async def test_a_failure_in_the_write_phase_rolls_back_every_write(tmp_path: Path) -> None:
    async def steal_claim() -> None:  # another worker's claim, as after an expiry
        await w.rt.store.db.execute(
            "UPDATE sessions SET extraction_started_at = '2030-01-01T00:00:00.000000Z'"
        )

    w = await make_xworld(tmp_path / "m.sqlite", reviewer=SideEffectReviewer(steal_claim))
    try:
        await two_turns(w)
        w.propose(cand("The user prefers concise answers.", QUOTE, 1))
        await w.end()
        result = await w.extract()
        assert (result.status, result.reason) == ("failed", "claim_lost")
        assert await w.records() == [] and (await w.session()).extracted_at is None
        assert await w.events("record.created") == []
    finally:
        await w.rt.close()


# --- the summary, re-runs, batches ---------------------------------------------------------------


async def test_a_summary_is_written_even_without_candidates(xw: XWorld) -> None:
    await two_turns(xw)
    xw.propose()
    await xw.end()
    result = await xw.extract()
    [summary] = await xw.records()
    person = (await xw.rt.store.entities_by_alias("u1", scopes=[USER], kinds=["person"]))[0]
    session = await xw.session()
    assert (summary.type, summary.source_kind, summary.status, summary.confidence) == (
        "episodic",
        "session_summary",
        "confirmed",
        0.8,
    )
    assert summary.expires_at == summary.created_at + timedelta(days=180)
    assert (summary.subject_entity_id, summary.attribute, summary.source_ref) == (
        person.id,
        "-",
        "session:s1",
    )
    assert summary.event_at == session.ended_at and session.extracted_at is not None
    assert summary.content.endswith("Decisions: use bullet lists")
    assert result.summary is not None and result.summary["outcome"] == "created"


async def test_a_session_with_fewer_than_two_turns_writes_the_summary_only(xw: XWorld) -> None:
    await xw.say("user", "Hi! I prefer concise answers, please.")
    xw.propose(cand("The user prefers concise answers.", QUOTE, 1))
    await xw.end()
    result = await xw.extract()
    assert result.counts["ignored_summary_only"] == 1 and result.counts["proposed"] == 0
    assert [r.source_kind for r in await xw.records()] == ["session_summary"]
    assert xw.reviewer.calls == []


async def test_a_long_summary_is_capped_with_its_decisions_line(tmp_path: Path) -> None:
    w = await make_xworld(
        tmp_path / "m.sqlite", config=Config().override({"ingestion.summary_max_chars": 120})
    )
    try:
        await two_turns(w)
        w.propose(summary=SessionSummary("word " * 100, ["ship it", "write docs"], []))
        await w.end()
        result = await w.extract()
        [summary] = await w.records()
        assert len(summary.content) <= 120 and summary.content.endswith("Decisions: ship it; write docs")
        assert result.summary is not None and result.summary["truncated"] is True
    finally:
        await w.rt.close()


async def test_a_forced_rerun_over_unchanged_output_changes_nothing(xw: XWorld) -> None:
    await two_turns(xw)
    xw.propose(cand("The user prefers concise answers.", QUOTE, 1))
    await xw.end()
    first = await xw.extract()
    before = await xw.records(all_statuses=True)
    assert (await xw.extract()).reason == "already_extracted"  # not without force
    xw.clock.advance(hours=1)
    again = await xw.extract(force=True)
    assert (again.status, again.rerun) == ("extracted", True)
    assert [c["outcome"] for c in again.candidates] == ["already_reinforced"]
    assert again.summary is not None and again.summary["outcome"] == "already_reinforced"
    assert await xw.records(all_statuses=True) == before
    assert len(await xw.events("extraction.rerun")) == 1 and len(await xw.events("extraction.run")) == 2
    assert first.candidates[0]["record_id"] == again.candidates[0]["record_id"]


async def test_a_rerun_with_a_different_summary_supersedes_the_earlier_one(xw: XWorld) -> None:
    await two_turns(xw)
    xw.propose()
    await xw.end()
    await xw.extract()
    xw.propose(summary=SessionSummary("A better summary of the same session.", [], []))
    again = await xw.extract(force=True)
    assert again.summary is not None and again.summary["outcome"].startswith("superseded:")
    summaries = [r for r in await xw.records(all_statuses=True) if r.source_kind == "session_summary"]
    assert sorted(r.status for r in summaries) == ["confirmed", "superseded"]


async def test_candidates_of_one_run_are_decided_against_each_other(tmp_path: Path) -> None:
    judge = FakeJudge(
        {("The user prefers concise answers.", "The user prefers detailed answers."): "contradicts"}
    )
    w = await make_xworld(tmp_path / "m.sqlite", judge=judge)
    try:
        await w.say("user", "I prefer concise answers. Actually, I prefer detailed answers.")
        await w.say("assistant", "Detailed it is.")
        concise = cand("The user prefers concise answers.", QUOTE, 1)
        w.propose(
            concise,
            concise,  # the same claim from the same evidence: one record
            cand(
                "The user prefers detailed answers.",
                "I prefer detailed answers",
                1,
                event_at=w.clock.now() + timedelta(seconds=1),
            ),
            cand("Acme is great.", "I prefer detailed answers", 1, attribute="opinion", entities=[ACME]),
            cand("Acme is nice.", "I prefer concise answers", 1, attribute="taste", entities=[ACME]),
        )
        await w.end()
        result = await w.extract()
        outcomes = [c["outcome"] for c in result.candidates]
        assert outcomes[:2] == ["created", "already_reinforced"]
        assert outcomes[2] == f"superseded:{result.candidates[0]['record_id']}"
        facts = {r.content: r.status for r in await w.records(all_statuses=True) if r.type == "semantic"}
        assert facts["The user prefers concise answers."] == "superseded"
        assert facts["The user prefers detailed answers."] == "confirmed"
        acme = await w.rt.store.entities_by_alias("acme", scopes=[USER], kinds=["org"])
        assert len(acme) == 1  # one new name planned by two candidates is one entity
    finally:
        await w.rt.close()


# --- context, scheduling, the API ----------------------------------------------------------------


async def test_the_extractor_gets_bounded_context_and_the_prompt_version(tmp_path: Path) -> None:
    config = Config().override(
        {"ingestion.extraction_context_max_entities": 1, "ingestion.extraction_context_max_subjects": 1}
    )
    w = await make_xworld(tmp_path / "m.sqlite", config=config)
    try:
        for name in ("Acme", "Globex"):
            await w.rt.store.insert_entity(
                Entity(f"e-{name}", "org", name, USER, "confirmed", None, [name.lower()], w.clock.now())
            )
        await w.rt.ingestor.write(w.p, _request("The user likes tea.", "drink"))
        await w.rt.ingestor.write(w.p, _request("The user likes jazz.", "music"))
        await two_turns(w)
        await w.end()
        await w.extract()
        [(turns, context)] = w.extractor.calls
        assert [t.turn for t in turns] == [1, 2]
        assert len(context.known_entities) == 1 and len(context.existing_subjects) == 1
        assert context.existing_subjects[0].startswith("Aditya/") and context.prompt_version == "fake_v1"
        payload = run_payload(await w.events("extraction.run"))
        assert payload["extractor"]["prompt_version"] == "fake_v1"
        assert set(payload["timings_ms"]) >= {
            "transcript_prep",
            "extractor_model",
            "candidate_review",
            "validation",
            "dedup_and_contradiction",
            "writes",
            "summary_write",
            "total",
        }
    finally:
        await w.rt.close()


async def test_session_end_schedules_extraction_in_the_background(xw: XWorld) -> None:
    await two_turns(xw)
    xw.propose(cand("The user prefers concise answers.", QUOTE, 1))
    xw.extractor.delay_s = 0.05
    assert await xw.rt.hooks.on_session_end(xw.p) is True
    assert (await xw.session()).extracted_at is None  # the host did not wait
    await xw.rt.join_background()
    assert (await xw.session()).extracted_at is not None
    assert len(await xw.events("extraction.run")) == 1


async def test_close_waits_for_a_scheduled_extraction(tmp_path: Path) -> None:
    w = await make_xworld(tmp_path / "m.sqlite")
    await two_turns(w)
    w.propose()
    w.extractor.delay_s = 0.1
    await w.rt.hooks.on_session_end(w.p)
    await w.rt.close()
    from retold.store import Store

    store = await Store.open(tmp_path / "m.sqlite")
    try:
        assert (await store.get_session(SessionKey("planner", "u1", "s1"))).extracted_at is not None  # type: ignore[union-attr]
    finally:
        await store.close()


async def test_close_can_cancel_a_scheduled_extraction_cleanly(tmp_path: Path) -> None:
    w = await make_xworld(tmp_path / "m.sqlite")
    await two_turns(w)
    w.propose(cand("The user prefers concise answers.", QUOTE, 1))
    w.extractor.delay_s = 0.3
    await w.rt.hooks.on_session_end(w.p)
    with anyio.fail_after(10):  # wait for the claim itself, not a guess at how long it takes
        while (await w.session()).extraction_started_at is None:  # noqa: ASYNC110 - polling the store is the point
            await anyio.sleep(0.005)
    await w.rt.close(cancel_background=True)
    from retold.store import Store

    store = await Store.open(tmp_path / "m.sqlite")
    try:
        session = await store.get_session(SessionKey("planner", "u1", "s1"))
        assert (
            session is not None and session.extracted_at is None and session.extraction_started_at is not None
        )
        assert await store.records_in_scope(USER) == []
    finally:
        await store.close()


async def test_without_an_extractor_a_session_stays_unextracted(tmp_path: Path) -> None:
    import retold
    from retold.models import Principal
    from retold.testing import FakeClock, FakeEmbedder

    async with retold.open_runtime(
        tmp_path / "m.sqlite", embedder=FakeEmbedder(), judge=FakeJudge(), clock=FakeClock()
    ) as rt:
        assert rt.extractor is None and rt.reviewer is None
        p = await rt.hooks.on_session_start(Principal("planner", "u1", "s1"))
        p = await rt.hooks.on_turn(p, "user", "hello there")
        await rt.hooks.on_session_end(p)
        await rt.join_background()
        assert (await rt.store.get_session(SessionKey("planner", "u1", "s1"))).extracted_at is None  # type: ignore[union-attr]
        with pytest.raises(ConfigError, match="extraction_enabled"):
            await rt.extract_session("s1")


async def test_an_extractor_without_a_reviewer_needs_a_configured_one(
    tmp_path: Path, monkeypatch: Any
) -> None:
    import retold
    from retold.testing import FakeEmbedder

    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    with pytest.raises(ConfigError, match="pass reviewer="):
        await retold.open_runtime(
            tmp_path / "m.sqlite", embedder=FakeEmbedder(), judge=FakeJudge(), extractor=FakeExtractor()
        )


async def test_extraction_enabled_without_a_key_is_a_clear_config_error(
    tmp_path: Path, monkeypatch: Any
) -> None:
    import retold
    from retold.testing import FakeEmbedder

    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    config = Config().override(
        {"ingestion.extraction_enabled": True, "ingestion.extraction_provider": "openai"}
    )
    with pytest.raises(ConfigError, match="OPENAI_API_KEY") as err:
        await retold.open_runtime(tmp_path / "m.sqlite", config, embedder=FakeEmbedder(), judge=FakeJudge())
    assert err.value.key == "ingestion.extraction_provider"


async def test_unknown_and_open_sessions(xw: XWorld) -> None:
    with pytest.raises(NotFoundError):
        await xw.rt.extract_session("nope")
    await two_turns(xw)
    result = await xw.extract()
    assert (result.status, result.reason) == ("skipped", "not_ended")


async def test_the_graph_wires_every_stage_with_a_fail_closed_edge_and_runs_from_json(xw: XWorld) -> None:
    from retold.graph_nodes.extraction import STAGES

    graph = xw.rt.extraction_graph.get_graph()
    edges = {(e.source, e.target) for e in graph.edges}
    names = [name for name, _ in STAGES]
    assert names == [
        "claim",
        "load_transcript",
        "build_context",
        "extract",
        "validate",
        "review",
        "revalidate",
        "write",
    ]
    for name, nxt in zip(names, [*names[1:], "finish"], strict=True):
        assert (name, nxt) in edges and (name, "fail") in edges
    assert ("claim", "finish") in edges and ("finish", "__end__") in edges and ("fail", "__end__") in edges
    await two_turns(xw)
    xw.propose(cand("The user prefers concise answers.", QUOTE, 1))
    await xw.end()
    out = await xw.rt.extraction_graph.ainvoke({"session_id": "s1"})
    assert out["result"]["status"] == "extracted" and out["result"]["counts"]["created"] == 1


async def test_a_session_without_turns_is_marked_extracted_without_a_model_call(xw: XWorld) -> None:
    await xw.end()
    result = await xw.extract()
    assert result.status == "extracted" and result.summary is None
    assert xw.extractor.calls == [] and await xw.records() == []
    assert (await xw.session()).extracted_at is not None


async def test_an_idle_split_schedules_extraction_of_the_idle_session(xw: XWorld) -> None:
    await two_turns(xw)
    xw.propose()
    xw.clock.advance(minutes=31)
    xw.p = await xw.rt.hooks.on_turn(xw.p, "user", "back again")
    assert xw.p.session_id == "s1~2"
    await xw.rt.join_background()
    [run] = await xw.events("extraction.run")
    assert run["payload"]["session_id"] == "s1"
