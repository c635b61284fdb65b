"""The PostgreSQL backend against a real server (tests/postgres_server.py): what SQLite's
tests cannot say for it — its schema, its locks across processes, erasure in its files.

The store's own behaviour runs on both backends through the unit suite (tests/unit/conftest.py
parametrizes every test that opens a store); these are the PostgreSQL-only facts.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import psycopg
import pytest

import retold
from retold.errors import SchemaVersionError, StoreError
from retold.models import Principal, Scope
from retold.store import Store
from retold.store.migrations import LATEST_VERSION
from retold.store.postgres.database import WRITE_LOCK
from retold.testing import FakeEmbedder, FakeJudge
from tests.postgres_server import fresh_database, server_url

ROOT = Path(__file__).resolve().parents[2]
USER = Scope("user", "u1")

pytestmark = pytest.mark.integration


def new_empty_database() -> str:
    """A database with no schema at all (not cloned from the migrated template)."""
    url = fresh_database("empty")
    name = url.split("/")[3].split("?")[0]
    with psycopg.connect(server_url("postgres"), autocommit=True) as conn:
        conn.execute(f"DROP DATABASE {name}")
        conn.execute(f"CREATE DATABASE {name}")
    return url


async def test_the_schema_has_sqlites_tables_and_columns(tmp_path: Path) -> None:
    lite = await Store.open(tmp_path / "m.sqlite")
    pg = await Store.open(fresh_database())
    try:
        assert await pg.schema_version() == await lite.schema_version() == LATEST_VERSION
        assert await pg.tables() == await lite.tables()
        for table in await lite.tables():
            lite_columns = {r[1] for r in await lite.db.fetchall(f"PRAGMA table_info({table})")}
            pg_columns = set(
                await pg.db.fetch_column(
                    "SELECT column_name FROM information_schema.columns WHERE table_name = ?", (table,)
                )
            )
            # PostgreSQL's own columns: identities, and what its lexical and vector search derive.
            derived = {
                "records_fts": {"content_tokens", "subject_tokens", "alias_tokens", "ntokens", "tokenized",
                                "scope_kind", "scope_id"},
                "embeddings": {"embedding"},
            }  # fmt: skip
            assert lite_columns == pg_columns - {"rowid", *derived.get(table, ())}, table
    finally:
        await lite.close()
        await pg.close()


async def test_reopening_applies_nothing_and_a_newer_schema_refuses_to_open() -> None:
    url = fresh_database()
    store = await Store.open(url)
    applied = await store.db.fetch_column("SELECT version FROM schema_migrations ORDER BY version")
    await store.close()
    assert applied == list(range(1, LATEST_VERSION + 1))
    again = await Store.open(url)
    assert await again.db.fetch_column("SELECT version FROM schema_migrations ORDER BY version") == applied
    await again.db.execute_atomic(
        "INSERT INTO schema_migrations(version, name, applied_at) VALUES (99, 'future', 'x')"
    )
    await again.close()
    with pytest.raises(SchemaVersionError, match="newer"):
        await Store.open(url)


def test_two_processes_creating_a_fresh_database_at_once_create_it_once() -> None:
    url = new_empty_database()
    script = textwrap.dedent(
        f"""
        import asyncio
        from retold.store import Store
        async def main():
            store = await Store.open({url!r})
            print(await store.schema_version())
            await store.close()
        asyncio.run(main())
        """
    )
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", script], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE
        )
        for _ in range(3)
    ]
    outputs = [p.communicate(timeout=120) for p in procs]
    for proc, (out, err) in zip(procs, outputs, strict=True):
        assert proc.returncode == 0, err.decode()
        assert out.decode().strip() == str(LATEST_VERSION)
    with psycopg.connect(url) as conn:
        versions = [r[0] for r in conn.execute("SELECT version FROM schema_migrations ORDER BY version")]
    assert versions == list(range(1, LATEST_VERSION + 1))


async def test_a_write_cancelled_while_another_session_holds_the_write_lock_leaves_the_store_usable() -> None:
    url = fresh_database()
    async with retold.open_runtime(url, embedder=FakeEmbedder(64), judge=FakeJudge()) as rt:
        await rt.host.grant("planner", USER, read=True, write=True)
        p = Principal("planner", "u1", "s1")
        other = psycopg.connect(url)
        try:
            other.execute("SELECT pg_advisory_xact_lock(%s)", (WRITE_LOCK,))  # another host's writer
            call = {"type": "semantic", "content": "The user prefers tea.", "attribute": "drink"}
            started = time.monotonic()
            with pytest.raises(TimeoutError):
                await asyncio.wait_for(rt.tools.call(p, "memory_write", call), timeout=0.5)
            # The cancelled writer stops queueing at once (a server-side cancel), not at lock_timeout.
            assert time.monotonic() - started < 5
            other.rollback()
            result = await asyncio.wait_for(rt.tools.call(p, "memory_write", call), timeout=30)
            assert result["ok"], result
            found = await rt.tools.call(p, "memory_search", {"queries": ["tea"]})
            assert [r["record_id"] for r in found["results"]] == [result["record_id"]]
            assert (await rt.ops.check()).clean
        finally:
            other.close()


async def test_writers_queue_on_the_lock_until_the_busy_timeout_then_get_a_named_error() -> None:
    url = fresh_database()
    store = await Store.open(url, busy_timeout_s=1)
    other = psycopg.connect(url)
    try:
        other.execute("SELECT pg_advisory_xact_lock(%s)", (WRITE_LOCK,))
        started = time.monotonic()
        with pytest.raises(StoreError, match="locked by another writer"):
            await store.append_event("record.created", "planner")
        assert 0.8 < time.monotonic() - started < 10
        other.rollback()
        await store.append_event("record.created", "planner")  # usable again
    finally:
        other.close()
        await store.close()


async def test_tools_registered_synchronously_read_grants_on_postgresql() -> None:
    url = fresh_database()
    async with retold.open_runtime(url, embedder=FakeEmbedder(64), judge=FakeJudge()) as rt:
        await rt.host.grant("planner", USER, read=True, write=True)
        schemas = await asyncio.to_thread(rt.tools.tool_schemas, Principal("planner", "u1", "s1"))
        write = next(s for s in schemas if s["name"] == "memory_write")
        assert "personal" in write["input_schema"]["properties"]["write_target"]["enum"]


async def table_files_holding(store: Store, marker: str) -> list[str]:
    """The relation files of the store's tables and indexes that hold ``marker``, after a checkpoint."""
    await store.db.execute("CHECKPOINT")  # shared buffers reach the files
    files = await store.db.fetch_column(
        """SELECT pg_relation_filepath(c.oid) FROM pg_class c
            WHERE c.relkind IN ('r', 'i', 't') AND pg_relation_filepath(c.oid) IS NOT NULL
              AND c.relnamespace = 'public'::regnamespace"""
    )
    data_dir = Path(str(await store.db.fetchval("SHOW data_directory")))

    def scan() -> list[str]:
        holding = []
        for name in files:
            for segment in sorted(data_dir.glob(f"{name}*")):  # the main fork and any 1 GB segments
                if marker.encode() in segment.read_bytes():
                    holding.append(name)
                    break
        return holding

    return await asyncio.to_thread(scan)


