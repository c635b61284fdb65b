"""``retold mcp`` through the SDK's own client: in-process and over streamable HTTP, on fakes.

Runs under whichever ``mcp`` line is installed: the main venv's 1.x and, in CI, 2.x
(``make test-mcp2``). Results are read as wire dicts (``model_dump(by_alias=True)``) because
the two lines name the model attributes differently (``isError`` / ``is_error``).
"""

from __future__ import annotations

import asyncio
import functools
import json
import os
import secrets
import subprocess
import sys
import tempfile
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import retold
from retold.adapters.mcp import POLICY_PROMPT, RECORD_URI_PREFIX, BoundSession, MemoryMcp, mcp_types
from retold.adapters.mcp_http import HttpMemoryServer, TokenMap, serve_http
from retold.errors import ConfigError, InvalidArgumentError, MissingExtraError
from retold.models import Principal, Scope, SessionKey
from retold.testing import FakeEmbedder, FakeJudge
from retold.util import new_id

from .slow import examples

U1, U2 = Scope("user", "u1"), Scope("user", "u2")
FACT = {"type": "semantic", "content": "The user drinks oat milk flat whites.", "attribute": "coffee_order"}


async def open_rt(path: Any) -> retold.Runtime:
    rt = await retold.open_runtime(path, embedder=FakeEmbedder(), judge=FakeJudge())
    await rt.host.grant("claude", U1, read=True, write=True)
    await rt.host.grant("claude", U2, read=True, write=True)
    return rt


@asynccontextmanager
async def connect(rt: retold.Runtime, principal: Principal) -> AsyncIterator[Any]:
    """An initialized SDK ClientSession on an in-process server bound to ``principal``."""
    from mcp.client.session import ClientSession
    from mcp.shared.memory import create_client_server_memory_streams

    session = BoundSession(rt, principal)
    server = MemoryMcp(rt, session).build()
    async with create_client_server_memory_streams() as (client, served), anyio.create_task_group() as tg:
        tg.start_soon(functools.partial(server.run, *served, server.create_initialization_options()))
        async with ClientSession(*client) as client_session:
            await client_session.initialize()
            yield client_session
        tg.cancel_scope.cancel()
    await session.close()


def wire(model: Any) -> dict[str, Any]:
    return model.model_dump(by_alias=True, mode="json", exclude_none=True)


async def call(client: Any, name: str, arguments: Any) -> dict[str, Any]:
    """One tool call: the structured result, checked against the text and the isError flag."""
    out = wire(await client.call_tool(name, arguments))
    result = out["structuredContent"]
    assert out.get("isError", False) is (not result["ok"])
    if name != "memory_search" or not result["ok"]:
        assert json.loads(out["content"][0]["text"]) == result
    return result


async def read(client: Any, uri: str) -> dict[str, Any]:
    contents = wire(await client.read_resource(uri))["contents"]
    assert len(contents) == 1 and contents[0]["mimeType"] == "application/json"
    return json.loads(contents[0]["text"])


def p(user: str = "u1", agent: str = "claude", session: str = "s1") -> Principal:
    return Principal(agent_id=agent, user_id=user, session_id=session)


# --- in-process: the surface -----------------------------------------------------------------


async def test_tools_are_the_published_portable_schemas(tmp_path: Path) -> None:
    rt = await open_rt(tmp_path / "m.sqlite")
    async with connect(rt, p()) as client:
        tools = [wire(t) for t in (await client.list_tools()).tools]
        published = rt.tools.tool_schemas(p())
        assert [(t["name"], t["description"], t["inputSchema"]) for t in tools] == [
            (s["name"], s["description"], s["input_schema"]) for s in published
        ]
        assert {t["name"]: t["annotations"]["readOnlyHint"] for t in tools}["memory_search"] is True
    async with connect(rt, p(agent="reader")) as client:  # nothing writable: no memory_write
        names = [t.name for t in (await client.list_tools()).tools]
        assert names == ["memory_search", "memory_get", "memory_revise", "memory_forget"]
        refused = await call(client, "memory_write", FACT)
        assert refused["error"] == "scope_not_writable"
    await rt.close()


