"""Long-term memory for langchain ``create_agent`` and Deep Agents: one ``AgentMiddleware``.

    from retold.middleware import RetoldContext, RetoldMiddleware

    memory = RetoldMiddleware(rt, mode="hybrid")
    agent = create_agent(model, tools=[...], middleware=[memory], context_schema=RetoldContext,
                         checkpointer=InMemorySaver())
    await agent.ainvoke({"messages": [HumanMessage("...")]}, {"configurable": {"thread_id": "s1"}},
                        context=RetoldContext(agent_id="planner", user_id="u1"))
    await memory.end_session({"configurable": {"thread_id": "s1"}})   # schedules extraction once

What it does, per spec §12–§14.1:

* ``before_agent`` opens the session of the run's thread; ``before_model`` records every new
  human, AI and tool message as a transcript turn, in order, exactly once; ``after_agent``
  records the final reply.
* ``auto`` / ``hybrid``: one host-issued search per new user turn before the model call,
  appended as a marked ``memory_search`` call + result pair (never an edit of earlier messages).
* The memory tools (five, or four without ``memory_search`` in ``auto``), narrowed to the
  caller's grants before every model call, and the §13 policy appended to the system prompt,
  byte-identical on every turn.
* The caller's ambient profile (:meth:`~retold.runtime.Runtime.profile`) after the policy, on
  every model call in every mode, unless ``activation.profile_in_prompt`` is false; nothing
  when it is empty. It is part of the request only, never of the thread's messages.

Every hook has a sync and an async side, and both run retold's work on the event loop that owns
the runtime (its aiosqlite connection is bound to that loop), through
:class:`~retold.adapters.portal.LoopBridge`. The owner is ``loop=``, else the loop of the
:class:`~retold.adapters.portal.RuntimePortal` that opened the runtime, else the loop running
when the middleware is built (or, built in sync code, its first async hook). An async hook on
the owning loop awaits directly; one on another loop (``langgraph dev`` runs invocations on
alternating event-loop threads) hands the call over and awaits the result. A sync hook
(``invoke()`` from a thread) hands it over and waits; on the owning loop itself it is refused,
since it would block the loop it waits for. Only retold's calls move: the identity is read, and
the model and other tools run, where the framework runs the hook.
Use a checkpointer for multi-turn threads: the recorded-message keys live in the graph state.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Annotated, Any, NotRequired

from retold.adapters.common import (
    RECORDED_KEY,
    MemoryTool,
    RetoldContext,
    end_session,
    memory_tools,
    merge_recorded,
    narrow_tools,
    recall,
    record_messages,
    resolve_mode,
    run_principal,
    tool_names,
    with_policy,
)
from retold.adapters.portal import LoopBridge
from retold.adapters.profile import prompt_profile, with_profile
from retold.errors import InvalidArgumentError, MissingExtraError
from retold.models import Scope
from retold.policy.prompt import policy_text

try:
    from langchain.agents.middleware import AgentMiddleware, AgentState, ModelRequest, ModelResponse
    from langchain.agents.middleware.types import PrivateStateAttr
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise MissingExtraError("langchain", "deepagents", "retold.middleware") from exc

from langchain_core.runnables import RunnableConfig
from langgraph.config import get_config

if TYPE_CHECKING:
    import asyncio

    from langchain_core.messages import BaseMessage
    from langgraph.runtime import Runtime as GraphRuntime

    from retold.models import Principal
    from retold.runtime import Runtime

__all__ = ["USER_SCOPE_ACCESS", "RetoldContext", "RetoldMiddleware", "RetoldState"]

log = logging.getLogger("retold.middleware")

USER_SCOPE_ACCESS = ("read", "read_write")
"""The values of ``user_scope``: the access each run's agent gets on its user's scope."""


class RetoldState(AgentState):
    """The agent state plus the keys of the messages already recorded (hidden from input/output).

    The reducer comes last in ``Annotated``: LangGraph takes the reducer from the last item.
    """

    retold_recorded: NotRequired[Annotated[list[str], PrivateStateAttr, merge_recorded]]


class RetoldMiddleware(AgentMiddleware[RetoldState, Any, Any]):
    """Session hooks, host-issued recall, memory tools, policy text and the profile for one runtime.

    ``mode`` is ``"tool_only"``, ``"auto"`` or ``"hybrid"`` (``None``: the configured
    ``retrieval.trigger.mode``). ``register_tools=False`` leaves the tools to the host (see
    :attr:`memory_tools`), e.g. to pass them to Deep Agents so subagents inherit them.
    ``loop`` is the event loop that owns the runtime (see the module docstring for how it is
    found when omitted). ``schema_dialect="openai_strict"`` publishes the tools' schemas in
    the form OpenAI's strict function calling needs (every field required, optional ones
    nullable); use it when the model is bound with ``strict=True`` (docs/tools.md).
    ``user_scope="read_write"`` (or ``"read"``) makes every run ensure that its agent holds
    that grant on ``user:<user_id>`` (once per agent and user per middleware; an existing
    wider grant is never narrowed; each change is audited as ``grant.changed``). ``None``
    grants nothing: the host provisions access itself. Unless ``user_scope="read"`` asked for
    a read-only agent, when the mode offers ``memory_write`` but the caller has nowhere to
    write, the tool is absent and a warning is logged once per agent and user.
    """

    state_schema = RetoldState

    def __init__(
        self,
        runtime: Runtime,
        mode: str | None = None,
        *,
        register_tools: bool = True,
        loop: asyncio.AbstractEventLoop | None = None,
        schema_dialect: str = "portable",
        user_scope: str | None = None,
    ) -> None:
        super().__init__()
        if user_scope is not None and user_scope not in USER_SCOPE_ACCESS:
            raise InvalidArgumentError(f"user_scope must be None, 'read' or 'read_write', got {user_scope!r}")
        self.runtime = runtime
        self.user_scope = user_scope
        self._checked: set[tuple[str, str]] = set()  # (agent, user) pairs already granted and checked
        self.mode = resolve_mode(runtime, mode)
        self.policy = policy_text(self.mode)
        self._bridge = LoopBridge(
            runtime,
            loop,
            who="RetoldMiddleware",
            sync_use="agent.invoke(...) from a thread",
            async_use="await agent.ainvoke(...) / agent.astream(...)",
        )
        self.memory_tools: list[MemoryTool] = memory_tools(
            runtime, self.mode, bridge=self._bridge, schema_dialect=schema_dialect
        )
        """The LangChain tools for this mode; registered by the middleware unless told otherwise."""
        self.tools = list(self.memory_tools) if register_tools else []
        self._names = tool_names(self.mode)

    @property
    def name(self) -> str:
        return "RetoldMiddleware"

    # --- identity ---------------------------------------------------------------------------

    @staticmethod
    def _principal(runtime: GraphRuntime[Any], *, require_session: bool = True) -> Principal:
        return run_principal(runtime.context, get_config(), require_session=require_session)

    def _recording(
        self,
        step: Callable[[Principal, list[BaseMessage], list[str]], Awaitable[dict[str, Any] | None]],
        state: RetoldState,
        runtime: GraphRuntime[Any],
    ) -> Callable[[], Awaitable[dict[str, Any] | None]]:
        """``step`` ready for the owning loop, its inputs read here, where the run's config is visible."""
        principal = self._principal(runtime)
        messages, recorded = list(state["messages"]), list(state.get(RECORDED_KEY) or [])
        return lambda: step(principal, messages, recorded)

    # --- before_agent: open the session -----------------------------------------------------

    async def _open(self, principal: Principal) -> None:
        key = (principal.agent_id, principal.user_id)
        if key not in self._checked:
            if self.user_scope is not None:
                await self._ensure_user_grant(principal)
            read_only = self.user_scope == "read"  # the host chose no writing: nothing to warn about
            if (
                "memory_write" in self._names
                and not read_only
                and not await self.runtime.tools.write_targets(principal)
            ):
                log.warning(
                    "agent %r has nowhere to write for user %r, so memory_write is not offered: grant it "
                    "write access (rt.host.grant) or pass user_scope='read_write'",
                    principal.agent_id,
                    principal.user_id,
                )
            self._checked.add(key)
        await self.runtime.hooks.on_session_start(principal)

    async def _ensure_user_grant(self, principal: Principal) -> None:
        """Grant ``user_scope`` on the caller's user scope unless a grant already covers it."""
        scope = Scope("user", principal.user_id)
        write = self.user_scope == "read_write"
        held = next((g for g in await self.runtime.host.grants(principal.agent_id) if g.scope == scope), None)
        if held is not None and held.can_read and (held.can_write or not write):
            return
        await self.runtime.host.grant(
            principal.agent_id,
            scope,
            read=True,
            write=write or (held is not None and held.can_write),
            actor="retold.middleware",
        )

    def before_agent(self, state: RetoldState, runtime: GraphRuntime[Any]) -> dict[str, Any] | None:
        principal = self._principal(runtime)
        self._bridge.call(lambda: self._open(principal))
        return None

    async def abefore_agent(self, state: RetoldState, runtime: GraphRuntime[Any]) -> dict[str, Any] | None:
        principal = self._principal(runtime)
        await self._bridge.acall(lambda: self._open(principal))
        return None

    # --- before_model: record new turns, then the host-issued recall --------------------------

    async def _before_model(
        self, principal: Principal, messages: list[BaseMessage], recorded: list[str]
    ) -> dict[str, Any] | None:
        principal, new_keys = await record_messages(self.runtime, principal, messages, recorded)
        update: dict[str, Any] = {}
        if new_keys:
            update[RECORDED_KEY] = new_keys
        if self.mode != "tool_only":
            appended = await recall(self.runtime, principal, messages)
            if appended:
                update["messages"] = appended
        return update or None

    def before_model(self, state: RetoldState, runtime: GraphRuntime[Any]) -> dict[str, Any] | None:
        return self._bridge.call(self._recording(self._before_model, state, runtime))

    async def abefore_model(self, state: RetoldState, runtime: GraphRuntime[Any]) -> dict[str, Any] | None:
        return await self._bridge.acall(self._recording(self._before_model, state, runtime))

    # --- after_agent: record the final reply ------------------------------------------------

    async def _after_agent(
        self, principal: Principal, messages: list[BaseMessage], recorded: list[str]
    ) -> dict[str, Any] | None:
        _, new_keys = await record_messages(self.runtime, principal, messages, recorded)
        return {RECORDED_KEY: new_keys} if new_keys else None

    def after_agent(self, state: RetoldState, runtime: GraphRuntime[Any]) -> dict[str, Any] | None:
        return self._bridge.call(self._recording(self._after_agent, state, runtime))

    async def aafter_agent(self, state: RetoldState, runtime: GraphRuntime[Any]) -> dict[str, Any] | None:
        return await self._bridge.acall(self._recording(self._after_agent, state, runtime))

    # --- wrap_model_call: policy text, the caller's tool schemas and the ambient profile -----

    async def _prepare(self, principal: Principal) -> tuple[list[dict[str, Any]], str]:
        """The caller's tool schemas and profile block ("" when off or empty), in one hop."""
        schemas = await self.runtime.tools.atool_schemas(principal, names=self._names)
        return schemas, await prompt_profile(self.runtime, principal)

    def _request(self, request: ModelRequest, prepared: tuple[list[dict[str, Any]], str]) -> ModelRequest:
        """The host's system message, then the policy, then the profile: the stable part stays a prefix."""
        principal_schemas, profile = prepared
        return request.override(
            system_message=with_profile(with_policy(request.system_message, self.policy), profile),
            tools=narrow_tools(request.tools, self.runtime, principal_schemas),
        )

    def wrap_model_call(
        self, request: ModelRequest, handler: Callable[[ModelRequest], ModelResponse]
    ) -> ModelResponse:
        principal = self._principal(request.runtime, require_session=False)
        prepared = self._bridge.call(lambda: self._prepare(principal))
        return handler(self._request(request, prepared))

    async def awrap_model_call(
        self, request: ModelRequest, handler: Callable[[ModelRequest], Awaitable[ModelResponse]]
    ) -> ModelResponse:
        principal = self._principal(request.runtime, require_session=False)
        prepared = await self._bridge.acall(lambda: self._prepare(principal))
        return await handler(self._request(request, prepared))  # the model runs here, not there

    # --- session end ------------------------------------------------------------------------

    async def end_session(self, config: RunnableConfig, *, context: Any = None) -> bool:
        """End the thread's session (scheduling extraction); False when already ended."""
        return await self._bridge.acall(lambda: end_session(self.runtime, config, context=context))

    def end_session_sync(self, config: RunnableConfig, *, context: Any = None) -> bool:
        """:meth:`end_session` for sync hosts, run on the runtime's event loop."""
        return self._bridge.call(lambda: end_session(self.runtime, config, context=context))
