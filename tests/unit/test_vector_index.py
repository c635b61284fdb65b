"""VectorIndex (spec §7): eligible-only exact search, growth, removal, and refresh across stores."""

from __future__ import annotations

import subprocess
import sys
import threading
from collections.abc import AsyncIterator
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from retold.index.vector import VectorIndex
from retold.store import Store
from retold.testing import FakeClock

from .factories import MakeRecord

MODEL, VERSION, DIMS = "fake-embedder", "1", 4


def unit(*values: float) -> np.ndarray:
    vec = np.asarray(values, dtype=np.float32)
    return vec / np.linalg.norm(vec)


def cos(a: np.ndarray, b: np.ndarray) -> float:
    return float(unit(*a) @ unit(*b))


A, B, C = unit(1, 0, 0, 0), unit(0, 1, 0, 0), unit(1, 1, 0, 0)


def index_with(*vectors: np.ndarray, capacity: int = 1024) -> VectorIndex:
    index = VectorIndex(MODEL, VERSION, DIMS, initial_capacity=capacity)
    for number, vec in enumerate(vectors):
        index.upsert(f"r{number}", vec, number + 1)
    return index


# --- search ------------------------------------------------------------------------------------


def test_search_scores_only_eligible_ids_so_a_closer_ineligible_row_never_appears() -> None:
    index = index_with(A, B, C)
    query = unit(1, 0.1, 0, 0)  # r0 is the closest of all
    hits = index.search(query, {"r1", "r2"}, k=5)
    assert [record_id for record_id, _ in hits] == ["r2", "r1"]
    assert hits[0][1] == pytest.approx(cos(query, C), abs=1e-6)
    assert hits[1][1] == pytest.approx(cos(query, B), abs=1e-6)
    assert index.search(query, {"r0", "r1", "r2"}, k=1) == [("r0", pytest.approx(cos(query, A), abs=1e-6))]


def test_search_ignores_unknown_ids_and_returns_nothing_for_k_zero_or_an_empty_set() -> None:
    index = index_with(A, B)
    assert index.search(A, ["nope", "r1", "r1"], k=3) == [("r1", pytest.approx(0.0, abs=1e-6))]
    assert index.search(A, {"r0"}, k=0) == []
    assert index.search(A, set(), k=3) == []
    with pytest.raises(ValueError, match="4 values"):
        index.search(np.ones(3), {"r0"}, k=1)


def test_several_queries_keep_each_records_best_cosine_then_cap_at_k() -> None:
    index = index_with(A, B, unit(0, 0, 1, 0))
    queries = np.stack([unit(1, 0.2, 0, 0), unit(0.1, 1, 0.5, 0)])
    hits = dict(index.search(queries, {"r0", "r1", "r2"}, k=3))
    for record_id, vec in (("r0", A), ("r1", B), ("r2", unit(0, 0, 1, 0))):
        assert hits[record_id] == pytest.approx(max(cos(q, vec) for q in queries), abs=1e-6)
    capped = index.search(queries, {"r0", "r1", "r2"}, k=2)
    assert [record_id for record_id, _ in capped] == sorted(hits, key=lambda r: -hits[r])[:2]


def test_ties_break_by_record_id() -> None:
    index = VectorIndex(MODEL, VERSION, DIMS)
    for record_id in ("c", "a", "b"):
        index.upsert(record_id, A, 1)
    assert [r for r, _ in index.search(A, {"a", "b", "c"}, k=3)] == ["a", "b", "c"]
    assert [r for r, _ in index.search(A, ["c", "b", "a"], k=2)] == ["a", "b"]