async def test_write_search_get_forget_round_trip(store_path: Path | str) -> None:
    rt = await open_rt(store_path)  # SQLite and PostgreSQL
    async with connect(rt, p()) as client:
        written = await call(client, "memory_write", FACT)
        assert written["outcome"] == "created" and written["write_target"] == "personal"
        assert "timings_ms" not in written  # a client may hand structuredContent to the model
        found = await call(client, "memory_search", {"queries": ["oat milk flat whites coffee order"]})
        assert "timings_ms" not in found
        assert [r["record_id"] for r in found["results"]] == [written["record_id"]]
        text = wire(
            await client.call_tool("memory_search", {"queries": ["oat milk flat whites coffee order"]})
        )
        assert (
            text["content"][0]["text"].splitlines()[1:] == found["rendered"].splitlines()[1:]
        )  # the model reads the §10.9 block
        got = await call(client, "memory_get", {"ids": [written["record_id"][-12:]]})
        assert got["records"][0]["content"] == FACT["content"]
        assert await read(client, RECORD_URI_PREFIX + written["record_id"]) == got
        forgot = await call(client, "memory_forget", {"id": written["record_id"], "reason": "asked to"})
        assert forgot["status"] == "deleted"
        after = await call(client, "memory_search", {"queries": ["oat milk flat whites coffee order"]})
        assert after["results"] == []
    await rt.close()


async def test_bad_and_hostile_input_is_a_structured_result_and_changes_nothing(tmp_path: Path) -> None:
    rt = await open_rt(tmp_path / "m.sqlite")
    async with connect(rt, p()) as client:
        before = await rt.store.records_version()
        for name, arguments in [
            ("memory_delete_everything", {}),
            ("memory_write", {**FACT, "agent_id": "root", "user_id": "u2"}),  # identity is not input
            ("memory_write", {**FACT, "write_target": "user:u2"}),
            ("memory_write", {**FACT, "content": "x" * 100_000}),
            ("memory_write", {**FACT, "content": "\ud800"}),
            ("memory_write", {**FACT, "source_kind": "system"}),
            ("memory_search", {"queries": []}),
            ("memory_search", {}),
            ("memory_get", {"ids": [{"$ne": None}]}),
            ("memory_revise", {"action": "merge_entities", "reason": "r"}),
            ("memory_forget", {"id": "../../etc/passwd", "reason": "r"}),
        ]:
            result = await call(client, name, arguments)
            assert result["ok"] is False and result["error"] in retold.tools.ERROR_CODES, (name, result)
        assert await rt.store.records_version() == before
        bad_uri = await read(client, "retold://elsewhere/x")
        assert bad_uri["error"] == "invalid_input"
    await rt.close()


async def test_user_statement_without_a_transcript_is_a_provisional_inference(tmp_path: Path) -> None:
    """MCP clients send no turns: a quoted user_statement finds no evidence and is downgraded."""
    rt = await open_rt(tmp_path / "m.sqlite")
    async with connect(rt, p()) as client:
        quoted = {**FACT, "source_kind": "user_statement", "evidence": "I drink oat milk flat whites"}
        result = await call(client, "memory_write", quoted)
        record = await rt.store.require_record(result["record_id"])
        assert (record.source_kind, record.status) == ("agent_inference", "provisional")
    await rt.close()


async def test_the_connection_is_one_session_ended_at_close(tmp_path: Path) -> None:
    rt = await open_rt(tmp_path / "m.sqlite")
    async with connect(rt, p(session="mcp-1")) as client:
        await call(client, "memory_write", FACT)
        live = await rt.store.get_session(SessionKey.of(p(session="mcp-1")))
        assert live is not None and live.ended_at is None
    ended = await rt.store.get_session(SessionKey.of(p(session="mcp-1")))
    assert ended is not None and ended.ended_at is not None
    record = (await rt.store.records_in_scope(U1))[0]
    assert record.source_ref is None or "mcp-1" in record.source_ref
    await rt.close()


