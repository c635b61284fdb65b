"""``retold mcp`` as a user runs it: a subprocess over stdio and over HTTP, the packaged embedder."""

from __future__ import annotations

import asyncio
import json
import os
import re
import secrets
import subprocess
import sys
from pathlib import Path

import pytest
from cli_runner import run
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.shared._httpx_utils import create_mcp_http_client

import retold
from retold.models import SessionKey

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.integration


def test_the_example_runs(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "mcp_quickstart.py"), str(tmp_path / "memory.sqlite")],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.splitlines() == [
        "tools: memory_search, memory_get, memory_write, memory_revise, memory_forget",
        "write: created provisional",
        "search: > The user drinks oat milk flat whites.",
    ]


async def test_stdio_serves_one_principal_and_ends_its_session(tmp_path: Path) -> None:
    store = tmp_path / "m.sqlite"
    run("grant", "claude", "user:u1", "--read", "--write", "--create", "--store", store)
    run("grant", "claude", "user:u2", "--read", "--write", "--store", store)
    async with retold.open_runtime(store) as rt:
        foreign = await rt.host.write_system(retold.Scope("user", "u2"), "Bea's door code is 4711.")
    args = [
        "-m",
        "retold",
        "mcp",
        "--store",
        str(store),
        "--user",
        "u1",
        "--agent",
        "claude",
        "--session",
        "d1",
    ]
    server = StdioServerParameters(command=sys.executable, args=args, env=dict(os.environ), cwd=str(tmp_path))
    async with stdio_client(server) as (read, write), ClientSession(read, write) as client:
        init = await client.initialize()
        assert init.instructions == retold.policy_text("tool_only")
        fact = {"type": "semantic", "content": "The user drinks oat milk flat whites.", "attribute": "coffee"}
        written = json.loads((await client.call_tool("memory_write", fact)).content[0].text)
        assert written["ok"] and written["write_target"] == "personal"
        found = (await client.call_tool("memory_search", {"queries": ["door code", "flat whites"]})).content
        assert "oat milk" in found[0].text and "4711" not in found[0].text
        uri = f"retold://records/{foreign.record_id}"
        answer = json.loads((await client.read_resource(uri)).contents[0].text)
        assert answer["error"] == "not_found"
    async with retold.open_runtime(store) as rt:
        session = await rt.store.get_session(SessionKey("claude", "u1", "d1"))
        assert session is not None and session.ended_at is not None
        record = await rt.store.require_record(written["record_id"])
        assert record.scope == retold.Scope("user", "u1")


def test_cli_refuses_to_bind_off_loopback_without_tokens(tmp_path: Path) -> None:
    store = tmp_path / "m.sqlite"
    run("migrate", "--store", store)  # a missing store is refused first (test_cli_missing_store.py)
    files = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    for host in ("0.0.0.0", "192.0.2.1"):
        proc = run("mcp", "--http", "--host", host, "--user", "u1", "--agent", "a", "--store", store, rc=2)
        assert "refusing to serve memory" in proc.stderr and "--tokens" in proc.stderr
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == files  # refused before opening it
    run("mcp", "--store", store, rc=2)  # stdio needs --agent and --user
    short = tmp_path / "tokens.yaml"
    short.write_text("abc: {agent: a, user: u1}\n")
    proc = run("mcp", "--http", "--tokens", short, "--store", store, rc=2)
    assert "at least 16 characters" in proc.stderr and "abc" not in proc.stderr


def test_http_cli_binds_identity_to_the_token(tmp_path: Path) -> None:
    store = tmp_path / "m.sqlite"
    run("migrate", "--store", store)
    token = secrets.token_urlsafe(24)
    tokens = tmp_path / "tokens.yaml"
    tokens.write_text(f"{token}: {{agent: claude, user: u1}}\n")
    proc = subprocess.Popen(
        [sys.executable, "-m", "retold", "mcp", "--http", "--port", "0", "--tokens", str(tokens),
         "--store", str(store)],
        stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert proc.stderr is not None
        line = proc.stderr.readline()
        match = re.search(r"serving on (http://127\.0\.0\.1:\d+/mcp)", line)
        assert match, line
        asyncio.run(_initialize(match.group(1), token))
    finally:
        proc.terminate()
        proc.wait(timeout=30)


async def _initialize(url: str, token: str) -> None:
    """Without the token: 401; with it: the server's initialize answer."""
    accept = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
    params = {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "t", "version": "1"},
    }
    init = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": params}
    async with create_mcp_http_client() as http:
        assert (await http.post(url, json=init, headers=accept)).status_code == 401
        ok = await http.post(url, json=init, headers={**accept, "Authorization": f"Bearer {token}"})
        assert ok.status_code == 200 and "retold" in ok.text
