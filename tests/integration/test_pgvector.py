"""Dense search inside PostgreSQL (pgvector): the index, the filter in the query, exactness.

The search's own behaviour (ranking, gate, isolation) runs on PostgreSQL through the unit and
contract suites; these are the facts about pgvector itself: every committed vector is in the
``embedding`` column and its HNSW index, a selective filter never starves the top k, a small
eligible set is searched exactly (the same answer as SQLite's in-process index), and an
older database gains the column on open.
"""

from __future__ import annotations

import numpy as np
import psycopg
import pytest

import retold
from retold.errors import StoreError
from retold.index.vector import VectorIndex
from retold.models import Principal, Scope, SearchRequest
from retold.store import Store
from retold.store.postgres.vectors import VectorSearchSettings, _literal, search_vectors
from retold.testing import FakeEmbedder, record_for_tests
from tests.postgres_server import fresh_database, server_url

pytestmark = pytest.mark.integration

DIMS = 32
MODEL, VERSION = "test-model", "1"


def clustered(rng: np.random.Generator, n: int, centres: int = 40) -> np.ndarray:
    """Vectors in clusters, as real embeddings are (uniform random ones defeat any ANN index)."""
    middle = rng.standard_normal((centres, DIMS)).astype(np.float32)
    vecs = middle[rng.integers(0, centres, n)] + 0.35 * rng.standard_normal((n, DIMS)).astype(np.float32)
    return vecs / np.linalg.norm(vecs, axis=1, keepdims=True)


async def fill(store: Store, scopes: list[Scope], vecs: np.ndarray) -> list[str]:
    now = store.clock.now()
    records = [
        record_for_tests(now, content=f"note {i}", scope=scopes[i], creator_agent_id="a1")
        for i in range(len(vecs))
    ]
    await store.bulk_insert(records, vecs, model=MODEL, version=VERSION)
    await store.db.run_raw("ANALYZE")  # what autovacuum does soon after a load: the planner's row counts
    return [r.id for r in records]


def exact_top(vecs: np.ndarray, ids: list[str], allowed: set[str], queries: np.ndarray, k: int) -> list[str]:
    scores = (vecs @ queries.T).max(axis=1)
    order = sorted((i for i in range(len(ids)) if ids[i] in allowed), key=lambda i: (-scores[i], ids[i]))
    return [ids[i] for i in order[:k]]


async def test_committed_vectors_are_in_pgvector_and_an_hnsw_index_per_dimension() -> None:
    store = await Store.open(fresh_database())
    try:
        rng = np.random.default_rng(1)
        vecs = clustered(rng, 50)
        ids = await fill(store, [Scope("user", "u1")] * 50, vecs)
        assert not await store.db.fetchval("SELECT count(*) FROM embeddings WHERE embedding IS NULL")
        indexes = await store.db.fetch_column(
            "SELECT indexname FROM pg_indexes WHERE tablename = 'embeddings'"
        )
        assert f"embeddings_hnsw_{DIMS}" in indexes
        stored = await store.db.fetchval(
            "SELECT embedding::text FROM embeddings WHERE record_id = ?", (ids[0],)
        )
        assert np.allclose(np.array(stored.strip("[]").split(","), dtype=np.float32), vecs[0])
        # Re-embedding a row (new bytes) refreshes its pgvector value in the same transaction.
        await store.put_embedding(ids[0], MODEL, VERSION, vecs[1])
        stored = await store.db.fetchval(
            "SELECT embedding::text FROM embeddings WHERE record_id = ?", (ids[0],)
        )
        assert np.allclose(np.array(stored.strip("[]").split(","), dtype=np.float32), vecs[1])
        # Another model's width gets its own index, never mixed with the first.
        await store.put_embedding(ids[2], "other", "1", np.ones(8, dtype=np.float32))
        indexes = await store.db.fetch_column(
            "SELECT indexname FROM pg_indexes WHERE tablename = 'embeddings'"
        )
        assert {f"embeddings_hnsw_{DIMS}", "embeddings_hnsw_8"} <= set(indexes)
    finally:
        await store.close()


