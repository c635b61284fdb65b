"""rt.ops maintenance: expire, retain, reembed, check and snapshots (spec §6.5, §16)."""

from __future__ import annotations

import re
import shutil
import sqlite3
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

import retold
from retold.config import Config
from retold.errors import ConfigError, InvalidArgumentError, SchemaVersionError, StoreError
from retold.models import Principal, SearchRequest, SessionInfo, SessionKey
from retold.operations import load_snapshot, supersession_cycles
from retold.store import Store
from retold.testing import FakeClock, FakeEmbedder, FakeJudge

from .factories import build_record, every_table
from .writepath import USER, World, make_world


async def table_rows(store: Store) -> dict[str, list[tuple[Any, ...]]]:
    """Every row of every table, FTS shadow tables included: a fingerprint of the whole store."""
    names = [n for n in await every_table(store) if n != "records_fts" or store.dialect == "postgresql"]
    return {
        name: sorted(tuple(r) for r in await store.db.fetchall(f"SELECT * FROM {name}")) for name in names
    }


# --- expire -------------------------------------------------------------------------------------


async def test_expire_marks_every_active_record_past_its_expiry_once(world: World) -> None:
    store, ops = world.rt.store, world.rt.ops
    inference = await world.write("Aditya may like tea.", source_kind="agent_inference", attribute="drink")
    await world.say("user", "I prefer concise answers.")
    fact = await world.write("Aditya prefers concise answers.", evidence="I prefer concise answers.")
    assert fact.status == "confirmed"
    now = world.clock.now()
    summary = build_record(
        now, type="episodic", content="We talked about tea.", source_kind="session_summary",
        source_ref="session:s0", expires_at=now + timedelta(days=2), attribute="-", subject="-",
    )  # fmt: skip
    later = build_record(now, content="A note that expires next year.", expires_at=now + timedelta(days=365))
    history = build_record(now, content="An old superseded fact.", status="superseded", expires_at=now)
    for record in (summary, later, history):
        await store.insert_record(record)
    world.clock.advance(days=world.rt.config.ingestion.provisional_ttl_days + 1)
    before = await store.records_version()

    expired = await ops.expire(actor="ops")

    assert sorted(expired) == sorted([inference.record_id, summary.id])
    for record_id in expired:
        assert (await world.record(record_id)).status == "expired"
        events = await store.events(record_id=record_id, kind="record.status")
        assert [(e["actor"], e["payload"]["to"]) for e in events] == [("ops", "expired")]
    assert (await world.record(fact.record_id)).status == "confirmed"
    assert (await store.require_record(later.id)).status == "confirmed"
    assert (await store.require_record(history.id)).status == "superseded"
    assert await store.records_version() == before + 2
    # Idempotent: nothing left to expire, nothing written.
    fingerprint = await table_rows(store)
    assert await ops.expire(actor="ops") == []
    assert await table_rows(store) == fingerprint


async def test_expire_records_the_previous_status_on_each_event(world: World) -> None:
    inference = await world.write("Aditya may like tea.", source_kind="agent_inference", attribute="drink")
    world.clock.advance(days=world.rt.config.ingestion.provisional_ttl_days + 1)
    await world.rt.ops.expire()
    (event,) = await world.rt.store.events(record_id=inference.record_id, kind="record.status")
    assert event["actor"] == "admin"
    assert event["payload"]["from"] == "provisional"
    assert event["payload"]["reason"] == "expired"


# --- retain -------------------------------------------------------------------------------------


async def add_session(store: Store, clock: FakeClock, session_id: str, *, ended_days_ago: float | None,
                      extracted: bool, turns: int = 3) -> None:  # fmt: skip
    now = clock.now()
    started = now - timedelta(days=(ended_days_ago or 0) + 1)
    ended = None if ended_days_ago is None else now - timedelta(days=ended_days_ago)
    key = SessionKey("planner", "u1", session_id)
    await store.insert_session(SessionInfo(session_id, "planner", "u1", None, started, ended, None, None))
    for n in range(turns):
        await store.append_turn(key, "user", f"{session_id} said thing {n}", started)
    if extracted:
        claim = await store.claim_session(key, now=now, stale_before=now - timedelta(hours=1))
        assert claim.claimed_at is not None, claim
        assert await store.finish_session_extraction(key, claimed_at=claim.claimed_at, now=now)


