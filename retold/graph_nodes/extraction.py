"""Session extraction as a compiled LangGraph graph (spec §8.2, ARCHITECTURE §6).

claim → load_transcript → build_context → extract → validate → review → revalidate →
write → finish, with a conditional edge from every stage to ``fail`` (fail closed:
``extraction.failed``, nothing written, the claim left to expire) and from ``claim``
straight to ``finish`` when the session is not this worker's to extract. The nodes only
call the stage functions of :mod:`retold.ingest.extraction.stages` and publish what each
decided (:mod:`retold.ingest.extraction.views`); the run itself (transcript, model output)
stays outside the state, handed in through the run context by ``rt.extract_session`` or
kept by the graph for the length of a JSON-input run. No checkpointer: a run is one pass,
and its one write transaction lives inside the ``write`` node.

The graph accepts plain JSON, ``{"session_id": "s1", "force": false}`` (or
``"planner/u1/s1"`` when several principals use ``s1``), so ``langgraph dev`` can run it;
served (``served=True``), the session must belong to the server's authenticated user
(:mod:`retold.graph_nodes.identity`). The output carries ``result``, the run's
:class:`~retold.ingest.extraction.run.ExtractionResult` as a dict.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from langgraph.graph import END, START, StateGraph
from langgraph.runtime import Runtime as GraphRuntime
from typing_extensions import TypedDict  # pydantic builds the graph schemas Studio shows from it

from retold.errors import IdentityError
from retold.graph_nodes.identity import is_served, served_principal
from retold.graph_nodes.live_runs import LiveRuns
from retold.ingest.extraction import stages as extraction
from retold.ingest.extraction.run import STAGE_NAMES, ExtractionRun, ExtractionServices, Stage
from retold.ingest.extraction.views import STAGE_VIEWS

if TYPE_CHECKING:
    from langchain_core.runnables import RunnableConfig
    from langgraph.graph.state import CompiledStateGraph

__all__ = [
    "STAGES", "ExtractionContext", "ExtractionInput", "ExtractionOutput", "ExtractionState",
    "build_extraction_graph", "run_from_json",
]  # fmt: skip

MAX_LIVE_RUNS = 256

STAGES: tuple[tuple[str, Stage], ...] = (
    ("claim", extraction.claim),
    ("load_transcript", extraction.load_transcript),
    ("build_context", extraction.build_context),
    ("extract", extraction.extract),
    ("validate", extraction.validate),
    ("review", extraction.review),
    ("revalidate", extraction.revalidate),
    ("write", extraction.write),
)
"""The stages in order; each has a fail-closed edge to ``fail``."""
if tuple(name for name, _ in STAGES) != STAGE_NAMES:  # the run counts progress by STAGE_NAMES
    raise RuntimeError(f"STAGES must follow retold.ingest.extraction.run.STAGE_NAMES {STAGE_NAMES}")


class ExtractionInput(TypedDict, total=False):
    """Plain JSON input, for ``langgraph dev`` and HTTP callers."""

    session_id: str
    force: bool
    agent_id: str  # served graphs only: checked against the authenticated caller
    user_id: str


class ExtractionOutput(TypedDict, total=False):
    """One channel per stage (ids, counts, verdicts, short texts), and the result."""

    session: str
    claim: dict[str, Any] | None
    transcript: dict[str, Any]
    extraction_context: dict[str, Any]
    extracted: dict[str, Any]
    validated: dict[str, Any]
    reviewed: dict[str, Any]
    revalidated: dict[str, Any]
    written: dict[str, Any]
    failure: dict[str, Any] | None
    result: dict[str, Any]


class ExtractionState(ExtractionInput, ExtractionOutput, total=False):
    run_key: str  # JSON input: where the graph keeps this run; never set from input


@dataclass
class ExtractionContext:
    """LangGraph run context: the prepared run ``rt.extract_session`` hands in."""

    run: ExtractionRun | None = None


async def run_from_json(services: ExtractionServices, state: ExtractionInput) -> ExtractionRun:
    """A run from JSON input: the session (bare or ``agent/user/session``) and whether to re-run."""
    session_id = state.get("session_id")
    if not isinstance(session_id, str) or not session_id.strip():
        raise ValueError("the extraction graph needs a session_id")
    key = await services.store.resolve_session(session_id)
    return ExtractionRun(key=key, force=bool(state.get("force", False)))


def build_extraction_graph(
    services: ExtractionServices, *, served: bool = False
) -> CompiledStateGraph[Any, Any, Any, Any]:
    """Compile the extraction graph over ``services``; ``served`` checks the session's owner."""
    graph = StateGraph(
        ExtractionState, context_schema=ExtractionContext, input_schema=ExtractionInput,
        output_schema=ExtractionOutput,
    )  # fmt: skip
    names = [name for name, _ in STAGES]
    live: LiveRuns[ExtractionRun] = LiveRuns(MAX_LIVE_RUNS)

    def known(state: ExtractionState, runtime: GraphRuntime[ExtractionContext]) -> ExtractionRun | None:
        """The run ``rt.extract_session`` handed in, or the one a JSON input started; None before that."""
        if runtime.context is not None and runtime.context.run is not None:
            return runtime.context.run
        return live[state["run_key"]] if "run_key" in state else None

    async def current(
        state: ExtractionState, config: RunnableConfig, runtime: GraphRuntime[ExtractionContext]
    ) -> tuple[ExtractionRun, dict[str, Any]]:
        run = known(state, runtime)
        if run is not None:
            return run, {}
        run = await run_from_json(services, state)
        configurable = config.get("configurable") or {}
        if served or is_served(configurable):
            caller = served_principal(state, configurable)
            if (run.key.agent_id, run.key.user_id) != (caller.agent_id, caller.user_id):
                raise IdentityError(
                    "the session belongs to another user or agent than the authenticated caller"
                )
        return run, {"run_key": live.add(run)}

    def node(name: str, stage: Stage) -> Callable[..., Awaitable[dict[str, Any]]]:
        async def run_node(
            state: ExtractionState, config: RunnableConfig, runtime: GraphRuntime[ExtractionContext]
        ) -> dict[str, Any]:
            try:
                run, out = await current(state, config, runtime)
                await stage(services, run)
            except BaseException:
                live.drop(state.get("run_key"))
                raise
            return out | STAGE_VIEWS[name](run)

        run_node.__name__ = stage.__name__
        return run_node

    def router(after: str, nxt: str) -> Callable[..., str]:
        def route(state: ExtractionState, runtime: GraphRuntime[ExtractionContext]) -> str:
            run = known(state, runtime)
            assert run is not None  # every stage node runs before its router
            if run.failed:
                return "fail"
            if after == "claim" and run.skipped:
                return "finish"
            return nxt

        route.__name__ = f"after_{after}"
        return route

    def outcome(step: Stage) -> Callable[..., Awaitable[dict[str, Any]]]:
        """``finish`` or ``fail``: the run's end, and its result as the graph's output."""

        async def end(
            state: ExtractionState, config: RunnableConfig, runtime: GraphRuntime[ExtractionContext]
        ) -> dict[str, Any]:
            try:
                run, _ = await current(state, config, runtime)
                await step(services, run)
            finally:
                live.drop(state.get("run_key"))
            assert run.result is not None
            failure = run.failure
            return {
                "result": run.result.as_dict(),
                "failure": None if failure is None else {"stage": run.failed_stage, "code": failure.code},
            }

        end.__name__ = step.__name__
        return end

    for name, stage in STAGES:
        graph.add_node(name, node(name, stage))  # type: ignore[call-overload]
    graph.add_node("finish", outcome(extraction.finish))  # type: ignore[call-overload]
    graph.add_node("fail", outcome(extraction.fail))  # type: ignore[call-overload]
    graph.add_edge(START, names[0])
    for index, name in enumerate(names):
        nxt = names[index + 1] if index + 1 < len(names) else "finish"
        targets: list[str] = sorted({nxt, "fail", "finish"} if name == "claim" else {nxt, "fail"})
        graph.add_conditional_edges(name, router(name, nxt), targets)  # type: ignore[arg-type]
    graph.add_edge("finish", END)
    graph.add_edge("fail", END)
    return graph.compile(name="retold_extraction", checkpointer=False)