async def test_a_selective_filter_never_starves_the_top_k_and_the_index_is_used() -> None:
    """2% of the rows are readable: the HNSW walk keeps going (iterative scan) until it has k."""
    store = await Store.open(fresh_database())
    try:
        rng = np.random.default_rng(7)
        n = 6000
        scopes = [Scope("user", "rare") if i % 50 == 0 else Scope("user", "common") for i in range(n)]
        vecs = clustered(rng, n)
        ids = await fill(store, scopes, vecs)
        ann = VectorSearchSettings(exact_search_max=1, ef_search=200)  # always the index
        for scope in ("rare", "common"):
            eligible = await store.eligible_ids([Scope("user", scope)], now=store.clock.now())
            allowed = set(eligible)
            found, wanted = 0, 0
            for _ in range(10):
                queries = clustered(rng, 2)
                hits = await search_vectors(
                    store.db, queries, eligible, 10, model=MODEL, version=VERSION, settings=ann
                )
                assert len(hits) == 10, scope  # never starved
                assert {h[0] for h in hits} <= allowed  # never ineligible
                truth = exact_top(vecs, ids, allowed, queries, 10)
                found += len({h[0] for h in hits} & set(truth))
                wanted += 10
                cosines = dict(zip(ids, (vecs @ queries.T).max(axis=1).tolist(), strict=True))
                assert all(abs(cos - cosines[rid]) < 1e-4 for rid, cos in hits)  # exact cosines
            assert found / wanted >= 0.9, (scope, found / wanted)
        # The plan walks the HNSW index (not a sequential scan and sort).
        async with store.db.transaction():
            await store.db.run_raw("SET LOCAL hnsw.iterative_scan = relaxed_order")
            plan = "\n".join(
                await store.db.fetch_column(
                    f"""EXPLAIN SELECT e.record_id FROM embeddings e JOIN records r ON r.id = e.record_id
                         AND r.scope_kind = 'user' AND r.scope_id = 'common'
                       WHERE e.dims = {DIMS}
                       ORDER BY e.embedding::vector({DIMS}) <=> '{_literal(vecs[0])}'::vector({DIMS})
                       LIMIT 10"""
                )
            )
        assert f"embeddings_hnsw_{DIMS}" in plan
    finally:
        await store.close()


async def test_a_small_eligible_set_is_searched_exactly_like_sqlites_index() -> None:
    store = await Store.open(fresh_database())
    try:
        rng = np.random.default_rng(3)
        n = 900
        vecs = clustered(rng, n)
        scopes = [Scope("user", f"u{i % 3}") for i in range(n)]
        ids = await fill(store, scopes, vecs)
        index = VectorIndex(MODEL, VERSION, DIMS)
        await index.refresh(store, 1000)
        for user in ("u0", "u1", "u2"):
            eligible = await store.eligible_ids([Scope("user", user)], now=store.clock.now())
            queries = clustered(rng, 3)
            got = await search_vectors(
                store.db, queries, eligible, 25, model=MODEL, version=VERSION, settings=VectorSearchSettings()
            )
            expected = index.search(queries, eligible, 25)
            assert [g[0] for g in got] == [e[0] for e in expected]
            assert np.allclose([g[1] for g in got], [e[1] for e in expected], atol=1e-5)
            # An explicit id set (no predicate) is its own filter.
            subset = frozenset(list(eligible)[:40])
            got = await search_vectors(
                store.db, queries, subset, 5, model=MODEL, version=VERSION, settings=VectorSearchSettings()
            )
            assert [g[0] for g in got] == [e[0] for e in index.search(queries, subset, 5)]
        assert len(ids) == n
    finally:
        await store.close()


async def test_search_on_postgresql_loads_no_vectors_into_the_process() -> None:
    embedder = FakeEmbedder(DIMS)
    rt = await retold.open_runtime(fresh_database(), embedder=embedder)
    try:
        await rt.host.provision_user("u1")
        await rt.host.grant("a1", Scope("user", "u1"), read=True)
        texts = ["Robin keeps bees on the allotment", "The boiler was serviced in May"]
        now = rt.clock.now()
        records = [
            record_for_tests(now, content=t, scope=Scope("user", "u1"), creator_agent_id="a1") for t in texts
        ]
        vectors = np.stack([embedder._vector(t) for t in texts])
        await rt.store.bulk_insert(records, vectors, model=embedder.name, version=embedder.version)
        response = await rt.search(Principal("a1", "u1", "s1"), SearchRequest(queries=["Robin keeps bees"]))
        assert response.results and response.results[0].record.id == records[0].id
        row = await rt.store.db.fetchone(
            "SELECT config_flags, dense FROM search_log ORDER BY at DESC LIMIT 1"
        )
        assert '"index_refresh":"in_store"' in row[0]
        assert records[0].id in row[1]  # found by the dense generator, in PostgreSQL
        assert len(rt.index) == 0  # the in-process index was never loaded for the search
    finally:
        await rt.close()