async def test_retain_blanks_only_extracted_sessions_past_the_window(world: World) -> None:
    store, clock = world.rt.store, world.clock
    days = world.rt.config.sessions.retain_days
    await add_session(store, clock, "old-done", ended_days_ago=days + 1, extracted=True)
    await add_session(store, clock, "old-pending", ended_days_ago=days + 30, extracted=False)
    await add_session(store, clock, "recent-done", ended_days_ago=days - 1, extracted=True)
    await add_session(store, clock, "open", ended_days_ago=None, extracted=False)

    report = await world.rt.ops.retain(actor="ops")

    assert report.sessions == ["planner/u1/old-done"]
    assert report.turns == 3
    blanked = await store.turns(SessionKey("planner", "u1", "old-done"))
    assert [(t.turn, t.role, t.content) for t in blanked] == [
        (1, "user", ""),
        (2, "user", ""),
        (3, "user", ""),
    ]
    for kept in ("old-pending", "recent-done", "open"):
        assert all(t.content for t in await store.turns(SessionKey("planner", "u1", kept))), kept
    (event,) = await store.events(kind="session.retained")
    assert event["actor"] == "ops"
    assert event["payload"]["session_id"] == "old-done"
    assert event["payload"]["turns"] == 3
    fingerprint = await table_rows(store)
    assert (await world.rt.ops.retain()).sessions == []
    assert await table_rows(store) == fingerprint


async def test_retain_follows_the_configured_window(tmp_path: Path) -> None:
    config = Config().override({"sessions.retain_days": 7})
    w = await make_world(tmp_path / "m.sqlite", config=config)
    try:
        await add_session(w.rt.store, w.clock, "eight-days", ended_days_ago=8, extracted=True)
        await add_session(w.rt.store, w.clock, "six-days", ended_days_ago=6, extracted=True)
        assert (await w.rt.ops.retain()).sessions == ["planner/u1/eight-days"]
    finally:
        await w.rt.close()


# --- check --------------------------------------------------------------------------------------


def journal_format(path: Path) -> tuple[int, int]:
    """The file format write/read version bytes of a database header: (2, 2) means WAL mode."""
    header = path.read_bytes()[:100]
    return header[18], header[19]


def corrupt(store: Store | Path, *statements: str) -> None:
    """Write behind the store's back on a plain connection (foreign keys off, as a buggy tool would)."""
    if isinstance(store, Store) and store.dialect == "postgresql":
        import psycopg

        with psycopg.connect(store.db.url, autocommit=True) as pg:
            pg.execute("SET session_replication_role = replica")  # no foreign keys, no triggers
            for statement in statements:
                pg.execute(statement.replace("x'00'", "'\\x00'::bytea").encode())
        return
    conn = sqlite3.connect(store.path if isinstance(store, Store) else store, isolation_level=None)
    try:
        for statement in statements:
            conn.execute(statement)
    finally:
        conn.close()


async def three_records(world: World) -> list[str]:
    ids = []
    for text, attribute in (
        ("Aditya prefers concise answers.", "answer_style"),
        ("Aditya deploys on Fridays.", "deploy_day"),
        ("Aditya works on the billing service.", "team"),
    ):
        result = await world.write(text, attribute=attribute, entities=[("person", "Priya", "mentions")])
        assert result.ok, result
        ids.append(result.record_id)
    return ids


async def test_a_store_written_through_the_library_checks_clean(world: World) -> None:
    await three_records(world)
    await world.rt.search(world.p, SearchRequest(queries=["concise answers"]))
    report = await world.rt.ops.check()
    assert report.clean, report.findings
    assert report.repaired == []