@pytest.mark.parametrize("share", [0.04, 0.5, 1.0])
def test_small_and_large_eligible_sets_rank_the_same_as_brute_force(share: float) -> None:
    rng = np.random.default_rng(7)
    vectors = rng.standard_normal((200, DIMS)).astype(np.float32)
    index = VectorIndex(MODEL, VERSION, DIMS, initial_capacity=16)
    for number, vec in enumerate(vectors):
        index.upsert(f"r{number:03d}", vec, 1)
    for number in range(0, 200, 7):
        index.remove(f"r{number:03d}", 2)
    chosen = [int(n) for n in rng.choice(200, size=int(200 * share), replace=False)]
    eligible = [f"r{n:03d}" for n in chosen] * 2 + ["unknown"]  # duplicates and strangers ignored
    query = rng.standard_normal(DIMS).astype(np.float32)
    expected = sorted(
        ((f"r{n:03d}", cos(query, vectors[n])) for n in chosen if n % 7),
        key=lambda hit: (-hit[1], hit[0]),
    )[:10]
    got = index.search(query, iter(eligible), k=10)
    assert [r for r, _ in got] == [r for r, _ in expected]
    assert [s for _, s in got] == pytest.approx([s for _, s in expected], abs=1e-5)


def test_several_queries_over_many_blocks_keep_the_best_cosine_of_every_row() -> None:
    """Scoring in cache-sized blocks (more rows than one block) changes no score."""
    from retold.index.vector import _SCORE_BLOCK, _best_cosines

    rng = np.random.default_rng(11)
    block = rng.standard_normal((2 * _SCORE_BLOCK + 37, 16)).astype(np.float32)
    queries = rng.standard_normal((3, 16)).astype(np.float32)
    expected = (block @ queries.T).max(axis=1)
    np.testing.assert_allclose(_best_cosines(block, queries), expected, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(_best_cosines(block, queries[:1]), block @ queries[0], rtol=1e-5, atol=1e-5)


@settings(max_examples=60, deadline=None)
@given(
    vectors=st.lists(
        st.lists(st.integers(-5, 5), min_size=DIMS, max_size=DIMS).filter(any), min_size=1, max_size=60
    ),
    removed=st.sets(st.integers(0, 59)),
    eligible=st.sets(st.integers(0, 70)),
    k=st.integers(1, 8),
)
def test_search_matches_brute_force_over_eligible_live_rows(
    vectors: list[list[int]], removed: set[int], eligible: set[int], k: int
) -> None:
    index = VectorIndex(MODEL, VERSION, DIMS, initial_capacity=2)
    for number, values in enumerate(vectors):
        index.upsert(f"r{number:02d}", np.asarray(values, dtype=np.float32), 1)
    for number in removed:
        index.remove(f"r{number:02d}", 2)
    query = unit(1, 2, 3, 4)
    expected = sorted(
        (
            (f"r{n:02d}", cos(query, np.asarray(vectors[n], dtype=np.float32)))
            for n in eligible
            if n < len(vectors) and n not in removed
        ),
        key=lambda hit: (-hit[1], hit[0]),
    )[:k]
    got = index.search(query, {f"r{n:02d}" for n in eligible}, k)
    assert [s for _, s in got] == pytest.approx([s for _, s in expected], abs=1e-5)
    assert {r for r, _ in got} <= {f"r{n:02d}" for n in eligible} - {f"r{n:02d}" for n in removed}


# --- rows --------------------------------------------------------------------------------------


def test_the_matrix_doubles_past_its_capacity_and_keeps_every_row() -> None:
    index = VectorIndex(MODEL, VERSION, DIMS, initial_capacity=2)
    assert index.capacity == 2
    vectors = [unit(1, n, 0, 0) for n in range(5)]
    for number, vec in enumerate(vectors):
        index.upsert(f"r{number}", vec, number + 1)
    assert index.capacity == 8
    assert len(index) == 5
    assert index.ids == [f"r{n}" for n in range(5)]
    for number, vec in enumerate(vectors):
        np.testing.assert_allclose(index.vector_for(f"r{number}"), vec, rtol=1e-6)
    assert index.search(vectors[4], {f"r{n}" for n in range(5)}, k=1)[0][0] == "r4"


def test_remove_hides_a_row_and_a_later_upsert_revives_it_in_place() -> None:
    index = index_with(A, B)
    assert index.remove("r0", 3) is True
    assert len(index) == 1
    assert index.search(A, {"r0", "r1"}, k=2) == [("r1", pytest.approx(0.0, abs=1e-6))]
    assert index.vector_for("r0") is None
    assert index.live.tolist() == [False, True]
    assert index.upsert("r0", C, 4) is True
    assert index.pos == {"r0": 0, "r1": 1} and len(index) == 2
    assert index.search(A, {"r0"}, k=1)[0][0] == "r0"
    assert index.remove("never-indexed", 5) is True and len(index) == 2


def test_upsert_normalises_and_refuses_zero_or_misshapen_vectors() -> None:
    index = VectorIndex(MODEL, VERSION, DIMS)
    index.upsert("r", np.array([3, 0, 4, 0], dtype=np.float32), 1)
    np.testing.assert_allclose(index.vector_for("r"), [0.6, 0, 0.8, 0], rtol=1e-6)
    with pytest.raises(ValueError, match="non-zero"):
        index.upsert("z", np.zeros(DIMS), 2)
    with pytest.raises(ValueError, match="non-zero"):
        index.upsert("n", np.array([np.nan, 1, 0, 0]), 2)
    with pytest.raises(ValueError, match="4 values"):
        index.upsert("w", np.ones(5), 2)
    assert index.ids == ["r"]


def test_an_upsert_older_than_what_the_index_holds_is_ignored() -> None:
    index = VectorIndex(MODEL, VERSION, DIMS)
    assert index.upsert("r", B, 7) is True
    assert index.upsert("r", A, 5) is False  # a late local write that a refresh already overtook
    assert index.remove("r", 6) is False
    np.testing.assert_allclose(index.vector_for("r"), B)


def test_vector_for_and_cosine() -> None:
    index = index_with(A, C)
    copy = index.vector_for("r0")
    assert copy is not None
    copy[:] = 0  # a copy: the index is untouched
    np.testing.assert_allclose(index.vector_for("r0"), A)
    assert index.vector_for("unknown") is None
    assert index.cosine("r0", "r1") == pytest.approx(float(A @ C), abs=1e-6)
    assert index.cosine("r0", "r0") == pytest.approx(1.0)
    assert index.cosine("r0", "r0") <= 1.0
    with pytest.raises(KeyError, match="unknown"):
        index.cosine("r0", "unknown")
    index.remove("r1", 9)
    with pytest.raises(KeyError, match="r1"):
        index.cosine("r1", "r0")


def test_diagnostic_snapshots_are_copies_and_the_matrix_is_not_exposed() -> None:
    index = index_with(A, B)
    index.ids.append("x")
    index.pos["x"] = 9
    index.live[:] = False
    assert index.ids == ["r0", "r1"] and index.pos == {"r0": 0, "r1": 1} and len(index) == 2
    assert not [name for name in dir(index) if "matrix" in name and not name.startswith("_")]


def test_concurrent_upserts_and_searches_never_see_a_torn_row() -> None:
    index = VectorIndex(MODEL, VERSION, DIMS, initial_capacity=1)
    errors: list[BaseException] = []

    def writer() -> None:
        for number in range(400):
            index.upsert(f"r{number}", unit(1, number % 7, 0, 1), number + 1)

    def reader() -> None:
        try:
            for _ in range(400):
                for record_id, score in index.search(A, {f"r{n}" for n in range(0, 400, 3)}, k=5):
                    assert int(record_id[1:]) % 3 == 0 and -1.0 <= score <= 1.0
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=writer), threading.Thread(target=reader)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert len(index) == 400 and index.capacity == 512


