"""Deep Agents with long-term memory: ``create_memory_agent`` wires retold into ``create_deep_agent``.

    from retold.adapters.deepagents import create_memory_agent, end_session
    from retold.middleware import RetoldContext

    agent = create_memory_agent(rt, model, user_scope="read_write", checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "s1"}}
    await agent.ainvoke({"messages": [HumanMessage("...")]}, config,
                        context=RetoldContext(agent_id="planner", user_id="u1"))
    await end_session(rt, config)        # schedules extraction once; a repeat returns False

Subagents. Deep Agents does not give its subagents the main agent's middleware, and it
gives a subagent the main agent's tools only when the subagent declares none. So the
memory tools are passed to ``create_deep_agent`` as ordinary tools (the default
``general-purpose`` subagent inherits them), and every declarative subagent that lists its
own tools gets them added with :func:`with_memory_tools` (``subagent_memory=False`` turns
that off). A subagent's memory calls act for the same caller and session as the main agent:
the tools read the identity from the run, which the subagent shares. Subagents record no
transcript turns of their own (their task text is not the user's words) and get no
host-issued recall; in ``auto`` mode they get no ``memory_search`` either, so the control
stays a control.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from retold.adapters.common import RetoldContext, memory_tools, tool_names
from retold.adapters.common import end_session as _end_session
from retold.adapters.portal import LoopBridge
from retold.errors import InvalidArgumentError, MissingExtraError
from retold.middleware import RetoldMiddleware
from retold.policy.prompt import policy_text

if TYPE_CHECKING:
    from langchain_core.runnables import RunnableConfig

    from retold.runtime import Runtime

__all__ = ["create_memory_agent", "end_session", "with_memory_tools"]


def _create_deep_agent() -> Any:
    try:
        from deepagents import create_deep_agent
    except ImportError as exc:
        raise MissingExtraError("deepagents", "deepagents", "retold.adapters.deepagents") from exc
    return create_deep_agent


def with_memory_tools(spec: dict[str, Any], runtime: Runtime, mode: str | None = None) -> dict[str, Any]:
    """A copy of a Deep Agents ``SubAgent`` spec that can use retold's memory tools.

    Adds the memory tools of ``mode`` (skipping names the spec already has) and, when the
    spec has its own system prompt, appends the tool-use policy (without the recalled-memory
    sentences: no recall runs inside a subagent). A spec without ``tools`` inherits the main
    agent's tools, which :func:`create_memory_agent` already extends, so it is returned
    unchanged apart from the prompt.
    """
    tools = memory_tools(runtime, mode)  # None: the configured trigger mode
    names = {t.name for t in tools}
    updated = dict(spec)
    if "tools" in spec:
        present = {getattr(t, "name", None) for t in spec["tools"]}
        updated["tools"] = [*spec["tools"], *(t for t in tools if t.name not in present)]
    prompt = spec.get("system_prompt")
    policy = policy_text("tool_only" if "memory_search" in names else "auto")
    if isinstance(prompt, str) and policy not in prompt:
        updated["system_prompt"] = f"{prompt}\n\n{policy}" if prompt else policy
    return updated


def _declarative(spec: dict[str, Any]) -> bool:
    """A ``SubAgent`` spec (not a compiled ``runnable`` or a remote ``graph_id`` subagent)."""
    return "runnable" not in spec and "graph_id" not in spec


def create_memory_agent(
    runtime: Runtime,
    model: Any,
    *,
    mode: str | None = None,
    tools: Sequence[Any] | None = None,
    middleware: Sequence[Any] = (),
    subagents: Sequence[dict[str, Any]] | None = None,
    subagent_memory: bool = True,
    context_schema: type = RetoldContext,
    user_scope: str | None = None,
    **kwargs: Any,
) -> Any:
    """``create_deep_agent`` with retold's middleware, tools and context schema.

    ``mode`` is the trigger mode (``None``: ``retrieval.trigger.mode``, ``tool_only`` by
    default). ``tools``, ``middleware``
    and the other keyword arguments go to ``create_deep_agent`` unchanged; retold's
    middleware runs after the caller's. Compiled subagents are passed through as they are.
    ``user_scope="read_write"`` (or ``"read"``) has every run grant its agent that access on
    the run's ``user:<user_id>`` scope, so a first agent can remember without any setup; the
    default ``None`` leaves grants to the host (see :class:`~retold.middleware.RetoldMiddleware`).
    """
    create_deep_agent = _create_deep_agent()
    memory = RetoldMiddleware(runtime, mode, register_tools=False, user_scope=user_scope)
    if subagents is not None and subagent_memory:
        subagents = [with_memory_tools(s, runtime, memory.mode) if _declarative(s) else s for s in subagents]
    known = {getattr(t, "name", None) for t in tools or []}
    clash = known & set(tool_names(memory.mode))
    if clash:
        raise InvalidArgumentError(
            f"tools already named {', '.join(sorted(clash))}: retold adds its memory tools itself"
        )
    return create_deep_agent(
        model,
        [*(tools or []), *memory.memory_tools],
        middleware=[*middleware, memory],
        subagents=subagents,
        context_schema=context_schema,
        **kwargs,
    )


async def end_session(runtime: Runtime, config: RunnableConfig, *, context: Any = None) -> bool:
    """End the thread's session and schedule its extraction; False when it had already ended.

    Runs on the loop that owns the runtime (a :class:`~retold.adapters.portal.RuntimePortal`'s, say).
    """
    return await LoopBridge(runtime).acall(lambda: _end_session(runtime, config, context=context))