async def test_erasure_rewrites_the_table_files_without_the_erased_text() -> None:
    url = fresh_database()
    marker = "zqxerasemarker"
    async with retold.open_runtime(url, embedder=FakeEmbedder(64), judge=FakeJudge()) as rt:
        await rt.host.grant("planner", USER, read=True, write=True)
        p = Principal("planner", "u1", "s1")
        written = await rt.tools.call(
            p,
            "memory_write",
            {"type": "semantic", "content": f"The code word is {marker}.", "attribute": "code"},
        )
        assert written["ok"], written
        await rt.tools.call(p, "memory_search", {"queries": [marker]})
        assert await table_files_holding(rt.store, marker)  # the control: the text is in the files
        report = await rt.ops.erase(record=written["record_id"], reason="asked")
        assert report.applied
        assert await table_files_holding(rt.store, marker) == []


async def test_the_lexical_channel_scores_as_fts5_does(tmp_path: Path) -> None:
    """Same rows, same match: PostgreSQL's bm25 (SQL for words, Python for phrases) equals FTS5's."""
    from retold.models import Record
    from retold.testing import record_for_tests

    texts = [
        "The router connected at noon and the router rebooted",
        "Deploys happen on Friday; the deploy bot posts to #ops",
        "bge m3 embeddings beat MiniLM on the recall benchmark",
        "Café crème at the Zürich office, naïve résumé parsing",
        "Friday deploys are frozen during the quarter close",
        "the the the router",
    ]
    stores = [await Store.open(tmp_path / "m.sqlite"), await Store.open(fresh_database())]
    try:
        for store in stores:
            now = store.clock.now()
            records: list[Record] = [
                record_for_tests(
                    now, id=f"r{i}", content=t, subject=f"x/fact_{i}", attribute=f"fact_{i}", scope=USER
                )
                for i, t in enumerate(texts)
            ]
            for record in records:
                await store.insert_record(record)
        ids = {f"r{i}" for i in range(len(texts))}
        for match in ('"router"', '"router" OR "friday"', '"deploy" OR "deploys" OR "bot"', '"bge m3"',
                      '"bge m3" OR "recall"', '"cafe" OR "zurich"', '"the"', '"nothing"'):  # fmt: skip
            lite = await stores[0].fts_search(match, ids, 10)
            pg = await stores[1].fts_search(match, ids, 10)
            assert [r[0] for r in pg] == [r[0] for r in lite], match
            assert lite or match == '"nothing"', match
            assert [round(r[1], 9) for r in pg] == [round(r[1], 9) for r in lite], match
    finally:
        for store in stores:
            await store.close()


