"""What the middleware and the drop-in graph nodes share, so each rule lives in one place.

* Identity comes from the run, never from tool input: ``agent_id`` / ``user_id`` /
  ``project_id`` from the run's context (:class:`RetoldContext`, or the same keys under
  ``config["configurable"]``) and ``config["configurable"]["thread_id"]`` as the session id.
* Turn capture (spec §12): every new human, AI and tool message becomes one transcript turn,
  in order, exactly once. The keys of the messages already recorded live in the graph state
  under :data:`RECORDED_KEY`, so a checkpointed thread never records a message twice.
* Host-issued recall (spec §14.1): one search per new user turn, appended as a synthetic
  ``memory_search`` tool-call + tool-result pair marked with :data:`RECALL_MARK` so it is
  never recorded as a turn and never edits an earlier message.
* The memory tools as LangChain tools whose identity is read from the run at call time, and
  whose calls run on the loop that owns the runtime (:class:`~retold.adapters.portal.LoopBridge`).

Only langchain-core and langgraph are imported here (both core dependencies of retold).
"""

from __future__ import annotations

import hashlib
import logging
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool
from pydantic import Field

from retold.adapters.portal import LoopBridge
from retold.errors import InvalidArgumentError, NotFoundError
from retold.graph_nodes.identity import is_served, served_principal
from retold.models import Principal, SessionKey
from retold.policy.prompt import MODES
from retold.retrieve.render import json_line
from retold.tools import schemas
from retold.tools.payloads import model_view

if TYPE_CHECKING:
    from retold.runtime import Runtime

__all__ = [
    "AUTO_TOOL_NAMES",
    "RECALL_HEADER",
    "RECALL_MARK",
    "RECORDED_KEY",
    "MemoryTool",
    "RetoldContext",
    "current_context",
    "end_session",
    "host_recall",
    "is_recall",
    "memory_tools",
    "merge_recorded",
    "message_key",
    "narrow_tools",
    "pending_user_turn",
    "recall",
    "recall_messages",
    "record_messages",
    "resolve_mode",
    "run_principal",
    "search_context",
    "tool_names",
    "tool_text",
    "transcript_context",
    "turn_of",
    "with_policy",
]

log = logging.getLogger(__name__)

RECORDED_KEY = "retold_recorded"
"""State key holding the keys of the messages already recorded as transcript turns."""
RECALL_MARK = "retold_recall"
"""``additional_kwargs`` key on the synthetic recall pair: never recorded as a turn."""
RECALL_HEADER = "recalled memory"
AUTO_TOOL_NAMES = tuple(n for n in schemas.TOOL_NAMES if n != "memory_search")
_SUMMARY_SOURCE = "summarization"  # langchain's SummarizationMiddleware marks its summary message so


@dataclass(frozen=True)
class RetoldContext:
    """The run context a memory agent is invoked with: who is calling, never chosen by the model.

    ``agent.ainvoke(inputs, {"configurable": {"thread_id": "s1"}},
    context=RetoldContext(agent_id="planner", user_id="u1"))``
    """

    agent_id: str
    user_id: str
    project_id: str | None = None


def merge_recorded(left: list[str] | None, right: list[str] | None) -> list[str]:
    """Reducer for :data:`RECORDED_KEY`: append new keys, keep order, never duplicate."""
    merged = list(left or [])
    seen = set(merged)
    for key in right or []:
        if key not in seen:
            seen.add(key)
            merged.append(key)
    return merged


def resolve_mode(rt: Runtime, mode: str | None) -> str:
    """``None`` means the configured ``retrieval.trigger.mode``."""
    chosen = rt.config.retrieval.trigger.mode if mode is None else mode
    if chosen not in MODES:
        raise InvalidArgumentError(f"mode must be one of {', '.join(MODES)}, got {chosen!r}")
    return chosen


def tool_names(mode: str) -> tuple[str, ...]:
    """Five tools in tool_only and hybrid; auto registers no memory_search (spec §14.1)."""
    return AUTO_TOOL_NAMES if mode == "auto" else schemas.TOOL_NAMES


# --- identity -----------------------------------------------------------------------------


def _field(source: Any, key: str) -> Any:
    if source is None:
        return None
    if isinstance(source, Mapping):
        return source.get(key)
    return getattr(source, key, None)


