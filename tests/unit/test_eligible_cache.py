"""The hard filter's cache: reused between writes, never stale across a write, an expiry or a process."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from retold.models import Scope
from retold.store import Store
from retold.store.eligible import EligibleSet
from retold.testing import FakeClock

from .factories import MakeRecord, build_record

USER = Scope("user", "u1")


class Counting:
    """Counts id-set queries on the store's database (the work the cache saves)."""

    def __init__(self, store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
        self.calls = 0
        original = store.db.fetch_column

        async def counted(sql: str, params: Any = None) -> list[Any]:
            if sql.startswith("SELECT r.id FROM records r WHERE"):
                self.calls += 1
            return await original(sql, params)

        monkeypatch.setattr(store.db, "fetch_column", counted)


async def test_same_filter_between_writes_reads_the_ids_once(
    store: Store, clock: FakeClock, make_record: MakeRecord, monkeypatch: pytest.MonkeyPatch
) -> None:
    await store.insert_record(make_record())
    counting = Counting(store, monkeypatch)
    first = await store.eligible_ids([USER], now=clock.now())
    second = await store.eligible_ids([USER], now=clock.advance(minutes=5))
    assert first == second and len(first) == 1 and counting.calls == 1
    other = await store.eligible_ids([USER], now=clock.now(), types=["episodic"])
    assert other == frozenset() and counting.calls == 2  # another filter, another entry


async def test_a_write_or_status_change_is_seen_at_once(
    store: Store, clock: FakeClock, make_record: MakeRecord
) -> None:
    a = make_record()
    await store.insert_record(a)
    assert await store.eligible_ids([USER], now=clock.now()) == {a.id}
    b = make_record()
    await store.insert_record(b)
    assert await store.eligible_ids([USER], now=clock.now()) == {a.id, b.id}
    await store.set_status(a.id, "deleted")
    assert await store.eligible_ids([USER], now=clock.now()) == {b.id}


async def test_an_expiry_passing_drops_the_record_without_any_write(
    store: Store, clock: FakeClock, make_record: MakeRecord
) -> None:
    lasting = make_record()
    fading = make_record(
        status="provisional", source_kind="agent_inference", expires_at=clock.now() + timedelta(hours=1)
    )
    for record in (lasting, fading):
        await store.insert_record(record)
    version = await store.records_version()
    assert await store.eligible_ids([USER], now=clock.now()) == {lasting.id, fading.id}
    assert await store.eligible_ids([USER], now=clock.advance(minutes=59)) == {lasting.id, fading.id}
    assert await store.eligible_ids([USER], now=clock.advance(minutes=1)) == {lasting.id}
    assert await store.records_version() == version
    # A clock set back is not served from an entry computed later.
    clock.set(clock.now() - timedelta(hours=2))
    assert await store.eligible_ids([USER], now=clock.now()) == {lasting.id, fading.id}


async def test_another_process_writing_invalidates_the_entry(
    store: Store, store_path: Path, clock: FakeClock, make_record: MakeRecord
) -> None:
    a = make_record()
    await store.insert_record(a)
    assert await store.eligible_ids([USER], now=clock.now()) == {a.id}
    other = await Store.open(store_path, clock=clock)  # its own connections, like another process
    try:
        b = make_record()
        await other.insert_record(b)
    finally:
        await other.close()
    assert await store.eligible_ids([USER], now=clock.now()) == {a.id, b.id}


async def test_writes_bring_the_entry_forward_without_reading_the_set_again(
    store: Store, clock: FakeClock, make_record: MakeRecord, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A write costs a read of the rows it changed, not of the scope (issue: flat write latency)."""
    a = make_record()
    await store.insert_record(a)
    counting = Counting(store, monkeypatch)
    first = await store.eligible_ids([USER], now=clock.now())
    b = make_record()
    await store.insert_record(b)
    assert await store.eligible_ids([USER], now=clock.now()) == {a.id, b.id}
    await store.set_status(a.id, "deleted")
    current = await store.eligible_ids([USER], now=clock.now())
    assert current == {b.id} and counting.calls == 1 and first == {a.id}
    # A write elsewhere leaves this filter's set as it was: the very same object.
    await store.insert_record(make_record(scope=Scope("user", "u2")))
    assert await store.eligible_ids([USER], now=clock.now()) is current
    assert counting.calls == 1
    # The predicate the set carries for large joins still selects exactly the set.
    assert current.where is not None
    rows = await store.db.fetch_column(f"SELECT r.id FROM records r WHERE {current.where}", current.params)
    assert set(rows) == current


async def test_a_record_written_with_an_expiry_leaves_when_it_passes(
    store: Store, clock: FakeClock, make_record: MakeRecord
) -> None:
    lasting = make_record()
    await store.insert_record(lasting)
    assert await store.eligible_ids([USER], now=clock.now()) == {lasting.id}
    fading = make_record(
        status="provisional", source_kind="agent_inference", expires_at=clock.now() + timedelta(minutes=30)
    )
    await store.insert_record(fading)
    assert await store.eligible_ids([USER], now=clock.advance(minutes=29)) == {lasting.id, fading.id}
    assert await store.eligible_ids([USER], now=clock.advance(minutes=1)) == {lasting.id}


async def test_a_row_written_already_expired_since_the_fill_is_never_admitted(
    store: Store, clock: FakeClock, make_record: MakeRecord
) -> None:
    lasting = make_record()
    await store.insert_record(lasting)
    filled = clock.now()
    assert await store.eligible_ids([USER], now=filled) == {lasting.id}
    gone = make_record(
        status="provisional", source_kind="agent_inference", expires_at=filled + timedelta(minutes=1)
    )
    await store.insert_record(gone)
    ids = await store.eligible_ids([USER], now=clock.advance(minutes=2))
    assert ids == {lasting.id}
    assert ids.where is not None  # and its predicate agrees with it
    rows = await store.db.fetch_column(f"SELECT r.id FROM records r WHERE {ids.where}", ids.params)
    assert set(rows) == ids


async def test_many_changes_are_read_again_whole(
    store: Store, clock: FakeClock, make_record: MakeRecord, monkeypatch: pytest.MonkeyPatch
) -> None:
    import retold.store.eligible as store_module

    monkeypatch.setattr(store_module, "_FORWARD_MAX", 2)
    await store.insert_record(make_record())
    counting = Counting(store, monkeypatch)
    await store.eligible_ids([USER], now=clock.now())
    added = [make_record() for _ in range(3)]
    for record in added:
        await store.insert_record(record)
    ids = await store.eligible_ids([USER], now=clock.now())
    assert len(ids) == 4 and {r.id for r in added} <= ids and counting.calls == 2


_STATUSES = ("confirmed", "provisional", "superseded", "deleted", "expired")


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    steps=st.lists(
        st.tuples(
            st.sampled_from(["insert", "status", "tick", "search"]),
            st.integers(0, 3),  # which scope, which record, how many minutes
            st.sampled_from(_STATUSES),
            st.one_of(st.none(), st.integers(-5, 90)),  # expiry, minutes from now
        ),
        max_size=25,
    )
)
async def test_the_cached_set_always_equals_a_fresh_read(
    steps: list[tuple[str, int, str, int | None]], store_path: Path
) -> None:
    """Whatever mix of writes, status changes, expiries and time: cache == the filter read anew."""
    clock = FakeClock()
    scopes = [Scope("user", f"p{i}") for i in range(4)]
    store = await Store.open(store_path, clock=clock)
    try:
        await store.db.execute("DELETE FROM records")  # one database serves every example
        store._eligible_cache.clear()
        written: list[str] = []
        for action, n, status, expiry in steps:
            if action == "insert":
                expires_at = None if expiry is None else clock.now() + timedelta(minutes=expiry)
                record = build_record(
                    clock.now(), scope=scopes[n], status=status, expires_at=expires_at,
                    source_kind="agent_inference" if expires_at else "user_statement",
                )  # fmt: skip
                await store.insert_record(record)
                written.append(record.id)
            elif action == "status" and written:
                await store.set_status(written[n % len(written)], status)
            elif action == "tick":
                clock.advance(minutes=n * 7)
            for history in (False, True):
                for wanted in (scopes[:1], scopes[1:3]):
                    cached = await store.eligible_ids(wanted, now=clock.now(), include_history=history)
                    fresh = await store.eligible_ids(
                        wanted, now=clock.now(), include_history=history, within=written
                    )
                    assert cached == fresh
    finally:
        await store.close()


_IDS = st.sets(st.sampled_from("abcdefghijkl"))


@settings(max_examples=60, deadline=None)
@given(
    base=st.frozensets(st.sampled_from("abcdefghij")),
    steps=st.lists(
        st.tuples(st.sets(st.sampled_from("abcdefghijkl")), st.sets(st.sampled_from("abcdefghijkl")))
    ),
)
def test_a_changed_set_behaves_as_the_set_it_stands_for(
    base: frozenset[str], steps: list[tuple[set[str], set[str]]]
) -> None:
    """EligibleSet.changed shares its ids instead of copying them; it must still be that set."""
    from retold.store import eligible as module

    view, model = EligibleSet(base, where="w", params=(1,)), set(base)
    for entering, leaving in steps:
        view = view.changed(entering, leaving)
        model = (model - leaving) | entering
        assert view == model and len(view) == len(model) and set(view) == model
        assert all((x in view) == (x in model) for x in "abcdefghijkl")
        assert view - {"a"} == frozenset(model - {"a"}) and view.where == "w" and view.params == (1,)
    assert module._FOLD_AT > 0


def test_without_is_the_difference_without_a_copy() -> None:
    from retold.index.dense import Without

    kept = EligibleSet({"a", "b", "c"})
    view = Without(kept, {"b", "z"})
    assert view == {"a", "c"} and len(view) == 2 and "b" not in view and "z" not in view