def same_ranking(first: list[tuple], second: list[tuple]) -> bool:
    """Same scores in the same order, and the same records, up to the order of floating-point ties.

    Two engines sum the same terms in different orders, so records whose scores differ by
    rounding alone may swap; a run of such ties cut by ``k`` may hold different members.
    """
    if len(first) != len(second):
        return False
    if any(abs(a[1] - b[1]) > 1e-9 * max(1.0, abs(a[1])) for a, b in zip(first, second, strict=True)):
        return False
    groups: list[tuple[set[str], set[str], float]] = []
    for a, b in zip(first, second, strict=True):
        if groups and abs(a[1] - groups[-1][2]) <= 1e-12 * max(1.0, abs(a[1])):
            groups[-1][0].add(a[0])
            groups[-1][1].add(b[0])
        else:
            groups.append(({a[0]}, {b[0]}, a[1]))
    return all(x == y for x, y, _ in groups[:-1])


async def test_maxscore_pruning_ranks_exactly_as_fts5(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Common and rare words, a filtered eligible set: the pruned ranking equals FTS5's."""
    import random

    import retold.store.postgres.bm25 as pg_bm25
    from retold.testing import record_for_tests

    monkeypatch.setattr(pg_bm25, "_CANDIDATE_POSTINGS", 60)  # prune at this small size
    rng = random.Random(3)
    vocab = [f"w{i}" for i in range(300)]

    def word() -> str:  # Zipf-like: a few words are in most records, most words in few
        return vocab[min(int(rng.paretovariate(1.1)) - 1, len(vocab) - 1)]

    texts = [" ".join(word() for _ in range(rng.randint(4, 14))) for _ in range(800)]
    stores = [await Store.open(tmp_path / "m.sqlite"), await Store.open(fresh_database())]
    statements: list[str] = []
    stores[1].db.tracer = lambda sql, params: statements.append(sql)
    try:
        for store in stores:
            now = store.clock.now()
            records = [
                record_for_tests(now, id=f"r{i:04d}", content=t, scope=USER) for i, t in enumerate(texts)
            ]
            await store.bulk_insert(records, np.zeros((len(records), 8), np.float32), model="m", version="1")
        eligible = {f"r{i:04d}" for i in range(len(texts)) if i % 5}
        early = 0
        queries = [[w] for w in vocab[:12]]  # one common word: its best records, read by length
        queries += [
            sorted({word() for _ in range(rng.randint(1, 5))} | {rng.choice(vocab)}) for _ in range(60)
        ]
        for words in queries:
            match = " OR ".join(f'"{w}"' for w in words)
            statements.clear()
            lite = await stores[0].fts_search(match, eligible, 10)
            pg = await stores[1].fts_search(match, eligible, 10)
            assert same_ranking(pg, lite), (match, pg, lite)
            assert all(r[2] == texts[int(r[0][1:])] for r in pg)
            # The pruned ranking was the answer: no full scan of every posting followed it.
            early += any("GROUP BY v.record_id, v.fts_rowid" in s for s in statements) and not any(
                "ORDER BY score DESC" in s for s in statements
            )
        assert early >= 10, early
        # A sparse eligible set: one word's groups are read further until they settle it.
        sparse = {f"r{i:04d}" for i in range(len(texts)) if i % 23 == 0}
        for w in vocab[:12]:
            lite = await stores[0].fts_search(f'"{w}"', sparse, 10)
            pg = await stores[1].fts_search(f'"{w}"', sparse, 10)
            assert same_ranking(pg, lite), (w, pg, lite)
        # SQLite's bound for a word in most records (retrieve.word_counts.scan_limit) scores its newest
        # matches alone; PostgreSQL reads one word's postings best first and stays exact.
        for w in vocab[:3]:
            holding = [f"r{i:04d}" for i in reversed(range(len(texts))) if w in texts[i].split()]
            assert len(holding) > 100  # the bound leaves most of them unscored
            newest = holding[:50]
            lite = await stores[0].fts_search(f'"{w}"', eligible, 10, scan_limit=50)
            assert [r[0] for r in lite] == [
                r[0] for r in await stores[0].fts_search(f'"{w}"', set(newest) & eligible, 10)
            ]
            exact = await stores[1].fts_search(f'"{w}"', eligible, 10)
            assert await stores[1].fts_search(f'"{w}"', eligible, 10, scan_limit=50) == exact
    finally:
        for store in stores:
            await store.close()


async def test_kept_lexical_statistics_match_a_recount_through_writes_and_erasure() -> None:
    """N, lengths and document frequencies are kept by triggers; check recounts them."""
    rt = await retold.open_runtime(fresh_database(), embedder=FakeEmbedder(64), judge=FakeJudge())
    try:
        await rt.host.provision_user("u1", aliases=["Aditya"])
        await rt.host.grant("planner", USER, read=True, write=True)
        p = Principal("planner", "u1", "s1")
        ids = []
        for i, text in enumerate(["Aditya's kiln fires at dawn", "The ferry rota changed", "Glaze the pots"]):
            call = {"type": "semantic", "content": text, "attribute": f"fact_{i}"}
            result = await rt.tools.call(p, "memory_write", call)
            assert result["ok"], result
            ids.append(result["record_id"])
        superseding = {
            "type": "semantic",
            "content": "The ferry rota changed to Tuesdays",
            "attribute": "fact_1",
        }
        assert (await rt.tools.call(p, "memory_write", superseding))["ok"]
        assert (await rt.ops.erase(record=ids[0], reason="asked")).applied
        store = rt.store
        assert await store.sqlite_integrity() == []
        kept = await store.db.fetchall("SELECT term, n FROM records_term_counts ORDER BY term")
        assert kept and "kiln" not in {r[0] for r in kept}  # the erased record's own words are gone
        await store.db.execute("UPDATE records_term_counts SET n = n + 1 WHERE term = 'ferry'")
        assert any("records_term_counts" in p for p in await store.sqlite_integrity())  # the control
        await store.rebuild_fts_index()  # what check --repair does
        assert await store.sqlite_integrity() == []
    finally:
        await rt.close()