def run_principal(context: Any, config: RunnableConfig | None, *, require_session: bool = True) -> Principal:
    """The caller for one run: context (or ``configurable``) identity, ``thread_id`` as session id.

    On a run a LangGraph server serves, identity is the server's authenticated user's
    (:func:`~retold.graph_nodes.identity.served_principal`): the context may only agree.
    """
    configurable = (config or {}).get("configurable") or {}

    def pick(key: str) -> Any:
        value = _field(context, key)
        return value if value not in (None, "") else configurable.get(key)

    agent_id, user_id, project_id = pick("agent_id"), pick("user_id"), pick("project_id")
    if is_served(configurable):  # a LangGraph server's run: identity from its authenticated user
        fields = {"agent_id": agent_id, "user_id": user_id, "project_id": project_id}
        served = served_principal(fields, configurable)
        agent_id, user_id, project_id = served.agent_id, served.user_id, served.project_id
    if not agent_id or not user_id:
        raise InvalidArgumentError(
            "retold needs the caller's identity from the run: invoke with "
            "context=RetoldContext(agent_id=..., user_id=...) (or put agent_id and user_id in "
            'config["configurable"])'
        )
    thread_id = configurable.get("thread_id")
    if require_session and not thread_id:
        raise InvalidArgumentError(
            'retold uses the thread id as the session id: invoke with config={"configurable": '
            '{"thread_id": "<session id>"}}'
        )
    return Principal(
        agent_id=str(agent_id),
        user_id=str(user_id),
        session_id=str(thread_id) if thread_id else None,
        project_id=str(project_id) if project_id else None,
    )


def current_context() -> Any:
    """The LangGraph run context of the node or tool being executed, or None outside a run.

    A LangChain runnable or tool invoked outside a graph has a config but no LangGraph
    runtime in it (``get_runtime()`` is then None): that is the outside-a-run case too.
    """
    from langgraph.runtime import get_runtime

    try:
        return getattr(get_runtime(), "context", None)
    except (RuntimeError, KeyError):
        return None


# --- turn capture -------------------------------------------------------------------------


def is_recall(message: BaseMessage) -> bool:
    return bool(message.additional_kwargs.get(RECALL_MARK))


def message_key(message: BaseMessage, index: int) -> str:
    """The message id; a content digest at its position when a graph assigns no ids."""
    if message.id:
        return str(message.id)
    digest = hashlib.sha1(f"{message.type}\0{message.text}".encode(), usedforsecurity=False).hexdigest()
    return f"{index}:{digest[:16]}"


def turn_of(message: BaseMessage) -> tuple[str, str] | None:
    """``(role, text)`` for a message that is a transcript turn, else None.

    Tool turns carry the result text, not the call (spec §12). Results of retold's own
    tools are not turns: a recalled memory echoed into the transcript would be quotable
    as fresh tool evidence and re-extracted as a new memory.
    """
    if is_recall(message):
        return None
    text = message.text.strip()
    if not text:
        return None
    if isinstance(message, HumanMessage):
        if message.additional_kwargs.get("lc_source") == _SUMMARY_SOURCE:
            return None
        return "user", text
    if isinstance(message, AIMessage):
        return "assistant", text
    if isinstance(message, ToolMessage):
        return None if message.name in schemas.TOOL_NAMES else ("tool", text)
    return None


async def record_messages(
    rt: Runtime, principal: Principal, messages: Sequence[BaseMessage], recorded: Iterable[str]
) -> tuple[Principal, list[str]]:
    """Record every message whose key is not in ``recorded``, in order.

    Returns the principal to keep using (an idle split changes its session id) and the keys
    newly processed, turns and non-turns alike, for the state's :data:`RECORDED_KEY`.
    """
    done = set(recorded)
    new_keys: list[str] = []
    for index, message in enumerate(messages):
        key = message_key(message, index)
        if key in done:
            continue
        done.add(key)
        new_keys.append(key)
        turn = turn_of(message)
        if turn is not None:
            principal = await rt.hooks.on_turn(principal, *turn)
    return principal, new_keys


# --- host-issued recall (spec §14.1) ------------------------------------------------------


def pending_user_turn(messages: Sequence[BaseMessage]) -> HumanMessage | None:
    """The user turn a model call is about to answer: the last message, when it is a human one."""
    if not messages:
        return None
    last = messages[-1]
    if not isinstance(last, HumanMessage) or last.additional_kwargs.get("lc_source") == _SUMMARY_SOURCE:
        return None
    return last


def _context(turns: Sequence[tuple[str, str]], max_chars: int) -> str | None:
    """Last user and assistant turns, oldest first; the tail is kept when it is too long."""
    lines = [f"{role}: {text}" for role, text in turns]
    return "\n".join(lines)[-max_chars:] or None


def search_context(messages: Sequence[BaseMessage], max_chars: int) -> str | None:
    """The current-turn context attached to a host-issued search: last user + assistant turn."""
    last: dict[str, tuple[int, str]] = {}
    for index, message in enumerate(messages):
        turn = turn_of(message)
        if turn is not None and turn[0] in ("user", "assistant"):
            last[turn[0]] = (index, turn[1])
    picked = sorted((index, role, text) for role, (index, text) in last.items())
    return _context([(role, text) for _, role, text in picked], max_chars)