async def test_policy_prompt_and_instructions(tmp_path: Path) -> None:
    rt = await open_rt(tmp_path / "m.sqlite")
    async with connect(rt, p()) as client:
        prompts = [x.name for x in (await client.list_prompts()).prompts]
        assert prompts == [POLICY_PROMPT]
        got = wire(await client.get_prompt(POLICY_PROMPT))
        assert got["messages"][0]["content"]["text"] == retold.policy_text("tool_only")
        from mcp.shared.exceptions import __dict__ as exceptions

        error = exceptions.get("MCPError") or exceptions["McpError"]
        with pytest.raises(error):
            await client.get_prompt("other")
    await rt.close()


async def test_resources_list_only_readable_records_by_label(tmp_path: Path) -> None:
    rt = await open_rt(tmp_path / "m.sqlite")
    async with connect(rt, p("u1")) as one:
        mine = await call(one, "memory_write", FACT)
        listed = [wire(r) for r in (await one.list_resources()).resources]
        assert [r["uri"] for r in listed] == [RECORD_URI_PREFIX + mine["record_id"]]
        assert "oat" not in json.dumps(listed)  # labels only: stored text is read, not listed
        templates = wire(await one.list_resource_templates())["resourceTemplates"]
        assert templates[0]["uriTemplate"] == RECORD_URI_PREFIX + "{id}"
    async with connect(rt, p("u2")) as two:
        assert (await two.list_resources()).resources == []
        assert (await read(two, RECORD_URI_PREFIX + mine["record_id"]))["error"] == "not_found"
    await rt.close()


