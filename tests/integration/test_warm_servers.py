"""The servers warm the packaged embedder in the background at start (issue 47 item 4).

Each is started as a user starts it, with the packaged embedder: it says on stderr that it
is warming, answers before the load is done, says when the embedder is ready, and then a
first search costs what a warm one does rather than the seconds of loading torch.
"""

from __future__ import annotations

import json
import os
import re
import sys
import time
from pathlib import Path

import httpx
import pytest
from cli_runner import run
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

from tests.ui_harness import UiServer

pytestmark = pytest.mark.integration

WARMING = "retold: warming the embedder in the background"
READY = re.compile(r"retold: the embedder is ready in \d+\.\d s")
FIRST_SEARCH_S = 5.0  # a warm search takes milliseconds; loading the model takes 5–35 s here


def _wait_for(read: object, pattern: re.Pattern[str], timeout_s: float = 180) -> str:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        text = read()  # type: ignore[operator]
        if pattern.search(text):
            return str(text)
        time.sleep(0.1)
    raise AssertionError(f"no {pattern.pattern!r} within {timeout_s:g} s: {read()[-3000:]}")  # type: ignore[operator]


async def test_mcp_stdio_warms_at_start_and_the_first_search_is_quick(tmp_path: Path) -> None:
    store = tmp_path / "m.sqlite"
    run("grant", "claude", "user:u1", "--read", "--write", "--create", "--store", store)
    args = ["-m", "retold", "mcp", "--store", str(store), "--user", "u1", "--agent", "claude"]
    server = StdioServerParameters(command=sys.executable, args=args, env=dict(os.environ), cwd=str(tmp_path))
    errlog = tmp_path / "stderr.log"
    with errlog.open("w") as err:
        async with stdio_client(server, errlog=err) as (read, write), ClientSession(read, write) as client:
            await client.initialize()
            log = errlog.read_text()
            assert WARMING in log  # said before serving, on stderr: stdout is the protocol
            assert not READY.search(log)  # and the server answered before the load was done
            _wait_for(errlog.read_text, READY)
            begun = time.perf_counter()
            found = await client.call_tool("memory_search", {"queries": ["answer style"]})
            elapsed = time.perf_counter() - begun
            assert not found.isError and elapsed < FIRST_SEARCH_S, (elapsed, found)
    assert errlog.read_text().count(WARMING) == 1


def test_ui_warms_at_start_and_the_first_live_search_is_quick(tmp_path: Path) -> None:
    store = tmp_path / "m.sqlite"
    run("grant", "planner", "user:u1", "--read", "--write", "--create", "--store", store)
    with UiServer(store) as server, httpx.Client(base_url=server.url, timeout=60) as http:
        assert http.get("/").status_code == 200
        _wait_for(lambda: "".join(server.stderr), READY)
        assert WARMING in "".join(server.stderr)
        csrf = re.search(r'name="csrf" value="([^"]+)"', http.get("/search").text)
        assert csrf is not None
        begun = time.perf_counter()
        form = {"csrf": csrf.group(1), "agent": "planner", "user": "u1", "queries": "answer style"}
        answer = http.post("/search", data=form)
        elapsed = time.perf_counter() - begun
        assert answer.status_code == 303 and elapsed < FIRST_SEARCH_S, (answer.status_code, elapsed)


def test_langgraph_dev_warms_the_studio_runtime_once_at_start(tmp_path: Path) -> None:
    from test_langgraph_dev import REPO, _post, _seed, _serve

    _seed(tmp_path / "memory.sqlite")
    log = tmp_path / "server.log"
    with _serve(tmp_path, REPO, {"RETOLD_GRAPH_IDENTITY": "input"}) as base:
        _wait_for(lambda: log.read_text(errors="replace"), READY)
        body = {"assistant_id": "retold_search", "input": {"agent_id": "planner", "user_id": "u1",
                "queries": ["answer style"]}}  # fmt: skip
        begun = time.perf_counter()
        result = json.loads(_post(base, "/runs/wait", body))
        elapsed = time.perf_counter() - begun
        assert "concise" in json.dumps(result) and elapsed < FIRST_SEARCH_S, (elapsed, result)
    # Three graphs from one file and the store: one runtime, warmed once.
    assert log.read_text(errors="replace").count(WARMING) == 1
