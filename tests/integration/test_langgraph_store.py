"""RetoldStore for real: the example on the packaged embedder, schema v8 reached from an older
PostgreSQL database, ``retold copy`` carrying store items, and ``langgraph dev`` serving the store."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from integration.langgraph_server import wait_until_ready  # tests/ is on sys.path

import retold
from retold.adapters.langgraph_store import RetoldStore
from retold.models import Scope
from retold.store import Store
from retold.store.copy import copy_store
from retold.store.migrations import LATEST_VERSION
from retold.testing import FakeEmbedder, FakeJudge
from tests.postgres_server import fresh_database

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
LANGGRAPH = Path(sys.executable).with_name("langgraph")


def test_the_quickstart_example_runs_offline(tmp_path: Path) -> None:
    env = {**os.environ, "HOME": str(tmp_path), "LANGSMITH_TRACING": "false"}
    proc = subprocess.run(
        [sys.executable, str(ROOT / "examples/langgraph_store_quickstart.py"), str(tmp_path / "m.sqlite")],
        capture_output=True, text=True, timeout=120, env=env, cwd=tmp_path,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = proc.stdout.splitlines()
    assert lines[0] == "get: {'content': 'Is vegetarian and avoids mushrooms.'}"
    assert lines[1].startswith("search: diet score=") and lines[1].endswith(
        "Is vegetarian and avoids mushrooms."
    )
    assert lines[2:] == ["u2 sees: []"]


async def test_postgres_databases_at_version_7_migrate_to_the_latest() -> None:
    """SQLite's path from 7 is in tests/unit/test_migrations.py; this is PostgreSQL's."""
    url = fresh_database()
    store = await Store.open(url)
    for table in ("passage_vectors", "activation_reviews", "record_activation", "store_items"):
        await store.db.execute_atomic(f"DROP TABLE {table}")
    await store.db.execute_atomic("DROP INDEX records_scope_order")
    await store.db.execute_atomic("DELETE FROM schema_migrations WHERE version >= 8")
    await store.close()
    store = await Store.open(url)
    try:
        assert await store.schema_version() == LATEST_VERSION and "store_items" in await store.tables()
    finally:
        await store.close()


async def test_copy_carries_store_items_between_backends(
    store_location: Callable[[str], Any], tmp_path: Path
) -> None:
    source = store_location("src.sqlite")
    async with retold.open_runtime(source, embedder=FakeEmbedder(), judge=FakeJudge()) as rt:
        await rt.host.grant("planner", Scope("user", "u1"), read=True, write=True)
        store = RetoldStore(rt, agent_id="planner")
        await store.aput(("memories", "u1"), "k", {"content": "Grows tomatoes.", "extra": [1, 2]})
        await store.aput(("memories", "u1"), "raw", {"note": "unindexed"}, index=False)
    target = tmp_path / "dst.sqlite"
    src, dst = await Store.open(source), await Store.open(target)
    try:
        report = await copy_store(src, dst)
    finally:
        await src.close()
        await dst.close()
    assert report.rows["store_items"] == 2
    async with retold.open_runtime(target, embedder=FakeEmbedder(), judge=FakeJudge()) as rt:
        store = RetoldStore(rt, agent_id="planner")
        item = await store.aget(("memories", "u1"), "k")
        assert item is not None and item.value == {"content": "Grows tomatoes.", "extra": [1, 2]}
        assert (await store.aget(("memories", "u1"), "raw")).value == {"note": "unindexed"}  # type: ignore[union-attr]
        assert [h.key for h in await store.asearch(("memories", "u1"), query="tomatoes")] == ["k"]
        assert (await rt.ops.check()).clean


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _call(base: str, method: str, path: str, body: Any = None) -> Any:
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(
        base + path, data=data, method=method, headers={"content-type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=60) as response:
        raw = response.read()
    return json.loads(raw) if raw else None


def test_langgraph_dev_serves_the_store_api_from_retold(tmp_path: Path) -> None:
    """The ``store`` entry of langgraph.json (notes.md) loads ``make_store``; /store goes to retold."""
    memory = tmp_path / "memory.sqlite"
    # --create: only init, migrate or an explicit --create may make a store (issue 45 item 10)
    grant = [sys.executable, "-m", "retold", "grant", "langgraph", "user:u1", "--read", "--write",
             "--create", "--store", str(memory)]  # fmt: skip
    subprocess.run(
        grant, check=True, capture_output=True, timeout=120, env={**os.environ, "HOME": str(tmp_path)}
    )
    (tmp_path / "langgraph.json").write_text(
        json.dumps(
            {
                "dependencies": [str(ROOT)],
                "graphs": {"retold_search": f"{ROOT}/retold/graph_nodes/studio.py:search_graph"},
                "store": {"path": f"{ROOT}/retold/adapters/langgraph_store_dev.py:make_store"},
            }
        )
    )
    port = _free_port()
    env = {**os.environ, "HOME": str(tmp_path), "RETOLD_STORE": str(memory),
           "LANGGRAPH_CLI_NO_ANALYTICS": "1", "LANGSMITH_TRACING": "false"}  # fmt: skip
    env.pop("RETOLD_CONFIG", None)
    log = (tmp_path / "server.log").open("wb")
    proc = subprocess.Popen(
        [str(LANGGRAPH), "dev", "--no-browser", "--no-reload", "--host", "127.0.0.1", "--port", str(port)],
        cwd=tmp_path, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
    )  # fmt: skip
    base = f"http://127.0.0.1:{port}"
    try:
        wait_until_ready(proc, base, tmp_path / "server.log")
        item = {"namespace": ["memories", "u1"], "key": "k", "value": {"content": "Plays chess on Sundays."}}
        _call(base, "PUT", "/store/items", item)
        got = _call(base, "GET", "/store/items?namespace=memories.u1&key=k")
        assert got["value"] == {"content": "Plays chess on Sundays."} and got["key"] == "k"
        found = _call(
            base, "POST", "/store/items/search", {"namespace_prefix": ["memories", "u1"], "limit": 5}
        )
        assert [i["key"] for i in found["items"]] == ["k"]
        with pytest.raises(urllib.error.HTTPError):  # no grant on u2: refused, nothing written
            _call(base, "PUT", "/store/items", {**item, "namespace": ["memories", "u2"]})
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=10)
        log.close()
    rows = subprocess.run(
        [sys.executable, "-c", f"import sqlite3; print(sqlite3.connect({str(memory)!r}).execute("
         "'SELECT namespace, key FROM store_items').fetchall())"],
        capture_output=True, text=True, check=True,
    ).stdout.strip()  # fmt: skip
    assert rows == "[('[\"memories\",\"u1\"]', 'k')]"
