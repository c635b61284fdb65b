"""The search pipeline as a compiled LangGraph graph (ARCHITECTURE §6).

prepare → generate → rank → gate → (rerank) → respond, the rerank node behind a
conditional edge. The nodes only call the stage functions of
:mod:`retold.retrieve.retriever` and publish what each decided as its own channel
(:mod:`retold.retrieve.stage_views`): Studio's node view and a trace show a few
kilobytes per node, never the run. The run itself (eligible set, query vectors, loaded
records) stays outside the state: handed in through LangGraph's run context by
``rt.search``, or, for plain JSON input, kept by the graph for the length of the run
under a key no input can set, and dropped when the run ends or fails. No checkpointer:
a search is one pass.

JSON input — ``agent_id``, ``user_id``, ``session_id``, ``queries`` and the request
filters — lets ``langgraph dev`` run the graph. Scopes are never an input: they come from
the principal's grants inside ``prepare``. When a LangGraph server runs the graph (or it
was built with ``served=True``), the principal comes from the server's authenticated user
(:mod:`retold.graph_nodes.identity`), not from the input.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any, Literal

from langgraph.graph import END, START, StateGraph
from langgraph.runtime import Runtime as GraphRuntime
from typing_extensions import TypedDict  # pydantic builds the graph schemas Studio shows from it

from retold.graph_nodes.identity import is_served, served_principal
from retold.graph_nodes.live_runs import LiveRuns
from retold.models import Principal, SearchRequest, SearchResponse
from retold.retrieve import retriever
from retold.retrieve import stage_views as views
from retold.retrieve.render import render_search
from retold.util import parse_ts

if TYPE_CHECKING:
    from langchain_core.runnables import RunnableConfig
    from langgraph.graph.state import CompiledStateGraph

__all__ = [
    "SearchContext", "SearchInput", "SearchOutput", "SearchState", "build_search_graph", "run_from_json",
]  # fmt: skip

MAX_LIVE_RUNS = 1024  # JSON-input runs in flight at once; the oldest is dropped past this


class SearchInput(TypedDict, total=False):
    """Plain JSON input, for ``langgraph dev`` and HTTP callers."""

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


class SearchOutput(TypedDict, total=False):
    """One channel per stage: what it decided, capped, as JSON."""

    search_id: str
    principal: dict[str, Any]  # prepare
    request: dict[str, Any]  # prepare
    eligible: dict[str, Any]  # prepare: the hard filter's size and filters, not its ids
    channels: dict[str, Any]  # generate: each channel's top candidates
    fused: dict[str, Any]  # rank: RRF contributions and freshness
    gate: dict[str, Any]  # gate: passed and rejected with reasons, dedup
    rerank: dict[str, Any]  # rerank (when it runs)
    response: SearchResponse  # respond
    returned: list[str]
    rendered: str  # JSON input only: the block a model would read


class SearchState(SearchInput, SearchOutput, total=False):
    run_key: str  # JSON input: where the graph keeps this run; in neither schema, so never set from input


@dataclass
class SearchContext:
    """LangGraph run context: the prepared run ``rt.search`` hands in."""

    run: retriever.SearchRun | None = None


def run_from_json(state: SearchInput, principal: Principal) -> retriever.SearchRun:
    """A run from JSON input for ``principal``."""
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


def _input_principal(state: SearchInput) -> Principal:
    """In-process JSON input: the caller is the host's own code, so the input names the principal."""
    return Principal(
        agent_id=state["agent_id"],
        user_id=state["user_id"],
        session_id=state.get("session_id"),
        project_id=state.get("project_id"),
    )


Node = Callable[[SearchState, "RunnableConfig", GraphRuntime[SearchContext]], Awaitable[dict[str, Any]]]


