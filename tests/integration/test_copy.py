"""`retold copy`: a whole store into an empty one, SQLite → PostgreSQL → SQLite, verified.

The round trip must give back every row of every table (the lexical index rebuilt, not
copied), a store that searches the same, and a clean `retold check`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from cli_runner import run as run_cli

import retold
from retold.copying import copy_store
from retold.errors import InvalidArgumentError
from retold.models import Principal, Scope, SearchRequest
from retold.store import Store
from retold.store.copy import COPIED_TABLES
from retold.testing import FakeEmbedder, FakeJudge
from tests.postgres_server import fresh_database

pytestmark = pytest.mark.integration

FAKE = "embedding:\n  model: fake-embedder\n  version: '1'\n  dims: 256\n"


async def seed(path: Path | str) -> list[str]:
    """A store with grants, entities, aliases, a supersession, sources, sessions, events, logs, activation."""
    async with retold.open_runtime(path, embedder=FakeEmbedder(), judge=FakeJudge()) as rt:
        await rt.host.provision_user("u1", aliases=["Aditya"])
        await rt.host.grant("planner", Scope("user", "u1"), read=True, write=True)
        p = await rt.hooks.on_session_start(Principal("planner", "u1", "s1"))
        p = await rt.hooks.on_turn(p, "user", "I prefer tea in the morning.")
        ids = []
        for content, attribute in (
            ("Aditya prefers tea in the morning.", "drink"),
            ("Aditya prefers coffee in the morning.", "drink"),
            ("Aditya works on the Atlas project.", "project"),
        ):
            result = await rt.tools.call(p, "memory_write", {
                "type": "semantic", "content": content, "attribute": attribute,
                "entities": [{"kind": "person", "name": "Aditya", "role": "about"},
                             {"kind": "project", "name": "Atlas", "role": "mentions"}],
            })  # fmt: skip
            assert result["ok"], result
            ids.append(result["record_id"])
        # Activation's two tables: an ambient preference, and a hedged one queued for review.
        for said, content, attribute in (
            ("Please always answer me in French.", "Prefers answers in French", "answer_language"),
            (
                "I think I might prefer shorter answers, maybe.",
                "Might prefer shorter answers",
                "answer_length",
            ),
        ):
            p = await rt.hooks.on_turn(p, "user", said)
            result = await rt.tools.call(p, "memory_write", {
                "type": "semantic", "content": content, "attribute": attribute,
                "source_kind": "user_statement", "evidence": said,
            })  # fmt: skip
            assert result["ok"], result
        assert result["activation"] == "conditional" and len(await rt.store.activation_reviews()) == 1
        assert "French" in await rt.profile(p)
        await rt.tools.call(p, "memory_search", {"queries": ["morning drink"]})
        await rt.hooks.on_session_end(p)
        return ids


async def snapshot_rows(path: Path | str) -> dict[str, list[tuple[Any, ...]]]:
    store = await Store.open(path)
    try:
        out = {}
        for table, _order, _ in COPIED_TABLES:
            columns = [c for c in await _columns(store, table) if c != "rowid"]
            rows = await store.db.fetchall(f"SELECT {', '.join(columns)} FROM {table}")
            out[table] = sorted(
                (tuple(bytes(v) if isinstance(v, memoryview) else v for v in r) for r in rows), key=repr
            )
        out["records_version"] = [(await store.records_version(),)]
        return out
    finally:
        await store.close()


async def _columns(store: Store, table: str) -> list[str]:
    from retold.store.copy import _columns as columns

    return [c for c in await columns(store, table) if c in SQLITE_COLUMNS[table]]


SQLITE_COLUMNS: dict[str, set[str]] = {}


async def test_a_round_trip_through_postgresql_gives_back_every_row(tmp_path: Path) -> None:
    source = tmp_path / "source.sqlite"
    ids = await seed(source)
    lite = await Store.open(source)
    for table, _, _ in COPIED_TABLES:
        SQLITE_COLUMNS[table] = {r[1] for r in await lite.db.fetchall(f"PRAGMA table_info({table})")}
    await lite.close()
    config = tmp_path / "fake.yaml"
    config.write_text(FAKE)

    url = fresh_database("copy")
    forth = await copy_store(source, url, str(config))
    assert forth.verified, (forth.counts, forth.findings)
    back_path = tmp_path / "back.sqlite"
    back = await copy_store(url, back_path, str(config))
    assert back.verified, (back.counts, back.findings)

    assert await snapshot_rows(back_path) == await snapshot_rows(source)
    assert await snapshot_rows(url) == await snapshot_rows(source)
    for location in (url, back_path):
        async with retold.open_runtime(location, embedder=FakeEmbedder(), judge=FakeJudge()) as rt:
            found = await rt.search(
                Principal("planner", "u1", "s9"), SearchRequest(queries=["Atlas project"])
            )
            assert ids[2] in [r.record.id for r in found.results]


async def test_copy_refuses_a_destination_that_holds_memories(tmp_path: Path) -> None:
    source, other = tmp_path / "a.sqlite", tmp_path / "b.sqlite"
    await seed(source)
    await seed(other)
    before = await snapshot_rows_plain(other)
    with pytest.raises(InvalidArgumentError, match="copy into a new, empty store"):
        await copy_store(source, other)
    assert await snapshot_rows_plain(other) == before


async def snapshot_rows_plain(path: Path) -> int:
    store = await Store.open(path)
    try:
        return int(await store.db.fetchval("SELECT count(*) FROM records"))
    finally:
        await store.close()


def test_the_cli_copies_with_a_progress_bar_and_verifies(tmp_path: Path) -> None:
    import asyncio

    source = tmp_path / "source.sqlite"
    asyncio.run(seed(source))
    config = tmp_path / "fake.yaml"
    config.write_text(FAKE)
    url = fresh_database("copycli")
    proc = run_cli("copy", str(source), url, "--config", str(config))
    assert "verified" in proc.stdout
    assert "records: 5 row(s) copied, 5 in the destination" in proc.stdout
    again = run_cli("copy", str(source), url, "--config", str(config), rc=None)
    assert again.returncode != 0 and "empty store" in (again.stdout + again.stderr)