def test_importing_the_vector_index_does_not_import_torch() -> None:
    code = "import sys, retold.index.vector\nassert 'torch' not in sys.modules\n"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr


# --- loading from the store --------------------------------------------------------------------


async def write(
    store: Store,
    make_record: MakeRecord,
    vec: np.ndarray,
    *,
    model: str = MODEL,
    version: str = VERSION,
) -> tuple[str, int]:
    """Insert a record and its embedding as a write path would; return (id, committed version)."""
    record = make_record()
    await store.insert_record(record)
    return record.id, await store.put_embedding(record.id, model, version, vec)


async def test_load_reads_only_vectors_of_the_configured_model_version_and_dims(
    store: Store, make_record: MakeRecord
) -> None:
    wanted, _ = await write(store, make_record, A)
    await write(store, make_record, A, model="other-model")
    await write(store, make_record, A, version="2")
    await write(store, make_record, np.ones(8, dtype=np.float32) / np.sqrt(8))  # 8 dims
    unembedded = make_record()
    await store.insert_record(unembedded)
    index = VectorIndex(MODEL, VERSION, DIMS)
    assert not index.is_loaded
    await index.load(store)
    assert index.is_loaded
    assert index.ids == [wanted] and len(index) == 1
    assert index.loaded_version == await store.records_version()
    np.testing.assert_allclose(index.vector_for(wanted), A, rtol=1e-6)


