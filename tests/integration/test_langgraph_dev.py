"""``langgraph dev`` serves the repository's ``langgraph.json`` offline: search graph and memory agent.

The server is started on a free loopback port with the documented offline flags, driven
over HTTP (``/runs/wait`` and ``/runs/stream``), and the process group it started is
stopped at the end.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from integration.langgraph_server import wait_until_ready  # tests/ is on sys.path

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
LANGGRAPH = Path(sys.executable).with_name("langgraph")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _post(base: str, path: str, body: dict[str, Any], timeout: float = 60.0) -> bytes:
    request = urllib.request.Request(
        base + path, data=json.dumps(body).encode(), headers={"content-type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=timeout) as response:
        return response.read()


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    home = tmp_path_factory.mktemp("langgraph-dev")
    port = _free_port()
    env = {
        **os.environ,
        "HOME": str(home),
        "RETOLD_STORE": str(home / "memory.sqlite"),
        "LANGGRAPH_CLI_NO_ANALYTICS": "1",
        "LANGSMITH_TRACING": "false",
    }
    env.pop("RETOLD_CONFIG", None)
    log = (home / "server.log").open("wb")
    proc = subprocess.Popen(
        [str(LANGGRAPH), "dev", "--no-browser", "--no-reload", "--host", "127.0.0.1", "--port", str(port)],
        cwd=REPO,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        wait_until_ready(proc, base, home / "server.log")
        yield base
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=10)
        log.close()
    assert proc.returncode is not None


SEARCH = {"agent_id": "planner", "user_id": "u1", "queries": ["answer style"]}


def test_the_three_graphs_are_served(server: str) -> None:
    found = json.loads(_post(server, "/assistants/search", {"limit": 20}))
    assert {a["graph_id"] for a in found} >= {"retold_search", "retold_extraction", "retold_memory_agent"}


def test_search_graph_through_runs_wait(server: str) -> None:
    out = json.loads(_post(server, "/runs/wait", {"assistant_id": "retold_search", "input": SEARCH}))
    response = out["response"]
    assert response["raw_queries"] == ["answer style"] and response["results"] == []
    assert response["empty_reason"] and out["rendered"].startswith("memory_search: no relevant memory")


def test_search_graph_through_runs_stream_has_per_node_updates(server: str) -> None:
    body = {"assistant_id": "retold_search", "input": SEARCH, "stream_mode": ["updates"]}
    raw = _post(server, "/runs/stream", body).decode().replace("\r\n", "\n")
    nodes = []
    for event in raw.split("\n\n"):
        lines = dict(line.split(": ", 1) for line in event.strip().splitlines() if ": " in line)
        if lines.get("event") == "updates":
            nodes.extend(json.loads(lines["data"]))
    assert nodes == ["prepare", "generate", "rank", "respond"]


def test_memory_agent_runs_with_the_scripted_model(server: str) -> None:
    body = {
        "assistant_id": "retold_memory_agent",
        "input": {"messages": [{"role": "user", "content": "What do you know about my answer style?"}]},
        "context": {"agent_id": "planner", "user_id": "u1"},
    }
    out = json.loads(_post(server, "/runs/wait", body))
    kinds = [m["type"] for m in out["messages"]]
    assert kinds == ["human", "ai", "tool", "ai"]
    assert out["messages"][2]["name"] == "memory_search"
    assert out["messages"][-1]["content"].startswith("From memory (memory_search):")