def build_search_graph(
    services: retriever.SearchServices, *, served: bool = False
) -> CompiledStateGraph[Any, Any, Any, Any]:
    """Compile the search graph over ``services``; ``served`` takes identity from the server's auth."""
    live: LiveRuns[retriever.SearchRun] = LiveRuns(MAX_LIVE_RUNS)  # JSON-input runs in flight

    def current(state: SearchState, runtime: GraphRuntime[SearchContext]) -> retriever.SearchRun:
        context = runtime.context
        if context is not None and context.run is not None:
            return context.run
        return live[state["run_key"]]

    def stage(body: Callable[..., Awaitable[dict[str, Any]]]) -> Node:
        """Drop a JSON-input run the moment a stage fails or is cancelled."""

        async def node(
            state: SearchState, config: RunnableConfig, runtime: GraphRuntime[SearchContext]
        ) -> Any:
            try:
                return await body(state, config, runtime)
            except BaseException:
                live.drop(state.get("run_key"))
                raise

        node.__name__ = body.__name__
        return node

    async def prepare(
        state: SearchState, config: RunnableConfig, runtime: GraphRuntime[SearchContext]
    ) -> Any:
        out: dict[str, Any] = {}
        if runtime.context is not None and runtime.context.run is not None:
            run = runtime.context.run
        else:
            configurable = config.get("configurable") or {}
            served_run = served or is_served(configurable)
            principal = served_principal(state, configurable) if served_run else _input_principal(state)
            run = run_from_json(state, principal)
            out["run_key"] = live.add(run)
        await retriever.prepare(services, run)
        return out | views.prepare_view(run)

    async def generate(
        state: SearchState, config: RunnableConfig, runtime: GraphRuntime[SearchContext]
    ) -> Any:
        run = current(state, runtime)
        await retriever.generate(services, run)
        return views.generate_view(run)

    async def rank(state: SearchState, config: RunnableConfig, runtime: GraphRuntime[SearchContext]) -> Any:
        run = current(state, runtime)
        await retriever.rank(services, run)
        return views.rank_view(run)

    async def gate(state: SearchState, config: RunnableConfig, runtime: GraphRuntime[SearchContext]) -> Any:
        run = current(state, runtime)
        await retriever.gate_stage(services, run)
        return views.gate_view(run)

    async def after_gate(
        state: SearchState, runtime: GraphRuntime[SearchContext]
    ) -> Literal["rerank", "respond"]:
        # async: LangGraph runs a sync edge function in a worker thread (~0.3 ms a search)
        return "rerank" if retriever.wants_rerank(services, current(state, runtime)) else "respond"

    async def rerank(state: SearchState, config: RunnableConfig, runtime: GraphRuntime[SearchContext]) -> Any:
        run = current(state, runtime)
        await retriever.rerank(services, run)
        return views.rerank_view(run)

    async def respond(
        state: SearchState, config: RunnableConfig, runtime: GraphRuntime[SearchContext]
    ) -> Any:
        run = current(state, runtime)
        response = await retriever.respond(services, run)
        out: dict[str, Any] = {"response": response, "returned": [r.record.id for r in response.results]}
        if "run_key" in state:  # JSON input (langgraph dev, HTTP): the block a model would read
            out["rendered"] = render_search(response)
            live.drop(state["run_key"])
        return out

    graph = StateGraph(
        SearchState, context_schema=SearchContext, input_schema=SearchInput, output_schema=SearchOutput
    )
    for body in (prepare, generate, rank, gate, rerank, respond):
        graph.add_node(body.__name__, stage(body))  # type: ignore[call-overload]
    graph.add_edge(START, "prepare")
    graph.add_edge("prepare", "generate")
    graph.add_edge("generate", "rank")
    graph.add_edge("rank", "gate")
    graph.add_conditional_edges("gate", after_gate, ["rerank", "respond"])  # type: ignore[arg-type]
    graph.add_edge("rerank", "respond")
    graph.add_edge("respond", END)
    return graph.compile(name="retold_search", checkpointer=False)
