"""RetoldStore as a LangGraph BaseStore: conformance with InMemoryStore's behaviour, retold's rules
(scopes, grants, write path, audit, erasure), loops and threads, on both backends."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from langgraph.store.base import BaseStore, Item, SearchItem

import retold
from retold.adapters.langgraph_store import (
    RESERVED_KEY,
    NamespaceMap,
    RetoldSearchItem,
    RetoldStore,
    StoreArgumentError,
    StoreNamespaceError,
    StoreRefusedError,
)
from retold.adapters.portal import RuntimePortal
from retold.models import Principal, Scope
from retold.testing import FakeClock, FakeEmbedder, FakeJudge

U1, U2 = ("memories", "u1"), ("memories", "u2")
PROJECT = ("memories", "project", "acme")


@pytest.fixture
async def rt(store_location: Callable[[str], Path | str]) -> AsyncIterator[retold.Runtime]:
    runtime = await retold.open_runtime(
        store_location("store.sqlite"), embedder=FakeEmbedder(), judge=FakeJudge(), clock=FakeClock()
    )
    for user in ("u1", "u2"):
        await runtime.host.provision_user(user)
        await runtime.host.grant("planner", Scope("user", user), read=True, write=True)
    yield runtime
    await runtime.close()


@pytest.fixture
def store(rt: retold.Runtime) -> RetoldStore:
    return RetoldStore(rt, agent_id="planner")


async def test_it_is_a_langgraph_base_store_and_round_trips_values_exactly(store: RetoldStore) -> None:
    assert isinstance(store, BaseStore)
    value = {"content": "Prefers window seats on long flights.", "tags": ["travel"], "n": 3, "x": None}
    await store.aput(U1, "seat", value)
    item = await store.aget(U1, "seat")
    assert isinstance(item, Item)
    assert item.value == value and item.key == "seat" and item.namespace == U1
    assert item.created_at <= item.updated_at
    assert await store.aget(U1, "missing") is None


async def test_overwrite_supersedes_the_keys_record_and_delete_forgets_it(
    store: RetoldStore, rt: retold.Runtime
) -> None:
    await store.aput(U1, "k", {"content": "Lives in Oslo."})
    first = await rt.store.store_item_row('["memories","u1"]', "k")
    assert first is not None and first.record_id
    await store.aput(U1, "k", {"content": "Lives in Bergen now."})
    second = await rt.store.store_item_row('["memories","u1"]', "k")
    assert second is not None and second.record_id != first.record_id
    assert (await rt.store.get_record(first.record_id)).status == "superseded"  # type: ignore[union-attr]
    assert (await store.aget(U1, "k")).value == {"content": "Lives in Bergen now."}  # type: ignore[union-attr]
    assert second.created_at == first.created_at
    await store.adelete(U1, "k")
    assert await store.aget(U1, "k") is None
    assert (await rt.store.get_record(second.record_id)).status == "deleted"  # type: ignore[union-attr, arg-type]
    kinds = [e["kind"] for e in await rt.store.events(limit=100)]
    assert kinds.count("store.item_put") == 2 and "store.item_deleted" in kinds
    assert "record.deleted" in kinds
    await store.adelete(U1, "never-there")  # a missing key is a no-op, as in InMemoryStore


async def test_two_keys_sharing_one_record_stay_readable_and_delete_keeps_the_other(
    store: RetoldStore, rt: retold.Runtime
) -> None:
    await store.aput(U1, "a", {"content": "Allergic to peanuts."})
    await store.aput(U1, "b", {"content": "Allergic to peanuts."})
    a = await rt.store.store_item_row('["memories","u1"]', "a")
    b = await rt.store.store_item_row('["memories","u1"]', "b")
    assert a is not None and b is not None and a.record_id == b.record_id  # deduplicated
    await store.adelete(U1, "a")
    assert await store.aget(U1, "a") is None
    assert (await store.aget(U1, "b")).value == {"content": "Allergic to peanuts."}  # type: ignore[union-attr]
    assert (await rt.store.get_record(b.record_id)).status in ("provisional", "confirmed")  # type: ignore[union-attr, arg-type]


async def test_search_without_query_filters_orders_and_pages_like_in_memory_store(
    store: RetoldStore, rt: retold.Runtime
) -> None:
    clock: FakeClock = rt.clock  # type: ignore[assignment]
    for i in range(5):
        await store.aput((*U1, "notes"), f"n{i}", {"content": f"Note number {i} about topic {i}", "i": i})
        clock.advance(timedelta(seconds=1))
    items = await store.asearch((*U1, "notes"))
    assert [i.key for i in items] == ["n4", "n3", "n2", "n1", "n0"]
    assert all(isinstance(i, SearchItem) and i.score is None for i in items)
    assert [i.key for i in await store.asearch((*U1, "notes"), limit=2, offset=1)] == ["n3", "n2"]
    assert [i.key for i in await store.asearch((*U1, "notes"), filter={"i": 2})] == ["n2"]
    assert [i.key for i in await store.asearch((*U1, "notes"), filter={"i": {"$gte": 3}})] == ["n4", "n3"]
    assert [i.key for i in await store.asearch((*U1, "notes"), filter={"i": {"$ne": 0}}, offset=3)] == ["n1"]
    with pytest.raises(StoreArgumentError):
        await store.asearch(U1, filter={"i": {"$regex": "x"}})
    assert await store.asearch((*U1, "other")) == []


async def test_query_search_goes_through_the_search_graph_with_scores_and_explanations(
    store: RetoldStore, rt: retold.Runtime
) -> None:
    await store.aput(U1, "food", {"content": "Loves spicy Sichuan food."})
    await store.aput(U1, "pet", {"content": "Has a cat named Miso."})
    hits = await store.asearch(U1, query="spicy Sichuan food")
    assert hits and hits[0].key == "food" and hits[0].value == {"content": "Loves spicy Sichuan food."}
    top = hits[0]
    assert isinstance(top, RetoldSearchItem) and isinstance(top.score, float)
    assert top.explanation and top.explanation["record_id"] == top.record_id
    assert (await rt.store.latest_search_log())["agent_id"] == "planner"  # type: ignore[index]
    assert await store.asearch(U2, query="spicy Sichuan food") == []


async def test_records_other_surfaces_wrote_appear_under_the_scope_root(
    store: RetoldStore, rt: retold.Runtime
) -> None:
    p = Principal("planner", "u1", "s9")
    result = await rt.tools.call(p, "memory_write", {"type": "episodic", "content": "Visited Kyoto in May."})
    assert result["ok"], result
    listed = await store.asearch(U1)
    assert [i.key for i in listed] == [result["record_id"]]
    assert listed[0].value["content"] == "Visited Kyoto in May."
    assert listed[0].value[RESERVED_KEY]["source_kind"] == "agent_inference"
    got = await store.aget(U1, result["record_id"])
    assert got is not None and got.value["content"] == "Visited Kyoto in May."
    assert await store.aget(U2, result["record_id"]) is None
    hits = await store.asearch(U1, query="Kyoto May")
    assert [h.key for h in hits] == [result["record_id"]]
    assert await store.asearch((*U1, "deeper")) == []
    # Updating it by its id supersedes that record (no duplicate); deleting the key forgets it.
    await store.aput(U1, result["record_id"], {"content": "Visited Kyoto in June."})
    assert (await rt.store.get_record(result["record_id"])).status == "superseded"  # type: ignore[union-attr]
    assert [i.value for i in await store.asearch(U1)] == [{"content": "Visited Kyoto in June."}]
    other = await rt.tools.call(p, "memory_write", {"type": "episodic", "content": "Owns a kayak."})
    await store.adelete(U1, other["record_id"])
    assert (await rt.store.get_record(other["record_id"])).status == "deleted"  # type: ignore[union-attr]


async def test_refusals_carry_the_tools_shape_and_change_nothing(
    store: RetoldStore, rt: retold.Runtime
) -> None:
    await rt.host.grant("planner", Scope("user", "u2"), read=True, write=False)
    with pytest.raises(StoreRefusedError) as refused:
        await store.aput(U2, "k", {"content": "x"})
    assert (
        refused.value.as_dict()["error"] == "scope_not_writable"
        and refused.value.code == "scope_not_writable"
    )
    with pytest.raises(StoreNamespaceError, match="maps to no retold scope"):
        await store.aput(("elsewhere",), "k", {"content": "x"})
    with pytest.raises(StoreRefusedError) as big:
        await store.aput(U1, "k", {"content": "x" * 5000})
    assert big.value.code == "invalid_input"
    for bad in ({RESERVED_KEY: 1, "content": "x"}, {"content": float("nan")}, {"content": object()}):
        with pytest.raises(StoreRefusedError):
            await store.aput(U1, "k", bad)
    with pytest.raises(StoreRefusedError):
        await store.aput(U1, "", {"content": "x"})
    assert await store.aget(U1, "k") is None
    assert await rt.store.db.fetchval("SELECT count(*) FROM store_items") == 0
    assert await rt.store.db.fetchval("SELECT count(*) FROM records") == 0


async def test_an_unreadable_namespace_answers_like_an_empty_one(
    store: RetoldStore, rt: retold.Runtime
) -> None:
    await store.aput(U1, "k", {"content": "Secret plans for u1."})
    other = RetoldStore(rt, agent_id="stranger")
    assert await other.aget(U1, "k") is None
    assert await other.asearch(U1) == []
    assert await other.asearch(U1, query="secret plans") == []
    assert await other.alist_namespaces() == []
    with pytest.raises(StoreRefusedError) as refused:
        await other.adelete(U1, "k")
    assert refused.value.code == "scope_not_writable"
    assert (await store.aget(U1, "k")) is not None


async def test_project_namespaces_need_a_user_and_a_project_grant(rt: retold.Runtime) -> None:
    await rt.host.grant("planner", Scope("project", "acme"), read=True, write=True)
    anonymous = RetoldStore(rt, agent_id="planner")
    with pytest.raises(StoreNamespaceError, match="user"):
        await anonymous.aput(PROJECT, "k", {"content": "Deploys on Fridays are banned."})
    store = RetoldStore(rt, agent_id="planner", default_user_id="u1")
    await store.aput(PROJECT, "k", {"content": "Deploys on Fridays are banned."})
    row = await rt.store.store_item_row('["memories","project","acme"]', "k")
    assert row is not None and row.scope == Scope("project", "acme") and row.user_id == "u1"
    assert (await RetoldStore(rt, agent_id="planner", default_user_id="u2").aget(PROJECT, "k")) is not None


async def test_list_namespaces_prefix_suffix_depth_and_paging(store: RetoldStore, rt: retold.Runtime) -> None:
    for ns in (U1, (*U1, "a"), (*U1, "a", "b"), (*U2, "c")):
        await store.aput(ns, "k", {"content": f"something in {'/'.join(ns)}"})
    assert await store.alist_namespaces() == sorted([U1, (*U1, "a"), (*U1, "a", "b"), U2, (*U2, "c")])
    assert await store.alist_namespaces(prefix=U1) == [U1, (*U1, "a"), (*U1, "a", "b")]
    assert await store.alist_namespaces(suffix=("a",)) == [(*U1, "a")]
    assert await store.alist_namespaces(prefix=("memories", "*", "c")) == [(*U2, "c")]
    assert await store.alist_namespaces(max_depth=2) == [U1, U2]
    assert await store.alist_namespaces(limit=2, offset=1) == [(*U1, "a"), (*U1, "a", "b")]


async def test_index_false_is_listable_not_searchable_and_index_fields_choose_the_text(
    store: RetoldStore, rt: retold.Runtime
) -> None:
    await store.aput(U1, "raw", {"content": "Quarterly budget spreadsheet"}, index=False)
    assert (await store.aget(U1, "raw")) is not None
    assert (await rt.store.store_item_row('["memories","u1"]', "raw")).record_id is None  # type: ignore[union-attr]
    assert await store.asearch(U1, query="quarterly budget spreadsheet") == []
    assert [i.key for i in await store.asearch(U1)] == ["raw"]
    await store.aput(U1, "doc", {"title": "Trip", "body": {"text": "Hiking in Norway"}}, index=["body.text"])
    row = await rt.store.store_item_row('["memories","u1"]', "doc")
    assert (await rt.store.get_record(row.record_id)).content == "Hiking in Norway"  # type: ignore[union-attr, arg-type]
    await store.aput(U1, "json", {"a": 1, "b": "two"})
    row = await rt.store.store_item_row('["memories","u1"]', "json")
    assert json.loads((await rt.store.get_record(row.record_id)).content) == {"a": 1, "b": "two"}  # type: ignore[union-attr, arg-type]


async def test_ttl_expires_the_item_and_its_record_and_reads_refresh_it(
    store: RetoldStore, rt: retold.Runtime
) -> None:
    clock: FakeClock = rt.clock  # type: ignore[assignment]
    await store.aput(U1, "t", {"content": "Temporary door code 4412."}, ttl=10)
    row = await rt.store.store_item_row('["memories","u1"]', "t")
    record = await rt.store.get_record(row.record_id)  # type: ignore[union-attr, arg-type]
    assert record is not None and record.expires_at == row.expires_at  # type: ignore[union-attr]
    clock.advance(timedelta(minutes=8))
    assert await store.aget(U1, "t") is not None  # refreshes: ten more minutes
    clock.advance(timedelta(minutes=8))
    assert await store.aget(U1, "t", refresh_ttl=False) is not None
    clock.advance(timedelta(minutes=3))
    assert await store.aget(U1, "t") is None
    assert await store.asearch(U1, query="door code") == []


async def test_evidence_makes_a_user_statement_checked_against_the_session(
    store: RetoldStore, rt: retold.Runtime
) -> None:
    p = await rt.hooks.on_session_start(Principal("planner", "u1", "default"))
    await rt.hooks.on_turn(p, "user", "I am vegetarian since 2019.")
    await store.aput(
        U1, "diet", {"content": "Is vegetarian since 2019.", "evidence": "I am vegetarian since 2019"}
    )
    row = await rt.store.store_item_row('["memories","u1"]', "diet")
    record = await rt.store.get_record(row.record_id)  # type: ignore[union-attr, arg-type]
    assert record is not None and record.source_kind == "user_statement" and record.status == "confirmed"
    with pytest.raises(StoreRefusedError):  # an inference cannot displace the user's own statement
        await store.aput(U1, "diet", {"content": "Eats fish sometimes."})
    assert (await store.aget(U1, "diet")).value["content"] == "Is vegetarian since 2019."  # type: ignore[union-attr]


async def test_erasing_the_user_leaves_no_store_value_behind(store: RetoldStore, rt: retold.Runtime) -> None:
    await store.aput(U1, "k", {"content": "Owns a red bicycle.", "note": "PRIVATE-MARKER"})
    await store.aput(U1, "raw", {"note": "PRIVATE-MARKER-2"}, index=False)
    await store.aput(U2, "k", {"content": "Owns a blue car."})
    report = await rt.ops.erase(user="u1", reason="request")
    assert report.store_items == 2
    rows = await rt.store.db.fetchall("SELECT namespace, value FROM store_items")
    assert [r[0] for r in rows] == ['["memories","u2"]']
    assert await store.aget(U1, "k") is None
    assert [f for f in (await rt.ops.check()).findings if f.kind.startswith("store_item")] == []
    assert "PRIVATE-MARKER" not in json.dumps(
        [dict(r) for r in await rt.store.db.fetchall("SELECT * FROM events")]
    )
    if rt.store.dialect == "sqlite":  # compacted: no freed page or WAL frame keeps the value
        path = Path(rt.store.path)
        files = b"".join(f.read_bytes() for f in path.parent.glob(path.name + "*") if f.is_file())
        assert b"PRIVATE-MARKER" not in files and b"red bicycle" not in files


async def test_erasing_a_record_removes_the_items_carrying_it(store: RetoldStore, rt: retold.Runtime) -> None:
    await store.aput(U1, "k", {"content": "Favourite colour is teal."})
    row = await rt.store.store_item_row('["memories","u1"]', "k")
    await rt.ops.erase(record=row.record_id, reason="request")  # type: ignore[union-attr]
    assert await rt.store.store_item_row('["memories","u1"]', "k") is None


async def test_sync_calls_work_from_threads_and_refuse_on_the_owning_loop(store: RetoldStore) -> None:
    await store.aput(U1, "k", {"content": "Speaks Norwegian."})
    with pytest.raises(RuntimeError, match="would block"):
        store.get(U1, "k")
    results: list[Any] = []

    def worker() -> None:
        store.put(U1, "t", {"content": "Plays the cello."})
        results.append(store.get(U1, "t"))
        results.append(store.search((*U1, "x")))
        results.append(store.list_namespaces())
        store.delete(U1, "t")
        results.append(store.get(U1, "t"))

    await asyncio.to_thread(worker)
    assert results[0].value == {"content": "Plays the cello."} and results[1] == [] and U1 in results[2]
    assert results[3] is None


async def test_other_loops_are_bridged_to_the_owner(store: RetoldStore) -> None:
    await store.aput(U1, "k", {"content": "Runs marathons."})
    out: list[Any] = []

    def other_loop() -> None:
        async def main() -> None:
            out.append(await store.aget(U1, "k"))
            out.append(store.get(U1, "k"))  # sync on another loop: handed to the owner, not refused
            await store.aput(U1, "k2", {"content": "Runs ultramarathons."})
            out.append(await store.abatch([__import__("langgraph.store.base").store.base.GetOp(U1, "k2")]))

        asyncio.run(main())

    await asyncio.to_thread(other_loop)
    assert out[0].value == out[1].value == {"content": "Runs marathons."}
    assert out[2][0].value == {"content": "Runs ultramarathons."}


def test_a_portal_runtime_serves_a_store_built_in_sync_code(tmp_path: Path) -> None:
    with RuntimePortal.open(tmp_path / "p.sqlite", embedder=FakeEmbedder(), judge=FakeJudge()) as portal:
        rt = portal.runtime
        assert rt is not None
        portal.run(rt.host.provision_user("u1"))
        portal.run(rt.host.grant("planner", Scope("user", "u1"), read=True, write=True))
        store = RetoldStore(rt, agent_id="planner")
        store.put(U1, "k", {"content": "Collects vinyl records."})
        assert store.get(U1, "k").value == {"content": "Collects vinyl records."}  # type: ignore[union-attr]
        assert store.batch([__import__("langgraph.store.base").store.base.GetOp(U1, "k")])[0] is not None


async def test_a_failing_op_in_a_batch_fails_only_its_own_caller(store: RetoldStore) -> None:
    good, bad = await asyncio.gather(
        store.aput(U1, "ok", {"content": "Likes jazz."}),
        store.aput(U1, "bad", {"content": "x" * 5000}),
        return_exceptions=True,
    )
    assert good is None and isinstance(bad, StoreRefusedError)
    assert (await store.aget(U1, "ok")) is not None


def test_custom_namespace_maps() -> None:
    mapping = NamespaceMap(extra={("team",): Scope("org", "acme")})
    target = mapping.target(("team", "docs"))
    assert target is not None and target.scope == Scope("org", "acme") and target.root == ("team",)
    assert mapping.target(("memories",)) is None and mapping.target(("memories", "project")) is None
    assert mapping.namespace_for(Scope("project", "p")) == ("memories", "project", "p")


async def test_concurrent_puts_to_one_key_leave_one_live_record(
    store: RetoldStore, rt: retold.Runtime
) -> None:
    await asyncio.gather(*(store.aput(U1, "k", {"content": f"Favourite number is {n}."}) for n in range(5)))
    row = await rt.store.store_item_row('["memories","u1"]', "k")
    assert row is not None
    live = await rt.store.db.fetch_column(
        "SELECT id FROM records WHERE status IN ('provisional', 'confirmed') AND scope_id = 'u1'"
    )
    assert live == [row.record_id]
    assert (await store.aget(U1, "k")).value["content"] == (await rt.store.get_record(live[0])).content  # type: ignore[union-attr]


async def test_namespace_prefixes_match_whole_labels(rt: retold.Runtime) -> None:
    from retold.store.items import StoreItemRow

    now = rt.clock.now()
    scope = Scope("user", "u1")
    for ns in ('["memories","u1"]', '["memories","u1","a"]', '["memories","u1a"]', '["memories","u1","a,b"]'):
        await rt.store.put_store_item(StoreItemRow(ns, "k", scope, None, "{}", "planner", "u1", now, now))
    entries = await rt.store.store_entries(
        [scope], '["memories","u1"]', root=None, now=now, limit=10, offset=0
    )
    expected = ['["memories","u1"]', '["memories","u1","a"]', '["memories","u1","a,b"]']
    assert sorted(e.item.namespace for e in entries if e.item) == sorted(expected)
    entries = await rt.store.store_entries(
        [scope], '["memories","u1","a"]', root=None, now=now, limit=10, offset=0
    )
    assert [e.item.namespace for e in entries if e.item] == ['["memories","u1","a"]']
    other = await rt.store.store_entries([Scope("user", "u2")], None, root=None, now=now, limit=10, offset=0)
    assert other == []


async def test_inside_a_run_the_runs_user_acts_so_another_users_namespace_is_foreign(
    store: RetoldStore,
) -> None:
    from langgraph.graph import END, START, StateGraph
    from langgraph.runtime import Runtime
    from typing_extensions import TypedDict

    class State(TypedDict):
        seen: list[Any]

    async def node(state: State, runtime: Runtime[Any]) -> dict[str, Any]:
        assert runtime.store is not None
        seen: list[Any] = [await runtime.store.aget(U1, "k"), await runtime.store.asearch(U1)]
        try:
            await runtime.store.aput(U1, "k", {"content": "Overwritten by u2's run."})
        except StoreRefusedError as refused:
            seen.append(refused.code)
        return {"seen": seen}

    graph = StateGraph(State).add_node("n", node).add_edge(START, "n").add_edge("n", END).compile(store=store)
    await store.aput(U1, "k", {"content": "Belongs to u1."})
    out = await graph.ainvoke({"seen": []}, {"configurable": {"user_id": "u2", "thread_id": "t"}})
    assert out["seen"] == [None, [], "scope_not_writable"]
    out = await graph.ainvoke({"seen": []}, {"configurable": {"user_id": "u1", "thread_id": "t"}})
    assert out["seen"][0].value == {"content": "Belongs to u1."}


async def test_gate_false_returns_what_the_gate_would_drop_and_logs_zero_floors(
    store: RetoldStore, rt: retold.Runtime
) -> None:
    await store.aput(U1, "food", {"content": "Loves spicy Sichuan food."})
    await store.aput(U1, "pet", {"content": "Has a cat named Miso."})
    weak = "is there a cat somewhere in the house or the garden today"
    gated = await store.asearch(U1, query=weak)
    assert [h.key for h in gated] == []  # one word of eleven: the gate answers nothing
    assert "empty_reason" in (await rt.store.latest_search_log())["explanations"]  # type: ignore[index]
    open_store = RetoldStore(rt, agent_id="planner", gate=False)
    everything = await open_store.asearch(U1, query=weak)
    assert "pet" in [h.key for h in everything]
    log = await rt.store.latest_search_log()
    assert log is not None
    flags = log["config_flags"] if isinstance(log["config_flags"], dict) else json.loads(log["config_flags"])
    assert flags["gate"]["enabled"] is False and flags["gate"]["dense_floor"]["episodic"] == 0.0
    assert await open_store.asearch(U2, query=weak) == []  # no gate is not more scope
    with pytest.raises(retold.InvalidArgumentError):
        RetoldStore(rt, agent_id="planner", gate="no")  # type: ignore[arg-type]
