"""Graphs for ``langgraph dev`` (see ``langgraph.json``): watch retold's pipelines node by node.

    RETOLD_STORE=memory.sqlite RETOLD_GRAPH_IDENTITY=input LANGGRAPH_CLI_NO_ANALYTICS=1 \\
        LANGSMITH_TRACING=false langgraph dev --no-browser --no-reload --host 127.0.0.1 --port 2024

Identity: every graph here takes the caller from the server's authenticated user (a
LangGraph ``Auth`` handler; its user's ``identity`` is the user id, its ``retold_agent_id``
field or ``$RETOLD_AGENT_ID`` the agent id). On your own machine, ``RETOLD_GRAPH_IDENTITY=input``
lets the input (or the agent's context) name them instead; never set it on a server others
can reach (:mod:`retold.graph_nodes.identity`).

* ``retold_search``: the search graph (spec §10). Input is plain JSON:
  ``{"agent_id": "planner", "user_id": "u1", "queries": ["answer style"]}``; each node's
  update is what that stage decided (a few kilobytes), the last one the response.
* ``retold_extraction``: the extraction graph (spec §8.2); input ``{"session_id": "s1"}``.
  It needs an extractor and a reviewer in the config (``ingestion.extraction_enabled``).
* ``retold_memory_agent``: a Deep Agents agent with retold's middleware. Its model is a
  small scripted one (offline: it saves statements of preference and searches memory for
  anything else) unless ``RETOLD_STUDIO_MODEL`` names a real one (``"anthropic:claude-..."``,
  through ``init_chat_model``). Run it with ``context: {"agent_id": ..., "user_id": ...}``.

The store is ``RETOLD_STORE`` (default ``memory.sqlite``) and the config ``RETOLD_CONFIG``
(a YAML path; default settings without it). Each entry is an async factory: the runtime is
opened once per server process on a :class:`~retold.adapters.portal.RuntimePortal` (the
server runs invocations on more than one event-loop thread; the agent's middleware hands its
calls to the portal's loop), with the config file read in a worker thread, so no blocking
call runs on the server's loop. No graph here carries a checkpointer
or a store: ``langgraph dev`` supplies its own.

Inside a LangGraph server (``langgraph_api`` loaded), importing this module opens the
runtime and warms its embedder in a background thread (``retold: warming the embedder in
the background`` … ``ready in N s`` on stderr), so the first run does not pay the model's
load; the server does not wait for it, and a failure is logged, never raised (the first run
then opens the runtime itself and reports its own error). The server loads this file by
path, as a module of another name: that copy shares this module's runtime.
"""

from __future__ import annotations

import asyncio
import logging
import os
import re
import sys
import threading
from typing import TYPE_CHECKING, Any

from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult

if TYPE_CHECKING:
    from langchain_core.runnables import RunnableConfig

    from retold.runtime import Runtime

__all__ = ["ScriptedMemoryModel", "extraction_graph", "memory_agent", "search_graph", "warm_at_start"]

logger = logging.getLogger(__name__)
_CANONICAL = "retold.graph_nodes.studio"
_opened: dict[str, Any] = {}
_lock = threading.Lock()
_PREFERENCE = re.compile(r"\b(i prefer|i like|i always|i never|remember that|i want)\b", re.IGNORECASE)


def _open_runtime() -> Runtime:
    """Open the runtime once per process, on a portal (blocking: runs in a worker thread).

    A thread lock, not an asyncio one: the server calls the factories from more than one
    event loop, and an asyncio lock is bound to the first loop that waits on it.
    """
    with _lock:
        rt = _opened.get("runtime")
        if rt is None or rt.closed:
            import retold
            from retold.adapters.portal import RuntimePortal

            if "portal" in _opened:
                _opened["portal"].close()  # its runtime was closed: stop its thread too
            config = retold.load_config(os.environ.get("RETOLD_CONFIG") or None)
            # The server runs invocations on more than one event-loop thread: a portal's
            # long-lived loop owns the runtime, and the agent's middleware hands its calls there.
            portal = RuntimePortal.open(os.environ.get("RETOLD_STORE") or "memory.sqlite", config)
            rt = portal.runtime
            assert rt is not None
            _opened.clear()
            _opened["runtime"] = rt
            _opened["portal"] = portal
        return rt


async def runtime() -> Runtime:
    """The process's runtime over ``RETOLD_STORE`` / ``RETOLD_CONFIG``, opened on first use."""
    return await asyncio.to_thread(_open_runtime)