async def test_a_database_from_before_pgvector_search_gains_the_column_on_open() -> None:
    url = fresh_database()
    store = await Store.open(url)
    rng = np.random.default_rng(5)
    ids = await fill(store, [Scope("user", "u1")] * 20, clustered(rng, 20))
    await store.db.run_raw("DROP TRIGGER embeddings_stale ON embeddings")
    await store.db.run_raw("DROP FUNCTION retold_embedding_stale()")
    await store.db.run_raw("ALTER TABLE embeddings DROP COLUMN embedding")
    await store.close()
    store = await Store.open(url)
    try:
        assert not await store.db.fetchval("SELECT count(*) FROM embeddings WHERE embedding IS NULL")
        eligible = await store.eligible_ids([Scope("user", "u1")], now=store.clock.now())
        hits = await store.vector_search(
            clustered(rng, 1), eligible, 5, model=MODEL, version=VERSION, settings=VectorSearchSettings()
        )
        assert len(hits) == 5 and {h[0] for h in hits} <= set(ids)
    finally:
        await store.close()


async def test_a_role_that_may_not_create_pgvector_gets_an_error_naming_the_fix() -> None:
    url = fresh_database("noext")
    name = url.split("/")[3].split("?")[0]
    with psycopg.connect(server_url("postgres"), autocommit=True) as conn:
        conn.execute(f"DROP DATABASE {name}")
        conn.execute("DROP ROLE IF EXISTS retold_plain")
        conn.execute("CREATE ROLE retold_plain LOGIN")
        conn.execute(f"CREATE DATABASE {name} OWNER retold_plain TEMPLATE template0")
    plain = url.replace("postgresql://postgres@", "postgresql://retold_plain@", 1)
    assert plain != url
    with pytest.raises(StoreError, match="CREATE EXTENSION vector"):
        await Store.open(plain)
    with psycopg.connect(server_url(name), autocommit=True) as conn:  # nothing half-made
        assert conn.execute("SELECT to_regclass('records')").fetchone() == (None,)


@pytest.mark.parametrize("exact_search_max", [2000, 1])  # exact comparisons; always the HNSW index
async def test_the_write_path_on_postgresql_deduplicates_without_holding_vectors(
    exact_search_max: int,
) -> None:
    from retold.config import Config
    from retold.testing import FakeJudge

    config = Config.model_validate({"store": {"exact_search_max": exact_search_max}})
    same = FakeJudge({("Robin fed the bees at dawn", "At dawn Robin fed the bees"): "same"})
    rt = await retold.open_runtime(fresh_database(), config, embedder=FakeEmbedder(DIMS), judge=same)
    try:
        await rt.host.provision_user("u1")
        await rt.host.grant("a1", Scope("user", "u1"), read=True, write=True)
        p = Principal("a1", "u1", "s1")
        for i in range(30):  # neighbours for the index to walk past
            await rt.tools.call(
                p, "memory_write", {"type": "episodic", "content": f"Errand {i} went to plan"}
            )
        first = await rt.tools.call(
            p, "memory_write", {"type": "episodic", "content": "Robin fed the bees at dawn"}
        )
        again = await rt.tools.call(
            p, "memory_write", {"type": "episodic", "content": "At dawn Robin fed the bees"}
        )
        assert first["ok"] and again["ok"], (first, again)
        # Not the same text: found by the nearby search (same words, cosine 1), then judged the same.
        assert again["record_id"] == first["record_id"] and "reinforced" in again["outcome"], again
        live = await rt.store.db.fetchval(
            "SELECT count(*) FROM records WHERE content LIKE '%bees%' AND status != 'superseded'"
        )
        assert live == 1
        assert len(rt.index) == 0  # nothing was loaded into this process to decide it
    finally:
        await rt.close()