async def test_check_finds_each_kind_of_damage_and_repair_fixes_the_derivable(world: World) -> None:
    store, ops = world.rt.store, world.rt.ops
    a, b, c = await three_records(world)
    corrupt(
        store,
        f"DELETE FROM records_fts WHERE record_id = '{a}'",  # missing FTS row
        f"UPDATE records_fts SET content = 'garbage' WHERE record_id = '{b}'",  # stale FTS row
        "INSERT INTO records_fts(record_id, content, subject, aliases) VALUES ('ghost', 'x', 'y', '')",
        f"DELETE FROM embeddings WHERE record_id = '{c}'",  # active record without a vector
        f"INSERT INTO record_conflicts(record_id, other_id, noted_at) VALUES ('{a}', '{b}', 'now')",
        f"INSERT INTO record_entities(record_id, entity_id, role) VALUES ('{c}', 'nobody', 'mentions')",
        f"UPDATE records SET supersedes_id = '{b}' WHERE id = '{a}'",
        f"UPDATE records SET supersedes_id = '{a}' WHERE id = '{b}'",
        "UPDATE store_meta SET value = 1 WHERE key = 'records_version'",
        f"UPDATE records SET index_version = 50 WHERE id = '{a}'",  # a row above records_version
    )

    report = await ops.check()

    kinds = {(f.kind, f.record_id) for f in report.findings}
    assert ("fts_rows", a) in kinds
    assert ("fts_stale", b) in kinds
    assert ("fts_orphan", "ghost") in kinds
    assert ("vector_missing", c) in kinds
    assert ("conflict_one_way", a) in kinds
    assert ("link_orphan", c) in kinds
    assert any(k == "supersession_cycle" for k, _ in kinds)
    assert any(k == "records_version" for k, _ in kinds)
    assert not report.clean

    repaired = await ops.check(repair=True, actor="ops")

    assert any("FTS rows of 3 record(s)" in line for line in repaired.repaired), repaired.repaired
    assert any(line.startswith("re-embedded 1 record(s)") for line in repaired.repaired)
    assert any(line.startswith("raised records_version") for line in repaired.repaired)
    left = {f.kind for f in repaired.findings}
    assert left == {"conflict_one_way", "link_orphan", "supersession_cycle"}  # not derivable: reported
    assert (await store.fts_row(a))["content"] == "Aditya prefers concise answers."  # type: ignore[index]
    assert (await store.fts_row(b))["content"] == "Aditya deploys on Fridays."  # type: ignore[index]
    assert await store.fts_row("ghost") is None
    vector = await store.get_embedding(c)
    assert vector is not None and vector[:2] == ("fake-embedder", "1")
    (event,) = await store.events(kind="store.repaired")
    assert event["actor"] == "ops" and event["payload"]["repaired"] == repaired.repaired
    # The repaired vector is searchable in this process straight away.
    assert world.rt.index.vector_for(c) is not None


async def test_check_reports_foreign_and_corrupt_vectors(world: World) -> None:
    a, b, _ = await three_records(world)
    corrupt(
        world.rt.store,
        f"UPDATE embeddings SET model = 'other-model' WHERE record_id = '{a}'",
        f"UPDATE embeddings SET vector = x'00' WHERE record_id = '{b}'",
    )
    kinds = {(f.kind, f.record_id) for f in (await world.rt.ops.check()).findings}
    assert kinds == {("vector_foreign", a), ("vector_corrupt", b)}
    assert (await world.rt.ops.check(repair=True)).clean


def test_supersession_cycles_are_found_once_each() -> None:
    edges = [("a", "b"), ("b", "c"), ("c", "a"), ("d", "a"), ("e", "f"), ("x", "x")]
    cycles = supersession_cycles(edges)
    assert sorted(sorted(c) for c in cycles) == [["a", "b", "c"], ["x"]]
    assert supersession_cycles([("a", "b"), ("b", "c")]) == []


# --- reembed ------------------------------------------------------------------------------------


async def seed_v1(path: Path, *, search: bool = True) -> list[str]:
    """Three records embedded by fake-embedder version 1, and (optionally) one logged search."""
    w = await make_world(path)
    try:
        ids = await three_records(w)
        if search:
            await w.rt.search(w.p, SearchRequest(queries=["concise answers"]))
        return ids
    finally:
        await w.rt.close()


def reopen_v2(path: Path, config: Config | None = None) -> Any:
    return retold.open_runtime(
        path, config, embedder=FakeEmbedder(version="2"), judge=FakeJudge(), clock=FakeClock(),
        allow_embedding_mismatch=True,
    )  # fmt: skip


