"""CrewAI adapter (spec §14, §14.1; ARCHITECTURE §5, §7): memory tools, turn capture and recall for a crew.

    inputs = {"user_id": "u1", "session_id": "s1", "topic": "..."}
    memory = CrewAIMemory(rt, inputs, "Trip Planner", agent_id="planner")   # mode: the configured one
    agent = Agent(role="Trip Planner", goal=..., backstory=f"...\\n\\n{memory.policy_text}",
                  llm=memory.wrap_llm("openai/gpt-4o-mini"), tools=memory.tools(),
                  step_callback=memory.step_callback)
    Crew(agents=[agent], tasks=[...]).kickoff(inputs=inputs)   # or: await crew.akickoff(inputs=inputs)
    memory.end_session()                                       # or: await memory.aend_session()

**Identity** is bound when the adapter is built, from the crew's inputs and never from tool
input (:func:`principal_from_inputs`): ``user_id`` (required), ``session_id`` (or ``thread_id``;
required: one crew run is one session), ``project_id`` (optional). The agent id is the host's
``agent_id=`` (the id its grants name); without one, the slug of the agent's role ("Trip
Planner" → ``trip-planner``), kept for compatibility: renaming a role then moves its memory.

**Mode** is ``None`` by default, as for :class:`~retold.middleware.RetoldMiddleware`: the
configured ``retrieval.trigger.mode``.

CrewAI's own unified ``Memory`` (``Crew(memory=...)``) is a different seam:
:mod:`retold.adapters.crewai_memory`.

**Event loops.** retold is async and its store belongs to the event loop that opened it, while
CrewAI calls tools, the LLM and ``step_callback`` synchronously from worker threads under both
``kickoff()`` and ``akickoff()``. Every call the adapter makes is handed to that one owning loop
through :class:`~retold.adapters.portal.LoopBridge` and runs there in submission order; nothing
starts a loop per call. The owning loop is, in order: ``loop=``; the loop of a
:class:`~retold.adapters.portal.RuntimePortal` that opened the runtime (the sync host: a
dedicated, long-lived event-loop thread); the loop running where the adapter is built (the async
host: ``async with open_runtime(...)`` then ``await crew.akickoff()``). A sync ``crew.kickoff()``
must not run on the owning loop's own thread (it would block the loop the tools wait for): async
hosts use ``akickoff()``. ``RuntimePortal`` lives in :mod:`retold.adapters.portal` and is
re-exported here.

**Turn capture** (spec §12, §14): the task description is the user turn, recorded by the
:meth:`CrewAIMemory.wrap_llm` proxy on the first model call of each task; results of other
tools are tool turns (``ToolUsageFinishedEvent`` on CrewAI's event bus, which fires on both the
ReAct and the native tool-call path); a finish is the assistant turn (``step_callback``'s
``AgentFinish`` on the native path, ``TaskCompletedEvent`` on the ReAct path, where CrewAI sends
no ``AgentFinish``). Results of retold's own tools are not turns, as in the LangGraph adapters.
Bus handlers run on CrewAI's handler threads, so each recording point first flushes the bus.

**Recall** (spec §14.1): in ``auto`` and ``hybrid`` the proxy runs one host search on the task
description before the task's first model call and appends the block, headed ``recalled
memory``, to the task prompt (in place, so every later call of the task sees the same bytes).

**The ambient profile** (spec §8.2): before every model call, in every mode, the proxy appends
the principal's profile (:meth:`~retold.runtime.Runtime.profile`) to the end of the system
message CrewAI sends (or prepends a system message when there is none), on a copy of the
messages, so each call carries the profile of that moment and CrewAI's own list is untouched.
``activation.profile_in_prompt: false`` turns it off; an empty profile adds nothing.

One job: retold's memory for the agents of a crew (:class:`CrewAIMemory`); it is long because
CrewAI offers no single seam for it: the tools, the LLM proxy that recalls and adds the profile,
and the event bus and ``step_callback`` that capture the turns each do part of that job, all on
the runtime's one owning loop. CrewAI's ``Memory`` seam is :mod:`retold.adapters.crewai_memory`.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
import logging
import re
import threading
from collections.abc import Awaitable, Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, TypeVar

try:
    from crewai.agents.parser import AgentFinish
    from crewai.events import crewai_event_bus
    from crewai.events.types.task_events import TaskCompletedEvent
    from crewai.events.types.tool_usage_events import ToolUsageFinishedEvent
    from crewai.llms.base_llm import BaseLLM, call_stop_override
    from crewai.tools import BaseTool
except ImportError as exc:  # pragma: no cover - depends on the installed extras
    raise ImportError(
        f"retold.adapters.crewai needs CrewAI 1.15 or later: pip install 'retold[crewai]' ({exc})"
    ) from exc
from pydantic import BaseModel, ConfigDict, Field, create_model

from retold.adapters.common import host_recall, resolve_mode, tool_names, tool_text
from retold.adapters.portal import LoopBridge, RuntimePortal
from retold.adapters.profile import messages_with_profile, prompt_profile
from retold.errors import InvalidArgumentError
from retold.models import Principal
from retold.policy.prompt import policy_text
from retold.tools import schemas

if TYPE_CHECKING:
    from retold.runtime import Runtime

__all__ = [
    "CrewAIMemory",
    "MemoryLLM",
    "RetoldCrewTool",
    "RuntimePortal",
    "agent_id_from_role",
    "args_model",
    "principal_from_inputs",
]

logger = logging.getLogger(__name__)
T = TypeVar("T")

SESSION_KEYS = ("session_id", "thread_id")
"""Crew input keys read as the session id, first present wins."""
_SLUG = re.compile(r"[^a-z0-9._-]+")
_FLUSH_TIMEOUT_S = 10.0


# --- identity -----------------------------------------------------------------------------


def agent_id_from_role(role: str) -> str:
    """The role slug: lower case, runs of anything but ``[a-z0-9._-]`` (``/`` included) → ``-``."""
    slug = _SLUG.sub("-", str(role).strip().lower()).strip("-.")
    if not slug:
        raise InvalidArgumentError(f"agent role {role!r} has no characters usable in an agent id")
    return slug


def _text(value: Any) -> str | None:
    return str(value).strip() or None if value is not None else None


def principal_from_inputs(
    inputs: Mapping[str, Any], agent_role: str, *, agent_id: str | None = None
) -> Principal:
    """The caller of a crew run: ``user_id``, ``session_id`` / ``thread_id``, optional ``project_id``.

    The host puts these in the crew's inputs (spec §14); tool input never chooses them. The
    agent is ``agent_id`` when the host names it, else the slug of ``agent_role``.
    """
    user_id = _text(inputs.get("user_id"))
    session_id = next((s for s in (_text(inputs.get(k)) for k in SESSION_KEYS) if s), None)
    if not user_id or not session_id:
        raise InvalidArgumentError(
            "retold reads the caller from the crew inputs: pass inputs with 'user_id' and "
            "'session_id' (or 'thread_id'), and optionally 'project_id'"
        )
    agent = agent_id if agent_id is not None else agent_id_from_role(agent_role)
    return Principal(agent, user_id, session_id, _text(inputs.get("project_id")))


# --- tools --------------------------------------------------------------------------------


def _annotation(prop: Mapping[str, Any]) -> Any:
    """A loose Python type for one JSON Schema property; retold's handler validates the rest."""
    if "enum" in prop:
        return Literal[tuple(prop["enum"])]  # type: ignore[valid-type]
    kind = prop.get("type")
    simple = {"string": str, "integer": int, "number": float, "boolean": bool}
    if kind in simple:
        return simple[kind]
    if kind == "array":
        return list[_annotation(prop.get("items") or {})]  # type: ignore[misc]
    if kind == "object":
        return dict[str, Any]
    return Any


