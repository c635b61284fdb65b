"""rt.ops.erase: record, session and user erasure leave ids and times, and no text (spec §11, §16)."""

from __future__ import annotations

import json
import sqlite3
from datetime import timedelta
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import retold
from retold.config import Config
from retold.errors import InvalidArgumentError, NotFoundError
from retold.ingest.equivalence.claim_parser import parse_claim
from retold.ingest.equivalence.conservative import ConservativeJudge
from retold.ingest.write.sources import source_for
from retold.models import EntityMention, Principal, Scope, SearchRequest, SessionInfo, SessionKey
from retold.operations import Operations
from retold.store.erase import ERASED_PAYLOAD
from retold.testing import FakeEmbedder

from .factories import build_record
from .test_operations import table_rows
from .writepath import World, make_world

PROJECT = Scope("project", "p1")


async def remember(world: World, said: str, content: str, **fields: Any) -> str:
    """A user turn and a confirmed memory quoting it; returns the record id."""
    await world.say("user", said)
    result = await world.write(content, evidence=said, **fields)
    assert result.ok and result.status == "confirmed", result
    assert result.record_id is not None
    return result.record_id


async def all_text(world: World, *, but: tuple[str, ...] = ()) -> str:
    """Every value stored in every table (``but`` these), as one string, for 'is this text anywhere'."""
    rows = await table_rows(world.rt.store)
    return json.dumps({k: v for k, v in rows.items() if k not in but}, default=str)


# --- one record ---------------------------------------------------------------------------------


async def test_erasing_a_record_leaves_a_tombstone_and_no_text(world: World) -> None:
    rid = await remember(
        world, "I prefer concise answers, quillfeather.", "Aditya prefers quillfeather answers.",
        tags=["quilltag"], entities=[("person", "Priya", "mentions")],
    )  # fmt: skip
    other = await remember(
        world, "I deploy on Fridays.", "Aditya deploys on Fridays.", attribute="deploy_day"
    )
    store, ops = world.rt.store, world.rt.ops
    row = world.rt.index.pos.get(rid)  # SQLite: this process's index holds it (PostgreSQL: none)
    assert rid in await world.rt.dense.vectors([rid])
    before = await store.require_record(rid)

    report = await ops.erase(record=rid, reason="user asked", actor="ops")

    assert report.applied and report.records == [rid] and report.compacted is True
    after = await store.require_record(rid)
    assert (after.status, after.content, after.evidence, after.tags, after.attribute) == (
        "deleted",
        "",
        None,
        [],
        None,
    )
    assert (after.id, after.type, after.scope, after.source_ref) == (
        before.id,
        before.type,
        before.scope,
        before.source_ref,
    )
    assert (after.created_at, after.event_at) == (before.created_at, before.event_at)
    assert await store.get_embedding(rid) is None
    assert await store.fts_row(rid) is None
    assert await store.record_links(rid) == []
    for event in await store.events(record_id=rid):
        if event["kind"] == "record.erased":
            assert event["actor"] == "ops" and event["payload"]["reason"] == "user asked"
        else:
            assert event["payload"] == json.loads(ERASED_PAYLOAD), event
    # The transcript is the session's, not the record's: erasing the record leaves the turn.
    assert "quillfeather" not in (await all_text(world, but=("session_turns",))).lower()
    assert "quilltag" not in await all_text(world)
    # The vector is gone from the store, and this process forgot it too: hidden and zeroed.
    assert await world.rt.dense.vectors([rid]) == {}
    assert world.rt.index.vector_for(rid) is None
    assert row is None or not np.any(world.rt.index._state.matrix[row])
    assert (row is None) == (world.rt.store.dialect == "postgresql")
    response = await world.rt.search(world.p, SearchRequest(queries=["quillfeather answers"]))
    assert rid not in {r.record.id for r in response.results}
    # The other record is untouched, and the store checks clean.
    assert (await store.require_record(other)).content == "Aditya deploys on Fridays."
    assert (await ops.check()).clean