def test_the_sdk_is_imported_lazily_and_named_when_missing() -> None:
    code = (
        "import sys, retold, retold.adapters.mcp, retold.adapters.mcp_http, retold.cli; "
        "assert not any(m == 'mcp' or m.startswith('mcp.') for m in sys.modules), 'mcp imported'; "
        "sys.modules['mcp'] = None; from retold.adapters.mcp import mcp_types\n"
        "try:\n    mcp_types()\nexcept retold.MissingExtraError as e:\n    print(e)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert "retold[mcp]" in out.stdout
    assert issubclass(MissingExtraError, ImportError)
    assert mcp_types().Tool  # installed here


# --- isolation property ----------------------------------------------------------------------


def _masked(result: dict[str, Any], ref: str) -> str:
    return json.dumps(result, sort_keys=True).replace(json.dumps(ref)[1:-1], "<REF>")


async def _isolation(path: Path, foreign_owner: str, probes: list[tuple[str, str, int]]) -> None:
    rt = await open_rt(path)
    await rt.host.grant("other", U1, read=True, write=True)
    await rt.host.grant("other", U2, read=True, write=True)
    owner = p(foreign_owner, agent="other", session="x")
    await rt.hooks.on_session_start(owner)
    foreign = [(await rt.tools.call(owner, "memory_write", {**FACT, "content": c}))["record_id"]
               for c in ("Bea earns 90k a year.", "Bea's door code is 4711.")]  # fmt: skip
    me = "u2" if foreign_owner == "u1" else "u1"
    async with connect(rt, p(me)) as client:
        await call(client, "memory_write", {**FACT, "content": "My own note about coffee."})
        before = await rt.store.records_version()
        for channel, kind, which in probes:
            target = foreign[which]
            ref = {
                "full": target,
                "short": target[-12:],
                "upper": target.upper(),
                "bracket": f"[{target[-12:]}]",
            }[kind]
            missing = new_id()
            missing_ref = {"full": missing, "short": missing[-12:], "upper": missing.upper(),
                           "bracket": f"[{missing[-12:]}]"}[kind]  # fmt: skip
            answers = []
            for r in (ref, missing_ref):
                if channel == "resource":
                    answers.append(_masked(await read(client, RECORD_URI_PREFIX + r), r))
                elif channel == "get":
                    answers.append(_masked(await call(client, "memory_get", {"ids": [r]}), r))
                elif channel == "forget":
                    answers.append(_masked(await call(client, "memory_forget", {"id": r, "reason": "x"}), r))
                else:
                    args = {"action": "supersede", "id": r, "content": "Bea earns nothing.", "reason": "x"}
                    answers.append(_masked(await call(client, "memory_revise", args), r))
            assert answers[0] == answers[1], (channel, kind, answers)
            assert '"error": "not_found"' in answers[0]
        searched = await call(client, "memory_search", {"queries": ["Bea earns door code"], "k": 20})
        assert not {r["record_id"] for r in searched["results"]} & set(foreign)
        listed = {str(r.uri) for r in (await client.list_resources()).resources}
        assert not listed & {RECORD_URI_PREFIX + f for f in foreign}
        assert await rt.store.records_version() == before
    await rt.close()


@settings(max_examples=examples(12), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    foreign_owner=st.sampled_from(["u1", "u2"]),
    probes=st.lists(
        st.tuples(
            st.sampled_from(["resource", "get", "forget", "revise"]),
            st.sampled_from(["full", "short", "upper", "bracket"]),
            st.integers(0, 1),
        ),
        min_size=1,
        max_size=6,
    ),
)
def test_a_foreign_id_answers_like_a_missing_one_on_every_channel(
    foreign_owner: str, probes: list[tuple[str, str, int]]
) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        asyncio.run(_isolation(Path(tmp) / "m.sqlite", foreign_owner, probes))


# --- streamable HTTP -------------------------------------------------------------------------


@asynccontextmanager
async def http_server(rt: retold.Runtime, **kwargs: Any) -> AsyncIterator[str]:
    ready: asyncio.Future[int] = asyncio.get_running_loop().create_future()
    task = asyncio.ensure_future(
        serve_http(HttpMemoryServer(rt, session_id="web", **kwargs), port=0, on_ready=ready.set_result)
    )
    try:
        port = await asyncio.wait_for(asyncio.shield(ready), 20)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


@asynccontextmanager
async def http_client(url: str, token: str | None) -> AsyncIterator[Any]:
    from mcp.client.session import ClientSession
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import create_mcp_http_client

    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with (
        create_mcp_http_client(headers=headers) as http,
        streamable_http_client(url, http_client=http) as streams,
        ClientSession(streams[0], streams[1]) as session,
    ):
        await session.initialize()
        yield session


def token_map() -> tuple[str, str, TokenMap]:
    one, two = secrets.token_urlsafe(24), secrets.token_urlsafe(24)
    return (
        one,
        two,
        TokenMap.from_mapping(
            {one: {"agent": "claude", "user": "u1"}, two: {"agent": "claude", "user": "u2"}}
        ),
    )


async def test_http_two_tokens_two_users_no_crossing(store_path: Path | str) -> None:
    rt = await open_rt(store_path)  # SQLite and PostgreSQL
    one, two, tokens = token_map()
    async with (
        http_server(rt, tokens=tokens) as url,
        http_client(url, one) as first,
        http_client(url, two) as second,
    ):
        written = await call(first, "memory_write", FACT)
        assert (await rt.store.require_record(written["record_id"])).scope == U1
        query = {"queries": ["oat milk flat whites coffee order"]}
        assert [r["record_id"] for r in (await call(first, "memory_search", query))["results"]] == [
            written["record_id"]
        ]
        assert (await call(second, "memory_search", query))["results"] == []
        assert (await call(second, "memory_get", {"ids": [written["record_id"]]}))["error"] == "not_found"
        assert (await read(second, RECORD_URI_PREFIX + written["record_id"]))["error"] == "not_found"
        assert (await second.list_resources()).resources == []
        assert len((await first.list_resources()).resources) == 1
        mine = await call(second, "memory_write", {**FACT, "content": "The user drinks green tea."})
        assert (await rt.store.require_record(mine["record_id"])).scope == U2
    # the server stopped: each principal's session ended
    for user in ("u1", "u2"):
        session = await rt.store.get_session(SessionKey.of(p(user, session="web")))
        assert session is not None and session.ended_at is not None
    await rt.close()


async def test_http_refuses_missing_wrong_and_borrowed_credentials(tmp_path: Path) -> None:
    from mcp.shared._httpx_utils import create_mcp_http_client

    rt = await open_rt(tmp_path / "m.sqlite")
    one, two, tokens = token_map()
    params = {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "t", "version": "1"},
    }
    init = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": params}
    accept = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
    async with http_server(rt, tokens=tokens) as url, create_mcp_http_client() as http:
        for headers in ({}, {"Authorization": "Bearer " + one[:-1]}, {"Authorization": "Basic " + one},
                        {"Authorization": "Bearer"}, {"Authorization": f"Bearer {one}x"}):  # fmt: skip
            response = await http.post(url, json=init, headers={**accept, **headers})
            assert response.status_code == 401
            assert response.json()["error"] == "unauthorized"
            assert "mcp-session-id" not in response.headers
        opened = await http.post(url, json=init, headers={**accept, "Authorization": f"Bearer {one}"})
        assert opened.status_code == 200
        sid = opened.headers["mcp-session-id"]
        listing = {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}
        borrowed = await http.post(
            url, json=listing, headers={**accept, "Authorization": f"Bearer {two}", "mcp-session-id": sid}
        )
        assert borrowed.status_code in (400, 404)  # u2's server has no such session
        assert "memory_search" not in borrowed.text
    await rt.close()


