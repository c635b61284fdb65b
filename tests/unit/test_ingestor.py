"""Explicit writes and lifecycle (spec §6.3, §6.4, §8.1, §17.2) on fakes and a real SQLite file."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import numpy as np
import pytest

import retold
from retold.config import Config
from retold.ingest.write.ingestor import WriteRequest
from retold.models import Principal, Scope
from retold.testing import FakeClock, FakeEmbedder, FakeJudge

from .writepath import USER, World, make_world

CONCISE = "Aditya prefers concise answers."
DETAILED = "Aditya prefers detailed answers."


async def _user_said(world: World, text: str) -> str:
    """A user turn and a quote of it (the whole turn)."""
    await world.say("user", text)
    return text


async def test_duplicate_judged_same_reinforces_instead_of_inserting(world: World) -> None:
    world.judge.table[(CONCISE, "Aditya likes concise answers.")] = "same"
    first = await world.write(CONCISE, evidence=await _user_said(world, "I prefer concise answers, always"))
    again = await world.write(
        "Aditya likes concise answers.", evidence=await _user_said(world, "short and concise answers suit me")
    )
    assert (again.outcome, again.record_id) == ("reinforced", first.record_id)
    record = await world.record(first.record_id)
    assert record.reinforcements == 1 and record.confidence == 0.99  # 0.95 + 0.1, capped
    assert await world.rt.store.records_in_scope(USER) == [record]


async def test_repeated_evidence_from_the_same_turn_is_not_independent(world: World) -> None:
    quote = await _user_said(world, "I prefer concise answers, always")
    first = await world.write(CONCISE, evidence=quote)
    again = await world.write(CONCISE, evidence=quote)
    assert (again.outcome, again.record_id) == ("already_reinforced", first.record_id)
    assert (await world.record(first.record_id)).reinforcements == 0
    events = await world.events("record.reinforced", first.record_id)
    assert [e["payload"]["counted"] for e in events] == [False]


async def test_second_independent_reinforcement_confirms_a_provisional_record(world: World) -> None:
    q1 = "maybe you like concise answers then"
    await world.say("assistant", q1)
    first = await world.write(CONCISE, source_kind="agent_inference", evidence=q1)
    assert (await world.record(first.record_id)).status == "provisional"
    for text in ("so concise answers it is for you", "you clearly like concise answers"):
        await world.say("assistant", text)
        world.clock.advance(days=1)
        result = await world.write(CONCISE, source_kind="agent_inference", evidence=text)
        assert result.outcome == "reinforced"
    record = await world.record(first.record_id)
    assert (record.status, record.reinforcements, record.expires_at) == ("confirmed", 2, None)


async def test_one_reinforcement_refreshes_provisional_expiry(world: World) -> None:
    first = await world.write(
        CONCISE, source_kind="agent_inference", evidence=await _user_said(world, "hmm concise answers maybe")
    )
    world.clock.advance(days=10)
    await world.write(
        CONCISE,
        source_kind="agent_inference",
        evidence=await _user_said(world, "concise answers are fine I guess"),
    )
    record = await world.record(first.record_id)
    assert record.status == "provisional" and record.expires_at == world.clock.now() + timedelta(days=30)


async def test_higher_ranked_observation_upgrades_provenance(world: World) -> None:
    await world.say("assistant", "you seem to prefer concise answers")
    first = await world.write(
        CONCISE, source_kind="agent_inference", evidence="you seem to prefer concise answers"
    )
    quote = await _user_said(world, "yes, I prefer concise answers")
    again = await world.write(CONCISE, evidence=quote)
    assert again.outcome == "reinforced"
    record = await world.record(first.record_id)
    assert (record.source_kind, record.evidence, record.source_ref) == (
        "user_statement",
        quote,
        "session:s1<turn:2>",
    )


async def test_tool_writes_reject_host_and_extractor_source_kinds(world: World) -> None:
    for kind in ("session_summary", "system"):
        result = await world.write(CONCISE, source_kind=kind)
        assert (result.ok, result.error) == (False, "invalid_source_kind")
    assert await world.rt.store.records_in_scope(USER) == []


@pytest.mark.parametrize(
    "fields",
    [
        {"source_kind": "bogus"},
        {"source_kind": "session_summary"},  # a summary without its session's source_ref
        {"source_kind": "system", "event_at": "2024-01-01"},
        {"source_kind": "system", "valid_from": "soon"},
        {"source_kind": "system", "evidence": 5},
        {"source_kind": "system", "attribute": 5},
        {"source_kind": "system", "tags": "a,b"},
        {"source_kind": "system", "scope": "user:u1"},
        {"source_kind": "system", "evidence_turn": "2"},
    ],
)
async def test_malformed_host_requests_are_refused_and_write_nothing(
    world: World, fields: dict[str, object]
) -> None:
    before = await world.rt.store.db.fetchval("SELECT count(*) FROM records")
    result = await world.write("Aditya prefers concise answers.", trusted=True, **fields)
    assert not result.ok and result.error in ("invalid_input", "invalid_source_kind"), result
    assert await world.rt.store.db.fetchval("SELECT count(*) FROM records") == before


async def test_semantic_and_procedural_writes_need_an_attribute(world: World) -> None:
    for kind in ("semantic", "procedural"):
        result = await world.write(CONCISE, type=kind, attribute=None)
        assert (result.error, result.message) == (
            "invalid_subject",
            "attribute required for semantic and procedural memories",
        )
    empty = await world.write(CONCISE, attribute="!!!")
    assert (empty.error, empty.message) == ("invalid_subject", "attribute normalizes to nothing")
    assert await world.rt.store.records_in_scope(USER) == []


async def test_subjectless_semantic_write_resolves_the_principal_entity_only_in_the_user_scope(
    world: World,
) -> None:
    person = (await world.rt.store.entities_in_scope(USER, kind="person"))[0]
    ok = await world.write(CONCISE)
    record = await world.record(ok.record_id)
    assert record.subject_entity_id == person.id and record.subject == f"{person.id}/answer_style"
    project = Scope("project", "p1")
    await world.rt.host.grant("planner", project, read=True, write=True)
    refused = await world.write(CONCISE, scope=project)
    assert (refused.error, refused.message) == ("invalid_subject", "about entity required")


async def test_an_entity_prefix_in_the_attribute_does_not_choose_the_entity(world: World) -> None:
    person = (await world.rt.store.entities_in_scope(USER, kind="person"))[0]
    result = await world.write(CONCISE, attribute="bob/Answer Style")
    record = await world.record(result.record_id)
    assert (record.subject_entity_id, record.attribute) == (person.id, "answer_style")


async def test_contradiction_under_another_attribute_supersedes_with_attribute_aliased_from(
    world: World,
) -> None:
    world.judge.table[(CONCISE, DETAILED)] = "contradicts"
    old = await world.write(
        CONCISE, attribute="answer_style", evidence=await _user_said(world, "give me concise answers please")
    )
    new = await world.write(
        DETAILED,
        attribute="explanation_style",
        evidence=await _user_said(world, "now I want detailed answers please"),
    )
    assert new.outcome == f"superseded:{old.record_id}"
    record = await world.record(new.record_id)
    assert record.attribute == "answer_style"  # the survivor keeps the incumbent attribute
    (event,) = await world.events("record.created", new.record_id)
    assert event["payload"]["attribute_aliased_from"] == "explanation_style"
    assert (await world.record(old.record_id)).status == "superseded"


async def test_an_unrelated_attribute_is_not_superseded_by_a_contradicts_verdict_alone(
    tmp_path: Path,
) -> None:
    world = await make_world(tmp_path / "m.sqlite", FakeJudge(default="contradicts"))
    try:
        a = await world.write("Aditya lives in Berlin.", attribute="home_city")
        b = await world.write("Aditya drinks green tea every morning.", attribute="drink")
        assert (a.outcome, b.outcome) == ("created", "created")  # low cosine: both stay live
    finally:
        await world.rt.close()


async def test_attribute_scan_cap_records_truncation_and_judges_recent_records(tmp_path: Path) -> None:
    config = Config().override({"ingestion.max_entity_attributes": 3})
    world = await make_world(tmp_path / "m.sqlite", config=config)
    try:
        ids = []
        for i in range(5):
            world.clock.advance(minutes=1)
            ids.append(
                (
                    await world.write(f"Aditya fact number {i} about topic{i}.", attribute=f"topic_{i}")
                ).record_id
            )
        world.judge.calls.clear()
        result = await world.write("Aditya has a brand new fact.", attribute="fresh_attribute")
        (event,) = await world.events("record.created", result.record_id)
        assert event["payload"]["attribute_scan_truncated"] is True
        judged = {c[1] for c in world.judge.calls if c[0] == "judge"}
        contents = {(await world.record(i)).content: i for i in ids}
        recent = [c for c, i in contents.items() if i in ids[-3:]]
        assert set(recent) <= judged
        assert "Aditya fact number 0 about topic0." not in judged
    finally:
        await world.rt.close()


async def test_higher_rank_supersedes_regardless_of_event_time(world: World) -> None:
    world.judge.table[(CONCISE, DETAILED)] = "contradicts"
    await world.say("tool", "profile says: prefers concise answers")
    old = await world.write(
        CONCISE, source_kind="tool_result", evidence="profile says: prefers concise answers"
    )
    earlier = world.clock.now() - timedelta(days=365)
    new = await world.write(
        DETAILED, evidence=await _user_said(world, "I want detailed answers from now on"), event_at=earlier
    )
    assert new.outcome == f"superseded:{old.record_id}"


async def test_equal_rank_later_event_supersedes(world: World) -> None:
    world.judge.table[(CONCISE, DETAILED)] = "contradicts"
    old = await world.write(CONCISE, evidence=await _user_said(world, "give me concise answers please"))
    world.clock.advance(days=1)
    new = await world.write(DETAILED, evidence=await _user_said(world, "actually detailed answers please"))
    assert new.outcome == f"superseded:{old.record_id}"
    assert (await world.record(new.record_id)).supersedes_id == old.record_id


async def test_equal_rank_earlier_event_arrives_superseded_and_is_not_retrievable(world: World) -> None:
    world.judge.table[(CONCISE, DETAILED)] = "contradicts"
    current = await world.write(CONCISE, evidence=await _user_said(world, "give me concise answers please"))
    stale = await world.write(
        DETAILED,
        evidence=await _user_said(world, "last year I wanted detailed answers"),
        event_at=world.clock.now() - timedelta(days=300),
    )
    assert stale.outcome == f"superseded_on_arrival:{current.record_id}"
    record = await world.record(stale.record_id)
    assert (record.status, record.supersedes_id) == ("superseded", None)
    (event,) = await world.events("record.created", record.id)
    assert event["payload"]["superseded_on_arrival_by"] == current.record_id
    eligible = await world.rt.store.eligible_ids([USER], now=world.clock.now())
    assert record.id not in eligible and current.record_id in eligible
    history = await world.rt.store.eligible_ids([USER], now=world.clock.now(), include_history=True)
    assert record.id in history


async def test_lower_rank_contradiction_is_a_provisional_conflict_both_ways_with_ttl(world: World) -> None:
    world.judge.table[(CONCISE, DETAILED)] = "contradicts"
    old = await world.write(CONCISE, evidence=await _user_said(world, "give me concise answers please"))
    await world.say("tool", "crm note: prefers detailed answers")
    new = await world.write(
        DETAILED, source_kind="tool_result", evidence="crm note: prefers detailed answers"
    )
    assert new.outcome == f"conflict:{old.record_id}"
    record = await world.record(new.record_id)
    assert record.status == "provisional"
    assert record.expires_at == record.created_at + timedelta(days=30)
    assert await world.rt.store.conflicts_for(old.record_id) == [record.id]
    assert await world.rt.store.conflicts_for(record.id) == [old.record_id]
    assert (await world.record(old.record_id)).status == "confirmed"


async def test_authority_incumbent_gets_the_decision_despite_a_later_provisional_conflict(
    world: World,
) -> None:
    """A sibling judged same does not short-circuit the incumbent's decision (spec §6.3, §17.3)."""
    brief = "Aditya prefers brief answers."
    world.judge.table.update(
        {(CONCISE, DETAILED): "contradicts", (CONCISE, brief): "contradicts", (DETAILED, brief): "same"}
    )
    incumbent = await world.write(CONCISE, evidence=await _user_said(world, "give me concise answers please"))
    await world.say("tool", "crm note: prefers detailed answers")
    conflict = await world.write(
        DETAILED, source_kind="tool_result", evidence="crm note: prefers detailed answers"
    )
    assert conflict.outcome == f"conflict:{incumbent.record_id}"
    world.clock.advance(days=1)
    new = await world.write(brief, evidence=await _user_said(world, "these days I prefer brief answers"))
    assert new.outcome == f"superseded:{incumbent.record_id}"
    (event,) = await world.events("record.created", new.record_id)
    assert event["payload"]["also_superseded"] == [conflict.record_id]
    assert (await world.record(conflict.record_id)).status == "superseded"