async def test_reembed_refuses_while_the_floors_are_the_old_models(tmp_path: Path) -> None:
    path = tmp_path / "m.sqlite"
    await seed_v1(path)
    async with reopen_v2(path) as rt:
        before = await table_rows(rt.store)
        with pytest.raises(ConfigError) as caught:
            await rt.ops.reembed("fake-embedder", "2")
        message = str(caught.value)
        assert "'fake-embedder' version '1'" in message and "retrieval.gate.dense_floor" in message
        assert caught.value.key == "retrieval.gate.dense_floor"
        assert await table_rows(rt.store) == before


async def test_reembed_swaps_every_vector_in_one_change(tmp_path: Path) -> None:
    path = tmp_path / "m.sqlite"
    ids = await seed_v1(path)
    recalibrated = Config().override({"retrieval.gate.dense_floor.semantic": 0.4})
    seen: list[tuple[int, int]] = []
    async with reopen_v2(path, recalibrated) as rt:
        version_before = await rt.store.records_version()
        report = await rt.ops.reembed(
            "fake-embedder", "2", actor="ops", batch_size=2, progress=lambda d, t: seen.append((d, t))
        )
        assert (report.records, report.batches, report.dims) == (3, 2, 256)
        assert report.replaced == [{"model": "fake-embedder", "version": "1", "dims": 256, "n": 3}]
        assert seen == [(0, 3), (2, 3), (3, 3)]
        assert await rt.store.embedding_models() == [
            {"model": "fake-embedder", "version": "2", "dims": 256, "n": 3}
        ]
        assert await rt.store.records_version() == version_before + 1
        (event,) = await rt.store.events(kind="store.reembedded")
        assert event["actor"] == "ops" and event["payload"]["records"] == 3
        assert (await rt.ops.check()).clean
        assert sorted(rt.index.ids) == sorted(ids)  # the in-process index now holds the new model's rows
        principal = Principal("planner", "u1", "s1")
        response = await rt.search(principal, SearchRequest(queries=["concise answers"]))
        assert ids[0] in {r.record.id for r in response.results}
    # A store re-embedded for version 2 opens without the mismatch escape hatch.
    async with retold.open_runtime(path, embedder=FakeEmbedder(version="2"), judge=FakeJudge()) as rt:
        assert (await rt.ops.check()).clean


async def test_reembed_without_search_history_needs_no_recalibration(tmp_path: Path) -> None:
    path = tmp_path / "m.sqlite"
    await seed_v1(path, search=False)
    async with reopen_v2(path) as rt:
        assert (await rt.ops.reembed("fake-embedder", "2")).records == 3


async def test_reembed_must_name_the_configured_embedder(tmp_path: Path) -> None:
    path = tmp_path / "m.sqlite"
    await seed_v1(path, search=False)
    async with reopen_v2(path) as rt:
        with pytest.raises(InvalidArgumentError, match="does not match the configured embedder"):
            await rt.ops.reembed("fake-embedder", "3")
        with pytest.raises(InvalidArgumentError, match="batch_size"):
            await rt.ops.reembed("fake-embedder", "2", batch_size=0)
        assert (await rt.store.embedding_models())[0]["version"] == "1"


async def test_reembed_skips_erased_tombstones(world: World) -> None:
    a, _, _ = await three_records(world)
    await world.rt.ops.erase(record=a, reason="test")
    report = await world.rt.ops.reembed("fake-embedder", "1")
    assert report.records == 2
    assert await world.rt.store.get_embedding(a) is None


# --- snapshots ----------------------------------------------------------------------------------


@pytest.mark.sqlite_only("a snapshot is a SQLite file (PostgreSQL: see the test below)")
async def test_snapshot_save_copies_every_table_into_one_file(world: World, tmp_path: Path) -> None:
    await three_records(world)
    await world.rt.search(world.p, SearchRequest(queries=["concise answers"]))
    target = tmp_path / "snap.sqlite"

    info = await world.rt.ops.save_snapshot(target)

    assert info.records == 3 and info.schema_version == Store.latest_schema_version()
    assert journal_format(target) == (1, 1)  # a rollback-journal file: self-contained, no -wal beside it
    copy = await Store.open(target)
    try:
        assert await table_rows(copy) == await table_rows(world.rt.store)
        assert await copy.db.fetchval("SELECT count(*) FROM records_fts") == 3
    finally:
        await copy.close()
    with pytest.raises(InvalidArgumentError, match="already exists"):
        await world.rt.ops.save_snapshot(target)
    with pytest.raises(InvalidArgumentError, match="does not exist"):
        await world.rt.ops.save_snapshot(tmp_path / "missing-folder" / "s.sqlite")


