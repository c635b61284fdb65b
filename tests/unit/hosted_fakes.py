"""Duck-typed stand-ins for the anthropic and openai SDK clients, for offline unit tests.

They answer the calls :class:`retold.hosted.CompletionClient` makes with objects shaped
like the SDKs' replies, and record every request, so the unit suite (which runs without
the ``hosted`` extra) exercises request building, retries, parsing and validation. The
integration suite runs the same code through the real SDK classes.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from types import SimpleNamespace
from typing import Any


class RateLimitError(Exception):
    status_code = 429


class InternalServerError(Exception):
    status_code = 500


class BadRequestError(Exception):
    status_code = 400


class AuthenticationError(Exception):
    status_code = 401


class APITimeoutError(Exception):
    pass


def anthropic_reply(data: Any, *, stop_reason: str = "end_turn") -> Any:
    text = data if isinstance(data, str) else json.dumps(data)
    return SimpleNamespace(stop_reason=stop_reason, content=[SimpleNamespace(type="text", text=text)])


def openai_reply(data: Any, *, finish_reason: str = "stop", refusal: str | None = None) -> Any:
    text = data if isinstance(data, str) else json.dumps(data)
    message = SimpleNamespace(content=text, refusal=refusal)
    return SimpleNamespace(choices=[SimpleNamespace(finish_reason=finish_reason, message=message)])


class FakeSDK:
    """``client.messages.create`` and ``client.chat.completions.create`` answering from a script.

    Each scripted item is a reply object, an exception to raise, or a callable of the
    request keyword arguments. ``delay_s`` sleeps before answering.
    """

    def __init__(self, replies: Sequence[Any] = (), *, delay_s: float = 0.0) -> None:
        self.replies = list(replies)
        self.requests: list[dict[str, Any]] = []
        self.delay_s = delay_s
        self.messages = SimpleNamespace(create=self._create)
        self.chat = SimpleNamespace(completions=SimpleNamespace(create=self._create))

    def _create(self, **kwargs: Any) -> Any:
        self.requests.append(kwargs)
        if self.delay_s:
            time.sleep(self.delay_s)
        reply = self.replies.pop(0) if len(self.replies) > 1 else self.replies[0]
        if isinstance(reply, BaseException):
            raise reply
        if callable(reply):
            return reply(kwargs)
        return reply


class FakeAsyncSDK(FakeSDK):
    def __init__(self, replies: Sequence[Any] = ()) -> None:
        super().__init__(replies)

        async def create(**kwargs: Any) -> Any:
            return self._create(**kwargs)

        self.messages = SimpleNamespace(create=create)
        self.chat = SimpleNamespace(completions=SimpleNamespace(create=create))


def pretend_sdks_installed(monkeypatch: Any) -> None:
    """Make the SDK presence check pass, for tests that build a hosted model but never call it.

    The unit suite also runs without the ``hosted`` extra (``make unit-lean``).
    """
    import importlib.util

    real = importlib.util.find_spec

    def find_spec(name: str, *args: Any) -> Any:
        if name in ("anthropic", "openai"):
            return real("json")  # any spec: the check only asks whether one exists
        return real(name, *args)

    monkeypatch.setattr(importlib.util, "find_spec", find_spec)
