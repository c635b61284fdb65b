"""records_version (spec §3, §7): every record or embedding change advances it, nothing else does."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import numpy as np
import pytest

from retold.models import Grant, Scope, SessionInfo, SessionKey
from retold.store import Store

from .factories import MakeEntity, MakeRecord


def unit_vector(dims: int = 8) -> np.ndarray:
    return np.ones(dims, dtype=np.float32) / np.sqrt(dims)


async def stored_index_versions(store: Store, record_id: str) -> tuple[int, int | None]:
    record = await store.db.fetchval("SELECT index_version FROM records WHERE id = ?", (record_id,))
    embedding = await store.db.fetchval(
        "SELECT index_version FROM embeddings WHERE record_id = ?", (record_id,)
    )
    return int(record), embedding


async def test_insert_advances_the_version_and_stamps_the_row(store: Store, make_record: MakeRecord) -> None:
    first, second = make_record(), make_record()
    assert await store.insert_record(first) == 1
    assert await store.insert_record(second) == 2
    assert await store.records_version() == 2
    assert first.index_version == 1 and second.index_version == 2
    assert (await stored_index_versions(store, second.id))[0] == 2
    assert (await store.require_record(first.id)).index_version == 1


async def test_update_and_set_status_advance_the_version(store: Store, make_record: MakeRecord) -> None:
    record = make_record()
    await store.insert_record(record)
    assert await store.update_record(record.id, content="Aditya prefers detailed answers") == 2
    assert (await stored_index_versions(store, record.id))[0] == 2
    assert await store.set_status(record.id, "superseded") == 3
    assert await store.records_version() == 3
    updated = await store.require_record(record.id)
    assert updated.index_version == 3
    assert updated.status == "superseded"


async def test_embedding_put_advances_the_version_on_both_rows(store: Store, make_record: MakeRecord) -> None:
    record = make_record()
    await store.insert_record(record)
    assert await store.put_embedding(record.id, "fake", "1", unit_vector()) == 2
    assert await stored_index_versions(store, record.id) == (2, 2)
    assert await store.put_embedding(record.id, "fake", "2", unit_vector()) == 3  # a re-embed counts too
    assert await stored_index_versions(store, record.id) == (3, 3)
    assert await store.records_version() == 3


async def test_failed_update_does_not_advance_the_version(store: Store, make_record: MakeRecord) -> None:
    await store.insert_record(make_record())
    with pytest.raises(LookupError):
        await store.update_record("no-such-record", content="x")
    assert await store.records_version() == 1


def _search_log_row() -> dict[str, object]:
    return {
        "id": "s1", "at": "2026-01-01T12:00:00.000000Z", "agent_id": "planner", "user_id": "u1",
        "request": {"queries": ["q"]}, "rewrite_status": "disabled", "readable_scopes": ["user:u1"],
        "dense": [], "lexical": [], "entity": [], "fused": [], "freshness": [], "gated_out": [],
        "deduped_out": [], "budget_out": [], "returned": [], "explanations": [], "config_flags": {},
        "warm": True, "timings_ms": {"total": 1.0},
    }  # fmt: skip


async def test_other_tables_do_not_advance_the_version(
    store: Store, make_record: MakeRecord, make_entity: MakeEntity
) -> None:
    a, b = make_record(), make_record()
    await store.insert_record(a)
    await store.insert_record(b)
    baseline = await store.records_version()
    now = store.clock.now()

    entity = make_entity()
    steps: list[tuple[str, Callable[[], Awaitable[object]]]] = [
        ("grant", lambda: store.set_grant(Grant("planner", Scope("user", "u1"), True, True))),
        ("revoke", lambda: store.delete_grant("planner", Scope("user", "u1"))),
        ("event", lambda: store.append_event("record.created", "planner", record_id=a.id)),
        (
            "session",
            lambda: store.insert_session(SessionInfo("s1", "planner", "u1", None, now, None, None, None)),
        ),
        ("turn", lambda: store.append_turn(SessionKey("planner", "u1", "s1"), "user", "hello", now)),
        ("end session", lambda: store.end_session(SessionKey("planner", "u1", "s1"), now)),
        ("entity", lambda: store.insert_entity(entity)),
        ("alias", lambda: store.add_aliases(entity.id, ["adi"])),
        ("conflict", lambda: store.add_conflict(a.id, b.id, now)),
        ("search_log", lambda: store.insert_search_log(_search_log_row())),
    ]
    for name, step in steps:
        await step()
        assert await store.records_version() == baseline, f"{name} changed records_version"
    assert (await store.require_record(a.id)).index_version == 1
