"""Structured completions from hosted models: one provider-neutral client (ARCHITECTURE §3).

The extractor, the candidate reviewer, the query rewriter and the LLM judge each make
one JSON-schema-constrained call through :class:`CompletionClient`, which speaks to the
official ``anthropic`` and ``openai`` SDKs (OpenRouter through its OpenAI-compatible
endpoint). The client owns the parts every caller would otherwise get subtly wrong:

* the key comes from the provider's environment variable, and a hosted feature enabled
  without it is a :class:`~retold.errors.ConfigError` naming the variable and the key;
* transient failures (connection, timeout, 429, 5xx) are retried a bounded number of
  times with exponential backoff and jitter (``tenacity``), inside an overall deadline;
  the SDKs' own retries are switched off so there is one retry policy, not two;
* a reply that is not JSON, is truncated, or does not validate against the schema is a
  :class:`SchemaMismatchError`: a failure, never a guess;
* the key never appears in a log line, an error message or ``repr``.

The callers are typed against :class:`StructuredCompleter`, which this client and
:class:`~retold.chat_model.ChatModelCompleter` (a host's LangChain chat model, with that
model's own retries and credentials) both satisfy.

The SDKs are imported on first use, so ``import retold`` loads neither. A test (or a
host with its own transport) passes ``sdk_client`` / ``http_client`` to run the real
request-building and parsing code offline.

    client = CompletionClient.from_env("anthropic", "claude-haiku-4-5-20251001",
                                       setting="ingestion.extraction_provider",
                                       feature="Session extraction")
    data = client.complete(system=prompt, user=payload, schema=SCHEMA, name="extraction")
"""

from __future__ import annotations

import functools
import importlib
import importlib.util
import json
import logging
import os
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal, Protocol

import anyio.to_thread

from retold.errors import ConfigError, MissingExtraError, RetoldError
from retold.util import schema_validator

__all__ = [
    "API_KEY_ENV",
    "OPENROUTER_BASE_URL",
    "CompletionClient",
    "CompletionError",
    "CompletionTimeoutError",
    "Provider",
    "SchemaMismatchError",
    "StructuredCall",
    "StructuredCompleter",
    "as_completion_error",
    "load_prompt",
    "nullable",
    "strict_object",
    "validate",
]

logger = logging.getLogger(__name__)

Provider = Literal["anthropic", "openai", "openrouter"]

API_KEY_ENV: dict[str, str] = {
    "anthropic": "ANTHROPIC_API_KEY",
    "openai": "OPENAI_API_KEY",
    "openrouter": "OPENROUTER_API_KEY",
}
"""The environment variable each provider's key is read from."""

OPENROUTER_BASE_URL = "https://openrouter.ai/api/v1"
_SDK_PACKAGE = {"anthropic": "anthropic", "openai": "openai", "openrouter": "openai"}
_TRANSIENT_NAMES = frozenset(
    {"APIConnectionError", "APITimeoutError", "RateLimitError", "InternalServerError"}
)
_TRANSIENT_STATUS = frozenset({408, 409, 429})


class CompletionError(RetoldError):
    """A hosted completion failed (after its retries); callers fail closed on it."""

    def __init__(self, message: str, *, provider: str, retryable: bool = False) -> None:
        super().__init__(message)
        self.provider = provider
        self.retryable = retryable


class CompletionTimeoutError(CompletionError, TimeoutError):
    """The provider did not answer within the deadline."""


class SchemaMismatchError(CompletionError):
    """The reply was not JSON matching the requested schema (or was cut off)."""


@dataclass(frozen=True)
class StructuredCall:
    """One structured completion: the system prompt, the user message and the reply schema."""

    system: str
    user: str
    schema: Mapping[str, Any]
    name: str


class StructuredCompleter(Protocol):
    """What the extractor, reviewer, rewriter and judge need from a model: one schema-valid dict.

    :class:`CompletionClient` (the provider SDKs) and
    :class:`~retold.chat_model.ChatModelCompleter` (any LangChain chat model) satisfy it.
    Either returns only a dict that validates against ``schema`` and raises
    :class:`CompletionError` otherwise (:class:`SchemaMismatchError` for a bad reply,
    :class:`CompletionTimeoutError` past the deadline), so callers fail closed alike.
    """

    @property
    def provider(self) -> str:
        """Who answered (``anthropic``, ``openai``, ``openrouter``, ``langchain``): errors carry it."""
        ...

    @property
    def identity(self) -> str:
        """The model, recorded with every decision it makes."""
        ...

    def complete(self, *, system: str, user: str, schema: Mapping[str, Any], name: str) -> dict[str, Any]:
        """One structured completion (blocking: call it from a worker thread)."""
        ...

    async def acomplete(
        self, *, system: str, user: str, schema: Mapping[str, Any], name: str
    ) -> dict[str, Any]:
        """One structured completion without blocking the event loop."""
        ...