async def transcript_context(rt: Runtime, principal: Principal) -> str | None:
    """The same context for a model-issued search, read from the principal's own transcript."""
    turns = await rt.store.turns(SessionKey.of(principal))
    last = {t.role: t for t in turns if t.role in ("user", "assistant")}
    picked = sorted(last.values(), key=lambda t: t.turn)
    return _context([(t.role, t.content) for t in picked], rt.config.retrieval.rewrite.max_context_chars)


def _recall_text(rendered: str) -> str:
    """The §10.9 rendering under the ``recalled memory`` header instead of the tool's name."""
    tool_header = "memory_search"
    body = rendered[len(tool_header) :] if rendered.startswith(tool_header) else f": {rendered}"
    return RECALL_HEADER + body


def recall_messages(payload: dict[str, Any], text: str) -> list[BaseMessage]:
    """The synthetic ``memory_search`` call (with the host's payload) and its result, both marked."""
    call_id = f"retold_recall_{uuid.uuid4().hex}"
    call = AIMessage(
        content="",
        tool_calls=[{"name": "memory_search", "args": payload, "id": call_id, "type": "tool_call"}],
        additional_kwargs={RECALL_MARK: True},
        id=f"{call_id}_call",
    )
    result = ToolMessage(
        content=text,
        tool_call_id=call_id,
        name="memory_search",
        additional_kwargs={RECALL_MARK: True},
        id=f"{call_id}_result",
    )
    return [call, result]


async def host_recall(
    rt: Runtime, principal: Principal, text: str, context: str | None, *, what: str = "user turn"
) -> tuple[dict[str, Any], str] | None:
    """One host-issued search on ``text`` (spec §14.1): its payload and ``recalled memory`` block.

    ``text`` shorter than ``trigger.auto_min_query_chars`` (whitespace-normalized; ``what``
    names it in the event) is skipped with a ``trigger.skipped`` event. A refused or empty
    search returns None; its search_log row is written by the search itself either way.
    Every adapter's host search goes through here, and through the handler the model's
    tool uses, so the pipeline, the gate and the log are the same.
    """
    trigger = rt.config.retrieval.trigger
    query = " ".join(text.split())
    if not query or len(query) < trigger.auto_min_query_chars:
        await rt.store.append_event(
            "trigger.skipped",
            principal.agent_id,
            payload={
                "reason": f"{what} shorter than trigger.auto_min_query_chars",
                "chars": len(query),
                "min_chars": trigger.auto_min_query_chars,
                "session_id": principal.session_id,
                "user_id": principal.user_id,
            },
        )
        return None
    payload = {"queries": [query], "k": trigger.auto_k}
    result = await rt.tools.call(principal, "memory_search", payload, context=context, trigger="auto")
    if not result.get("ok"):
        log.warning("host-issued memory search refused (%s): %s", result.get("error"), result.get("message"))
        return None
    if not result["results"]:
        return None  # an empty search appends nothing; its search_log row is written all the same
    return payload, _recall_text(result["rendered"])


async def recall(rt: Runtime, principal: Principal, messages: Sequence[BaseMessage]) -> list[BaseMessage]:
    """One host-issued search for a pending user turn; the messages to append (maybe none).

    See :func:`host_recall` for the short-turn skip and the empty result.
    """
    turn = pending_user_turn(messages)
    if turn is None:
        return []
    context = search_context(messages, rt.config.retrieval.rewrite.max_context_chars)
    found = await host_recall(rt, principal, turn.text, context)
    return recall_messages(*found) if found else []


# --- prompt -------------------------------------------------------------------------------


def with_policy(system_message: SystemMessage | None, policy: str) -> SystemMessage:
    """The system message with the §13 policy appended once; the same bytes on every turn."""
    if system_message is None:
        return SystemMessage(content=policy)
    content = system_message.content
    if isinstance(content, str):
        if policy in content:
            return system_message
        return system_message.model_copy(update={"content": f"{content}\n\n{policy}" if content else policy})
    if any(isinstance(b, dict) and b.get("text") == policy for b in content):
        return system_message
    return system_message.model_copy(update={"content": [*content, {"type": "text", "text": policy}]})


# --- tools --------------------------------------------------------------------------------


def tool_text(name: str, result: dict[str, Any]) -> str:
    """What the model sees: the §10.9 rendering for a search, the JSON result otherwise.

    Both keep stored text inside its quoting: the rendering quotes every content line, and
    the JSON is one line in which no string (content, evidence, entity names, tags) can
    carry a raw line break (:func:`~retold.retrieve.render.json_line`). The JSON is the
    result's :func:`~retold.tools.payloads.model_view`: no stage timings, which the host
    keeps in the result it got from ``rt.tools.call``.
    """
    if name == "memory_search" and result.get("ok") and isinstance(result.get("rendered"), str):
        return result["rendered"]
    return json_line(model_view(result))


