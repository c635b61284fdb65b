"""``retold mcp --http`` bounds a token holder's request body before the SDK reads it (issue 45, item 7).

A body nested 5,000 levels deep made the SDK's JSON parser raise ``RecursionError``: HTTP 500.
Against the real server (uvicorn on a free port, real tokens): deeper than
``MAX_BODY_DEPTH`` is 400 and larger than ``MAX_BODY_BYTES`` is 413, each with a JSON-RPC
error naming the limit, whether the size is declared or streamed in chunks; a bracket inside a
string is not nesting; an unauthenticated body is still 401 unread; the server keeps serving.
The depth scanner is checked against ``json``'s own reading of generated documents.
"""

from __future__ import annotations

import asyncio
import json
import secrets
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
from hypothesis import given, settings
from hypothesis import strategies as st

import retold
from retold.adapters.mcp_http import (
    MAX_BODY_BYTES,
    MAX_BODY_DEPTH,
    HttpMemoryServer,
    TokenMap,
    body_depth_exceeds,
    serve_http,
)
from retold.models import Scope
from retold.testing import FakeEmbedder, FakeJudge

from .slow import examples

ACCEPT = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
CLIENT = {"name": "t", "version": "1"}
INIT = {
    "jsonrpc": "2.0", "id": 1, "method": "initialize",
    "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": CLIENT},
}  # fmt: skip


@asynccontextmanager
async def served(tmp_path: Path) -> AsyncIterator[tuple[str, dict[str, str]]]:
    """The real HTTP server on a free port; yields its URL and a token holder's headers."""
    rt = await retold.open_runtime(tmp_path / "m.sqlite", embedder=FakeEmbedder(), judge=FakeJudge())
    await rt.host.grant("claude", Scope("user", "u1"), read=True, write=True)
    token = secrets.token_urlsafe(24)
    tokens = TokenMap.from_mapping({token: {"agent": "claude", "user": "u1"}})
    ready: asyncio.Future[int] = asyncio.get_running_loop().create_future()
    server = HttpMemoryServer(rt, session_id="web", tokens=tokens)
    task = asyncio.ensure_future(serve_http(server, port=0, on_ready=ready.set_result))
    try:
        port = await asyncio.wait_for(asyncio.shield(ready), 20)
        yield f"http://127.0.0.1:{port}/mcp", {**ACCEPT, "Authorization": f"Bearer {token}"}
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        await rt.close()


def _nested(depth: int) -> bytes:
    """A tools/list request whose ``_meta`` nests ``depth`` levels in all (valid JSON)."""
    arrays = depth - 3  # the request, its params and _meta are three levels
    return (
        b'{"jsonrpc": "2.0", "id": 7, "method": "tools/list", "params": {"_meta": {"x": '
        + b"[" * arrays + b"1" + b"]" * arrays + b"}}}"
    )  # fmt: skip


def _refusal(response: httpx.Response, status: int, limit: int) -> None:
    assert response.status_code == status, (response.status_code, response.text[:300])
    body = response.json()
    assert body["jsonrpc"] == "2.0" and body["id"] is None
    assert str(limit) in body["error"]["message"] and body["error"]["data"] == {"limit": limit}


async def test_deep_and_huge_bodies_are_refused_in_front_of_the_sdk(tmp_path: Path) -> None:
    async with served(tmp_path) as (url, headers), httpx.AsyncClient(timeout=30) as http:
        opened = await http.post(url, json=INIT, headers=headers)
        assert opened.status_code == 200
        session = {**headers, "mcp-session-id": opened.headers["mcp-session-id"]}
        listing = {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}

        for body in (
            b"[" * 5_000 + b"]" * 5_000,
            b"[" * 5_000,
            b'{"a":' * 5_000,
            _nested(MAX_BODY_DEPTH + 1),
        ):
            _refusal(await http.post(url, content=body, headers=session), 400, MAX_BODY_DEPTH)
        at_limit = await http.post(url, content=_nested(MAX_BODY_DEPTH), headers=session)
        assert at_limit.status_code == 200 and "memory_search" in at_limit.text  # the SDK answered

        # Brackets and escaped quotes inside a string are text, not nesting.
        query = '\\"[{' * 100 + "[" * 2_000
        search = {"jsonrpc": "2.0", "id": 3, "method": "tools/call",
                  "params": {"name": "memory_search", "arguments": {"queries": [query]}}}  # fmt: skip
        answered = await http.post(url, json=search, headers=session)
        assert answered.status_code == 200 and "invalid_input" in answered.text  # the tool's own limit

        huge = {**listing, "params": {"_meta": {"pad": "x" * MAX_BODY_BYTES}}}
        _refusal(await http.post(url, json=huge, headers=session), 413, MAX_BODY_BYTES)

        async def chunks() -> AsyncIterator[bytes]:  # no Content-Length: counted as it arrives
            yield b'{"jsonrpc": "2.0", "id": 4, "method": "tools/list", "params": {"_meta": {"pad": "'
            for _ in range(40):
                yield b"y" * 65_536
            yield b'"}}}'

        _refusal(await http.post(url, content=chunks(), headers=session), 413, MAX_BODY_BYTES)

        # Authentication still comes first: no token, no reading of the body.
        anonymous = await http.post(url, content=b"[" * 5_000, headers=ACCEPT)
        assert anonymous.status_code == 401 and anonymous.json()["error"] == "unauthorized"

        again = await http.post(url, json=listing, headers=session)  # the server keeps serving
        assert again.status_code == 200 and "memory_search" in again.text


_TRICKY = st.text(alphabet='[]{}"\\ab\u00e9', max_size=8)
"""Strings full of brackets, quotes and backslashes: the scan must skip them whole."""
_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | _TRICKY,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_TRICKY, inner, max_size=3),
    max_leaves=30,
)


def _depth(value: Any) -> int:
    if isinstance(value, list):
        return 1 + max((_depth(v) for v in value), default=0)
    if isinstance(value, dict):
        return 1 + max((_depth(v) for v in value.values()), default=0)
    return 0


@settings(max_examples=examples(300), deadline=None, database=None)
@given(value=_JSON, ascii_only=st.booleans())
def test_the_depth_scan_agrees_with_json(value: Any, ascii_only: bool) -> None:
    body = json.dumps(value, ensure_ascii=ascii_only).encode()
    depth = _depth(value)
    assert not body_depth_exceeds(body, depth)
    assert body_depth_exceeds(body, depth - 1) is (depth >= 1)