async def test_loopback_without_tokens_serves_the_configured_principal(tmp_path: Path) -> None:
    rt = await open_rt(tmp_path / "m.sqlite")
    async with http_server(rt, principal=p("u1")) as url, http_client(url, None) as client:
        written = await call(client, "memory_write", FACT)
        assert (await rt.store.require_record(written["record_id"])).scope == U1
    await rt.close()


async def test_non_loopback_without_tokens_is_refused(tmp_path: Path) -> None:
    rt = await open_rt(tmp_path / "m.sqlite")
    for host in ("0.0.0.0", "192.168.1.5", "::", "example.com"):
        with pytest.raises(InvalidArgumentError, match="tokens"):
            HttpMemoryServer(rt, session_id="web", principal=p(), host=host)
    HttpMemoryServer(rt, session_id="web", tokens=token_map()[2], host="0.0.0.0")  # with tokens: allowed
    await rt.close()


def test_token_map_validation_and_lookup() -> None:
    one, two, tokens = token_map()
    assert tokens.lookup(one) == Principal("claude", "u1") and tokens.lookup(two) == Principal("claude", "u2")
    for presented in (None, "", one[:-1], one + " ", one.upper() if one.upper() != one else "x"):
        assert tokens.lookup(presented) is None
    for bad in (
        {},
        ["x"],
        {"short": {"agent": "a", "user": "u"}},
        {"a" * 20: {"agent": "a"}},
        {"a" * 20: {"agent": "a", "user": "u", "role": "admin"}},
        {"a" * 19 + " ": {"agent": "a", "user": "u"}},
        {"a" * 20: {"agent": "a", "user": ""}},
    ):
        with pytest.raises(ConfigError) as err:
            TokenMap.from_mapping(bad)
        assert "a" * 19 not in str(err.value)  # a refusal never echoes a token


# --- stdio in a subprocess (the CLI itself, with the packaged embedder: tests/integration) ------

_STDIO_SERVER = """
import asyncio, sys
import retold
from retold.adapters.mcp import serve_stdio
from retold.testing import FakeEmbedder, FakeJudge

async def main():
    async with retold.open_runtime(sys.argv[1], embedder=FakeEmbedder(), judge=FakeJudge()) as rt:
        await rt.host.grant("claude", retold.Scope("user", "u1"), read=True, write=True)
        await serve_stdio(rt, retold.Principal("claude", "u1", "io1"))

asyncio.run(main())
"""


async def test_stdio_transport_in_a_subprocess(tmp_path: Path) -> None:
    from mcp import StdioServerParameters
    from mcp.client.session import ClientSession
    from mcp.client.stdio import stdio_client

    store = tmp_path / "m.sqlite"
    server = StdioServerParameters(
        command=sys.executable, args=["-c", _STDIO_SERVER, str(store)], env=dict(os.environ)
    )
    async with (
        stdio_client(server) as (read_stream, write_stream),
        ClientSession(read_stream, write_stream) as c,
    ):
        await c.initialize()
        written = await call(c, "memory_write", FACT)
        assert (await read(c, RECORD_URI_PREFIX + written["record_id"]))["records"][0]["content"] == FACT[
            "content"
        ]
    async with retold.open_runtime(store, embedder=FakeEmbedder(), judge=FakeJudge()) as rt:
        session = await rt.store.get_session(SessionKey.of(p(session="io1")))
        assert session is not None and session.ended_at is not None  # ended when the client left
