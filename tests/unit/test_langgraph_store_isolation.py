"""Property: through RetoldStore, no value ever reaches a store whose agent cannot read its scope.

Random agents, users, grants (changing mid-run), puts from every side, and every read channel
(get by key, get by another scope's record id, search with and without a query, list_namespaces):
each value a store returns carries a marker naming the scope it was written to, and that scope
must be the namespace's and readable by the store's agent acting for the namespace's user now.
"""

from __future__ import annotations

import asyncio
import tempfile
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import retold
from retold.adapters.langgraph_store import RetoldStore, StoreRefusedError
from retold.models import Principal, Scope
from retold.policy.grants import readable_scopes
from retold.testing import FakeClock, FakeEmbedder, FakeJudge

from .slow import examples

AGENTS = ["a1", "a2"]
USERS = ["u1", "u2", "u3"]
WORDS = ["tea", "coffee", "oslo", "cello", "budget"]

_agent, _user = st.sampled_from(AGENTS), st.sampled_from(USERS)
ops = st.lists(
    st.one_of(
        st.tuples(st.just("grant"), _agent, _user, st.booleans(), st.booleans()),
        st.tuples(st.just("put"), _agent, _user, st.sampled_from(["k1", "k2"]),
                  st.sampled_from(WORDS)),
        st.tuples(st.just("tool_write"), _agent, _user, st.sampled_from(WORDS)),
        st.tuples(st.just("read"), _agent, _user, st.sampled_from(WORDS)),
    ),
    min_size=3,
    max_size=14,
)  # fmt: skip


def marker_scope(value: dict[str, Any]) -> str:
    """The scope a value was written to: every content written here ends with ``@<scope>``."""
    return str(value["content"]).rsplit("@", 1)[1].rstrip(".")


async def scenario(path: Path, steps: list[tuple[Any, ...]]) -> None:
    rt = await retold.open_runtime(path, embedder=FakeEmbedder(), judge=FakeJudge(), clock=FakeClock())
    try:
        for user in USERS:
            await rt.host.provision_user(user)
        # A starting point where writes succeed, so the grant changes below have something to hide.
        for agent, user in (("a1", "u1"), ("a1", "u2"), ("a2", "u2"), ("a2", "u3")):
            await rt.host.grant(agent, Scope("user", user), read=True, write=True)
        stores = {a: RetoldStore(rt, agent_id=a) for a in AGENTS}
        n = 0
        for step in steps:
            kind, agent, user = step[0], step[1], step[2]
            ns, scope = ("memories", user), Scope("user", user)
            if kind == "grant" and step[3]:
                await rt.host.grant(agent, scope, read=True, write=step[4])
            elif kind == "grant":
                await rt.host.revoke(agent, scope)
            elif kind == "put":
                n += 1
                try:
                    await stores[agent].aput(ns, step[3], {"content": f"{step[4]} note {n} @{scope}."})
                except StoreRefusedError as refused:
                    assert refused.code == "scope_not_writable"
            elif kind == "tool_write":
                n += 1
                p = Principal(agent, user, "s1")
                await rt.tools.call(
                    p, "memory_write", {"type": "episodic", "content": f"{step[3]} fact {n} @{scope}."}
                )
            else:
                await check_reads(rt, stores[agent], agent, user, step[3])
        for agent in AGENTS:
            for user in USERS:
                await check_reads(rt, stores[agent], agent, user, "note")
    finally:
        await rt.close()


async def check_reads(rt: retold.Runtime, store: RetoldStore, agent: str, user: str, word: str) -> None:
    ns, scope = ("memories", user), Scope("user", user)
    readable = scope in await readable_scopes(rt.store, Principal(agent, user))
    seen: list[dict[str, Any]] = []
    for key in ("k1", "k2"):
        item = await store.aget(ns, key)
        if item is not None:
            seen.append(item.value)
    seen += [i.value for i in await store.asearch(ns)]
    seen += [i.value for i in await store.asearch(ns, query=f"{word} note")]
    for record_id in await rt.store.db.fetch_column("SELECT id FROM records"):  # any id, any scope
        item = await store.aget(ns, record_id)
        if item is not None:
            seen.append(item.value)
    if not readable:
        assert seen == [], (agent, user, seen)
    for value in seen:
        assert marker_scope(value) == str(scope), (agent, user, value)
    granted = {g.scope for g in await rt.store.grants_for(agent, can_read=True)}
    for listed in await store.alist_namespaces():
        assert len(listed) >= 2 and Scope("user", listed[1]) in granted, listed


@settings(max_examples=examples(25), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(steps=ops)
def test_no_store_read_reaches_an_agent_that_cannot_read_the_scope(steps: list[tuple[Any, ...]]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        asyncio.run(scenario(Path(tmp) / "m.sqlite", steps))