def _transient(exc: BaseException) -> bool:
    """Worth another attempt: a dropped connection, a timeout, a rate limit or a server error."""
    if isinstance(exc, CompletionError):
        return False
    if isinstance(exc, TimeoutError | ConnectionError):
        return True
    if _TRANSIENT_NAMES & {cls.__name__ for cls in type(exc).__mro__}:
        return True
    status = getattr(exc, "status_code", None)
    return isinstance(status, int) and (status in _TRANSIENT_STATUS or status >= 500)


def _is_timeout(exc: BaseException) -> bool:
    names = {"APITimeoutError", "ModelTimeoutError"}  # the SDKs' and langchain-core's timeout errors
    return isinstance(exc, TimeoutError) or any(c.__name__ in names for c in type(exc).__mro__)


def as_completion_error(
    exc: BaseException, *, identity: str, provider: str, secrets: tuple[str, ...] = (), hint: str = ""
) -> CompletionError:
    """Any failure of a model call as a :class:`CompletionError` (a timeout: :class:`CompletionTimeoutError`).

    The message names the error class and HTTP status and keeps 200 characters of its
    text with every one of ``secrets`` (the API keys in play) redacted; ``hint`` is
    appended for 401/403.
    """
    if isinstance(exc, CompletionError):
        return exc
    status = getattr(exc, "status_code", None)
    detail = f"{type(exc).__name__}" + (f" {status}" if isinstance(status, int) else "")
    text = str(exc)
    for secret in secrets:
        if secret:
            text = text.replace(secret, "***")
    text = text[:200]
    message = f"{identity}: {detail}: {text}" if text else f"{identity}: {detail}"
    if status in (401, 403):
        message += hint
    retryable = _transient(exc) or bool(getattr(exc, "is_retryable", False))
    if _is_timeout(exc):
        return CompletionTimeoutError(message, provider=provider, retryable=True)
    return CompletionError(message, provider=provider, retryable=retryable)


