"""The graphs' state is what each stage decided, typed per stage and small; identity when served."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from langgraph_sdk.auth.types import StudioUser

from retold.errors import IdentityError
from retold.graph_nodes.identity import IDENTITY_ENV, served_principal
from retold.models import SearchRequest

from .extraction_world import XWorld, cand, make_xworld
from .writepath import World

CONCISE = "Aditya prefers concise answers without preamble."

SEARCH_NODES = ["prepare", "generate", "rank", "gate", "respond"]


async def _updates(graph: Any, payload: dict[str, Any], **kwargs: Any) -> list[tuple[str, dict[str, Any]]]:
    return [
        (node, update)
        async for chunk in graph.astream(payload, stream_mode="updates", **kwargs)
        for node, update in chunk.items()
    ]


async def test_each_search_node_publishes_its_own_stage_and_never_the_run(world: World) -> None:
    written = await world.write(CONCISE)
    await world.write("Aditya keeps a vegetable garden.", attribute="garden")
    payload = {
        "agent_id": "planner",
        "user_id": "u1",
        "session_id": "s1",
        "queries": ["concise answers preamble"],
    }
    updates = await _updates(world.rt.search_graph, payload)
    assert [node for node, _ in updates] == SEARCH_NODES
    keys = {node: set(update) for node, update in updates}
    # run_key: an opaque token naming where the graph keeps this run (the output leaves it out)
    assert keys["prepare"] == {"search_id", "principal", "request", "eligible", "run_key"}
    assert keys["generate"] == {"channels"} and keys["rank"] == {"fused"} and keys["gate"] == {"gate"}
    assert keys["respond"] == {"response", "returned", "rendered"}
    views = dict(updates)
    assert views["prepare"]["eligible"]["count"] == 2 and "ids" not in json.dumps(views["prepare"])
    lexical = views["generate"]["channels"]["lexical"]["top"]
    assert lexical[0]["id"] == written.record_id and "concise" in lexical[0]["text"].lower()
    fused = views["rank"]["fused"]["top"][0]
    assert fused["id"] == written.record_id and set(fused["channel_ranks"]) >= {"lexical"}
    gate = views["gate"]["gate"]
    assert [p["id"] for p in gate["passed"]] == views["respond"]["returned"] == [written.record_id]
    assert gate["floors"]["dense_floor"]["semantic"] > 0
    rejected = {r["id"]: r["reason"] for r in gate["rejected"]}
    assert all(reason for reason in rejected.values())
    final = await world.rt.search_graph.ainvoke(payload)
    assert "run_key" not in final and set(final) >= {"response", "eligible", "gate"}


async def test_the_input_cannot_choose_where_the_graph_keeps_a_run(world: World) -> None:
    await world.write(CONCISE)
    for graph in (world.rt.search_graph, world.rt.extraction_graph):
        assert "run_key" not in graph.get_input_jsonschema()["properties"]
        assert "run_key" not in graph.get_output_jsonschema()["properties"]
    payload = {"agent_id": "planner", "user_id": "u1", "queries": ["concise answers"], "run_key": "x"}
    out = await world.rt.search_graph.ainvoke(payload)
    assert out["returned"] and "run_key" not in out  # the key named in the input was never read


async def test_a_failed_json_run_is_dropped_and_the_next_runs(world: World) -> None:
    with pytest.raises(Exception, match="queries"):
        await world.rt.search_graph.ainvoke({"agent_id": "planner", "user_id": "u1", "queries": []})
    await world.write(CONCISE)
    out = await world.rt.search_graph.ainvoke(
        {"agent_id": "planner", "user_id": "u1", "queries": ["concise"]}
    )
    assert out["returned"]


async def test_rt_search_hands_the_run_in_through_the_context_and_tags_the_trace(world: World) -> None:
    seen: list[dict[str, Any]] = []
    original = world.rt.search_graph.ainvoke

    async def spy(payload: Any, config: Any = None, **kwargs: Any) -> Any:
        seen.append({"payload": payload, "config": config, "context": kwargs.get("context")})
        return await original(payload, config, **kwargs)

    world.rt._search_graph = type("G", (), {"ainvoke": staticmethod(spy)})()
    response = await world.rt.search(world.p, SearchRequest(queries=["concise answers"]))
    [call] = seen
    assert call["payload"] == {"queries": ["concise answers"]}  # the run is not in the state
    assert call["context"].run.search_id == response.search_id
    assert call["config"]["run_name"] == "retold_search"
    assert call["config"]["metadata"]["retold_search_id"] == response.search_id
    assert call["config"]["metadata"]["user_id"] == "u1"


@pytest.fixture
async def xw(tmp_path: Path) -> AsyncIterator[XWorld]:
    w = await make_xworld(tmp_path / "memory.sqlite")
    try:
        yield w
    finally:
        await w.rt.close()


async def test_each_extraction_node_publishes_its_stage(xw: XWorld) -> None:
    await xw.say("user", "Hi! I prefer concise answers, please.")
    await xw.say("assistant", "Understood.")
    xw.propose(
        *[
            cand(f"The user prefers concise answers, variant {i}.", "I prefer concise answers", 1)
            for i in range(40)
        ]
    )
    await xw.end()
    updates = await _updates(xw.rt.extraction_graph, {"session_id": "s1"})
    names = [node for node, _ in updates]
    stages = ["claim", "load_transcript", "build_context", "extract", "validate", "review", "revalidate"]
    assert names == [*stages, "write", "finish"]
    views = dict(updates)
    assert views["claim"]["claim"]["status"] == "claimed"
    assert views["load_transcript"]["transcript"]["turns"] == 2
    extracted = views["extract"]["extracted"]
    assert extracted["total"] + extracted["over_cap"] == 40 and len(extracted["shown"]) <= 30
    assert all(row["text"] and len(row["text"]) <= 100 for row in extracted["shown"])
    assert {"action", "status"} <= set(views["review"]["reviewed"]["shown"][0])
    assert any(row["outcome"] for row in views["write"]["written"]["shown"])
    assert views["finish"]["result"]["status"] == "extracted" and views["finish"]["failure"] is None
    for node, update in updates:
        assert "run" not in update
        assert len(json.dumps(update, default=str)) <= 20 * 1024, node


class _User(dict[str, Any]):
    """A user as LangGraph's server hands it to a run: dict access plus ``identity``."""

    is_authenticated = True

    @property
    def identity(self) -> str:
        return str(self["identity"])


