"""RetoldStore in a run a LangGraph server serves, outside any graph, and with TTLs a date cannot hold.

* A served run acts as the server's authenticated user (``langgraph_auth_user``), exactly as the
  middleware and tools do: a run whose config or context names another user, or a namespace of
  another user, is refused with :class:`StoreIdentityError`; so is a served run nobody is
  authenticated on, outside ``RETOLD_GRAPH_IDENTITY=input``. In-process runs are unchanged.
* ``list_namespaces`` inside a run lists only what that run's user may read.
* A ttl whose expiry no date can hold is refused before anything is written; refresh-on-read
  caps the expiry instead of overflowing.
* Store calls from a LangChain runnable or ``@tool`` invoked outside a graph are the
  outside-a-run case.

The class property at the end sweeps every way an authenticated caller can name a user
(``user_id``, ``langgraph_user_id``, the context, the namespace) over every op, sync and async,
on both backends: the caller never reads, lists, overwrites or deletes another user's items.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langchain_core.runnables import RunnableLambda
from langchain_core.tools import tool
from langgraph.graph import END, START, StateGraph
from langgraph.runtime import Runtime
from typing_extensions import TypedDict

import retold
from retold.adapters.langgraph_store import RetoldStore, StoreIdentityError, StoreRefusedError
from retold.adapters.langgraph_values import LAST_EXPIRY, max_ttl_minutes
from retold.errors import IdentityError
from retold.graph_nodes.identity import IDENTITY_ENV
from retold.models import Principal, Scope
from retold.testing import FakeClock, FakeEmbedder, FakeJudge

from .slow import examples

A, B = ("memories", "u1"), ("memories", "u2")
B_LABELLED = ("memories", "u2", "medical_clinic")
PROJECT = ("memories", "project", "acme")


class AuthUser(dict[str, Any]):
    """A user as LangGraph's server hands it to a run: dict access plus ``identity``."""

    is_authenticated = True

    @property
    def identity(self) -> str:
        return str(self["identity"])


def served(user: str | None = "u1", **configurable: Any) -> dict[str, Any]:
    """A run's config as a LangGraph server stamps it (``user`` None: nobody authenticated)."""
    auth = AuthUser(identity=user, retold_agent_id="planner") if user else None
    return {
        "configurable": {
            "langgraph_request_id": "req-1",
            "langgraph_auth_user": auth,
            "thread_id": "t-served",
            **configurable,
        }
    }