def args_model(name: str, input_schema: Mapping[str, Any]) -> type[BaseModel]:
    """A pydantic model CrewAI can show the model and validate with, built from the JSON Schema."""
    required = set(input_schema.get("required", []))
    fields: dict[str, Any] = {}
    for key, prop in (input_schema.get("properties") or {}).items():
        annotation, description = _annotation(prop), prop.get("description")
        if key in required:
            fields[key] = (annotation, Field(..., description=description))
        else:
            fields[key] = (annotation | None, Field(None, description=description))
    title = "".join(part.title() for part in name.split("_")) + "Args"
    return create_model(title, __config__=ConfigDict(extra="forbid"), **fields)


class RetoldCrewTool(BaseTool):
    """One retold tool for CrewAI; the caller is the adapter's principal, never the tool input."""

    retold_memory: Any = Field(exclude=True)

    def _run(self, **kwargs: Any) -> str:
        memory: CrewAIMemory = self.retold_memory
        memory._flush_bus()
        return memory._call(lambda: memory._tool(self.name, kwargs))

    async def _arun(self, **kwargs: Any) -> str:
        memory: CrewAIMemory = self.retold_memory
        return await memory._acall(lambda: memory._tool(self.name, kwargs))


# --- the LLM proxy ------------------------------------------------------------------------


