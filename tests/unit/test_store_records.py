"""Store CRUD over records, FTS, the hard eligibility filter, conflicts, sources, the search log, sessions."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta, timezone

import pytest

from retold.errors import InvalidArgumentError, NotFoundError
from retold.models import Record, RecordSource, Scope, SessionInfo, SessionKey
from retold.store import Store
from retold.store.rows import RECORD_COLUMNS, record_to_params
from retold.testing import FakeClock

from .factories import MakeEntity, MakeRecord

U1 = Scope("user", "u1")
U2 = Scope("user", "u2")
PRIVATE = Scope("agent", "planner/u1")


# --------------------------------------------------------------------------- insert and read back


async def test_insert_then_get_round_trips_every_field(
    store: Store, make_record: MakeRecord, make_entity: MakeEntity
) -> None:
    about, mentioned = make_entity("Aditya"), make_entity("Priya")
    await store.insert_entity(about)
    await store.insert_entity(mentioned)
    ist = timezone(timedelta(hours=5, minutes=30))
    base = datetime(2025, 3, 4, 5, 6, 7, 891011, tzinfo=UTC)
    older = make_record(content="older")
    await store.insert_record(older)
    record = make_record(
        type="procedural",
        version=3,
        content="Run `make lint` before pushing",
        subject=f"{about.id}/pre_push_check",
        subject_entity_id=about.id,
        attribute="pre_push_check",
        scope=PRIVATE,
        source_kind="tool_result",
        source_ref="session:s1<turn:4>",
        creator_agent_id="coder",
        evidence="make lint passed",
        created_at=base,
        event_at=(base - timedelta(days=1)).astimezone(ist),
        expires_at=base + timedelta(days=30),
        valid_from=base - timedelta(days=2),
        valid_until=base + timedelta(days=2),
        review_at=base + timedelta(days=7),
        review_flagged_at=base + timedelta(days=8),
        confidence=0.85,
        status="provisional",
        supersedes_id=older.id,
        reinforcements=2,
        last_reinforced_at=base + timedelta(hours=1),
        tags=["ci", "lint"],
    )
    # mentions first on purpose: the stored order puts the about link first
    version = await store.insert_record(record, links=[(mentioned.id, "mentions"), (about.id, "about")])

    got = await store.require_record(record.id)
    expected = {f: getattr(record, f) for f in Record.__dataclass_fields__} | {
        "entity_ids": [about.id, mentioned.id],
        "index_version": version,
    }
    assert {f: getattr(got, f) for f in Record.__dataclass_fields__} == expected
    assert record.entity_ids == [about.id, mentioned.id]
    assert got.event_at.tzinfo == UTC and got.event_at.utcoffset() == timedelta(0)
    assert got.event_at == base - timedelta(days=1)
    assert got.scope == PRIVATE
    assert await store.record_links(record.id) == [(about.id, "about"), (mentioned.id, "mentions")]


async def test_naive_datetimes_are_stored_as_utc(store: Store, make_record: MakeRecord) -> None:
    naive = datetime(2025, 1, 2, 3, 4, 5)
    record = make_record(created_at=naive, event_at=naive)
    await store.insert_record(record)
    got = await store.require_record(record.id)
    assert got.created_at == naive.replace(tzinfo=UTC)
    assert got.created_at.tzinfo == UTC


async def test_get_records_keeps_the_requested_order_and_skips_unknown_ids(
    store: Store, make_record: MakeRecord
) -> None:
    records = [make_record(content=f"fact {i}") for i in range(3)]
    for record in records:
        await store.insert_record(record)
    ids = [records[2].id, "missing", records[0].id, records[2].id]
    assert [r.id for r in await store.get_records(ids)] == [records[2].id, records[0].id]
    assert await store.get_record("missing") is None
    with pytest.raises(NotFoundError):
        await store.require_record("missing")


async def test_fts_row_carries_content_subject_and_linked_aliases(
    store: Store, make_record: MakeRecord, make_entity: MakeEntity
) -> None:
    aditya = make_entity("Aditya", aliases=["aditya", "adi"])
    priya = make_entity("Priya")
    unrelated = make_entity("Zed")
    for entity in (aditya, priya, unrelated):
        await store.insert_entity(entity)
    record = make_record(content="He likes short answers", subject=f"{aditya.id}/answer_style")
    await store.insert_record(record, links=[(aditya.id, "about"), (priya.id, "mentions")])

    fts = await store.fts_row(record.id)
    assert fts is not None
    assert fts["content"] == "He likes short answers"
    assert fts["subject"] == f"{aditya.id}/answer_style"
    assert set(fts["aliases"].split()) == {"aditya", "adi", "priya"}
    matched = await store.fts_search('"adi"', {record.id}, 10)
    assert [r[0] for r in matched] == [record.id]


async def test_update_of_content_rewrites_the_fts_row(store: Store, make_record: MakeRecord) -> None:
    record = make_record(content="prefers tabs")
    await store.insert_record(record)
    await store.update_record(record.id, content="prefers spaces", subject="x/indentation")
    fts = await store.fts_row(record.id)
    assert fts is not None and fts["content"] == "prefers spaces" and fts["subject"] == "x/indentation"
    assert await store.db.fetchval("SELECT count(*) FROM records_fts") == 1
    assert await store.fts_search('"tabs"', {record.id}, 10) == []
    assert [r[0] for r in await store.fts_search('"spaces"', {record.id}, 10)] == [record.id]
    assert (await store.require_record(record.id)).content == "prefers spaces"


async def test_update_writes_python_values_in_stored_form(
    store: Store, make_record: MakeRecord, clock: FakeClock
) -> None:
    record = make_record()
    await store.insert_record(record)
    later = clock.advance(days=3)
    await store.update_record(record.id, tags=["a", "b"], expires_at=later, reinforcements=1)
    got = await store.require_record(record.id)
    assert got.tags == ["a", "b"] and got.expires_at == later and got.reinforcements == 1
    assert await store.db.fetchval("SELECT tags FROM records WHERE id = ?", (record.id,)) == '["a", "b"]'


@pytest.mark.parametrize(
    "change",
    [{"id": "other"}, {"scope_kind": "org"}, {"created_at": datetime(2020, 1, 1, tzinfo=UTC)}],
    ids=["id", "scope_kind", "created_at"],
)
async def test_update_refuses_immutable_columns(
    store: Store, make_record: MakeRecord, change: dict[str, object]
) -> None:
    record = make_record()
    await store.insert_record(record)
    with pytest.raises(InvalidArgumentError):
        await store.update_record(record.id, content="changed", **change)
    got = await store.require_record(record.id)
    assert got.content == record.content and got.created_at == record.created_at
    assert await store.records_version() == 1


async def test_update_needs_a_column(store: Store, make_record: MakeRecord) -> None:
    record = make_record()
    await store.insert_record(record)
    with pytest.raises(InvalidArgumentError):
        await store.update_record(record.id)
    assert await store.records_version() == 1


async def test_update_of_unknown_record_raises_not_found(store: Store) -> None:
    with pytest.raises(NotFoundError):
        await store.update_record("missing", content="x")
    with pytest.raises(NotFoundError):
        await store.set_status("missing", "expired")


# --------------------------------------------------------------------------- eligible_ids


@pytest.fixture
async def population(store: Store, make_record: MakeRecord, clock: FakeClock) -> dict[str, str]:
    """One record per eligibility case, keyed by a name for the assertions."""
    now = clock.now()
    specs: dict[str, dict[str, object]] = {
        "live": {},
        "other_user": {"scope": U2},
        "private": {"scope": PRIVATE},
        "superseded": {"status": "superseded"},
        "expired_status": {"status": "expired"},
        "deleted": {"status": "deleted"},
        "past_expiry": {"status": "provisional", "expires_at": now - timedelta(minutes=1)},
        "future_expiry": {"status": "provisional", "expires_at": now + timedelta(days=1)},
        "old_episode": {"type": "episodic", "event_at": now - timedelta(days=10)},
        "summary": {"type": "episodic", "source_kind": "session_summary", "source_ref": "session:s1"},
        "procedure": {"type": "procedural"},
    }
    ids = {}
    for name, overrides in specs.items():
        record = make_record(content=name, **overrides)
        await store.insert_record(record)
        ids[name] = record.id
    return ids


def named(population: dict[str, str], names: set[str]) -> set[str]:
    return {population[n] for n in names}


async def test_eligible_ids_default_is_live_unexpired_records_in_the_scopes(
    store: Store, population: dict[str, str], clock: FakeClock
) -> None:
    live = {"live", "future_expiry", "old_episode", "summary", "procedure"}
    assert await store.eligible_ids([U1], now=clock.now()) == named(population, live)
    both = await store.eligible_ids([U1, PRIVATE], now=clock.now())
    assert both == named(population, live | {"private"})
    assert await store.eligible_ids([], now=clock.now()) == set()


async def test_eligible_ids_expiry_follows_now(
    store: Store, population: dict[str, str], clock: FakeClock
) -> None:
    later = clock.now() + timedelta(days=2)
    eligible = await store.eligible_ids([U1], now=later)
    assert population["future_expiry"] not in eligible
    assert population["live"] in eligible


async def test_eligible_ids_history_admits_superseded_and_expired_never_deleted(
    store: Store, population: dict[str, str], clock: FakeClock
) -> None:
    eligible = await store.eligible_ids([U1], now=clock.now(), include_history=True)
    history = {"superseded", "expired_status", "past_expiry"}
    live = {"live", "future_expiry", "old_episode", "summary", "procedure"}
    assert eligible == named(population, live | history)
    assert population["deleted"] not in eligible


async def test_eligible_ids_filters_types_time_and_source_kinds(
    store: Store, population: dict[str, str], clock: FakeClock
) -> None:
    now = clock.now()
    episodic = await store.eligible_ids([U1], now=now, types=["episodic"])
    assert episodic == named(population, {"old_episode", "summary"})
    two_types = await store.eligible_ids([U1], now=now, types=["episodic", "procedural"])
    assert two_types == named(population, {"old_episode", "summary", "procedure"})

    since = await store.eligible_ids([U1], now=now, types=["episodic"], since=now - timedelta(days=1))
    assert since == named(population, {"summary"})
    until = await store.eligible_ids([U1], now=now, types=["episodic"], until=now - timedelta(days=1))
    assert until == named(population, {"old_episode"})
    exact = await store.eligible_ids([U1], now=now, types=["episodic"], since=now, until=now)
    assert exact == named(population, {"summary"})  # both bounds are inclusive

    no_summaries = await store.eligible_ids([U1], now=now, exclude_source_kinds=["session_summary"])
    assert no_summaries == named(population, {"live", "future_expiry", "old_episode", "procedure"})


async def test_eligible_ids_within_restricts_to_a_subset(
    store: Store, population: dict[str, str], clock: FakeClock
) -> None:
    within = [population["live"], population["deleted"], population["other_user"], "not-a-record"]
    assert await store.eligible_ids([U1], now=clock.now(), within=within) == {population["live"]}
    assert await store.eligible_ids([U1], now=clock.now(), within=[]) == set()


async def test_eligible_ids_within_two_thousand_ids(
    store: Store, make_record: MakeRecord, clock: FakeClock
) -> None:
    records = [make_record(content=f"fact {i}") for i in range(2000)]
    columns = ", ".join(RECORD_COLUMNS)
    placeholders = ", ".join(f":{c}" for c in RECORD_COLUMNS)
    async with store.transaction():  # bulk rows without FTS: only the filter is under test here
        await store.db.executemany(
            f"INSERT INTO records({columns}) VALUES ({placeholders})", [record_to_params(r) for r in records]
        )
    ids = [r.id for r in records]
    everything = await store.eligible_ids([U1], now=clock.now(), within=ids)
    assert everything == set(ids)
    half = ids[::2] + [f"missing-{i}" for i in range(1000)]
    assert await store.eligible_ids([U1], now=clock.now(), within=half) == set(ids[::2])
    assert len(await store.get_records(ids)) == 2000


# --------------------------------------------------------------------------- conflicts


async def test_add_conflict_writes_both_directions(
    store: Store, make_record: MakeRecord, clock: FakeClock
) -> None:
    a, b, c = make_record(), make_record(), make_record()
    for record in (a, b, c):
        await store.insert_record(record)
    await store.add_conflict(a.id, b.id, clock.now())
    await store.add_conflict(b.id, a.id, clock.now())  # idempotent
    await store.add_conflict(a.id, c.id, clock.now())
    assert await store.conflicts_for(a.id) == sorted([b.id, c.id])
    assert await store.conflicts_for(b.id) == [a.id]
    assert await store.conflicts_for(c.id) == [a.id]
    assert await store.db.fetchval("SELECT count(*) FROM record_conflicts") == 4


# --------------------------------------------------------------------------- record sources


def supplied(record: Record, origin: str, content: str, added_at: datetime) -> RecordSource:
    return RecordSource(
        record_id=record.id, origin=origin, source_kind="agent_inference", source_ref=None,
        agent_id="import", user_id=None, session_id=None, evidence=None, content=content,
        added_at=added_at,
    )  # fmt: skip


async def test_records_with_sources_finds_the_record_each_source_gave_that_text(
    store: Store, make_record: MakeRecord, clock: FakeClock
) -> None:
    a, b, c, d, e = (make_record(content=f"r{i}") for i in range(5))
    now = clock.now()
    async with store.transaction():
        for record in (a, b, c, d, e):
            await store.insert_record(record)
        await store.add_source(supplied(a, "import//crm:1", "Priya uses vim.", now))
        await store.add_source(supplied(b, "import//crm:1", "Priya uses emacs.", now))
        await store.add_source(supplied(c, "import//crm:2", "Priya uses vim.", now))
        # the same source and text on a later record: the earliest-added row answers
        await store.add_source(supplied(d, "import//crm:1", "Priya uses vim.", now + timedelta(seconds=1)))
        for i in range(450):  # more sources than one query binds
            await store.add_source(supplied(e, f"import//bulk:{i}", f"fact {i}", now))

    found = await store.records_with_sources(
        [
            ("import//crm:1", "Priya uses vim."),
            ("import//crm:1", "Priya uses vim."),  # a repeat is asked once
            ("import//crm:1", "Priya uses emacs."),
            ("import//crm:2", "Priya uses vim."),
            ("import//crm:2", "Priya uses emacs."),  # each text from its own source only
            ("import//-", "Priya uses vim."),
            ("import//crm:1", "Priya uses vim"),  # the text is matched exactly
            ("import//crm:3", "Priya uses vim."),
        ]
    )
    assert found == {
        ("import//crm:1", "Priya uses vim."): a.id,
        ("import//crm:1", "Priya uses emacs."): b.id,
        ("import//crm:2", "Priya uses vim."): c.id,
    }
    many = await store.records_with_sources((f"import//bulk:{i}", f"fact {i}") for i in range(450))
    assert many == {(f"import//bulk:{i}", f"fact {i}"): e.id for i in range(450)}
    assert await store.records_with_sources([]) == {}


# --------------------------------------------------------------------------- search_log


def search_log_row(search_id: str = "search-1") -> dict[str, object]:
    return {
        "id": search_id,
        "at": datetime(2026, 1, 1, 12, 0, tzinfo=UTC),
        "agent_id": "planner",
        "user_id": "u1",
        "session_id": "s1",
        "trigger": "auto",
        "request": {"queries": ["editor"], "k": 5},
        "context": "what editor do I use?",
        "rewrite_status": "applied",
        "rewritten_queries": ["which editor does Aditya use"],
        "readable_scopes": ["agent:planner/u1", "user:u1"],
        "dense": [["r1", 1, 0.81]],
        "lexical": [["r1", 1, -3.2, 1, 1]],
        "entity": [],
        "fused": [["r1", 1, 0.032]],
        "freshness": [],
        "gated_out": [["r2", "below dense floor"]],
        "deduped_out": [],
        "reranked": None,
        "reranked_out": [{"id": "r3", "reason": "shortlist"}],
        "rerank_status": "timeout",
        "rerank_error": "reranker took 900 ms",
        "budget_out": [],
        "returned": ["r1"],
        "explanations": [{"summary": "dense #1"}],
        "config_flags": {"rewrite_enabled": True},
        "warm": True,
        "timings_ms": {"total": 12.5},
    }


async def test_search_log_accepts_python_values_for_json_columns(store: Store) -> None:
    row = search_log_row()
    await store.insert_search_log(row)
    stored = await store.search_log("search-1")
    assert stored is not None
    assert stored["at"] == "2026-01-01T12:00:00.000000Z"
    assert stored["warm"] == 1
    assert stored["context"] == "what editor do I use?"
    assert stored["reranked"] is None
    for column in ("request", "rewritten_queries", "readable_scopes", "dense", "lexical", "gated_out",
                   "reranked_out", "returned", "explanations", "config_flags", "timings_ms"):  # fmt: skip
        assert json.loads(stored[column]) == row[column], column
    assert (stored["trigger"], stored["rerank_status"], stored["rerank_error"]) == (
        "auto",
        "timeout",
        "reranker took 900 ms",
    )
    assert (await store.latest_search_log() or {})["id"] == "search-1"


async def test_search_log_fills_defaults_for_optional_columns(store: Store) -> None:
    row = search_log_row("search-2")
    for column in ("session_id", "trigger", "context", "rewritten_queries", "reranked", "reranked_out",
                   "rerank_status", "rerank_error"):  # fmt: skip
        del row[column]
    await store.insert_search_log(row)
    stored = await store.search_log("search-2")
    assert stored is not None
    assert (stored["trigger"], stored["reranked_out"], stored["rerank_status"]) == ("tool", "[]", "disabled")
    assert stored["session_id"] is None and stored["rerank_error"] is None


async def test_search_log_rejects_unknown_and_missing_columns(store: Store) -> None:
    with pytest.raises(InvalidArgumentError, match="unknown search_log column"):
        await store.insert_search_log({**search_log_row(), "bogus": 1})
    incomplete = search_log_row()
    del incomplete["timings_ms"]
    with pytest.raises(InvalidArgumentError, match="timings_ms"):
        await store.insert_search_log(incomplete)
    assert await store.db.fetchval("SELECT count(*) FROM search_log") == 0


# --------------------------------------------------------------------------- sessions

S1 = SessionKey("planner", "u1", "s1")


async def test_turns_are_numbered_in_order_and_ending_is_idempotent(store: Store, clock: FakeClock) -> None:
    started = clock.now()
    await store.insert_session(SessionInfo("s1", "planner", "u1", "proj", started, None, None, None))
    await store.insert_session(SessionInfo("s2", "planner", "u1", None, started, None, None, None))
    turns = []
    for role, text in (("user", "hi"), ("assistant", "hello"), ("tool", "42")):
        clock.advance(seconds=1)
        turns.append(await store.append_turn(S1, role, text, clock.now()))
    other = await store.append_turn(S1.with_session("s2"), "user", "elsewhere", clock.now())

    assert [t.turn for t in turns] == [1, 2, 3]
    assert other.turn == 1
    stored = await store.turns(S1)
    assert stored == turns
    assert [t.role for t in stored] == ["user", "assistant", "tool"]

    ended_at = clock.advance(minutes=5)
    assert await store.end_session(S1, ended_at) is True
    assert await store.end_session(S1, clock.advance(minutes=5)) is False
    session = await store.get_session(S1)
    assert session is not None and session.ended_at == ended_at and session.project_id == "proj"
    assert [s.id for s in await store.sessions_for_user("u1")] == ["s1", "s2"]
    assert await store.end_session(S1.with_session("missing"), ended_at) is False
    # The same id under another owner is another session: nothing of s1 is reachable through it.
    assert await store.get_session(SessionKey("planner", "u2", "s1")) is None
    assert await store.turns(SessionKey("planner", "u2", "s1")) == []
    assert await store.end_session(SessionKey("helper", "u1", "s1"), ended_at) is False


async def test_rewriting_one_full_text_row_is_an_index_lookup_not_a_scan(
    store: Store, make_record: MakeRecord
) -> None:
    """A status change rewrites the record's FTS row; finding it must not read every row."""
    kept, changed = make_record(content="tea with lemon"), make_record(content="coffee black")
    for record in (kept, changed):
        await store.insert_record(record)
    await store.set_status(changed.id, "deleted")
    assert await store.fts_row(changed.id) is None
    assert (await store.fts_row(kept.id) or {}).get("content") == "tea with lemon"
    if store.dialect == "sqlite":
        sql = "SELECT id FROM records_fts_content WHERE c0 = ?"  # Store._fts_rowid
        plan = " ".join(str(tuple(r)) for r in await store.db.fetchall(f"EXPLAIN QUERY PLAN {sql}", ("x",)))
        assert "records_fts_record" in plan, plan
        # A rewritten row keeps its rowid (the lexical caches tell new rows from rewritten ones).
        before = await store.db.fetchval(sql, (kept.id,))
        await store.set_status(kept.id, "superseded")
        assert await store.db.fetchval(sql, (kept.id,)) == before