@pytest.fixture(autouse=True)
def _no_development_mode(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(IDENTITY_ENV, raising=False)


@pytest.fixture
async def rt(store_location: Callable[[str], Path | str]) -> AsyncIterator[retold.Runtime]:
    runtime = await retold.open_runtime(
        store_location("served.sqlite"), embedder=FakeEmbedder(), judge=FakeJudge(), clock=FakeClock()
    )
    for user in ("u1", "u2"):
        await runtime.host.provision_user(user)
        await runtime.host.grant("planner", Scope("user", user), read=True, write=True)
    await runtime.host.grant("planner", Scope("project", "acme"), read=True, write=True)
    yield runtime
    await runtime.close()


@pytest.fixture
def store(rt: retold.Runtime) -> RetoldStore:
    return RetoldStore(rt, agent_id="planner")


class State(TypedDict, total=False):
    op: str
    namespace: list[str]
    key: str
    sync: bool
    out: Any


def _do(store: Any, state: State) -> Any:
    """One store op from inside a node; a refusal comes back as its structured dict."""
    ns, key, op = tuple(state.get("namespace") or A), state.get("key", "k"), state["op"]
    value = {"content": f"Written by the run into {'/'.join(ns)} @run."}
    try:
        if op == "get":
            item = store.get(ns, key)
            return item.value if item else None
        if op == "search":
            return [i.value for i in store.search(ns)]
        if op == "query":
            return [i.value for i in store.search(ns, query="clinic appointment note")]
        if op == "put":
            store.put(ns, key, value)
            return "put"
        if op == "delete":
            store.delete(ns, key)
            return "deleted"
        if op == "list":
            return [list(n) for n in store.list_namespaces()]
        if op == "profile":
            return store.profile("u2")
    except StoreRefusedError as refused:
        return refused.as_dict()
    raise AssertionError(op)


async def _ado(store: Any, state: State) -> Any:
    ns, key, op = tuple(state.get("namespace") or A), state.get("key", "k"), state["op"]
    value = {"content": f"Written by the run into {'/'.join(ns)} @run."}
    try:
        if op == "get":
            item = await store.aget(ns, key)
            return item.value if item else None
        if op == "search":
            return [i.value for i in await store.asearch(ns)]
        if op == "query":
            return [i.value for i in await store.asearch(ns, query="clinic appointment note")]
        if op == "put":
            await store.aput(ns, key, value)
            return "put"
        if op == "delete":
            await store.adelete(ns, key)
            return "deleted"
        if op == "list":
            return [list(n) for n in await store.alist_namespaces()]
        if op == "profile":
            return await store.aprofile("u2")
    except StoreRefusedError as refused:
        return refused.as_dict()
    raise AssertionError(op)


def node_graph(store: RetoldStore) -> Any:
    """A graph whose one node runs ``state["op"]`` through ``runtime.store`` (sync in a worker thread)."""

    async def anode(state: State, runtime: Runtime[Any]) -> dict[str, Any]:
        return {"out": await _ado(runtime.store, state)}

    def snode(state: State, runtime: Runtime[Any]) -> dict[str, Any]:
        return {"out": _do(runtime.store, state)}

    def route(state: State) -> str:
        return "sync" if state.get("sync") else "async"

    builder = StateGraph(State, context_schema=dict)  # type: ignore[arg-type]
    builder.add_node("async", anode)
    builder.add_node("sync", snode)
    builder.add_conditional_edges(START, route, ["async", "sync"])
    builder.add_edge("async", END)
    builder.add_edge("sync", END)
    return builder.compile(store=store)


async def run(graph: Any, state: State, config: dict[str, Any], context: Any = None) -> Any:
    out = await graph.ainvoke(state, config, context=context)
    return out["out"]


async def seed_b(store: RetoldStore, rt: retold.Runtime) -> str:
    """B's items (one under a label B chose) and a record B's tools wrote; returns its id."""
    await store.aput(B, "b", {"content": "Dentist appointment on Friday @u2."})
    await store.aput(B_LABELLED, "c", {"content": "Clinic appointment note for the knee @u2."})
    p = await rt.hooks.on_session_start(Principal("planner", "u2", "s-b"))
    written = await rt.tools.call(
        p, "memory_write", {"type": "episodic", "content": "Clinic appointment note kept by u2 @u2."}
    )
    assert written["ok"], written
    return str(written["record_id"])


async def b_state(rt: retold.Runtime) -> list[Any]:
    """Everything of B's an attacker could change: B's item rows and B's records."""
    items = await rt.store.db.fetchall(
        "SELECT namespace, key, value, record_id, updated_at FROM store_items "
        "WHERE scope_kind = 'user' AND scope_id = 'u2' ORDER BY namespace, key"
    )
    records = await rt.store.db.fetchall(
        "SELECT id, status, content, expires_at FROM records "
        "WHERE scope_kind = 'user' AND scope_id = 'u2' ORDER BY id"
    )
    return [tuple(r) for r in items] + [tuple(r) for r in records]


# --- item 2: a served run acts as its authenticated user --------------------------------------


@pytest.mark.parametrize("sync", [False, True], ids=["async", "sync"])
async def test_a_served_run_naming_another_user_is_refused_and_changes_nothing(
    store: RetoldStore, rt: retold.Runtime, sync: bool
) -> None:
    record_b = await seed_b(store, rt)
    before = await b_state(rt)
    graph = node_graph(store)
    ways = [  # the three ways of issue 45: user_id, langgraph_user_id, and only the namespace
        (served(user_id="u2"), A, None),
        (served(langgraph_user_id="u2"), A, None),
        (served(), B, None),
        (served(), B_LABELLED, None),
        (served(), A, {"user_id": "u2"}),  # the run context naming B
    ]
    for config, ns, context in ways:
        for op, key in (("get", "b"), ("get", record_b), ("search", "b"), ("query", "b"),
                        ("put", "b"), ("delete", "b"), ("delete", record_b), ("list", "b")):  # fmt: skip
            if op == "list" and ns != A:
                continue  # listing takes no namespace: the namespace ways are listed below
            state: State = {"op": op, "namespace": list(ns), "key": key, "sync": sync}
            out = await run(graph, state, config, context)
            assert isinstance(out, dict) and out.get("error") == "identity_mismatch", (op, ns, config, out)
    assert await run(graph, {"op": "list", "sync": sync}, served()) == []  # u1 has nothing yet
    assert await b_state(rt) == before
    # A's own namespace, with or without naming A, works as A.
    for config in (served(), served(user_id="u1"), served(langgraph_user_id="u1")):
        assert (
            await run(graph, {"op": "put", "namespace": list(A), "key": "a", "sync": sync}, config) == "put"
        )
    out = await run(graph, {"op": "get", "namespace": list(A), "key": "a", "sync": sync}, served())
    assert out == {"content": "Written by the run into memories/u1 @run."}
    row = await rt.store.store_item_row('["memories","u1"]', "a")
    assert row is not None and row.user_id == "u1"


async def test_the_refusal_is_the_stores_structured_identity_error(store: RetoldStore) -> None:
    async def node(state: State, runtime: Runtime[Any]) -> dict[str, Any]:
        await runtime.store.aget(B, "b")  # type: ignore[union-attr]
        return {}

    graph = StateGraph(State).add_node("n", node).add_edge(START, "n").add_edge("n", END).compile(store=store)
    with pytest.raises(StoreIdentityError) as refused:
        await graph.ainvoke({}, served())
    assert isinstance(refused.value, StoreRefusedError) and isinstance(refused.value, IdentityError)
    assert refused.value.as_dict()["error"] == "identity_mismatch" and "memories" in refused.value.message


async def test_a_served_run_without_an_authenticated_user_needs_development_mode(
    store: RetoldStore, rt: retold.Runtime, monkeypatch: pytest.MonkeyPatch
) -> None:
    await seed_b(store, rt)
    graph = node_graph(store)
    for config in (served(None), served(None, user_id="u2")):
        out = await run(graph, {"op": "get", "namespace": list(B), "key": "b"}, config)
        assert out["error"] == "unauthenticated" and IDENTITY_ENV in out["message"]
    monkeypatch.setenv(IDENTITY_ENV, "input")  # local development: the run names its user, as in-process
    out = await run(graph, {"op": "get", "namespace": list(B), "key": "b"}, served(None, user_id="u2"))
    assert out == {"content": "Dentist appointment on Friday @u2."}
    out = await run(graph, {"op": "get", "namespace": list(B), "key": "b"}, served(None, user_id="u1"))
    assert out is None  # another user's namespace reads as empty, as in any run naming its user


async def test_in_process_runs_are_unchanged(store: RetoldStore, rt: retold.Runtime) -> None:
    await seed_b(store, rt)
    graph = node_graph(store)
    plain = {"configurable": {"thread_id": "t", "user_id": "u1"}}
    assert await run(graph, {"op": "get", "namespace": list(B), "key": "b"}, plain) is None
    out = await run(graph, {"op": "put", "namespace": list(B), "key": "b"}, plain)
    assert out["error"] == "scope_not_writable"
    # A run naming no user: the namespace names it (the host's own code is the caller).
    out = await run(
        graph, {"op": "get", "namespace": list(B), "key": "b"}, {"configurable": {"thread_id": "t"}}
    )
    assert out == {"content": "Dentist appointment on Friday @u2."}


async def test_the_profile_in_a_served_run_is_the_authenticated_users(store: RetoldStore) -> None:
    graph = node_graph(store)
    assert await run(graph, {"op": "profile"}, served()) == ""  # u2's profile asked for by u1: empty
    out = await run(graph, {"op": "profile"}, served(user_id="u2"))
    assert out["error"] == "identity_mismatch"


# --- item 3: list_namespaces inside a run --------------------------------------------------------


async def test_list_namespaces_inside_a_run_shows_only_what_its_user_may_read(
    store: RetoldStore, rt: retold.Runtime
) -> None:
    await seed_b(store, rt)
    await store.aput((*A, "travel"), "k", {"content": "Window seats @u1."})
    await RetoldStore(rt, agent_id="planner", default_user_id="u2").aput(
        (*PROJECT, "runbook"), "k", {"content": "Deploys are on Tuesdays."}
    )  # a project label B chose: the project is A's to read too
    graph = node_graph(store)
    mine = [list(A), [*A, "travel"], list(PROJECT), [*PROJECT, "runbook"]]
    for config in (served(), {"configurable": {"thread_id": "t", "user_id": "u1"}}):
        for sync in (False, True):
            listed = await run(graph, {"op": "list", "sync": sync}, config)
            assert sorted(listed) == sorted(mine), (config, listed)
            assert not any("u2" in ns or "medical_clinic" in ns for ns in listed)
    # Outside a run (host code, an operator): every namespace of the scopes the agent may read.
    everything = await store.alist_namespaces()
    assert {B, B_LABELLED, A, PROJECT} <= set(everything)


async def test_each_served_user_lists_only_their_own_namespaces(rt: retold.Runtime) -> None:
    await rt.host.grant("solo", Scope("user", "u1"), read=True, write=True)
    await rt.host.grant("solo", Scope("user", "u2"), read=True, write=True)
    store = RetoldStore(rt, agent_id="solo")
    await store.aput(B, "b", {"content": "Only u2 @u2."})
    await store.aput(A, "a", {"content": "Only u1 @u1."})
    graph = node_graph(store)
    assert await run(graph, {"op": "list"}, served()) == [list(A)]
    assert await run(graph, {"op": "list"}, served("u2")) == [list(B)]


# --- item 4: a ttl no date can hold ----------------------------------------------------------


async def test_a_ttl_past_year_9999_is_refused_before_anything_is_written(
    store: RetoldStore, rt: retold.Runtime
) -> None:
    for ttl in (5e9, 5.256e9, max_ttl_minutes(rt.clock.now()) + 1, 10**400, float("inf"), float("nan")):
        with pytest.raises(StoreRefusedError) as refused:
            await store.aput(A, "k", {"content": "Remember this for a very long time."}, ttl=ttl)
        assert refused.value.code == "invalid_input" and "ttl" in refused.value.message
    assert await rt.store.db.fetchval("SELECT count(*) FROM records") == 0
    assert await rt.store.db.fetchval("SELECT count(*) FROM store_items") == 0
    default = RetoldStore(rt, agent_id="planner", ttl_config={"default_ttl": 5e9})
    with pytest.raises(StoreRefusedError):
        await default.aput(A, "k", {"content": "Remember this for a very long time."})
    assert await rt.store.db.fetchval("SELECT count(*) FROM records") == 0


async def test_the_longest_ttl_is_kept_and_refresh_on_read_caps_the_expiry(
    store: RetoldStore, rt: retold.Runtime
) -> None:
    clock: FakeClock = rt.clock  # type: ignore[assignment]
    longest = max_ttl_minutes(clock.now())
    await store.aput(A, "k", {"content": "Remember this for a very long time."}, ttl=longest)
    row = await rt.store.store_item_row('["memories","u1"]', "k")
    assert row is not None and row.expires_at == LAST_EXPIRY
    record = await rt.store.get_record(row.record_id)  # type: ignore[arg-type]
    assert record is not None and record.expires_at is not None and record.expires_at <= LAST_EXPIRY
    # An item without a record (index=False) lives as long as its ttl says: read it a year on.
    await store.aput(A, "raw", {"note": "kept for ages"}, index=False, ttl=longest)
    clock.advance(timedelta(days=400))  # the same ttl from this later now would pass year 9999
    item = await store.aget(A, "raw")  # refresh on read: capped, never an OverflowError
    assert item is not None and item.value == {"note": "kept for ages"}
    assert "raw" in [i.key for i in await store.asearch(A)]  # the listing's refresh too
    row = await rt.store.store_item_row('["memories","u1"]', "raw")
    assert row is not None and row.expires_at == LAST_EXPIRY
    await store.aget(A, "k")  # a keyed item's refresh (its record may have expired): no error either


# --- item 5: outside a graph --------------------------------------------------------------------


async def test_store_calls_from_a_runnable_or_tool_outside_a_graph_are_outside_a_run(
    store: RetoldStore,
) -> None:
    await store.aput(A, "k", {"content": "Plays the oboe @u1."})

    async def read(_: Any) -> Any:
        item = await store.aget(A, "k")
        return item.value if item else None

    def read_sync(_: Any) -> Any:
        item = store.get(A, "k")
        return item.value if item else None

    @tool
    async def recall_fact() -> str:
        """Recall the stored fact."""
        item = await store.aget(A, "k")
        return item.value["content"] if item else "nothing"

    expected = {"content": "Plays the oboe @u1."}
    assert await RunnableLambda(read).ainvoke(None) == expected
    assert await RunnableLambda(read).ainvoke(None, {"configurable": {"thread_id": "x"}}) == expected
    assert await asyncio.to_thread(RunnableLambda(read_sync).invoke, None) == expected
    assert await recall_fact.ainvoke({}) == "Plays the oboe @u1."
    # A config that names a user still counts, as before: another user's namespace reads empty.
    assert await RunnableLambda(read).ainvoke(None, {"configurable": {"user_id": "u2"}}) is None

    async def listing(_: Any) -> Any:
        return await store.alist_namespaces()

    assert await RunnableLambda(listing).ainvoke(None) == [A]  # the operator's view (docs/integrations.md)


# --- the class: any way an authenticated caller names a user ---------------------------------------

NAMES = st.sampled_from([None, "", "u1", "u2"])
NAMESPACES = st.sampled_from([A, (*A, "x"), B, B_LABELLED, PROJECT])
OPS = st.sampled_from(["get", "get_record", "search", "query", "put", "delete", "delete_record", "list"])


@settings(
    max_examples=examples(40),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    user_id=NAMES, langgraph_user_id=NAMES, context_user=NAMES, namespace=NAMESPACES, op=OPS,
    key=st.sampled_from(["a", "b", "c"]), sync=st.booleans(),
)  # fmt: skip
async def test_an_authenticated_caller_never_reaches_another_users_items(
    world: tuple[RetoldStore, retold.Runtime, Any, str],
    user_id: str | None,
    langgraph_user_id: str | None,
    context_user: str | None,
    namespace: tuple[str, ...],
    op: str,
    key: str,
    sync: bool,
) -> None:
    _, rt, graph, record_b = world
    before = await b_state(rt)
    names = {"user_id": user_id, "langgraph_user_id": langgraph_user_id}
    config = served(**{k: v for k, v in names.items() if v is not None})
    context = {"user_id": context_user} if context_user is not None else None
    actual = {"get_record": "get", "delete_record": "delete"}.get(op, op)
    state: State = {
        "op": actual,
        "namespace": list(namespace),
        "key": record_b if op.endswith("_record") else key,
        "sync": sync,
    }
    out = await run(graph, state, config, context)
    assert await b_state(rt) == before  # nothing of B's overwritten or deleted
    names_b = "u2" in (user_id, langgraph_user_id, context_user)
    namespace_b = len(namespace) > 1 and namespace[1] == "u2"
    refused = isinstance(out, dict) and out.get("error") == "identity_mismatch"
    if names_b or (namespace_b and actual != "list"):
        assert refused, (names, context, namespace, op, out)
        return
    assert not refused, (names, context, namespace, op, out)
    assert "@u2" not in repr(out) and "medical_clinic" not in repr(out), out  # nothing of B's read
    if actual == "list":
        assert all(ns[1] != "u2" for ns in out), out  # nor B's id or labels listed


@pytest.fixture
async def world(store: RetoldStore, rt: retold.Runtime) -> tuple[RetoldStore, retold.Runtime, Any, str]:
    record_b = await seed_b(store, rt)
    return store, rt, node_graph(store), record_b