class CompletionClient:
    """Async and sync structured completions against one hosted model.

    ``complete`` (used from worker threads, where the model protocols run) and
    ``acomplete`` (for async callers) share request building, parsing and validation;
    only the I/O differs. ``max_attempts`` bounds the tries and ``timeout_s`` both each
    request and the whole retry loop.
    """

    def __init__(
        self,
        provider: Provider,
        model: str,
        *,
        api_key: str,
        max_output_tokens: int = 4096,
        timeout_s: float = 60.0,
        max_attempts: int = 3,
        base_url: str | None = None,
        sdk_client: Any = None,
        async_sdk_client: Any = None,
        http_client: Any = None,
        async_http_client: Any = None,
        backoff_initial_s: float = 0.5,
        backoff_max_s: float = 8.0,
    ) -> None:
        if provider not in API_KEY_ENV:
            raise ConfigError(
                f"unknown hosted provider {provider!r}; use one of {', '.join(API_KEY_ENV)}", key="provider"
            )
        if not isinstance(api_key, str) or not api_key.strip():
            raise ConfigError(f"an API key is required for {provider}; set {API_KEY_ENV[provider]}")
        if max_attempts < 1 or max_output_tokens < 1 or timeout_s <= 0:
            raise ConfigError("max_attempts, max_output_tokens and timeout_s must be positive")
        self.provider: Provider = provider
        self.model = model
        self.max_output_tokens = max_output_tokens
        self.timeout_s = float(timeout_s)
        self.max_attempts = max_attempts
        self.base_url = base_url or (OPENROUTER_BASE_URL if provider == "openrouter" else None)
        self._key = api_key.strip()
        self._sdk = sdk_client
        self._async_sdk = async_sdk_client
        self._http_client = http_client
        self._async_http_client = async_http_client
        self._backoff = (backoff_initial_s, backoff_max_s)
        self._lock = threading.Lock()

    @classmethod
    def from_env(
        cls,
        provider: Provider,
        model: str,
        *,
        setting: str,
        feature: str,
        env: Mapping[str, str] | None = None,
        **kwargs: Any,
    ) -> CompletionClient:
        """A client keyed from the provider's environment variable, or a clear error.

        ``setting`` names the config key that chose the provider and ``feature`` the
        capability that needs it, so the error tells the user what to change. The SDK
        must be installed (``retold[hosted]``); it is checked here but imported on first use.
        """
        env = os.environ if env is None else env
        variable = API_KEY_ENV.get(provider)
        if variable is None:
            raise ConfigError(f"{setting}: unknown hosted provider {provider!r}", key=setting)
        key = env.get(variable, "")
        if not key.strip():
            raise ConfigError(
                f"{feature} is enabled and uses {provider} ({setting}), but {variable} is not set. "
                f"Export {variable}, choose another provider in {setting}, or turn the feature off.",
                key=setting,
            )
        if kwargs.get("sdk_client") is None and kwargs.get("async_sdk_client") is None:
            package = _SDK_PACKAGE[provider]
            if importlib.util.find_spec(package) is None:
                raise MissingExtraError(package, "hosted", feature)
        return cls(provider, model, api_key=key, **kwargs)

    @property
    def identity(self) -> str:
        """``provider:model``, recorded with every decision the model makes."""
        return f"{self.provider}:{self.model}"

    def __repr__(self) -> str:
        return (
            f"CompletionClient({self.identity!r}, timeout_s={self.timeout_s}, attempts={self.max_attempts})"
        )

    # --- the calls ------------------------------------------------------------------------------

    def complete(self, *, system: str, user: str, schema: Mapping[str, Any], name: str) -> dict[str, Any]:
        """One structured completion (blocking: call it from a worker thread)."""
        import tenacity

        call = StructuredCall(system, user, schema, name)
        kwargs = self._request(call)
        retrying = tenacity.Retrying(**self._retry_policy(tenacity))
        try:
            response = retrying(self._create, kwargs)
        except Exception as exc:
            raise self._translate(exc) from exc
        return self._parse(call, response)

    async def acomplete(
        self, *, system: str, user: str, schema: Mapping[str, Any], name: str
    ) -> dict[str, Any]:
        """One structured completion on the async SDK client (never blocks the event loop)."""
        import tenacity

        call = StructuredCall(system, user, schema, name)
        kwargs = self._request(call)
        retrying = tenacity.AsyncRetrying(**self._retry_policy(tenacity))
        try:
            response = await retrying(self._acreate, kwargs)
        except Exception as exc:
            raise self._translate(exc) from exc
        return self._parse(call, response)

    def _retry_policy(self, tenacity: Any) -> dict[str, Any]:
        initial, ceiling = self._backoff
        return {
            "stop": tenacity.stop_after_attempt(self.max_attempts)
            | tenacity.stop_after_delay(self.timeout_s),
            "wait": tenacity.wait_exponential_jitter(initial=initial, max=ceiling, jitter=initial),
            "retry": tenacity.retry_if_exception(_transient),
            "before_sleep": self._log_retry,
            "reraise": True,
        }

    def _log_retry(self, state: Any) -> None:
        exc = state.outcome.exception() if state.outcome is not None else None
        logger.warning(
            "%s: attempt %d of %d failed (%s); retrying",
            self.identity,
            state.attempt_number,
            self.max_attempts,
            type(exc).__name__,
        )

    def _create(self, kwargs: dict[str, Any]) -> Any:
        sdk = self._sync_client()
        if self.provider == "anthropic":
            return sdk.messages.create(**kwargs)
        return sdk.chat.completions.create(**kwargs)

    async def _acreate(self, kwargs: dict[str, Any]) -> Any:
        # The first call imports the SDK and builds its HTTP client: seconds, off the event loop.
        sdk = self._async_sdk or await anyio.to_thread.run_sync(self._async_client)
        if self.provider == "anthropic":
            return await sdk.messages.create(**kwargs)
        return await sdk.chat.completions.create(**kwargs)

    # --- the SDK clients, built on first use ------------------------------------------------------

    def _sync_client(self) -> Any:
        with self._lock:
            if self._sdk is None:
                self._sdk = self._build(asynchronous=False)
            return self._sdk

    def _async_client(self) -> Any:
        with self._lock:
            if self._async_sdk is None:
                self._async_sdk = self._build(asynchronous=True)
            return self._async_sdk

    def _build(self, *, asynchronous: bool) -> Any:
        package = _SDK_PACKAGE[self.provider]
        try:
            module = importlib.import_module(package)
        except ImportError as exc:
            raise MissingExtraError(package, "hosted", f"The {self.provider} model client") from exc
        options: dict[str, Any] = {"api_key": self._key, "max_retries": 0, "timeout": self.timeout_s}
        if self.base_url is not None:
            options["base_url"] = self.base_url
        http_client = self._async_http_client if asynchronous else self._http_client
        if http_client is not None:
            options["http_client"] = http_client
        if package == "anthropic":
            options["open_telemetry"] = False  # retold sends nothing anywhere (ARCHITECTURE §2)
            factory = module.AsyncAnthropic if asynchronous else module.Anthropic
        else:
            factory = module.AsyncOpenAI if asynchronous else module.OpenAI
        try:
            return factory(**options)
        except TypeError:  # an SDK release without the telemetry switch
            options.pop("open_telemetry", None)
            return factory(**options)

    # --- request and reply, shared by both paths -------------------------------------------------

    def _request(self, call: StructuredCall) -> dict[str, Any]:
        schema = dict(call.schema)
        if self.provider == "anthropic":
            return {
                "model": self.model,
                "max_tokens": self.max_output_tokens,
                "system": call.system,
                "messages": [{"role": "user", "content": call.user}],
                "output_config": {"format": {"type": "json_schema", "schema": schema}},
                "timeout": self.timeout_s,
            }
        tokens = "max_tokens" if self.provider == "openrouter" else "max_completion_tokens"
        return {
            "model": self.model,
            tokens: self.max_output_tokens,
            "messages": [
                {"role": "system", "content": call.system},
                {"role": "user", "content": call.user},
            ],
            "response_format": {
                "type": "json_schema",
                "json_schema": {"name": call.name, "schema": schema, "strict": True},
            },
            "timeout": self.timeout_s,
        }

    def _reply_text(self, response: Any) -> str:
        if self.provider == "anthropic":
            stop = getattr(response, "stop_reason", None)
            if stop == "max_tokens":
                raise SchemaMismatchError(
                    f"{self.identity}: the reply was cut off at {self.max_output_tokens} tokens "
                    "(raise hosted_max_output_tokens)",
                    provider=self.provider,
                )
            if stop == "refusal":
                raise CompletionError(
                    f"{self.identity}: the model refused the request", provider=self.provider
                )
            blocks = getattr(response, "content", None) or []
            return "".join(getattr(b, "text", "") for b in blocks if getattr(b, "type", None) == "text")
        choices = getattr(response, "choices", None) or []
        if not choices:
            raise SchemaMismatchError(f"{self.identity}: the reply had no choices", provider=self.provider)
        choice = choices[0]
        if getattr(choice, "finish_reason", None) == "length":
            raise SchemaMismatchError(
                f"{self.identity}: the reply was cut off at {self.max_output_tokens} tokens",
                provider=self.provider,
            )
        message = getattr(choice, "message", None)
        if getattr(message, "refusal", None):
            raise CompletionError(f"{self.identity}: the model refused the request", provider=self.provider)
        return getattr(message, "content", None) or ""

    def _parse(self, call: StructuredCall, response: Any) -> dict[str, Any]:
        text = self._reply_text(response).strip()
        try:
            data = json.loads(text)
        except ValueError as exc:
            raise SchemaMismatchError(
                f"{self.identity}: the {call.name} reply is not JSON ({len(text)} characters)",
                provider=self.provider,
            ) from exc
        validate(data, call.schema, call.name, self.identity, self.provider)
        assert isinstance(data, dict)
        return data

    def _translate(self, exc: BaseException) -> CompletionError:
        """SDK and transport errors → :class:`CompletionError`, with the key redacted."""
        return as_completion_error(
            exc,
            identity=self.identity,
            provider=self.provider,
            secrets=(self._key,),
            hint=f" (check {API_KEY_ENV[self.provider]})",
        )