async def test_a_postgresql_store_refuses_a_snapshot_and_names_its_tools(tmp_path: Path) -> None:
    from tests.postgres_server import fresh_database

    w = await make_world(fresh_database())
    try:
        with pytest.raises(StoreError, match="pg_dump"):
            await w.rt.ops.save_snapshot(tmp_path / "snap.sqlite")
        assert not (tmp_path / "snap.sqlite").exists()
    finally:
        await w.rt.close()


async def test_snapshot_load_refuses_an_open_store_and_restores_a_closed_one(tmp_path: Path) -> None:
    path, snap = tmp_path / "m.sqlite", tmp_path / "snap.sqlite"
    w = await make_world(path)
    first = await w.write("Aditya prefers concise answers.")
    await w.rt.ops.save_snapshot(snap)
    later = await w.write("Aditya deploys on Fridays.", attribute="deploy_day")
    with pytest.raises(StoreError, match="another connection holds the store"):
        await load_snapshot(path, snap)
    assert await w.rt.store.get_record(later.record_id) is not None
    await w.rt.close()

    info = await load_snapshot(path, snap)

    assert info.records == 1
    async with retold.open_runtime(path, embedder=FakeEmbedder(), judge=FakeJudge(), clock=FakeClock()) as rt:
        assert await rt.store.get_record(first.record_id) is not None
        assert await rt.store.get_record(later.record_id) is None
        assert (await rt.ops.check()).clean
        principal = Principal("planner", "u1", "s1")
        response = await rt.search(principal, SearchRequest(queries=["concise answers"]))
        assert [r.record.id for r in response.results] == [first.record_id]


async def test_snapshot_load_validates_before_replacing_anything(tmp_path: Path) -> None:
    path, snap = tmp_path / "m.sqlite", tmp_path / "snap.sqlite"
    await seed_v1(path, search=False)
    shutil.copy(path, snap)
    corrupt(snap, "INSERT INTO schema_migrations(version, name, applied_at) VALUES (99, 'future', 'x')")
    original = path.read_bytes()
    with pytest.raises(SchemaVersionError, match="schema version 99"):
        await load_snapshot(path, snap)
    not_sqlite = tmp_path / "notes.txt"
    not_sqlite.write_text("not a database at all, just text " * 200)
    with pytest.raises(InvalidArgumentError, match=r"not a readable SQLite database|cannot be read"):
        await load_snapshot(path, not_sqlite)
    foreign = tmp_path / "other.sqlite"
    corrupt(foreign, "CREATE TABLE t(x)")
    with pytest.raises(InvalidArgumentError, match="not a retold store"):
        await load_snapshot(path, foreign)
    with pytest.raises(InvalidArgumentError, match="does not exist"):
        await load_snapshot(path, tmp_path / "nope.sqlite")
    with pytest.raises(InvalidArgumentError, match="same file"):
        await load_snapshot(path, path)
    assert path.read_bytes() == original


async def test_snapshot_dry_run_describes_without_replacing(tmp_path: Path) -> None:
    path, snap = tmp_path / "m.sqlite", tmp_path / "snap.sqlite"
    await seed_v1(path, search=False)
    async with retold.open_runtime(path, embedder=FakeEmbedder(), judge=FakeJudge()) as rt:
        await rt.ops.save_snapshot(snap)
        await rt.host.write_system(USER, "Aditya moved to Berlin.", attribute="city")
    original = path.read_bytes()
    info = await load_snapshot(path, snap, dry_run=True)
    assert info.records == 3
    assert path.read_bytes() == original


def test_reliability_doc_names_only_existing_tests() -> None:
    """docs/reliability.md cites tests as proof; a renamed or deleted test must not leave a dead citation."""
    root = Path(__file__).parents[2]
    text = (root / "docs" / "reliability.md").read_text()
    cited = set(re.findall(r"(tests/[\w/]+\.py)::(test_\w+)", text))
    assert len(cited) >= 15
    for path, name in sorted(cited):
        source = (root / path).read_text()
        assert re.search(rf"^(async )?def {name}\(", source, re.M), f"{path}::{name}"
