"""LangGraph's own store expectations, run against RetoldStore.

LangGraph publishes a conformance package only for checkpointers; its store tests live in
its repository (libs/checkpoint/tests: test_store_namespace_validation.py,
test_inmemory_store_dotted_filters.py) and are not installable. These are their
expectations restated for RetoldStore, whose namespaces must also map to a retold scope.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest
from langgraph.store.base import InvalidNamespaceError

import retold
from retold.adapters.langgraph_store import RetoldStore
from retold.models import Scope
from retold.testing import FakeEmbedder, FakeJudge

INVALID_NAMESPACES = [("memories.u1",), ("memories", ""), (123,), ("memories", "u1", "a.b")]
METHODS = ["get", "delete", "search", "prefix", "suffix", "put"]


@pytest.fixture
async def store(store_location: Callable[[str], Path | str]) -> AsyncIterator[RetoldStore]:
    rt = await retold.open_runtime(store_location("conf.sqlite"), embedder=FakeEmbedder(), judge=FakeJudge())
    await rt.host.grant("planner", Scope("user", "u1"), read=True, write=True)
    yield RetoldStore(rt, agent_id="planner")
    await rt.close()


async def _call(store: RetoldStore, method: str, namespace: tuple) -> object:
    if method in ("prefix", "suffix"):
        return await store.alist_namespaces(**{method: namespace})
    if method == "search":
        return await store.asearch(namespace)
    if method == "put":
        return await store.aput(namespace, "key", {"content": "Likes green tea in the morning."})
    return await getattr(store, f"a{method}")(namespace, "key")


@pytest.mark.parametrize("namespace", INVALID_NAMESPACES)
async def test_invalid_labels_are_refused_before_anything_is_queued(
    store: RetoldStore, namespace: tuple
) -> None:
    for method in METHODS:
        with pytest.raises(InvalidNamespaceError):
            await _call(store, method, namespace)
        assert store._aqueue.empty(), method
    assert await store.asearch(("memories", "u1")) == []  # nothing was written


async def test_empty_prefix_listing_and_wildcards_are_accepted(store: RetoldStore) -> None:
    await store.aput(("memories", "u1", "notes"), "tea", {"content": "Likes green tea in the morning."})
    assert ("memories", "u1", "notes") in await store.alist_namespaces()
    assert await store.alist_namespaces(prefix=("memories", "*"), suffix=("notes",)) == [
        ("memories", "u1", "notes")
    ]


async def test_the_langgraph_root_label_is_reserved(store: RetoldStore) -> None:
    with pytest.raises(InvalidNamespaceError):
        await store.aput(("langgraph", "u1"), "k", {"content": "x"})


async def test_dotted_filter_keys_reach_nested_fields(store: RetoldStore) -> None:
    await store.aput(
        ("memories", "u1"), "hyphen", {"content": "Nested access.", "user": {"access-level": "nested"}}
    )
    await store.aput(
        ("memories", "u1"), "other", {"content": "Flat access.", "user": {"access-level": "flat"}}
    )
    found = await store.asearch(("memories", "u1"), filter={"user.access-level": "nested"})
    assert [item.key for item in found] == ["hyphen"]