async def test_an_episodic_record_never_supersedes(tmp_path: Path) -> None:
    world = await make_world(tmp_path / "m.sqlite", FakeJudge(default="contradicts"))
    try:
        first = await world.write(
            "We chose Postgres for the billing service.", type="episodic", attribute=None
        )
        second = await world.write("We chose MySQL for the billing service.", type="episodic", attribute=None)
        assert (first.outcome, second.outcome) == ("created", "created")
        assert (await world.record(first.record_id)).status == "provisional"  # untouched, no evidence
        assert (await world.record(first.record_id)).subject.endswith("/-")
    finally:
        await world.rt.close()


async def test_nearby_duplicate_about_another_entity_is_reinforced(world: World) -> None:
    a = "The billing repo uses pytest for tests."
    b = "The billing repo uses pytest for its tests."
    world.judge.table[(a, b)] = "same"
    first = await world.write(a, attribute="test_runner", entities=[("repo", "billing", "about")])
    second = await world.write(b, attribute="test_framework", entities=[("repo", "billing-service", "about")])
    assert (second.outcome, second.record_id) == ("already_reinforced", first.record_id)


async def test_writes_to_an_unwritable_scope_change_nothing(world: World) -> None:
    before = await world.rt.store.records_version()
    events_before = len(await world.events())
    for scope in (Scope("user", "u2"), Scope("project", "p9"), Scope("agent", "other/u1")):
        result = await world.write(CONCISE, scope=scope)
        assert (result.ok, result.error) == (False, "scope_not_writable")
    assert await world.rt.store.records_version() == before
    assert len(await world.events()) == events_before


