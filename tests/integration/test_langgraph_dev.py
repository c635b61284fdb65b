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
from contextlib import contextmanager
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


def _post(
    base: str, path: str, body: dict[str, Any], timeout: float = 60.0, headers: dict[str, str] | None = None
) -> bytes:
    request = urllib.request.Request(
        base + path,
        data=json.dumps(body).encode(),
        headers={"content-type": "application/json", **(headers or {})},
    )
    with urllib.request.urlopen(request, timeout=timeout) as response:
        return response.read()


def _seed(path: Path) -> None:
    """Two users' memories in the store the servers open (the packaged embedder, as they use)."""
    import asyncio

    import retold
    from retold.models import Principal, Scope

    async def seed() -> None:
        async with retold.open_runtime(path) as rt:
            for user, text in (("u1", "I prefer concise answers without preamble."),
                               ("u2", "I prefer long answers with every detail spelled out.")):  # fmt: skip
                await rt.host.provision_user(user)
                await rt.host.grant("planner", Scope("user", user), read=True, write=True)
                p = await rt.hooks.on_session_start(Principal("planner", user, f"seed-{user}"))
                p = await rt.hooks.on_turn(p, "user", text)
                payload = {
                    "type": "semantic",
                    "content": text.replace("I prefer", "The user prefers"),
                    "attribute": "answer_style",
                    "source_kind": "user_statement",
                    "evidence": text,
                }
                written = await rt.tools.call(p, "memory_write", payload)
                assert written["ok"], written

    asyncio.run(seed())


