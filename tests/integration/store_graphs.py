"""Graphs a test ``langgraph dev`` serves to drive the server's store from inside served runs.

* ``store_probe``: one node runs ``input["op"]`` through ``runtime.store`` (the server's store,
  here :func:`retold.adapters.langgraph_store_dev.make_store`).
* ``langmem_probe``: one node calls LangMem's own memory tools, whose namespace
  ``("memories", "{langgraph_user_id}")`` LangMem fills from the run's config.

A refusal comes back in the output as ``{"error": <code>, "kind": <exception class>}`` so a test
reads it from ``/runs/wait``; nothing here decides who the caller is.
"""

from __future__ import annotations

from typing import Any

from langgraph.graph import END, START, StateGraph
from langgraph.runtime import Runtime
from langmem import create_manage_memory_tool, create_search_memory_tool
from typing_extensions import TypedDict

LANGMEM_NS = ("memories", "{langgraph_user_id}")


class Probe(TypedDict, total=False):
    op: str
    namespace: list[str]
    key: str
    value: dict[str, Any]
    args: dict[str, Any]
    out: Any


def _refusal(exc: Exception) -> dict[str, Any]:
    return {"error": getattr(exc, "code", None), "kind": type(exc).__name__, "message": str(exc)[:300]}


async def _store_op(state: Probe, runtime: Runtime[Any]) -> dict[str, Any]:
    store, ns, key = runtime.store, tuple(state.get("namespace") or ()), state.get("key", "k")
    assert store is not None
    try:
        if state["op"] == "get":
            item = await store.aget(ns, key)
            out: Any = item.value if item else None
        elif state["op"] == "search":
            out = [{"key": i.key, "value": i.value} for i in await store.asearch(ns, **state.get("args", {}))]
        elif state["op"] == "put":
            await store.aput(ns, key, state["value"])
            out = "put"
        elif state["op"] == "delete":
            await store.adelete(ns, key)
            out = "deleted"
        elif state["op"] == "list":
            out = [list(n) for n in await store.alist_namespaces()]
        else:
            raise ValueError(state["op"])
    except Exception as exc:  # the store's refusal, shown to the test
        out = _refusal(exc)
    return {"out": out}


async def _langmem_op(state: Probe) -> dict[str, Any]:
    tools = {
        "manage_memory": create_manage_memory_tool(namespace=LANGMEM_NS),
        "search_memory": create_search_memory_tool(namespace=LANGMEM_NS),
    }
    try:
        out: Any = await tools[state["op"]].ainvoke(state.get("args", {}))
    except Exception as exc:
        out = _refusal(exc)
    return {"out": out}


def _one_node(name: str, node: Any) -> Any:
    return StateGraph(Probe).add_node(name, node).add_edge(START, name).add_edge(name, END).compile()


store_probe = _one_node("store_op", _store_op)
langmem_probe = _one_node("langmem_op", _langmem_op)