async def test_default_user_scope_is_unwritable_without_the_host_grant(tmp_path: Path) -> None:
    world = await make_world(tmp_path / "m.sqlite")
    try:
        await world.rt.host.revoke("planner", USER)
        result = await world.write(CONCISE)
        assert result.error == "scope_not_writable"
        private = await world.write(
            CONCISE, scope=Principal("planner", "u1").private_scope, entities=[("person", "Aditya", "about")]
        )
        assert private.ok  # the private agent-and-user scope needs no grant
    finally:
        await world.rt.close()


async def test_write_result_reports_every_stage_timing(world: World) -> None:
    result = await world.write(CONCISE, evidence=await _user_said(world, "I prefer concise answers, always"))
    for stage in (
        "permission",
        "evidence",
        "entities",
        "embed",
        "persistence",
        "event_log",
        "transaction",
        "index_update",
        "activation",
        "total",
    ):
        assert stage in result.timings_ms, stage
    (event,) = await world.events("record.created", result.record_id)
    assert event["payload"]["timings_pending"] == [
        "event_log",
        "transaction",
        "index_update",
        "activation",
        "total",
    ]
    assert result.as_dict()["ok"] is True and result.as_dict()["outcome"] == "created"


async def test_reinforced_write_event_and_result_carry_every_write_stage(world: World) -> None:
    from retold.ingest.write.request import WRITE_STAGES, WRITE_STAGES_PENDING

    world.judge.table[(CONCISE, "Aditya likes concise answers.")] = "same"
    await world.write(CONCISE, evidence=await _user_said(world, "I prefer concise answers, always"))
    again = await world.write(
        "Aditya likes concise answers.", evidence=await _user_said(world, "short and concise answers suit me")
    )
    assert again.outcome == "reinforced"
    assert list(again.timings_ms) == [*WRITE_STAGES, "total"]
    (event,) = await world.events("record.reinforced", again.record_id)
    timings, pending = event["payload"]["timings_ms"], event["payload"]["timings_pending"]
    assert pending == list(WRITE_STAGES_PENDING)
    assert set(timings) | set(pending) == {*WRITE_STAGES, "total"} and not set(timings) & set(pending)
    assert timings["judge"] >= 0.0 and timings["persistence"] > 0.0


