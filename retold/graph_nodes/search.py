"""The search pipeline as a compiled LangGraph graph (ARCHITECTURE §6).

Five nodes keep LangGraph's per-node cost small while the stage names survive in the
timings: prepare → generate → rank → (rerank) → respond, the rerank node behind a
conditional edge. The nodes only call the stage functions in
:mod:`retold.retrieve.retriever`. No checkpointer: a search is one pass.

The graph accepts either a prepared ``run`` (what ``rt.search`` passes) or plain JSON —
``agent_id``, ``user_id``, ``session_id``, ``queries`` and the request filters — so
``langgraph dev`` can run it. Scopes are never an input: they are resolved from the
principal's grants inside ``prepare``.
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any, Literal, TypedDict

from langgraph.graph import END, START, StateGraph

from retold.models import Principal, SearchRequest, SearchResponse
from retold.retrieve import retriever
from retold.retrieve.render import render_search
from retold.util import parse_ts

if TYPE_CHECKING:
    from langgraph.graph.state import CompiledStateGraph

    from retold.runtime import Runtime

__all__ = ["SearchState", "build_search_graph", "run_from_json"]


class SearchState(TypedDict, total=False):
    # Plain JSON input, for `langgraph dev` and HTTP callers.
    agent_id: str
    user_id: str
    session_id: str | None
    project_id: str | None
    queries: list[str]
    types: list[str] | None
    entities: list[str] | None
    since: str | None
    until: str | None
    k: int | None
    include_history: bool
    trigger: Literal["tool", "auto"]
    context: str | None
    # Internal: the run every node advances, and the outputs.
    run: retriever.SearchRun
    response: SearchResponse
    rendered: str
    returned: list[str]


def run_from_json(state: SearchState) -> retriever.SearchRun:
    """Build a run from JSON input; identity comes from the input's agent and user ids."""
    principal = Principal(
        agent_id=state["agent_id"],
        user_id=state["user_id"],
        session_id=state.get("session_id"),
        project_id=state.get("project_id"),
    )
    request = SearchRequest(
        queries=list(state.get("queries") or []),
        context=state.get("context"),
        types=state.get("types"),
        entities=state.get("entities"),
        since=_ts(state.get("since")),
        until=_ts(state.get("until")),
        k=state.get("k"),
        include_history=bool(state.get("include_history", False)),
        trigger=state.get("trigger", "tool"),
    )
    return retriever.SearchRun(principal=principal, request=retriever.validate_request(request))


def _ts(value: str | datetime | None) -> datetime | None:
    return value if value is None or isinstance(value, datetime) else parse_ts(value)


def build_search_graph(rt: Runtime) -> CompiledStateGraph[Any, Any, Any, Any]:
    """Compile the search graph bound to one runtime."""

    async def prepare(state: SearchState) -> dict[str, Any]:
        if "run" in state:  # rt.search: the caller reads run.response, not the rendering
            run = state["run"]
            await retriever.prepare(rt, run)
            return {"run": run}
        run = run_from_json(state)
        await retriever.prepare(rt, run)
        return {"run": run, "rendered": ""}

    async def generate(state: SearchState) -> dict[str, Any]:
        await retriever.generate(rt, state["run"])
        return {"run": state["run"]}

    async def rank(state: SearchState) -> dict[str, Any]:
        await retriever.rank(rt, state["run"])
        return {"run": state["run"]}

    async def after_rank(state: SearchState) -> Literal["rerank", "respond"]:
        # async: LangGraph runs a sync edge function in a worker thread (~0.3 ms a search)
        return "rerank" if retriever.wants_rerank(rt, state["run"]) else "respond"

    async def rerank(state: SearchState) -> dict[str, Any]:
        await retriever.rerank(rt, state["run"])
        return {"run": state["run"]}

    async def respond(state: SearchState) -> dict[str, Any]:
        response = await retriever.respond(rt, state["run"])
        out: dict[str, Any] = {"response": response, "returned": [r.record.id for r in response.results]}
        if "rendered" in state:  # JSON input (langgraph dev, HTTP): render the block for the UI
            out["rendered"] = render_search(response)
        return out

    graph = StateGraph(SearchState)
    graph.add_node("prepare", prepare)
    graph.add_node("generate", generate)
    graph.add_node("rank", rank)
    graph.add_node("rerank", rerank)
    graph.add_node("respond", respond)
    graph.add_edge(START, "prepare")
    graph.add_edge("prepare", "generate")
    graph.add_edge("generate", "rank")
    graph.add_conditional_edges("rank", after_rank, ["rerank", "respond"])
    graph.add_edge("rerank", "respond")
    graph.add_edge("respond", END)
    return graph.compile(name="retold_search", checkpointer=False)