async def test_load_sizes_the_matrix_to_a_power_of_two_above_the_initial_capacity(
    store: Store, make_record: MakeRecord
) -> None:
    for number in range(5):
        await write(store, make_record, unit(1, number, 0, 0))
    index = VectorIndex(MODEL, VERSION, DIMS, initial_capacity=2)
    await index.load(store)
    assert (len(index), index.capacity) == (5, 8)


@pytest.fixture
async def other_store(store_path: Path, clock: FakeClock) -> AsyncIterator[Store]:
    """A second connection to the same file: another process's view of it."""
    opened = await Store.open(store_path, clock=clock)
    try:
        yield opened
    finally:
        await opened.close()


async def test_refresh_outcomes_across_two_indexes_on_one_file(
    store: Store, other_store: Store, make_record: MakeRecord
) -> None:
    here, there = VectorIndex(MODEL, VERSION, DIMS), VectorIndex(MODEL, VERSION, DIMS)
    assert await here.refresh(store, 4) == "loaded"
    assert await there.refresh(other_store, 4) == "loaded"
    assert await here.refresh(store, 4) == "current"

    # "here" writes and applies its own change: nothing new for it, a delta for "there".
    record_id, version = await write(store, make_record, A)
    assert here.upsert(record_id, A, version)
    assert await here.refresh(store, 4) == "current"
    assert here.loaded_version == version
    assert await there.refresh(other_store, 4) == "delta"
    assert there.search(A, {record_id}, k=1) == [(record_id, pytest.approx(1.0))]
    assert there.loaded_version == version
    assert await there.refresh(other_store, 4) == "current"

    # A burst from "there" bigger than the limit makes "here" rebuild; at the limit it is a delta.
    burst = [await write(other_store, make_record, unit(1, n, 1, 0)) for n in range(5)]
    assert await here.refresh(store, 4) == "reloaded"
    assert set(here.ids) == {record_id} | {i for i, _ in burst}
    assert here.loaded_version == await store.records_version()
    more = [await write(other_store, make_record, unit(0, 1, n, 0)) for n in range(4)]
    assert await here.refresh(store, 4) == "delta"
    assert {i for i, _ in more} <= set(here.ids) and len(here) == 10


async def test_a_burst_of_local_writes_never_forces_a_rebuild(
    store: Store, other_store: Store, make_record: MakeRecord
) -> None:
    index = VectorIndex(MODEL, VERSION, DIMS)
    await index.load(store)
    for number in range(6):
        record_id, version = await write(store, make_record, unit(1, number, 0, 0))
        index.upsert(record_id, unit(1, number, 0, 0), version)
    assert await index.refresh(store, 2) == "current"
    # Six local writes and one foreign one: only the foreign one counts toward the limit.
    for number in range(6):
        record_id, version = await write(store, make_record, unit(0, number, 1, 0))
        index.upsert(record_id, unit(0, number, 1, 0), version)
    foreign, _ = await write(other_store, make_record, B)
    assert await index.refresh(store, 1) == "delta"
    assert index.search(B, {foreign}, k=1)[0][0] == foreign
    assert index.loaded_version == await store.records_version()