async def test_erase_without_apply_reports_and_changes_nothing(world: World) -> None:
    rid = await remember(world, "I prefer concise answers.", "Aditya prefers concise answers.")
    await world.rt.search(world.p, SearchRequest(queries=["concise"]))
    store = world.rt.store
    fingerprint = await table_rows(store)

    dry = await world.rt.ops.erase(user="u1", reason="request 7", dry_run=True)

    assert not dry.applied and dry.compacted is None and dry.event_id is None
    assert rid in dry.records and dry.sessions == ["planner/u1/s1"] and dry.turns == 1
    assert dry.search_logs == 1
    assert dry.summary().startswith("would erase user:u1: ")
    assert await table_rows(store) == fingerprint
    assert rid in await world.rt.dense.vectors([rid])
    done = await world.rt.ops.erase(user="u1", reason="request 7")
    assert (done.records, done.sessions, done.turns, done.search_logs) == (
        dry.records, dry.sessions, dry.turns, dry.search_logs,
    )  # fmt: skip


async def test_bad_erase_requests_are_refused_before_anything_changes(world: World) -> None:
    rid = await remember(world, "I prefer concise answers.", "Aditya prefers concise answers.")
    store, ops = world.rt.store, world.rt.ops
    fingerprint = await table_rows(store)
    with pytest.raises(InvalidArgumentError, match="exactly one target"):
        await ops.erase(reason="x")
    with pytest.raises(InvalidArgumentError, match="exactly one target"):
        await ops.erase(record=rid, user="u1", reason="x")
    with pytest.raises(InvalidArgumentError, match="non-blank reason"):
        await ops.erase(record=rid, reason="   ")
    with pytest.raises(NotFoundError, match="no record 'nope'"):
        await ops.erase(record="nope", reason="x")
    with pytest.raises(NotFoundError, match="no session 'nope'"):
        await ops.erase(session="nope", reason="x")
    with pytest.raises(NotFoundError, match="no user 'nobody'"):
        await ops.erase(user="nobody", reason="x")
    with pytest.raises(InvalidArgumentError):
        await ops.erase(user="a/b", reason="x")
    assert await table_rows(store) == fingerprint


async def test_erasing_again_is_harmless(world: World) -> None:
    rid = await remember(world, "I prefer concise answers.", "Aditya prefers concise answers.")
    await world.rt.ops.erase(record=rid, reason="first")
    again = await world.rt.ops.erase(record=rid, reason="second")
    assert again.records == [rid]
    kinds = [e["kind"] for e in await world.rt.store.events(record_id=rid)]
    assert kinds.count("record.erased") == 2
    reasons = [e["payload"]["reason"] for e in await world.rt.store.events(kind="record.erased")]
    assert reasons == ["first", "second"]  # an erasure event keeps its reason through later erasures
    assert (await world.rt.ops.check()).clean


# --- one session --------------------------------------------------------------------------------


async def test_erasing_a_session_blanks_its_transcript_and_what_quotes_it(world: World) -> None:
    store, clock = world.rt.store, world.clock
    quoted = await remember(world, "My badger code is zephyrine.", "Aditya's code word is zephyrine.")
    await world.rt.search(world.p, SearchRequest(queries=["zephyrine code"]))
    summary = build_record(
        clock.now(), type="episodic", content="Session about zephyrine.", source_kind="session_summary",
        source_ref="session:s1", attribute="-", subject="-", expires_at=clock.now() + timedelta(days=30),
    )  # fmt: skip
    await store.insert_record(summary, source=source_for(summary, world.p, trusted=True))
    s2 = SessionKey("planner", "u1", "s2")
    await store.insert_session(SessionInfo("s2", "planner", "u1", None, clock.now(), None, None, None))
    await store.append_turn(s2, "user", "zephyrine again in another session", clock.now())

    report = await world.rt.ops.erase(session="s1", reason="wrong chat")

    assert report.sessions == ["planner/u1/s1"]
    assert report.records == [summary.id] and report.evidence_cleared == [quoted]
    assert [t.content for t in await store.turns(SessionKey.of(world.p))] == [""]
    assert [t.content for t in await store.turns(s2)] == ["zephyrine again in another session"]
    kept = await store.require_record(quoted)
    assert (kept.status, kept.content, kept.evidence) == (
        "confirmed",
        "Aditya's code word is zephyrine.",
        None,
    )
    assert (await store.require_record(summary.id)).content == ""
    log = await store.latest_search_log()
    assert log is not None and log["request"] == "{}" and log["explanations"] == "[]"
    text = await all_text(world)
    assert "badger" not in text and "Session about" not in text
    assert (await world.rt.ops.check()).clean


