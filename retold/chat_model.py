"""Structured completions from a LangChain chat model the host already has (``BaseChatModel``).

A LangGraph user has a chat model configured (``ChatAnthropic(...)``,
``init_chat_model("openai:gpt-4.1-mini")``, a gateway, a local server); asking them for a
second set of keys and provider settings just for retold's extractor, reviewer, rewriter
and LLM judge is friction. :class:`ChatModelCompleter` gives those four the same
:class:`~retold.hosted.StructuredCompleter` surface as :class:`~retold.hosted.CompletionClient`
over ``model.with_structured_output(schema, method="json_schema", include_raw=True)``
(the model's default structured-output method where it has no JSON-schema mode), and
keeps the guarantees that matter to the callers:

* the parsed reply is validated against the schema with :func:`~retold.hosted.validate`;
  a reply that does not parse, is cut off or does not validate is a
  :class:`~retold.hosted.SchemaMismatchError`, a refusal a
  :class:`~retold.hosted.CompletionError`: the callers fail closed, never guess;
* every other failure is a :class:`~retold.hosted.CompletionError`, a timeout or a call
  past ``timeout_s`` a :class:`~retold.hosted.CompletionTimeoutError`; the model's API
  keys are redacted from the message;
* no second retry layer: the chat model's own ``max_retries`` is the retry policy.

    completer = ChatModelCompleter(ChatAnthropic(model="claude-haiku-4-5"), timeout_s=30)
    extractor = StructuredLLMExtractor(completer)   # or StructuredLLMExtractor.from_chat_model(model)
    rt = await retold.open_runtime("memory.sqlite", config, chat_model=model)   # every hosted feature

Which stages a chat model answers is :func:`retold.chat_stages.hosted_stages`: the stages
import this module, never the other way round. ``langchain-core`` is a core dependency but is
imported on first use, so ``import retold`` does not load it.
"""

from __future__ import annotations

import concurrent.futures
import contextvars
import json
import logging
import threading
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, TypeVar

import anyio

from retold.errors import ConfigError
from retold.hosted import CompletionError, SchemaMismatchError, as_completion_error, validate

if TYPE_CHECKING:
    from langchain_core.language_models.chat_models import BaseChatModel
    from langchain_core.runnables import Runnable

__all__ = ["PROVIDER", "ChatModelCompleter", "chat_model_name"]

logger = logging.getLogger(__name__)

PROVIDER = "langchain"
"""The ``provider`` a chat model's errors carry and its identities start with."""

_T = TypeVar("_T")
# How each provider reports a reply cut off at its output-token limit (response_metadata).
_CUT_OFF = {"stop_reason": "max_tokens", "finish_reason": "length"}
# Binding a schema: JSON-schema mode strict where the model supports it, else its default method.
_METHODS: tuple[dict[str, Any], ...] = (
    {"method": "json_schema", "strict": True},
    {"method": "json_schema"},
    {},
)


def chat_model_name(model: Any) -> str:
    """The model a chat model calls (``claude-haiku-4-5``), whatever field its class keeps it in."""
    for attr in ("model_name", "model", "model_id", "deployment_name"):
        value = getattr(model, attr, None)
        if isinstance(value, str) and value:
            return value
    ls_params = getattr(model, "_get_ls_params", None)
    if callable(ls_params):
        try:
            name = ls_params().get("ls_model_name")
        except Exception:  # an integration's own bookkeeping must not break the identity
            name = None
        if isinstance(name, str) and name:
            return name
    return "unknown"


def _secrets(model: Any) -> tuple[str, ...]:
    """The API keys a chat model holds (pydantic ``SecretStr`` fields), to redact from errors."""
    from pydantic import SecretStr

    fields = getattr(model, "__dict__", {})
    return tuple(v.get_secret_value() for v in fields.values() if isinstance(v, SecretStr))


def _has_structured_output(model: Any) -> bool:
    """True when ``with_structured_output`` can bind a schema (the base class needs ``bind_tools``)."""
    from langchain_core.language_models.chat_models import BaseChatModel

    if not isinstance(model, BaseChatModel):  # a configurable init_chat_model() wrapper, a proxy
        return callable(getattr(model, "with_structured_output", None))
    cls = type(model)
    return (
        cls.with_structured_output is not BaseChatModel.with_structured_output
        or cls.bind_tools is not BaseChatModel.bind_tools
    )


def _call_with_deadline(fn: Callable[[], _T], timeout_s: float) -> _T:
    """``fn()`` in a daemon thread, waited for at most ``timeout_s`` (then ``TimeoutError``).

    A sync chat-model call cannot be interrupted; past the deadline it is abandoned and
    its answer dropped, as the extraction graph and the rewrite stage do with their calls.
    """
    future: concurrent.futures.Future[_T] = concurrent.futures.Future()
    context = contextvars.copy_context()  # LangChain's callbacks and tracing read context variables

    def run() -> None:
        if not future.set_running_or_notify_cancel():
            return
        try:
            future.set_result(context.run(fn))
        except BaseException as exc:
            future.set_exception(exc)

    threading.Thread(target=run, name="retold-chat-model", daemon=True).start()
    return future.result(timeout=timeout_s)


