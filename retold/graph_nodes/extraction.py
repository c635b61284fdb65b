"""Session extraction as a compiled LangGraph graph (spec §8.2, ARCHITECTURE §6).

claim → load_transcript → build_context → extract → validate → review → revalidate →
write → finish, with a conditional edge from every stage to ``fail`` (fail closed:
``extraction.failed``, nothing written, the claim left to expire) and from ``claim``
straight to ``finish`` when the session is not this worker's to extract. The nodes only
call the stage functions of :mod:`retold.ingest.extraction.stages`. No checkpointer: a run is
one pass, and its one write transaction lives inside the ``write`` node.

The graph accepts a prepared ``run`` (what ``rt.extract_session`` passes) or plain JSON,
``{"session_id": "s1", "force": false}`` (or ``"planner/u1/s1"`` when several principals use
``s1``), so ``langgraph dev`` can run it; the output
carries ``result``, the run's :class:`~retold.ingest.extraction.stages.ExtractionResult` as a dict.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, TypedDict

from langgraph.graph import END, START, StateGraph

from retold.ingest.extraction import stages as extraction
from retold.ingest.extraction.run import ExtractionRun

if TYPE_CHECKING:
    from langgraph.graph.state import CompiledStateGraph

    from retold.runtime import Runtime

__all__ = ["STAGES", "ExtractionState", "build_extraction_graph", "run_from_json"]

Stage = Callable[["Runtime", ExtractionRun], Awaitable[None]]

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


class ExtractionState(TypedDict, total=False):
    # Plain JSON input, for `langgraph dev` and HTTP callers.
    session_id: str
    force: bool
    # Internal: the run every node advances, and the output.
    run: ExtractionRun
    result: dict[str, Any]


async def run_from_json(rt: Runtime, state: ExtractionState) -> ExtractionRun:
    """A run from JSON input: the session (bare or ``agent/user/session``) and whether to re-run."""
    session_id = state.get("session_id")
    if not isinstance(session_id, str) or not session_id.strip():
        raise ValueError("the extraction graph needs a session_id")
    key = await rt.store.resolve_session(session_id)
    return ExtractionRun(key=key, force=bool(state.get("force", False)))


def build_extraction_graph(rt: Runtime) -> CompiledStateGraph[Any, Any, Any, Any]:
    """Compile the extraction graph bound to one runtime."""
    graph = StateGraph(ExtractionState)
    names = [name for name, _ in STAGES]

    def node(stage: Stage) -> Callable[[ExtractionState], Awaitable[dict[str, Any]]]:
        async def run_node(state: ExtractionState) -> dict[str, Any]:
            run = state.get("run") or await run_from_json(rt, state)
            await stage(rt, run)
            return {"run": run}

        run_node.__name__ = stage.__name__
        return run_node

    def router(after: str, nxt: str) -> Callable[[ExtractionState], str]:
        def route(state: ExtractionState) -> str:
            run = state["run"]
            if run.failed:
                return "fail"
            if after == "claim" and run.skipped:
                return "finish"
            return nxt

        route.__name__ = f"after_{after}"
        return route

    def outcome(step: Stage) -> Callable[[ExtractionState], Awaitable[dict[str, Any]]]:
        """``finish`` or ``fail``: the run's end, and its result as the graph's output."""

        async def end(state: ExtractionState) -> dict[str, Any]:
            run = state["run"]
            await step(rt, run)
            assert run.result is not None
            return {"run": run, "result": run.result.as_dict()}

        end.__name__ = step.__name__
        return end

    for name, stage in STAGES:
        graph.add_node(name, node(stage))  # type: ignore[arg-type]
    graph.add_node("finish", outcome(extraction.finish))  # type: ignore[arg-type]
    graph.add_node("fail", outcome(extraction.fail))  # type: ignore[arg-type]
    graph.add_edge(START, names[0])
    for index, name in enumerate(names):
        nxt = names[index + 1] if index + 1 < len(names) else "finish"
        targets: list[str] = sorted({nxt, "fail", "finish"} if name == "claim" else {nxt, "fail"})
        graph.add_conditional_edges(name, router(name, nxt), targets)  # type: ignore[arg-type]
    graph.add_edge("finish", END)
    graph.add_edge("fail", END)
    return graph.compile(name="retold_extraction", checkpointer=False)