# --- one user -----------------------------------------------------------------------------------


async def test_erasing_a_user_reaches_every_place_their_text_went(world: World) -> None:
    rt, store = world.rt, world.rt.store
    await rt.host.provision_user("u1", aliases=["Marlowequill"])
    await rt.host.grant("planner", PROJECT, read=True, write=True)
    mine = await remember(world, "I prefer tangerinewhisk answers.", "Aditya prefers tangerinewhisk answers.")
    # A project record sourced from u1's session: erased although the scope is shared.
    shared = await remember(
        world, "The deploy key is copperwhistle.", "The deploy key is copperwhistle.",
        scope=PROJECT, attribute="deploy_key", entities=[("project", "Billing", "about")],
    )  # fmt: skip
    private = build_record(world.clock.now(), content="planner's private note on u1: lanternmoss",
                           scope=Scope("agent", "planner/u1"))  # fmt: skip
    await store.insert_record(private)
    await rt.search(world.p, SearchRequest(queries=["saffronquery tangerinewhisk"]))
    # Another user's memory in the same project and their own scope: must survive, searchable.
    await rt.host.provision_user("u2", aliases=["Beatrix"])
    await rt.host.grant("planner", Scope("user", "u2"), read=True, write=True)
    u2 = Principal("planner", "u2", "t1")
    await rt.hooks.on_session_start(u2)
    await rt.hooks.on_turn(u2, "user", "I like ochrebloom tea.")
    theirs = await rt.host.write_system(Scope("user", "u2"), "Beatrix likes ochrebloom tea.", attribute="tea")
    project_fact = await rt.host.write_system(
        PROJECT, "The project ships on mauvecastle.", attribute="ship",
        entities=[EntityMention("project", "Billing", "about")],
    )  # fmt: skip
    assert project_fact.ok, project_fact
    await rt.search(u2, SearchRequest(queries=["ochrebloom"]))

    report = await rt.ops.erase(user="u1", reason="account deleted", actor="dpo")

    assert set(report.records) >= {mine, shared, private.id}
    assert report.sessions == ["planner/u1/s1"] and report.search_logs == 1 and report.entities
    # u2's own search keeps u2's query, and no longer names u1's erased records.
    for row in await store.db.fetchall("SELECT * FROM search_log WHERE user_id = 'u2'"):
        assert "ochrebloom" in row["request"]
        assert not any(rid in json.dumps(dict(row)) for rid in report.records)
    text = (await all_text(world)).lower()
    for marker in ("tangerinewhisk", "copperwhistle", "lanternmoss", "saffronquery", "marlowequill"):
        assert marker not in text, marker
    for marker in ("ochrebloom", "mauvecastle", "beatrix"):
        assert marker in text, marker
    assert (await store.require_record(theirs.record_id)).content == "Beatrix likes ochrebloom tea."  # type: ignore[arg-type]
    assert (await store.require_record(project_fact.record_id)).status == "confirmed"  # type: ignore[arg-type]
    for entity_id in report.entities:
        entity = await store.require_entity(entity_id)
        assert (entity.canonical, entity.aliases, entity.status) == ("", [], "deleted")
    (event,) = await store.events(kind="user.erased")
    assert event["actor"] == "dpo" and event["payload"]["reason"] == "account deleted"
    grant_events = await store.events(kind="grant.changed")
    assert all(e["payload"] != json.loads(ERASED_PAYLOAD) for e in grant_events)
    response = await rt.search(u2, SearchRequest(queries=["ochrebloom tea"]))
    assert theirs.record_id in {r.record.id for r in response.results}
    assert (await rt.ops.check()).clean