class MemoryLLM(BaseLLM):
    """The host's CrewAI model behind a proxy that records each task, adds recall and the profile."""

    inner: Any = Field(exclude=True)
    retold_memory: Any = Field(exclude=True)

    def call(self, messages: Any, **options: Any) -> Any:
        """Record the task and add recall on its first call, add the profile, then call the inner model.

        CrewAI passes everything but ``messages`` by keyword (``tools``, ``from_task``, ...);
        they go to the inner model unchanged.
        """
        memory: CrewAIMemory = self.retold_memory
        task_text = memory._first_call(messages, options.get("from_task"))
        if task_text is not None or memory._profile_on:
            block, profile = memory._call(lambda: memory._prepare_call(task_text))
            messages = messages_with_profile(memory._apply_recall(messages, block), profile)
        with self._forwarding(task_text):
            return self.inner.call(messages, **options)

    async def acall(self, messages: Any, **options: Any) -> Any:
        """:meth:`call` for ``akickoff()``."""
        memory: CrewAIMemory = self.retold_memory
        # It flushes CrewAI's event bus (a blocking wait): off this loop.
        task_text = await asyncio.to_thread(memory._first_call, messages, options.get("from_task"))
        if task_text is not None or memory._profile_on:
            block, profile = await memory._acall(lambda: memory._prepare_call(task_text))
            messages = messages_with_profile(memory._apply_recall(messages, block), profile)
        with self._forwarding(task_text):
            return await self.inner.acall(messages, **options)

    @contextmanager
    def _forwarding(self, task_text: str | None) -> Iterator[None]:
        """The inner call under the proxy's stop words; a failed first call is not a new task."""
        try:
            with call_stop_override(self.inner, list(self.stop_sequences)):
                yield
        except BaseException:
            self.retold_memory._failed_first(task_text)
            raise

    def supports_function_calling(self) -> bool:
        """As the inner model: CrewAI picks native tool calls or ReAct text from this."""
        supports = getattr(self.inner, "supports_function_calling", None)
        return bool(callable(supports) and supports())

    def supports_stop_words(self) -> bool:
        return bool(self.inner.supports_stop_words())

    def get_context_window_size(self) -> int:
        return int(self.inner.get_context_window_size())

    def supports_multimodal(self) -> bool:
        return bool(self.inner.supports_multimodal())


# --- the adapter --------------------------------------------------------------------------


@dataclass
class _TaskRun:
    """One execution of one task: its finish is recorded once, from whichever source sees it."""

    task_id: str
    finished: bool = False


def _task_id(task: Any) -> str:
    return str(getattr(task, "id", None) or "task")


def _message_role(message: Any) -> str | None:
    return message.get("role") if isinstance(message, Mapping) else getattr(message, "role", None)