def validate(data: Any, schema: Mapping[str, Any], name: str, identity: str, provider: str) -> None:
    """Raise :class:`SchemaMismatchError` unless ``data`` matches ``schema``.

    The message names the failing path and rule, never the reply's content.
    """
    from jsonschema.exceptions import best_match

    error = best_match(schema_validator(schema).iter_errors(data))
    if error is not None:
        where = "/".join(str(p) for p in error.absolute_path) or "(root)"
        raise SchemaMismatchError(
            f"{identity}: the {name} reply does not match its schema at {where} ({error.validator})",
            provider=provider,
        )


@functools.cache
def load_prompt(package: str, version: str) -> str:
    """The versioned prompt ``<package>/prompts/<version>.md`` (shipped as package data)."""
    from importlib.resources import files

    return (files(package) / "prompts" / f"{version}.md").read_text(encoding="utf-8")


def nullable(schema: Mapping[str, Any]) -> dict[str, Any]:
    """``schema`` or null, in the form both providers' strict structured outputs accept."""
    return {"anyOf": [dict(schema), {"type": "null"}]}


def strict_object(properties: Mapping[str, Any]) -> dict[str, Any]:
    """An object whose every property is required and which allows no others (strict mode)."""
    return {
        "type": "object",
        "properties": dict(properties),
        "required": list(properties),
        "additionalProperties": False,
    }