async def test_erasure_empties_in_process_caches(world: World) -> None:
    class Cached:
        def __init__(self) -> None:
            self.cleared = 0

        def clear_cache(self) -> None:
            self.cleared += 1

    rid = await remember(world, "I prefer concise answers.", "Aditya prefers concise answers.")
    judge = ConservativeJudge(FakeEmbedder())
    judge.judge("Aditya prefers concise answers.", "Aditya likes short answers.")
    assert judge._cache
    parse_claim("Aditya prefers concise answers.")
    embedder, reranker = Cached(), Cached()
    ops = Operations(
        world.rt.store, world.rt.config, world.clock, embedder=embedder, index=world.rt.index,
        caches=[judge, reranker, None],
    )  # fmt: skip

    await ops.erase(record=rid, reason="cache test")

    assert embedder.cleared == reranker.cleared == 1
    assert not judge._cache
    assert parse_claim.cache_info().currsize == 0
    assert world.rt.index.vector_for(rid) is None


async def test_the_runtime_wires_its_embedder_index_and_models_into_ops(tmp_path: Path) -> None:
    from retold.index.embedder import SentenceTransformerEmbedder

    class Model:
        def encode(self, sentences: list[str], **_: Any) -> np.ndarray:
            return np.stack([FakeEmbedder(dims=16)._vector(s) for s in sentences])

    embedder = SentenceTransformerEmbedder("stub", "1", 16, model_factory=Model)
    rt = await retold.open_runtime(
        tmp_path / "m.sqlite", embedder=embedder, judge=ConservativeJudge(embedder)
    )
    try:
        await rt.host.provision_user("u1")
        result = await rt.host.write_system(
            Scope("user", "u1"), "Aditya prefers concise answers.", attribute="style"
        )
        await rt.host.write_system(Scope("user", "u1"), "Aditya prefers short answers.", attribute="style")
        await rt.host.grant("planner", Scope("user", "u1"), read=True)
        await rt.search(Principal("planner", "u1"), SearchRequest(queries=["concise answers"]))
        assert embedder.cache_info().size == 1
        assert rt.judge._cache  # type: ignore[attr-defined]
        await rt.ops.erase(record=result.record_id or "", reason="wiring")
        assert embedder.cache_info().size == 0
        assert not rt.judge._cache  # type: ignore[attr-defined]
    finally:
        await rt.close()


async def test_an_open_reader_elsewhere_is_reported_and_a_rerun_finishes(tmp_path: Path) -> None:
    path = tmp_path / "m.sqlite"
    w = await make_world(path, config=Config().override({"store.busy_timeout_seconds": 1}))
    try:
        rid = await remember(w, "I prefer concise answers.", "Aditya prefers concise answers.")
        reader = sqlite3.connect(path, isolation_level=None)
        reader.execute("BEGIN")
        reader.execute("SELECT count(*) FROM records").fetchall()  # holds a read snapshot of the WAL
        try:
            first = await w.rt.ops.erase(record=rid, reason="held")
        finally:
            reader.execute("COMMIT")
            reader.close()
        assert first.applied and first.compacted is False
        assert (await w.rt.store.require_record(rid)).content == ""  # erased all the same
        second = await w.rt.ops.erase(record=rid, reason="held, again")
        assert second.compacted is True
    finally:
        await w.rt.close()