def test_a_served_run_takes_identity_from_the_authenticated_user(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(IDENTITY_ENV, raising=False)
    user = _User(identity="u1", retold_agent_id="planner")
    p = served_principal({"queries": ["x"], "session_id": "s9"}, {"langgraph_auth_user": user})
    assert (p.agent_id, p.user_id, p.session_id) == ("planner", "u1", "s9")
    with pytest.raises(IdentityError, match="user_id"):
        served_principal({"user_id": "u2"}, {"langgraph_auth_user": user})
    with pytest.raises(IdentityError, match="agent_id"):
        served_principal({"agent_id": "other"}, {"langgraph_auth_user": user})
    monkeypatch.setenv("RETOLD_AGENT_ID", "planner")
    p = served_principal({}, {"langgraph_auth_user": _User(identity="u3")})
    assert (p.agent_id, p.user_id) == ("planner", "u3")


def test_without_an_authenticated_user_identity_needs_local_development_mode(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv(IDENTITY_ENV, raising=False)
    named = {"agent_id": "planner", "user_id": "u1"}
    for configurable in ({}, {"langgraph_auth_user": None}, {"langgraph_auth_user": StudioUser("dev")}):
        with pytest.raises(IdentityError, match=IDENTITY_ENV):
            served_principal(named, configurable)
    monkeypatch.setenv(IDENTITY_ENV, "input")
    assert served_principal(named, {}).user_id == "u1"
    with pytest.raises(IdentityError, match="both"):
        served_principal({"agent_id": "planner"}, {})


async def test_a_graph_run_by_a_server_refuses_input_identity_outside_development_mode(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(IDENTITY_ENV, raising=False)
    payload = {"agent_id": "planner", "user_id": "u1", "queries": ["concise"]}
    served = {"configurable": {"langgraph_request_id": "r1", "langgraph_auth_user": None}}
    with pytest.raises(IdentityError):
        await world.rt.search_graph.ainvoke(payload, served)
    authenticated = _User(identity="u1", retold_agent_id="planner")
    user = {"configurable": {"langgraph_request_id": "r1", "langgraph_auth_user": authenticated}}
    out = await world.rt.search_graph.ainvoke({"queries": ["concise"]}, user)
    assert out["principal"]["user_id"] == "u1"