class CrewAIMemory:
    """retold for one CrewAI agent in one session: tools, ``step_callback``, an LLM proxy, the policy.

    ``mode`` is ``tool_only`` (the model searches), ``auto`` (the host searches once per task,
    memory_search is not offered) or ``hybrid`` (both); ``None`` (the default, as for the
    middleware) means the configured ``retrieval.trigger.mode``. ``agent_id`` is the agent's
    retold id (default: the role slug). ``loop`` is the event loop that owns ``runtime`` (see
    the module docstring for how it is found when omitted).
    """

    def __init__(
        self,
        runtime: Runtime,
        inputs: Mapping[str, Any],
        agent_role: str,
        mode: str | None = None,
        *,
        agent_id: str | None = None,
        loop: asyncio.AbstractEventLoop | None = None,
    ) -> None:
        self.runtime = runtime
        self.agent_role = agent_role
        self.mode = resolve_mode(runtime, mode)
        self._principal = principal_from_inputs(inputs, agent_role, agent_id=agent_id)
        self._bridge = LoopBridge(
            runtime, loop, who="CrewAIMemory", sync_use="crew.kickoff()", async_use="await crew.akickoff()"
        )
        self._loop = self._bridge.require_owner()
        self._lane: asyncio.Condition | None = None  # created on the owning loop; orders every call
        self._issued = self._serving = 0
        self._abandoned: set[int] = set()
        self._state = threading.Lock()
        self._started = False
        self._ended = False
        self._runs: dict[str, _TaskRun] = {}
        self._current: _TaskRun | None = None
        self._retrying: str | None = None
        self._task_text: str | None = None
        self._last_step: tuple[str, str] | None = None
        self._posted: set[concurrent.futures.Future[Any] | asyncio.Future[Any]] = set()
        crewai_event_bus.on(ToolUsageFinishedEvent)(self._on_tool_finished)
        crewai_event_bus.on(TaskCompletedEvent)(self._on_task_completed)

    # --- public surface -------------------------------------------------------------------

    @property
    def principal(self) -> Principal:
        """The principal in use (an idle split moves it to ``<session_id>~2``)."""
        return self._principal

    @property
    def policy_text(self) -> str:
        """The §13 policy for this mode; put it in the agent's backstory (CrewAI has no system slot)."""
        return policy_text(self.mode)

    def tools(self) -> list[BaseTool]:
        """The memory tools for this principal and mode: five, or four in ``auto`` (no memory_search)."""
        built = self.runtime.tools.tool_schemas(self._principal, names=tool_names(self.mode))
        return [
            RetoldCrewTool(
                name=schema["name"],
                description=schema["description"],
                args_schema=args_model(schema["name"], schema["input_schema"]),
                retold_memory=self,
            )
            for schema in built
        ]

    def wrap_llm(self, llm: BaseLLM | str) -> MemoryLLM:
        """The agent's model behind the recording / recall proxy; pass it as ``Agent(llm=...)``.

        A string is a CrewAI model name (``"openai/gpt-4o-mini"``), built with ``crewai.LLM``;
        building one reaches no network (the provider is first called on the first task).
        """
        if isinstance(llm, str):
            if not llm.strip():
                raise InvalidArgumentError("wrap_llm needs a CrewAI model name or a BaseLLM")
            from crewai import LLM

            llm = LLM(model=llm)
        if not isinstance(llm, BaseLLM):
            raise InvalidArgumentError(
                f"wrap_llm needs a crewai BaseLLM or a model name, got {type(llm).__name__}"
            )
        return MemoryLLM(
            model=llm.model,
            inner=llm,
            retold_memory=self,
            stop=list(getattr(llm, "stop", []) or []),
            temperature=getattr(llm, "temperature", None),
        )

    def step_callback(self, step: Any) -> None:
        """CrewAI's per-step hook: a finish is the assistant turn; other steps only keep the order.

        On the ReAct path CrewAI calls this with the bare ``ToolResult`` and then the
        ``AgentAction``; tool turns come from the event bus, so both only flush it.
        """
        self._flush_bus()
        if not isinstance(step, AgentFinish):
            return
        with self._state:
            run = self._current
            if run is not None:
                if run.finished:
                    return
                run.finished = True
        text = str(step.output)
        if self._bridge.on_owner():
            self._post(lambda: self._record("assistant", text))
        else:
            self._call(lambda: self._record("assistant", text))

    def end_session(self) -> bool:
        """End the session and schedule extraction; False when it had already ended (idempotent)."""
        if self._bridge.on_owner():
            raise RuntimeError("end_session() would block the runtime's own event loop; await aend_session()")
        self._flush_bus()
        return self._call(self._end)

    async def aend_session(self) -> bool:
        """:meth:`end_session` for async hosts."""
        await asyncio.to_thread(self._flush_bus)  # a blocking wait for CrewAI's handler threads
        return await self._acall(self._end)

    # --- running on the owning loop -------------------------------------------------------

    async def _serial(self, ticket: int, factory: Callable[[], Awaitable[T]]) -> T:
        """Run ``factory`` when its ticket comes up: calls run in the order they were submitted.

        Tickets are drawn in the submitting thread, so a bus handler's queued turn and the
        agent thread's next call keep CrewAI's order however the loop schedules them.
        """
        if self._lane is None:
            self._lane = asyncio.Condition()
        async with self._lane:
            try:
                await self._lane.wait_for(lambda: self._serving == ticket)
            except BaseException:  # cancelled while queued: the lane must not wait for it
                self._abandoned.add(ticket)
                raise
            try:
                if not self._started:
                    self._principal = await self.runtime.hooks.on_session_start(self._principal)
                    self._started = True
                return await factory()
            finally:
                self._serving += 1
                while self._serving in self._abandoned:
                    self._abandoned.discard(self._serving)
                    self._serving += 1
                self._lane.notify_all()

    def _ticket(self) -> int:
        with self._state:
            self._issued += 1
            return self._issued - 1

    def _queued(self, factory: Callable[[], Awaitable[T]]) -> Callable[[], Awaitable[T]]:
        """``factory`` behind the lane; the ticket is drawn when the bridge starts it, in this thread."""
        return lambda: self._serial(self._ticket(), factory)

    def _call(self, factory: Callable[[], Awaitable[T]]) -> T:
        """Run on the owning loop and wait: for CrewAI's sync callers on worker threads."""
        return self._bridge.call(self._queued(factory))

    async def _acall(self, factory: Callable[[], Awaitable[T]]) -> T:
        return await self._bridge.acall(self._queued(factory))

    def _post(self, factory: Callable[[], Awaitable[Any]]) -> None:
        """Queue a recording without waiting (event-bus handlers must never block)."""
        future: concurrent.futures.Future[Any] | asyncio.Future[Any]
        if self._bridge.on_owner():
            future = self._loop.create_task(self._queued(factory)())
        else:
            try:
                future = self._bridge.submit(self._queued(factory))
            except RuntimeError:
                logger.warning("retold could not record a CrewAI turn: the runtime's loop is not running")
                return
        self._posted.add(future)
        future.add_done_callback(self._done)

    def _done(self, future: Any) -> None:
        self._posted.discard(future)
        if not future.cancelled() and future.exception() is not None:
            logger.error("retold could not record a CrewAI turn", exc_info=future.exception())

    def _flush_bus(self) -> None:
        """Let pending event-bus handlers queue their turns first, so turns keep CrewAI's order."""
        crewai_event_bus.flush(timeout=_FLUSH_TIMEOUT_S)

    # --- on the owning loop ---------------------------------------------------------------

    async def _record(self, role: str, text: str) -> None:
        text = text.strip()
        if not text:
            return
        self._principal = await self.runtime.hooks.on_turn(self._principal, role, text)
        if role == "user":
            self._task_text = text
        else:
            self._last_step = (role, text)

    def _search_context(self) -> str | None:
        """Task description plus the most recent step output (spec §14), tail-truncated."""
        lines = [f"user: {self._task_text}"] if self._task_text else []
        if self._last_step:
            lines.append(f"{self._last_step[0]}: {self._last_step[1]}")
        return "\n".join(lines)[-self.runtime.config.retrieval.rewrite.max_context_chars :] or None

    async def _tool(self, name: str, kwargs: dict[str, Any]) -> str:
        payload = {k: v for k, v in kwargs.items() if v is not None}  # unset optionals, not nulls
        context = self._search_context() if name == "memory_search" else None
        principal = self._principal
        result = await self.runtime.tools.call(principal, name, payload, context=context, trigger="tool")
        return tool_text(name, result)

    @property
    def _profile_on(self) -> bool:
        return bool(self.runtime.config.activation.profile_in_prompt)

    async def _prepare_call(self, task_text: str | None) -> tuple[str | None, str]:
        """Before a model call: a new task's turn and recall block, then the profile ("" when off)."""
        block = await self._open_task(task_text) if task_text is not None else None
        return block, await prompt_profile(self.runtime, self._principal)

    async def _open_task(self, text: str) -> str | None:
        """Record the task as the user turn; in auto / hybrid, the host search's recalled block."""
        await self._record("user", text)
        return None if self.mode == "tool_only" else await self._host_recall(text)

    async def _host_recall(self, text: str) -> str | None:
        """One host-issued search on the task (spec §14.1); a short task is skipped with an event."""
        found = await host_recall(self.runtime, self._principal, text, self._search_context(), what="task")
        return found[1] if found else None

    async def _end(self) -> bool:
        if self._ended:
            return False
        self._ended = True
        crewai_event_bus.off(ToolUsageFinishedEvent, self._on_tool_finished)
        crewai_event_bus.off(TaskCompletedEvent, self._on_task_completed)
        return await self.runtime.hooks.on_session_end(self._principal)

    # --- the proxy's side -----------------------------------------------------------------

    def _first_call(self, messages: Any, task: Any) -> str | None:
        """The task text when this model call starts a task execution, else None.

        A task's first call carries no assistant or tool message yet. A retry of a failed
        first call (CrewAI's rate-limit policy) is not a new task.
        """
        if not isinstance(messages, str) and any(_message_role(m) in ("assistant", "tool") for m in messages):
            return None
        key = _task_id(task)
        self._flush_bus()  # the previous execution's finish is queued before this one registers
        with self._state:
            if self._retrying == key:
                self._retrying = None
                return None
            run = _TaskRun(key)
            self._runs[key] = run
            self._current = run
        text = getattr(task, "description", None) if task is not None else None
        if not text:
            users = [m for m in ([] if isinstance(messages, str) else messages) if _message_role(m) == "user"]
            text = messages if isinstance(messages, str) else _content_text(users[-1]) if users else ""
        return str(text)

    def _failed_first(self, task_text: str | None) -> None:
        """A first call failed: CrewAI's retry of it must not record the task again."""
        if task_text is not None and self._current is not None:
            with self._state:
                self._retrying = self._current.task_id

    def _apply_recall(self, messages: Any, block: str | None) -> Any:
        """Append the recalled block to the task prompt, in place so later calls see the same bytes."""
        if not block:
            return messages
        if isinstance(messages, str):
            return f"{messages}\n\n{block}"
        for message in reversed(messages):
            if _message_role(message) != "user" or not isinstance(message, dict):
                continue
            content = message.get("content")
            if isinstance(content, list):
                content.append({"type": "text", "text": block})
            else:
                message["content"] = f"{content or ''}\n\n{block}"
            return messages
        messages.append({"role": "user", "content": block})
        return messages

    # --- event-bus handlers (CrewAI's handler threads) ------------------------------------

    def _owned_run(self, event: Any) -> _TaskRun | None:
        task_id = getattr(event, "task_id", None) or _task_id(getattr(event, "task", None))
        with self._state:
            return self._runs.get(str(task_id))

    def _on_tool_finished(self, source: Any, event: ToolUsageFinishedEvent) -> None:
        """A tool result is a tool turn, except retold's own (a recalled memory is not new evidence)."""
        if event.tool_name in schemas.TOOL_NAMES or self._owned_run(event) is None:
            return
        output = event.output
        text = output if isinstance(output, str) else json.dumps(output, ensure_ascii=False, default=str)
        self._post(lambda: self._record("tool", text))

    def _on_task_completed(self, source: Any, event: TaskCompletedEvent) -> None:
        """The ReAct path's finish (CrewAI sends step_callback no AgentFinish there)."""
        run = self._owned_run(event)
        if run is None:
            return
        with self._state:
            if run.finished:
                return
            run.finished = True
        text = str(getattr(event.output, "raw", "") or "")
        self._post(lambda: self._record("assistant", text))


def _content_text(message: Any) -> str:
    content = message.get("content") if isinstance(message, Mapping) else getattr(message, "content", "")
    if isinstance(content, list):
        return "\n".join(str(b.get("text", "")) for b in content if isinstance(b, Mapping))
    return str(content or "")
