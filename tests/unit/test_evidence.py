"""Evidence (spec §6.6, §17.2): a quote must be in this session, and its turn caps the claim."""

from __future__ import annotations

from datetime import timedelta

from retold.ingest.write.evidence import NOTE_NOT_FOUND, NOTE_NOT_PROVIDED, NOTE_NOT_SUPPORTED, locate_quote
from retold.models import Turn
from retold.testing import FakeClock, FakeJudge

from .writepath import World

QUOTE = "I prefer concise answers please"


async def test_missing_quote_downgrades_to_an_expiring_inference(world: World) -> None:
    await world.say("user", "Hello there, how are you today?")
    result = await world.write("Aditya prefers concise answers.", evidence=QUOTE)
    assert result.ok and result.outcome == "created"
    record = await world.record(result.record_id)
    assert (record.source_kind, record.status, record.source_ref, record.evidence) == (
        "agent_inference",
        "provisional",
        None,
        None,
    )
    assert result.note == NOTE_NOT_FOUND
    assert record.expires_at == record.created_at + timedelta(days=30)


async def test_no_evidence_stores_an_expiring_inference_with_a_note(world: World) -> None:
    result = await world.write("Aditya prefers concise answers.")
    record = await world.record(result.record_id)
    assert result.note == NOTE_NOT_PROVIDED
    assert (record.source_kind, record.status, record.source_ref) == ("agent_inference", "provisional", None)
    assert record.expires_at is not None


async def test_user_statement_backed_by_an_assistant_turn_is_downgraded(world: World) -> None:
    await world.say("assistant", "You told me once: I prefer concise answers please")
    result = await world.write("Aditya prefers concise answers.", evidence=QUOTE)
    record = await world.record(result.record_id)
    assert record.source_kind == "agent_inference"
    assert result.note == "downgraded from user_statement: quote is from a assistant turn"
    assert world.judge.calls == []  # a downgraded claim is not entailment-scored


async def test_tool_turn_supports_tool_result_but_not_user_statement(world: World) -> None:
    turn = await world.say("tool", "deploy finished: target is bge-m3 on staging")
    quote = "target is bge-m3 on staging"
    as_tool = await world.write(
        "The deploy target is bge-m3.", source_kind="tool_result", evidence=quote, attribute="deploy_target"
    )
    assert (await world.record(as_tool.record_id)).source_kind == "tool_result"
    assert as_tool.note is None
    as_user = await world.write(
        "The deploy target is bge-m3 on staging.", evidence=quote, attribute="deploy_host"
    )
    record = await world.record(as_user.record_id)
    assert record.source_kind == "tool_result" and "quote is from a tool turn" in (as_user.note or "")
    assert record.source_ref == f"session:s1<turn:{turn}>"


async def test_a_caller_may_claim_less_than_the_turn_supports(world: World) -> None:
    turn = await world.say("user", QUOTE)
    result = await world.write(
        "Aditya prefers concise answers.", source_kind="agent_inference", evidence=QUOTE
    )
    record = await world.record(result.record_id)
    assert (record.source_kind, record.status) == ("agent_inference", "provisional")
    assert record.source_ref == f"session:s1<turn:{turn}>" and result.note is None


async def test_source_ref_points_to_the_matched_turn(world: World) -> None:
    await world.say("user", "Good morning!")
    turn = await world.say("user", "Please note:   I prefer\nconcise answers please, always.")
    await world.say("assistant", "Noted.")
    result = await world.write("Aditya prefers concise answers.", evidence=QUOTE)
    record = await world.record(result.record_id)
    assert record.source_ref == f"session:s1<turn:{turn}>"
    assert (record.source_kind, record.status, record.evidence) == ("user_statement", "confirmed", QUOTE)


async def test_a_quote_that_does_not_entail_the_claim_is_downgraded_and_scored(world: World) -> None:
    world.judge.entail = 0.2
    await world.say("user", QUOTE)
    result = await world.write("Aditya wants answers in French.", evidence=QUOTE, attribute="language")
    record = await world.record(result.record_id)
    assert record.source_kind == "agent_inference" and result.note == NOTE_NOT_SUPPORTED
    (event,) = await world.events("record.created", record.id)
    assert event["payload"]["entail_score"] == 0.2


async def test_a_hinted_turn_is_the_only_place_searched(world: World) -> None:
    first = await world.say("user", QUOTE)
    await world.say("user", "something else entirely, nothing to see")
    wrong = await world.write("Aditya prefers concise answers.", evidence=QUOTE, evidence_turn=first + 1)
    assert (await world.record(wrong.record_id)).source_kind == "agent_inference"


def test_locate_quote_requires_a_substantial_quote() -> None:
    now = FakeClock().now()
    turns = [Turn("s1", 1, "user", "ok yes do it now", now)]
    check = locate_quote(turns, "ok yes", "user_statement", None, min_chars=15, min_words=3)
    assert not check.found and "too short" in (check.note or "")
    assert FakeJudge().calls == []


def test_the_users_names_read_as_the_user_in_their_own_quote() -> None:
    from retold.ingest.write.evidence import as_the_user

    assert as_the_user("Aditya's editor is vim; ADITYA likes it.", ["aditya", "u1"]) == (
        "The user's editor is vim; the user likes it."
    )
    assert as_the_user("Adityas are rare.", ["aditya"]) == "Adityas are rare."


async def test_a_claim_naming_the_user_is_scored_as_the_user(world: World) -> None:
    await world.say("user", QUOTE)
    await world.write("Aditya prefers concise answers.", evidence=QUOTE)
    scored = [c for c in world.judge.calls if c[0] == "entails"]
    assert scored == [("entails", QUOTE, "The user prefers concise answers.")]