async def test_status_changes_refresh_as_deltas_unless_touched_locally(
    store: Store, other_store: Store, make_record: MakeRecord
) -> None:
    index = VectorIndex(MODEL, VERSION, DIMS)
    record_id, _ = await write(store, make_record, A)
    await index.load(store)
    await other_store.set_status(record_id, "superseded")
    assert await index.refresh(store, 8) == "delta"
    assert index.search(A, {record_id}, k=1)[0][0] == record_id  # eligibility is the store's job
    version = await store.set_status(record_id, "confirmed")
    assert index.touch(record_id, version)
    assert await index.refresh(store, 8) == "current"


async def test_refresh_applies_another_process_changing_or_dropping_a_vector(
    store: Store, other_store: Store, make_record: MakeRecord
) -> None:
    index = VectorIndex(MODEL, VERSION, DIMS)
    changed, _ = await write(store, make_record, A)
    dropped, _ = await write(store, make_record, B)
    await index.load(store)
    await other_store.put_embedding(changed, MODEL, VERSION, C)
    await other_store.put_embedding(dropped, "another-model", VERSION, B)  # a re-embed by another model
    assert await index.refresh(store, 8) == "delta"
    np.testing.assert_allclose(index.vector_for(changed), C, rtol=1e-6)
    assert index.vector_for(dropped) is None
    assert index.search(B, {changed, dropped}, k=2)[0][0] == changed
    assert len(index) == 1


async def test_a_local_write_newer_than_a_reload_snapshot_survives_the_reload(
    store: Store, make_record: MakeRecord, monkeypatch: pytest.MonkeyPatch
) -> None:
    index = VectorIndex(MODEL, VERSION, DIMS)
    old, _ = await write(store, make_record, A)
    await index.load(store)
    snapshot = await store.load_vectors(MODEL, VERSION, DIMS)  # read before the next write commits
    new, version = await write(store, make_record, B)
    index.upsert(new, B, version)

    async def stale_snapshot(model: str, version: str, dims: int) -> object:
        return snapshot

    monkeypatch.setattr(store, "load_vectors", stale_snapshot)
    await index.load(store)
    assert set(index.ids) == {old, new}
    assert index.loaded_version == snapshot.records_version
    monkeypatch.undo()
    assert await index.refresh(store, 0) == "current"  # the only change since was local
    assert index.loaded_version == version


async def test_vector_changes_reports_each_changed_record_once_with_its_newest_version(
    store: Store, make_record: MakeRecord
) -> None:
    kept, _ = await write(store, make_record, A)
    gone, _ = await write(store, make_record, B, model="other-model")
    since = await store.records_version()
    await store.set_status(kept, "superseded")
    latest = await store.put_embedding(kept, MODEL, VERSION, C)
    await store.set_status(gone, "expired")
    found = await store.vector_changes(since, MODEL, VERSION, DIMS)
    assert found.complete and found.records_version == await store.records_version()
    by_id = {c.record_id: c for c in found.changes}
    assert len(found.changes) == 2
    assert by_id[kept].index_version == latest
    assert by_id[kept].vector is not None
    np.testing.assert_allclose(np.frombuffer(by_id[kept].vector, dtype=np.float32), C, rtol=1e-6)
    assert by_id[gone].vector is None
    cut = await store.vector_changes(since, MODEL, VERSION, DIMS, limit=1)
    assert not cut.complete and len(cut.changes) == 1
    assert (await store.vector_changes(since, MODEL, VERSION, DIMS, limit=2)).complete


async def test_a_store_whose_version_went_backwards_is_reloaded(
    store: Store, make_record: MakeRecord, tmp_path: Path
) -> None:
    index = VectorIndex(MODEL, VERSION, DIMS)
    await write(store, make_record, A)
    await write(store, make_record, B)
    await index.load(store)
    restored = await Store.open(tmp_path / "restored.sqlite")  # an older copy of the file
    try:
        kept, version = await write(restored, make_record, C)
        assert version < index.loaded_version
        assert await index.refresh(restored, 8) == "reloaded"
        assert index.ids == [kept] and index.loaded_version == version
    finally:
        await restored.close()
