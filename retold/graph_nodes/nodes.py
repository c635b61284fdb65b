"""Drop-in nodes that give a hand-built ``StateGraph`` long-term memory (spec §12, §14.1).

    from retold.graph_nodes.nodes import (RetoldMessagesState, end_session_node, profile_node,
                                          recall_node, record_turns_node, with_profile)

    graph = StateGraph(RetoldMessagesState, context_schema=RetoldContext)
    graph.add_node("record", record_turns_node(rt))     # opens the session, records new turns
    graph.add_node("recall", recall_node(rt))           # one search per new user turn
    graph.add_node("profile", profile_node(rt))         # the ambient profile, into state["retold_profile"]
    graph.add_node("model", call_model)                 # with_profile(system, state["retold_profile"])
    graph.add_node("record_reply", record_turns_node(rt))
    graph.add_edge(START, "record"); graph.add_edge("record", "recall"); ...

Identity is read from the run exactly as the middleware reads it: the context
(:class:`~retold.adapters.common.RetoldContext`, or ``agent_id`` / ``user_id`` in
``configurable``) and ``thread_id`` as the session id. The state needs the usual
``messages`` key plus ``retold_recorded`` (the keys of the messages already recorded):
use :class:`RetoldMessagesState` or add that key, with its reducer, to your own state.
The nodes are async; run the graph with ``ainvoke`` / ``astream``.

The ambient profile (spec §8.2) is not a message: :func:`profile_node` writes the caller's
block to ``state["retold_profile"]`` (a string, kept current on every run, "" when nothing is
ambient or ``activation.profile_in_prompt`` is false), and the model node appends it to its
system message with :func:`with_profile` on each call, after the host's own prompt so that
prefix stays cacheable. Putting it in ``messages`` instead would pile up one copy per turn.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Annotated, Any, NotRequired

from langchain_core.runnables import RunnableConfig
from langgraph.graph import MessagesState

from retold.adapters.common import (
    RECORDED_KEY,
    RetoldContext,
    current_context,
    end_session,
    merge_recorded,
    recall,
    record_messages,
    run_principal,
)
from retold.adapters.profile import prompt_profile, with_profile

if TYPE_CHECKING:
    from retold.runtime import Runtime

__all__ = [
    "PROFILE_KEY",
    "RetoldContext",
    "RetoldMessagesState",
    "end_session_node",
    "profile_node",
    "recall_node",
    "record_turns_node",
    "with_profile",
]

PROFILE_KEY = "retold_profile"
"""State key :func:`profile_node` writes the caller's profile block to."""

Node = Callable[[dict[str, Any], RunnableConfig], Awaitable[dict[str, Any]]]


class RetoldMessagesState(MessagesState):
    """``messages``, the keys of the messages already recorded as transcript turns, and the profile."""

    retold_recorded: Annotated[list[str], merge_recorded]
    retold_profile: NotRequired[str]


def record_turns_node(rt: Runtime) -> Node:
    """A node that opens the thread's session and records every new message, once, in order."""

    async def record_turns(state: dict[str, Any], config: RunnableConfig) -> dict[str, Any]:
        principal = run_principal(current_context(), config)
        principal = await rt.hooks.on_session_start(principal)
        _, new_keys = await record_messages(
            rt, principal, list(state.get("messages") or []), state.get(RECORDED_KEY) or []
        )
        return {RECORDED_KEY: new_keys} if new_keys else {}

    return record_turns


def recall_node(rt: Runtime) -> Node:
    """A node that searches on a new last user message and appends the ``recalled memory`` pair.

    Host-issued (``trigger="auto"``, ``k = trigger.auto_k``); a short turn is skipped with a
    ``trigger.skipped`` event; an empty result appends nothing. The appended pair is marked
    so :func:`record_turns_node` never records it. Place it after the node that adds the
    user message and before the model.
    """

    async def recall_memory(state: dict[str, Any], config: RunnableConfig) -> dict[str, Any]:
        principal = run_principal(current_context(), config)
        principal = await rt.hooks.on_session_start(principal)
        appended = await recall(rt, principal, list(state.get("messages") or []))
        return {"messages": appended} if appended else {}

    return recall_memory


def profile_node(rt: Runtime) -> Node:
    """A node that writes the caller's ambient profile to ``state["retold_profile"]``.

    The block of :meth:`~retold.runtime.Runtime.profile` for the run's principal ("" when
    nothing it may read is ambient, or when ``activation.profile_in_prompt`` is false); the
    key is only written when the block changed. Place it before the model node, which adds
    it with :func:`with_profile`; it needs no thread id.
    """

    async def load_profile(state: dict[str, Any], config: RunnableConfig) -> dict[str, Any]:
        principal = run_principal(current_context(), config, require_session=False)
        profile = await prompt_profile(rt, principal)
        return {PROFILE_KEY: profile} if state.get(PROFILE_KEY) != profile else {}

    return load_profile


def end_session_node(rt: Runtime) -> Node:
    """A node that ends the thread's session (extraction is scheduled once; repeats do nothing)."""

    async def end_memory_session(state: dict[str, Any], config: RunnableConfig) -> dict[str, Any]:
        await end_session(rt, config, context=current_context())
        return {}

    return end_memory_session
