"""Schema migrations (spec §3, §3.2): a fresh file, a re-open, a legacy v1 file, and a newer file."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from retold.errors import MigrationIssuesError, SchemaVersionError
from retold.models import SessionKey
from retold.store import LATEST_VERSION, Database, Store, migrate
from retold.util import normalize_attribute

SPEC_TABLES = {
    "records",
    "migration_issues",
    "record_conflicts",
    "embeddings",
    "passage_vectors",
    "store_meta",
    "records_fts",
    "entities",
    "entity_aliases",
    "record_entities",
    "grants",
    "sessions",
    "session_turns",
    "events",
    "search_log",
}

SPEC_COLUMNS = {
    "records": {
        "id", "type", "version", "content", "subject", "subject_entity_id", "attribute", "scope_kind",
        "scope_id", "source_kind", "source_ref", "creator_agent_id", "evidence", "created_at", "event_at",
        "expires_at", "valid_from", "valid_until", "review_at", "review_flagged_at", "confidence",
        "status", "supersedes_id", "reinforcements", "last_reinforced_at", "index_version", "tags",
    },
    "migration_issues": {"migration_version", "record_id", "issue"},
    "record_conflicts": {"record_id", "other_id", "noted_at"},
    "embeddings": {"record_id", "model", "version", "dims", "vector", "index_version"},
    "store_meta": {"key", "value"},
    "records_fts": {"record_id", "content", "subject", "aliases"},
    "entities": {"id", "kind", "canonical", "scope_kind", "scope_id", "status", "merged_into", "created_at"},
    "entity_aliases": {"entity_id", "alias_norm"},
    "record_entities": {"record_id", "entity_id", "role"},
    "grants": {"agent_id", "scope_kind", "scope_id", "can_read", "can_write"},
    "sessions": {
        "id", "agent_id", "user_id", "project_id", "started_at", "ended_at", "extraction_started_at",
        "extracted_at",
    },
    "session_turns": {"session_id", "turn", "role", "content", "at"},
    "events": {"id", "at", "kind", "actor", "record_id", "entity_id", "payload"},
    "search_log": {
        "id", "at", "agent_id", "user_id", "session_id", "trigger", "request", "context",
        "rewrite_status", "rewritten_queries", "readable_scopes", "dense", "lexical", "entity", "fused",
        "freshness", "gated_out", "deduped_out", "reranked", "reranked_out", "rerank_status",
        "rerank_error", "budget_out", "returned", "explanations", "config_flags", "warm", "timings_ms",
    },
}  # fmt: skip

TS = "2025-06-01T10:00:00.000000Z"


def table_columns(path: Path, table: str) -> set[str]:
    with sqlite3.connect(path) as conn:
        return {row[1] for row in conn.execute(f"PRAGMA table_info({table})")}


def applied_migrations(path: Path) -> list[tuple[int, str, str]]:
    with sqlite3.connect(path) as conn:
        return list(conn.execute("SELECT version, name, applied_at FROM schema_migrations ORDER BY version"))


# --------------------------------------------------------------------------- fresh and re-opened files


async def test_fresh_database_reaches_latest_version_with_every_spec_table(store: Store) -> None:
    assert LATEST_VERSION == 12
    assert await store.schema_version() == LATEST_VERSION
    assert set(await store.tables()) >= SPEC_TABLES
    assert await store.records_version() == 0


async def store_columns(store: Store, table: str) -> set[str]:
    if store.dialect == "postgresql":
        rows = await store.db.fetchall(
            "SELECT column_name FROM information_schema.columns WHERE table_name = ?", (table,)
        )
        return {r[0] for r in rows}
    return table_columns(Path(store.path), table)


@pytest.mark.parametrize("table", sorted(SPEC_COLUMNS))
async def test_fresh_database_has_the_spec_columns(store: Store, table: str) -> None:
    missing = SPEC_COLUMNS[table] - await store_columns(store, table)
    assert not missing, f"{table} lacks {sorted(missing)}"


@pytest.mark.sqlite_only(
    "SQLite files migrated from version 1; PostgreSQL starts at 7 (tests/integration/test_postgres.py)"
)
async def test_search_log_defaults_for_columns_added_by_later_migrations(store: Store) -> None:
    with sqlite3.connect(store.path) as conn:
        defaults = {row[1]: row[4] for row in conn.execute("PRAGMA table_info(search_log)")}
    assert defaults["trigger"] == "'tool'"
    assert defaults["reranked_out"] == "'[]'"
    assert defaults["rerank_status"] == "'disabled'"


@pytest.mark.sqlite_only(
    "SQLite files migrated from version 1; PostgreSQL starts at 7 (tests/integration/test_postgres.py)"
)
async def test_reopening_applies_no_migration(store_path: Path) -> None:
    first = await Store.open(store_path)
    await first.close()
    before = applied_migrations(store_path)
    assert [v for v, _, _ in before] == list(range(1, LATEST_VERSION + 1))

    second = await Store.open(store_path)
    await second.close()
    assert applied_migrations(store_path) == before

    db = await Database.open(store_path)
    try:
        assert await migrate(db) == []
    finally:
        await db.close()
    assert applied_migrations(store_path) == before


@pytest.mark.sqlite_only(
    "SQLite files migrated from version 1; PostgreSQL starts at 7 (tests/integration/test_postgres.py)"
)
async def test_migrate_to_a_target_stops_there(store_path: Path) -> None:
    db = await Database.open(store_path)
    try:
        assert await migrate(db, target=1) == [1]
        assert await migrate(db, target=3) == [2, 3]
        assert await migrate(db) == [4, 5, 6, 7, 8, 9, 10, 11, 12]
    finally:
        await db.close()
    assert "subject_entity_id" in table_columns(store_path, "records")


@pytest.mark.sqlite_only(
    "SQLite files migrated from version 1; PostgreSQL starts at 7 (tests/integration/test_postgres.py)"
)
async def test_newer_schema_version_refuses_to_open(store_path: Path) -> None:
    store = await Store.open(store_path)
    await store.close()
    with sqlite3.connect(store_path) as conn:
        conn.execute(
            "INSERT INTO schema_migrations(version, name, applied_at) VALUES (99, 'future', ?)", (TS,)
        )
    with pytest.raises(SchemaVersionError, match="99"):
        await Store.open(store_path)


# --------------------------------------------------------------------------- a legacy version-1 file

E_ADITYA = "e-aditya"
E_PRIYA = "e-priya"
R_MAPPED = "r1-mapped"
R_ZERO = "r2-zero-about"
R_TWO = "r3-two-about"
R_NO_ATTR = "r4-no-attribute"
R_OLD = "r5-superseded-unmappable"
UNRESOLVED_ACTIVE = {R_ZERO, R_TWO, R_NO_ATTR}


async def _legacy_record(db: Database, record_id: str, subject: str, status: str = "confirmed") -> None:
    await db.execute(
        """INSERT INTO records(id, type, content, subject, scope_kind, scope_id, source_kind,
                               creator_agent_id, created_at, event_at, confidence, status)
           VALUES (?, 'semantic', ?, ?, 'user', 'u1', 'user_statement', 'planner', ?, ?, 0.95, ?)""",
        (record_id, f"content of {record_id}", subject, TS, TS, status),
    )
    await db.execute(
        "INSERT INTO records_fts(record_id, content, subject, aliases) VALUES (?, ?, ?, '')",
        (record_id, f"content of {record_id}", subject),
    )


async def _link(db: Database, record_id: str, entity_id: str, role: str = "about") -> None:
    await db.execute(
        "INSERT INTO record_entities(record_id, entity_id, role) VALUES (?, ?, ?)",
        (record_id, entity_id, role),
    )


@pytest.fixture
async def legacy_path(tmp_path: Path) -> Path:
    """A version-1 file with one mappable legacy record and four that migration 2 cannot map."""
    store_path = tmp_path / "legacy.sqlite"
    db = await Database.open(store_path)
    try:
        assert await migrate(db, target=1) == [1]
        assert "subject_entity_id" not in table_columns(store_path, "records")
        async with db.transaction():
            for entity_id, name in ((E_ADITYA, "Aditya"), (E_PRIYA, "Priya")):
                await db.execute(
                    """INSERT INTO entities(id, kind, canonical, scope_kind, scope_id, status, created_at)
                       VALUES (?, 'person', ?, 'user', 'u1', 'confirmed', ?)""",
                    (entity_id, name, TS),
                )
                await db.execute(
                    "INSERT INTO entity_aliases(entity_id, alias_norm) VALUES (?, ?)",
                    (entity_id, name.lower()),
                )
            await _legacy_record(db, R_MAPPED, "aditya/Explanation Style")
            await _link(db, R_MAPPED, E_ADITYA)
            await _link(db, R_MAPPED, E_PRIYA, "mentions")  # a mention does not count as a second subject
            await _legacy_record(db, R_ZERO, "aditya/Tone")
            await _link(db, R_ZERO, E_ADITYA, "mentions")
            await _legacy_record(db, R_TWO, "aditya/Editor")
            await _link(db, R_TWO, E_ADITYA)
            await _link(db, R_TWO, E_PRIYA)
            await _legacy_record(db, R_NO_ATTR, "aditya/")
            await _link(db, R_NO_ATTR, E_ADITYA)
            await _legacy_record(db, R_OLD, "priya/", status="superseded")
    finally:
        await db.close()
    return store_path


async def test_legacy_row_with_one_about_link_is_mapped(legacy_path: Path) -> None:
    store = await Store.open(legacy_path, allow_migration_issues=True)
    try:
        record = await store.require_record(R_MAPPED)
        assert record.subject_entity_id == E_ADITYA
        assert record.attribute == normalize_attribute("Explanation Style") == "explanation_style"
        assert record.subject == f"{E_ADITYA}/explanation_style"
        assert record.entity_ids == [E_ADITYA, E_PRIYA]
        fts = await store.fts_row(R_MAPPED)
        assert fts is not None and fts["subject"] == record.subject
        issues = await store.migration_issues(unresolved_only=False)
        assert R_MAPPED not in {i["record_id"] for i in issues}
    finally:
        await store.close()


async def test_unmappable_legacy_rows_are_listed_with_a_reason(legacy_path: Path) -> None:
    store = await Store.open(legacy_path, allow_migration_issues=True)
    try:
        issues = {i["record_id"]: i for i in await store.migration_issues(unresolved_only=False)}
        assert set(issues) == UNRESOLVED_ACTIVE | {R_OLD}
        assert all(i["migration_version"] == 2 and i["resolution"] is None for i in issues.values())
        assert "0 about links" in issues[R_ZERO]["issue"]
        assert "2 about links" in issues[R_TWO]["issue"]
        assert "no attribute segment" in issues[R_NO_ATTR]["issue"]
        for record_id in UNRESOLVED_ACTIVE:
            record = await store.require_record(record_id)
            assert record.subject_entity_id is None and record.attribute is None
            assert record.status == "confirmed"
        unresolved = await store.migration_issues()
        assert {i["record_id"] for i in unresolved} == UNRESOLVED_ACTIVE
    finally:
        await store.close()


async def test_unresolved_issues_refuse_to_open(legacy_path: Path) -> None:
    for _ in range(2):  # the first open migrates, the second finds the same issues
        with pytest.raises(MigrationIssuesError) as info:
            await Store.open(legacy_path)
        assert info.value.count == len(UNRESOLVED_ACTIVE)
    assert applied_migrations(legacy_path)[-1][0] == LATEST_VERSION


async def test_expiring_unmapped_rows_unblocks_opening(legacy_path: Path) -> None:
    store = await Store.open(legacy_path, allow_migration_issues=True)
    try:
        assert await store.resolve_migration_issues("expired", "admin") == len(UNRESOLVED_ACTIVE)
        for record_id in UNRESOLVED_ACTIVE:
            assert (await store.require_record(record_id)).status == "expired"
            events = await store.events(record_id=record_id, kind="record.status")
            assert len(events) == 1
            assert events[0]["actor"] == "admin"
            assert events[0]["payload"]["from"] == "confirmed"
            assert events[0]["payload"]["to"] == "expired"
        assert (await store.require_record(R_MAPPED)).status == "confirmed"
        assert await store.events(record_id=R_MAPPED) == []
        assert await store.migration_issues() == []
        assert await store.resolve_migration_issues("expired", "admin") == 0
    finally:
        await store.close()
    reopened = await Store.open(legacy_path)
    await reopened.close()


async def test_acknowledging_unmapped_rows_unblocks_opening_and_keeps_them_active(legacy_path: Path) -> None:
    store = await Store.open(legacy_path, allow_migration_issues=True)
    try:
        assert await store.resolve_migration_issues("acknowledged", "ops") == len(UNRESOLVED_ACTIVE)
        for record_id in UNRESOLVED_ACTIVE:
            assert (await store.require_record(record_id)).status == "confirmed"
        assert await store.events(kind="record.status") == []
        resolved = {i["record_id"]: i for i in await store.migration_issues(unresolved_only=False)}
        assert {resolved[r]["resolution"] for r in UNRESOLVED_ACTIVE} == {"acknowledged"}
        assert {resolved[r]["resolved_by"] for r in UNRESOLVED_ACTIVE} == {"ops"}
    finally:
        await store.close()
    reopened = await Store.open(legacy_path)
    await reopened.close()


async def test_resolution_must_be_expired_or_acknowledged(legacy_path: Path) -> None:
    store = await Store.open(legacy_path, allow_migration_issues=True)
    try:
        with pytest.raises(ValueError, match="resolution"):
            await store.resolve_migration_issues("deleted", "admin")
        assert len(await store.migration_issues()) == len(UNRESOLVED_ACTIVE)
    finally:
        await store.close()


@pytest.mark.sqlite_only(
    "SQLite files migrated from version 1; PostgreSQL starts at 7 (tests/integration/test_postgres.py)"
)
async def test_unmappable_row_already_superseded_does_not_block_opening(store_path: Path) -> None:
    db = await Database.open(store_path)
    try:
        await migrate(db, target=1)
        async with db.transaction():
            await _legacy_record(db, R_OLD, "priya/", status="superseded")
            await _legacy_record(db, "r6-expired", "no links", status="expired")
    finally:
        await db.close()
    store = await Store.open(store_path)
    try:
        listed = {i["record_id"] for i in await store.migration_issues(unresolved_only=False)}
        assert listed == {R_OLD, "r6-expired"}
        assert await store.migration_issues() == []
    finally:
        await store.close()


@pytest.mark.sqlite_only(
    "SQLite files migrated from version 1; PostgreSQL starts at 7 (tests/integration/test_postgres.py)"
)
async def test_episodic_marker_is_not_an_attribute_for_a_semantic_legacy_row(store_path: Path) -> None:
    db = await Database.open(store_path)
    try:
        await migrate(db, target=1)
        async with db.transaction():
            await db.execute(
                """INSERT INTO entities(id, kind, canonical, scope_kind, scope_id, status, created_at)
                   VALUES (?, 'person', 'Aditya', 'user', 'u1', 'confirmed', ?)""",
                (E_ADITYA, TS),
            )
            await _legacy_record(db, "r-dash", "aditya/-")
            await _link(db, "r-dash", E_ADITYA)
    finally:
        await db.close()
    store = await Store.open(store_path, allow_migration_issues=True)
    try:
        issues = await store.migration_issues()
        assert [(i["record_id"], "no attribute segment" in i["issue"]) for i in issues] == [("r-dash", True)]
    finally:
        await store.close()


# --------------------------------------------------------------------------- version 6 -> 7: ownership


@pytest.mark.sqlite_only(
    "SQLite files migrated from version 1; PostgreSQL starts at 7 (tests/integration/test_postgres.py)"
)
async def test_migration_7_keys_sessions_by_owner_and_keeps_every_source(store_path: Path) -> None:
    """A version-6 file: one session, a record quoting it, a counted reinforcement from a tool call,
    and a project record linked to a user's person entity whose private alias was in its FTS row."""
    db = await Database.open(store_path)
    try:
        assert await migrate(db, target=6) == [1, 2, 3, 4, 5, 6]
        async with db.transaction():
            await db.execute(
                "INSERT INTO sessions(id, agent_id, user_id, started_at) VALUES ('t1', 'planner', 'u1', ?)",
                (TS,),
            )
            await db.execute(
                """INSERT INTO session_turns(session_id, turn, role, content, at)
                   VALUES ('t1', 1, 'user', ?, ?)""",
                ("I like tea", TS),
            )
            await db.execute(
                """INSERT INTO entities(id, kind, canonical, scope_kind, scope_id, status, created_at)
                   VALUES ('e1', 'person', 'u1', 'user', 'u1', 'confirmed', ?)""",
                (TS,),
            )
            for alias in ("u1", "adi"):
                await db.execute(
                    "INSERT INTO entity_aliases(entity_id, alias_norm) VALUES ('e1', ?)", (alias,)
                )
            for rid, scope, ref in (("r1", "u1", "session:t1<turn:1>"), ("r2", "p1", None)):
                kind = "user" if scope == "u1" else "project"
                await db.execute(
                    """INSERT INTO records(id, type, content, subject, subject_entity_id, attribute,
                               scope_kind, scope_id, source_kind, source_ref, creator_agent_id, evidence,
                               created_at, event_at, confidence, status)
                       VALUES (?, 'semantic', ?, ?, 'e1', 'drink', ?, ?, ?, ?, 'planner', ?, ?, ?, 0.9,
                               'confirmed')""",
                    (
                        rid,
                        f"likes tea {rid}",
                        "e1/drink",
                        kind,
                        scope,
                        "user_statement" if ref else "system",
                        ref,
                        "I like tea" if ref else None,
                        TS,
                        TS,
                    ),
                )
                await db.execute("INSERT INTO record_entities(record_id, entity_id) VALUES (?, 'e1')", (rid,))
                await db.execute(
                    """INSERT INTO records_fts(record_id, content, subject, aliases)
                       VALUES (?, ?, 'e1/drink', ?)""",
                    (rid, f"likes tea {rid}", "u1 adi"),
                )
            await db.execute(
                """INSERT INTO events(id, at, kind, actor, record_id, payload)
                   VALUES ('ev1', ?, 'record.reinforced', 'helper', 'r1', ?)""",
                (
                    TS,
                    '{"counted": true, "source_ref": "call-7", "source_kind": "tool_result", '
                    '"evidence": "tea: yes"}',
                ),
            )
        assert await migrate(db) == [7, 8, 9, 10, 11, 12]
    finally:
        await db.close()

    store = await Store.open(store_path)
    try:
        key = SessionKey("planner", "u1", "t1")
        assert [t.content for t in await store.turns(key)] == ["I like tea"]
        assert (await store.get_session(key)) is not None
        assert await store.get_session(SessionKey("planner", "u2", "t1")) is None
        sources = {s.origin: s for s in await store.sources_of("r1")}
        assert set(sources) == {"planner/u1/session:t1<turn:1>", "helper//call-7"}
        assert sources["planner/u1/session:t1<turn:1>"].user_id == "u1"
        assert sources["helper//call-7"].evidence == "tea: yes"
        assert await store.source_origin_of("r1") == "planner/u1/session:t1<turn:1>"
        # The user's aliases stay on records in the user's scope, and leave the project's row.
        assert sorted((await store.fts_row("r1"))["aliases"].split()) == ["adi", "u1"]  # type: ignore[index]
        assert (await store.fts_row("r2"))["aliases"] == ""  # type: ignore[index]
        assert await store.orphan_findings() == []
        assert await store.fts_findings() == []
    finally:
        await store.close()