async def test_a_write_embeds_once_for_its_evidence_check_and_its_vector(tmp_path: Path) -> None:
    embedder = FakeEmbedder()
    rt = await retold.open_runtime(tmp_path / "m.sqlite", embedder=embedder, clock=FakeClock())
    try:
        await rt.host.provision_user("u1", aliases=["Aditya"])
        await rt.host.grant("planner", USER, read=True, write=True)
        p = await rt.hooks.on_session_start(Principal("planner", "u1", "s1"))
        said = "Please keep your answers short, I read them on my phone"
        p = await rt.hooks.on_turn(p, "user", said)
        embedder.calls.clear()
        request = WriteRequest(
            type="semantic", content="Aditya prefers short answers.", scope=USER,
            source_kind="user_statement", attribute="answer_style", evidence=said,
        )  # fmt: skip
        result = await rt.ingestor.write(p, request)
        assert result.ok, result
        assert embedder.calls == [("document", 3)]  # quote, "The user prefers...", the claim
        stored = await rt.store.vectors_for(
            [result.record_id], embedder.name, embedder.version, embedder.dims
        )
        expected = np.asarray(
            FakeEmbedder().embed_documents(["Aditya prefers short answers."])[0], np.float32
        )
        assert np.allclose(np.frombuffer(stored[result.record_id], np.float32), expected)
    finally:
        await rt.close()