@contextmanager
def _serve(home: Path, cwd: Path, extra_env: dict[str, str]) -> Iterator[str]:
    port = _free_port()
    env = {
        **os.environ,
        "HOME": str(home),
        "RETOLD_STORE": str(home / "memory.sqlite"),
        "LANGGRAPH_CLI_NO_ANALYTICS": "1",
        "LANGSMITH_TRACING": "false",
        **extra_env,
    }
    env.pop("RETOLD_CONFIG", None)
    if "RETOLD_GRAPH_IDENTITY" not in extra_env:
        env.pop("RETOLD_GRAPH_IDENTITY", None)
    log = (home / "server.log").open("wb")
    proc = subprocess.Popen(
        [str(LANGGRAPH), "dev", "--no-browser", "--no-reload", "--host", "127.0.0.1", "--port", str(port)],
        cwd=cwd,
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


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The repository's langgraph.json in local development mode (identity from the input)."""
    home = tmp_path_factory.mktemp("langgraph-dev")
    _seed(home / "memory.sqlite")
    with _serve(home, REPO, {"RETOLD_GRAPH_IDENTITY": "input"}) as base:
        yield base


AUTH = """
from langgraph_sdk import Auth

auth = Auth()
TOKENS = {"token-u1": "u1", "token-u2": "u2"}


@auth.authenticate
async def authenticate(authorization: str | None) -> Auth.types.MinimalUserDict:
    user = TOKENS.get((authorization or "").removeprefix("Bearer "))
    if user is None:
        raise Auth.exceptions.HTTPException(status_code=401, detail="unknown token")
    return {"identity": user, "retold_agent_id": "planner"}
"""


@pytest.fixture(scope="module")
def auth_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The same graphs behind a LangGraph Auth handler, without local development mode."""
    home = tmp_path_factory.mktemp("langgraph-auth")
    _seed(home / "memory.sqlite")
    (home / "auth.py").write_text(AUTH)
    repo_config = json.loads((REPO / "langgraph.json").read_text())
    graphs = {name: str(REPO / path.removeprefix("./")) for name, path in repo_config["graphs"].items()}
    probes = Path(__file__).with_name("store_graphs.py")
    graphs |= {"store_probe": f"{probes}:store_probe", "langmem_probe": f"{probes}:langmem_probe"}
    config = {
        "dependencies": [str(REPO)],
        "graphs": graphs,
        "store": {"path": str(REPO / repo_config["store"]["path"].removeprefix("./"))},
        "auth": {"path": "./auth.py:auth"},
    }
    (home / "langgraph.json").write_text(json.dumps(config))
    with _serve(home, home, {"RETOLD_STORE_AGENT": "planner"}) as base:  # the store acts as the seeded agent
        yield base


SEARCH = {"agent_id": "planner", "user_id": "u1", "queries": ["answer style"]}
NODES = ["prepare", "generate", "rank", "gate", "respond"]
MAX_UPDATE_BYTES = 20 * 1024


def _stream(base: str, body: dict[str, Any], headers: dict[str, str] | None = None) -> list[tuple[str, Any]]:
    """(event, data) pairs of one /runs/stream call."""
    raw = _post(base, "/runs/stream", body, headers=headers).decode().replace("\r\n", "\n")
    events = []
    for event in raw.split("\n\n"):
        lines = dict(line.split(": ", 1) for line in event.strip().splitlines() if ": " in line)
        if "event" in lines:
            events.append((lines["event"], json.loads(lines["data"]) if lines.get("data") else None))
    return events


def test_the_three_graphs_are_served(server: str) -> None:
    found = json.loads(_post(server, "/assistants/search", {"limit": 20}))
    assert {a["graph_id"] for a in found} >= {"retold_search", "retold_extraction", "retold_memory_agent"}


def test_search_graph_through_runs_wait(server: str) -> None:
    out = json.loads(_post(server, "/runs/wait", {"assistant_id": "retold_search", "input": SEARCH}))
    response = out["response"]
    assert response["raw_queries"] == ["answer style"] and len(response["results"]) == 1
    assert "concise" in response["results"][0]["record"]["content"]
    assert out["rendered"].startswith("memory_search: 1 result")
    assert "run_key" not in out and out["eligible"]["count"] == 1  # the state is the stages' views


def test_each_node_update_in_the_stream_is_what_its_stage_decided(server: str) -> None:
    body = {"assistant_id": "retold_search", "input": SEARCH, "stream_mode": ["updates"]}
    updates = [data for event, data in _stream(server, body) if event == "updates"]
    assert [next(iter(u)) for u in updates] == NODES
    by_node = {node: update for u in updates for node, update in u.items()}
    for node, update in by_node.items():
        assert len(json.dumps(update)) <= MAX_UPDATE_BYTES, node
        assert "run" not in update and "run_key" not in update
    prepare, generate, rank = by_node["prepare"], by_node["generate"], by_node["rank"]
    assert prepare["eligible"]["count"] == 1 and prepare["eligible"]["scopes"] == [
        "agent:planner/u1",
        "user:u1",
    ]
    assert prepare["request"]["queries"] == ["answer style"] and prepare["principal"]["user_id"] == "u1"
    dense = generate["channels"]["dense"]["top"]
    assert dense and {"id", "text", "score", "rank"} <= set(dense[0]) and "concise" in dense[0]["text"]
    top = rank["fused"]["top"][0]
    assert top["channel_ranks"]["dense"] == 1 and top["rrf"] > 0
    assert "dense" in top["contributions"] and sum(top["contributions"].values()) == pytest.approx(top["rrf"])
    passed = by_node["gate"]["gate"]["passed"]
    assert [p["id"] for p in passed] == by_node["respond"]["returned"] and passed[0]["reason"]
    assert by_node["respond"]["response"]["search_id"] == prepare["search_id"]


def test_without_auth_or_development_mode_the_input_cannot_name_a_user(auth_server: str) -> None:
    with pytest.raises(urllib.error.HTTPError) as refused:  # no token: the server's Auth handler refuses
        _post(auth_server, "/runs/wait", {"assistant_id": "retold_search", "input": SEARCH})
    assert refused.value.code in (401, 403)


def test_identity_comes_from_the_authenticated_user(auth_server: str) -> None:
    def search(token: str, payload: dict[str, Any]) -> dict[str, Any]:
        body = {"assistant_id": "retold_search", "input": payload}
        return json.loads(
            _post(auth_server, "/runs/wait", body, headers={"authorization": f"Bearer {token}"})
        )

    mine = search("token-u1", {"queries": ["answer style"]})  # no ids in the input at all
    assert [r["record"]["content"] for r in mine["response"]["results"]] == [
        "The user prefers concise answers without preamble."
    ]
    theirs = search("token-u2", {"queries": ["answer style"]})
    assert ["long answers" in r["record"]["content"] for r in theirs["response"]["results"]] == [True]
    # Naming another user is refused, never silently answered for either of them.
    spoofed = search("token-u2", {"agent_id": "planner", "user_id": "u1", "queries": ["answer style"]})
    assert "response" not in spoofed and "IdentityError" in json.dumps(spoofed)


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


def test_the_served_agent_takes_its_user_from_the_authenticated_caller(auth_server: str) -> None:
    def ask(token: str, context: dict[str, str]) -> dict[str, Any]:
        body = {
            "assistant_id": "retold_memory_agent",
            "input": {"messages": [{"role": "user", "content": "What do you know about my answer style?"}]},
            "context": context,
        }
        headers = {"authorization": f"Bearer {token}"}
        return json.loads(_post(auth_server, "/runs/wait", body, headers=headers))

    out = ask("token-u1", {"agent_id": "planner", "user_id": "u1"})
    assert (
        "concise" in out["messages"][-1]["content"] and "long answers" not in out["messages"][-1]["content"]
    )
    spoofed = ask("token-u2", {"agent_id": "planner", "user_id": "u1"})  # u2 naming u1
    assert "concise" not in json.dumps(spoofed) and "IdentityError" in json.dumps(spoofed)


# --- the server's store (RetoldStore) in served runs: the authenticated user, never another -------

U1_TOKEN, U2_TOKEN = {"authorization": "Bearer token-u1"}, {"authorization": "Bearer token-u2"}
CLINIC = "6f1c3c1e-2b7a-4d0e-9c55-1d2e3f4a5b6c"  # u2's key: a UUID, as LangMem's tools name memories


def _run(base: str, graph: str, payload: dict[str, Any], headers: dict[str, str], **config: Any) -> Any:
    body: dict[str, Any] = {"assistant_id": graph, "input": payload}
    if config:
        body["config"] = {"configurable": config}
    return json.loads(_post(base, "/runs/wait", body, headers=headers))["out"]


def _store_call(base: str, method: str, path: str, body: Any, headers: dict[str, str]) -> Any:
    request = urllib.request.Request(
        base + path, data=json.dumps(body).encode() if body is not None else None, method=method,
        headers={"content-type": "application/json", **headers},
    )  # fmt: skip
    with urllib.request.urlopen(request, timeout=60) as response:
        raw = response.read()
    return json.loads(raw) if raw else None


def test_a_served_runs_store_acts_only_as_its_authenticated_user(auth_server: str) -> None:
    """Issue 45 item 2 on a real server: token u1 naming u2 by user_id, langgraph_user_id or the
    namespace reads, overwrites and deletes nothing of u2's, through runtime.store and LangMem."""
    secret = {"content": "Knee surgery follow-up at the clinic on Friday."}
    u2_ns = ["memories", "u2"]
    put = {"op": "put", "namespace": u2_ns, "key": CLINIC, "value": secret}
    assert _run(auth_server, "store_probe", put, U2_TOKEN) == "put"
    labelled = {**put, "namespace": [*u2_ns, "medical_clinic"]}
    assert _run(auth_server, "store_probe", labelled, U2_TOKEN) == "put"

    get_u2 = {"op": "get", "namespace": u2_ns, "key": CLINIC}
    overwrite = {**put, "value": {"content": "Overwritten by u1."}}
    delete = {"op": "delete", "namespace": u2_ns, "key": CLINIC}
    search_u2 = {"op": "search", "namespace": u2_ns, "args": {"query": "clinic knee surgery"}}
    for payload in (get_u2, overwrite, delete, search_u2):
        for named in ({}, {"user_id": "u2"}, {"langgraph_user_id": "u2"}):
            out = _run(auth_server, "store_probe", payload, U1_TOKEN, **named)
            refused = isinstance(out, dict) and out.get("error") == "identity_mismatch"
            assert refused and out["kind"] == "StoreIdentityError", (payload, named, out)
    own = {"op": "get", "namespace": ["memories", "u1"], "key": CLINIC}
    for named in ({"user_id": "u2"}, {"langgraph_user_id": "u2"}):  # the run naming u2, even for u1's own
        out = _run(auth_server, "store_probe", own, U1_TOKEN, **named)
        assert isinstance(out, dict) and out.get("error") == "identity_mismatch", (named, out)

    # LangMem's tools fill ("memories", "{langgraph_user_id}") from the run: u1 naming u2 is refused.
    for tool_name, args in (
        ("search_memory", {"query": "clinic knee surgery"}),
        ("manage_memory", {"action": "update", "id": CLINIC, "content": "Overwritten by u1."}),
        ("manage_memory", {"action": "delete", "id": CLINIC}),
        ("manage_memory", {"action": "create", "content": "Planted in u2's memory by u1."}),
    ):
        out = _run(
            auth_server, "langmem_probe", {"op": tool_name, "args": args}, U1_TOKEN, langgraph_user_id="u2"
        )
        assert isinstance(out, dict) and out["error"] == "identity_mismatch", (tool_name, out)

    # u1's listing shows neither u2's id nor the label u2 chose.
    listed = _run(auth_server, "store_probe", {"op": "list"}, U1_TOKEN)
    assert not any("u2" in ns or "medical_clinic" in ns for ns in listed), listed
    assert ["memories", "u2", "medical_clinic"] in _run(auth_server, "store_probe", {"op": "list"}, U2_TOKEN)

    # u2's item is untouched; u1's own LangMem memory works as u1.
    assert _run(auth_server, "store_probe", get_u2, U2_TOKEN) == secret
    created = _run(
        auth_server, "langmem_probe",
        {"op": "manage_memory", "args": {"action": "create", "content": "Prefers aisle seats on trains."}},
        U1_TOKEN, langgraph_user_id="u1",
    )  # fmt: skip
    assert created.startswith("created memory ")
    found = _run(
        auth_server, "langmem_probe", {"op": "search_memory", "args": {"query": "aisle seats on trains"}},
        U1_TOKEN, langgraph_user_id="u1",
    )  # fmt: skip
    assert "Prefers aisle seats on trains." in json.dumps(found)
    hits = _run(auth_server, "store_probe", search_u2, U2_TOKEN)
    assert hits and all(h["value"] == secret and h["key"] == CLINIC for h in hits)  # its two namespaces


def test_the_store_api_acts_as_the_authenticated_user(auth_server: str) -> None:
    """The server's /store HTTP API is no run, but a token holder still acts only as themselves."""
    item = {"namespace": ["memories", "u2"], "key": "api", "value": {"content": "Takes the 7:40 train."}}
    _store_call(auth_server, "PUT", "/store/items", item, U2_TOKEN)
    # Refused (the server answers the store's error as a 500, as it does a scope_not_writable put).
    with pytest.raises(urllib.error.HTTPError):
        _store_call(auth_server, "GET", "/store/items?namespace=memories.u2&key=api", None, U1_TOKEN)
    with pytest.raises(urllib.error.HTTPError):
        _store_call(auth_server, "PUT", "/store/items", {**item, "value": {"content": "x"}}, U1_TOKEN)
    with pytest.raises(urllib.error.HTTPError):
        _store_call(
            auth_server, "DELETE", "/store/items", {"namespace": ["memories", "u2"], "key": "api"}, U1_TOKEN
        )
    mine = _store_call(auth_server, "GET", "/store/items?namespace=memories.u2&key=api", None, U2_TOKEN)
    assert mine["value"] == {"content": "Takes the 7:40 train."}
    listed = _store_call(auth_server, "POST", "/store/namespaces", {}, U1_TOKEN)
    assert not any("u2" in ns for ns in listed["namespaces"]), listed