def _report(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


async def _start_warm(rt: Runtime) -> None:
    rt.warm_in_background(_report)


def _open_and_warm() -> None:
    try:
        from retold.index.threads import configure_torch_threads

        configure_torch_threads()  # before anything here imports torch
        rt = _open_runtime()
        _opened["portal"].run(_start_warm(rt))
    except Exception as exc:  # the first run opens it again and reports its own error
        logger.debug("opening the runtime at start failed", exc_info=True)
        _report(f"retold: could not open the runtime to warm it ({type(exc).__name__}: {exc})")


def warm_at_start() -> threading.Thread:
    """Open the process's runtime and warm its embedder in a daemon thread; returns the thread.

    What importing this module does inside a LangGraph server. The runtime is the one every
    factory here (and ``make_store``) then gets; warming it twice starts one load.
    """
    thread = threading.Thread(target=_open_and_warm, name="retold-warm", daemon=True)
    thread.start()
    return thread


def _served(name: str, build: Any) -> Any:
    graph = _opened.get(name)
    if graph is None:
        graph = _opened[name] = build()
    return graph


async def search_graph(config: RunnableConfig) -> Any:
    """The search graph over the shared runtime; identity from the server's authenticated user."""
    from retold.graph_nodes.search import build_search_graph

    rt = await runtime()
    return _served("search_graph", lambda: build_search_graph(rt.search_services(), served=True))


async def extraction_graph(config: RunnableConfig) -> Any:
    """The extraction graph over the shared runtime; only the authenticated user's sessions."""
    from retold.graph_nodes.extraction import build_extraction_graph

    rt = await runtime()
    return _served("extraction_graph", lambda: build_extraction_graph(rt.extraction_services(), served=True))


class ScriptedMemoryModel(BaseChatModel):
    """An offline stand-in model that shows the memory loop without an API key.

    A user turn that states a preference is saved with ``memory_write`` (quoting the turn);
    any other user turn is looked up with ``memory_search``; a tool result is summarised.
    """

    @property
    def _llm_type(self) -> str:
        return "retold-scripted-memory"

    def bind_tools(self, tools: Any, **kwargs: Any) -> ScriptedMemoryModel:
        return self

    def _generate(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kwargs: Any
    ) -> ChatResult:
        return ChatResult(generations=[ChatGeneration(message=self._reply(messages))])

    @staticmethod
    def _reply(messages: list[BaseMessage]) -> AIMessage:
        last = messages[-1] if messages else None
        if isinstance(last, ToolMessage):
            return AIMessage(f"From memory ({last.name}):\n{last.text}")
        if not isinstance(last, HumanMessage) or not last.text.strip():
            return AIMessage("Tell me something to remember, or ask about something you told me.")
        text = " ".join(last.text.split())
        call_id = f"scripted_{len(messages)}"
        if _PREFERENCE.search(text):
            args = {
                "type": "semantic",
                "content": text[:1000],
                "attribute": "preference",
                "source_kind": "user_statement",
                "evidence": text,
            }
            return AIMessage("", tool_calls=[{"name": "memory_write", "args": args, "id": call_id}])
        args = {"queries": [text[:300]]}
        return AIMessage("", tool_calls=[{"name": "memory_search", "args": args, "id": call_id}])


def _model() -> BaseChatModel:
    named = os.environ.get("RETOLD_STUDIO_MODEL")
    if not named:
        return ScriptedMemoryModel()
    from langchain.chat_models import init_chat_model

    return init_chat_model(named)


async def memory_agent(config: RunnableConfig) -> Any:
    """A Deep Agents agent with retold memory (mode from ``retrieval.trigger.mode``); built once."""
    rt = await runtime()
    agent = _opened.get("memory_agent")
    if agent is None:
        from retold.adapters.deepagents import create_memory_agent

        agent = create_memory_agent(
            rt,
            _model(),
            mode=None,
            system_prompt="You are a helpful assistant with long-term memory.",
            name="retold_memory_agent",
        )
        _opened["memory_agent"] = agent
    return agent


if __name__ != _CANONICAL:
    # Loaded by path (langgraph.json's graphs): share the package module's runtime, which the
    # store (make_store) imports by name, rather than open a second one beside it; importing
    # it warms it.
    from retold.graph_nodes.studio import _lock, _opened
elif "langgraph_api" in sys.modules:  # inside a LangGraph server
    warm_at_start()