class ChatModelCompleter:
    """:class:`~retold.hosted.StructuredCompleter` over a LangChain chat model.

    ``timeout_s`` bounds each whole call (``None``: the model's own timeout only). The
    model's retries, output-token limit and temperature are its own settings; retold's
    ``hosted_max_output_tokens`` and ``max_attempts`` do not apply to it.
    """

    provider = PROVIDER

    def __init__(self, model: BaseChatModel, *, timeout_s: float | None = 60.0) -> None:
        if not _has_structured_output(model):
            raise ConfigError(
                f"{type(model).__name__} has no structured output (it implements neither "
                "with_structured_output nor bind_tools); pass a chat model that does, such as "
                "ChatAnthropic, ChatOpenAI or init_chat_model('provider:model')",
                key="chat_model",
            )
        if timeout_s is not None and timeout_s <= 0:
            raise ConfigError("timeout_s must be positive", key="chat_model")
        self.model = model
        self.timeout_s = None if timeout_s is None else float(timeout_s)
        self._identity = f"{PROVIDER}:{type(model).__name__}:{chat_model_name(model)}"
        self._secrets = _secrets(model)
        self._bound: dict[str, Runnable[Any, Any]] = {}
        self._lock = threading.Lock()

    @property
    def identity(self) -> str:
        """``langchain:<chat model class>:<model>``, recorded with every decision the model makes."""
        return self._identity

    def __repr__(self) -> str:
        return f"ChatModelCompleter({self.identity!r}, timeout_s={self.timeout_s})"

    def complete(self, *, system: str, user: str, schema: Mapping[str, Any], name: str) -> dict[str, Any]:
        """One structured completion (blocking: call it from a worker thread)."""
        runnable = self._structured(schema, name)
        messages = self._messages(system, user)
        try:
            if self.timeout_s is None:
                reply = runnable.invoke(messages)
            else:
                reply = _call_with_deadline(lambda: runnable.invoke(messages), self.timeout_s)
        except Exception as exc:
            raise self._translate(exc) from exc
        return self._parse(reply, schema, name)

    async def acomplete(
        self, *, system: str, user: str, schema: Mapping[str, Any], name: str
    ) -> dict[str, Any]:
        """One structured completion on the model's async path (never blocks the event loop)."""
        runnable = self._structured(schema, name)
        messages = self._messages(system, user)
        try:
            with anyio.fail_after(self.timeout_s):
                reply = await runnable.ainvoke(messages)
        except Exception as exc:
            raise self._translate(exc) from exc
        return self._parse(reply, schema, name)

    # --- binding, shared by both paths ----------------------------------------------------------

    @staticmethod
    def _messages(system: str, user: str) -> list[Any]:
        from langchain_core.messages import HumanMessage, SystemMessage

        return [SystemMessage(system), HumanMessage(user)]

    def _structured(self, schema: Mapping[str, Any], name: str) -> Runnable[Any, Any]:
        """The model bound to ``schema``, built once per schema (binding converts it)."""
        key = json.dumps([name, schema], sort_keys=True, default=dict)
        with self._lock:
            bound = self._bound.get(key)
            if bound is None:
                bound = self._bound[key] = self._bind(schema, name)
            return bound

    def _bind(self, schema: Mapping[str, Any], name: str) -> Runnable[Any, Any]:
        # The title names the tool / response format; providers require one.
        titled = {"title": name, "description": f"The {name} reply.", **schema}
        last: Exception | None = None
        for options in _METHODS:
            try:
                return self.model.with_structured_output(titled, include_raw=True, **options)
            except (TypeError, ValueError, NotImplementedError) as exc:  # that method is not supported
                last = exc
        raise ConfigError(
            f"{self.identity} could not bind the {name} schema for structured output: "
            f"{type(last).__name__}: {last}",
            key="chat_model",
        ) from last

    # --- reply and errors -----------------------------------------------------------------------

    def _parse(self, reply: Any, schema: Mapping[str, Any], name: str) -> dict[str, Any]:
        from langchain_core.exceptions import ModelRefusalError

        reply = reply if isinstance(reply, Mapping) else {}  # include_raw=True answers a dict
        raw, parsed, error = (reply.get(k) for k in ("raw", "parsed", "parsing_error"))
        metadata = getattr(raw, "response_metadata", None) or {}
        if any(metadata.get(field) == value for field, value in _CUT_OFF.items()):
            raise SchemaMismatchError(
                f"{self.identity}: the {name} reply was cut off at the model's output-token limit "
                "(raise max_tokens on the chat model)",
                provider=PROVIDER,
            )
        if isinstance(error, ModelRefusalError):
            raise CompletionError(f"{self.identity}: the model refused the request", provider=PROVIDER)
        if error is not None or not isinstance(parsed, dict):
            problem = type(error).__name__ if error is not None else "no structured output"
            raise SchemaMismatchError(
                f"{self.identity}: the {name} reply could not be parsed ({problem})", provider=PROVIDER
            )
        validate(parsed, schema, name, self.identity, PROVIDER)
        return parsed

    def _translate(self, exc: BaseException) -> CompletionError:
        return as_completion_error(
            exc,
            identity=self.identity,
            provider=PROVIDER,
            secrets=self._secrets,
            hint=" (check the chat model's API key)",
        )