class MemoryTool(BaseTool):
    """One retold tool as a LangChain tool; the caller is read from the run on every call.

    The argument schema is retold's published JSON Schema (the handler validates against
    it). The middleware narrows it per principal before each model call, so ``memory_write``
    offers only the targets this caller can write. ``schema_dialect`` is ``"portable"``, or
    ``"openai_strict"`` for a model bound with OpenAI's ``strict=True`` (docs/tools.md).
    """

    memory_runtime: Any = Field(exclude=True)
    bridge: LoopBridge = Field(exclude=True)
    schema_dialect: str = Field(default="portable", exclude=True)

    def _run(self, config: RunnableConfig, **kwargs: Any) -> str:
        context = current_context()
        return self.bridge.call(lambda: self._call(context, config, kwargs))

    async def _arun(self, config: RunnableConfig, **kwargs: Any) -> str:
        context = current_context()  # read here: the run's context does not travel to the owning loop
        return await self.bridge.acall(lambda: self._call(context, config, kwargs))

    async def _call(self, context: Any, config: RunnableConfig, payload: dict[str, Any]) -> str:
        rt: Runtime = self.memory_runtime
        principal = run_principal(context, config)
        # Resolve the live session of the thread: an idle split continues under "<id>~2".
        principal = await rt.hooks.on_session_start(principal)
        search_context_text = None
        if self.name == "memory_search" and principal.session_id:
            search_context_text = await transcript_context(rt, principal)
        result = await rt.tools.call(principal, self.name, payload, context=search_context_text)
        return tool_text(self.name, result)


def _generic_schemas(rt: Runtime) -> dict[str, dict[str, Any]]:
    """Build-time schemas before any caller is known; narrowed per principal at model-call time."""
    built = {
        "memory_search": schemas.search_schema(rt.config.retrieval.default_k),
        "memory_get": schemas.get_schema(),
        "memory_write": schemas.write_schema(["personal", "current_project"]),
        "memory_revise": schemas.revise_schema(),
        "memory_forget": schemas.forget_schema(),
    }
    return {name: schemas.tool_schema(name, schema) for name, schema in built.items()}


def memory_tools(
    rt: Runtime,
    mode: str | None = "tool_only",
    *,
    bridge: LoopBridge | None = None,
    schema_dialect: str = "portable",
) -> list[MemoryTool]:
    """The memory tools for a trigger mode (``None``: the configured one), identity-free until called."""
    bridge = bridge or LoopBridge(rt)
    generic = _generic_schemas(rt)
    return [
        MemoryTool(
            name=name,
            description=generic[name]["description"],
            args_schema=schemas.for_dialect(generic[name]["input_schema"], schema_dialect),
            memory_runtime=rt,
            bridge=bridge,
            schema_dialect=schema_dialect,
        )
        for name in tool_names(resolve_mode(rt, mode))
    ]


def narrow_tools(tools: Sequence[Any], rt: Runtime, principal_schemas: list[dict[str, Any]]) -> list[Any]:
    """The request's tools with retold's replaced by this principal's schemas (absent ones dropped)."""
    by_name = {s["name"]: s for s in principal_schemas}
    narrowed: list[Any] = []
    for tool in tools:
        if isinstance(tool, MemoryTool) and tool.memory_runtime is rt:
            schema = by_name.get(tool.name)
            if schema is None:
                continue
            args_schema = schemas.for_dialect(schema["input_schema"], tool.schema_dialect)
            update = {"args_schema": args_schema, "description": schema["description"]}
            narrowed.append(tool.model_copy(update=update))
        else:
            narrowed.append(tool)
    return narrowed


# --- session end --------------------------------------------------------------------------


async def end_session(rt: Runtime, config: RunnableConfig, *, context: Any = None) -> bool:
    """End the thread's session and schedule extraction; False when it had already ended.

    The identity may come from ``context`` or ``configurable``; without either, the session
    row of the thread supplies it (the host only has to know the thread id).
    """
    thread_id = ((config or {}).get("configurable") or {}).get("thread_id")
    if not thread_id:
        raise InvalidArgumentError('end_session needs config={"configurable": {"thread_id": ...}}')
    try:
        principal = run_principal(context, config)
    except InvalidArgumentError:
        # Only the thread id is known: it must name one principal's session (else the error
        # lists the qualified ids; pass the run's context to say whose thread it is).
        try:
            key = await rt.store.resolve_session(str(thread_id))
        except NotFoundError:
            return False
        session = await rt.store.get_session(key)
        if session is None:
            return False
        principal = Principal(session.agent_id, session.user_id, session.id, session.project_id)
    return await rt.hooks.on_session_end(principal)
