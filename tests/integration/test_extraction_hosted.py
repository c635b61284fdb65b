"""The hosted client through the real anthropic and openai SDK classes, offline and (with a key) live.

The offline tests give the SDKs an ``httpx2.MockTransport``: the SDKs build the real
HTTP requests, parse the real response bodies and raise their real exception classes,
so request shapes, retries, timeouts and parsing are tested exactly as they run, with
no network. The live smoke test calls the provider only when ``ANTHROPIC_API_KEY`` or
``OPENAI_API_KEY`` is set; without one it records that no call was made (the suite
forbids skips) and the offline tests here cover the same code path.
"""

from __future__ import annotations

import json
import os
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx2
import pytest

import retold
from retold.hosted import CompletionClient, CompletionError, CompletionTimeoutError, strict_object
from retold.ingest.extraction.structured import StructuredLLMExtractor, StructuredLLMReviewer
from retold.models import Principal, Scope, SessionKey
from retold.retrieve.rewrite import HostedLLMQueryRewriter, rewrite_stage
from retold.testing import FakeClock, FakeEmbedder, FakeJudge

pytestmark = pytest.mark.integration

KEY = "sk-ant-test-NOT-A-REAL-KEY-42"
SCHEMA = strict_object({"answer": {"type": "string"}})

Handler = Callable[[httpx2.Request], httpx2.Response]


def anthropic_body(data: Any, stop_reason: str = "end_turn") -> dict[str, Any]:
    return {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "claude-haiku-4-5-20251001",
        "content": [{"type": "text", "text": json.dumps(data)}],
        "stop_reason": stop_reason,
        "stop_sequence": None,
        "usage": {"input_tokens": 10, "output_tokens": 10},
    }


def openai_body(data: Any, finish_reason: str = "stop") -> dict[str, Any]:
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 0,
        "model": "gpt-test",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": json.dumps(data), "refusal": None},
                "finish_reason": finish_reason,
                "logprobs": None,
            }
        ],
        "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
    }


class Recorder:
    """A MockTransport handler answering from a script and keeping every request."""

    def __init__(self, *responses: httpx2.Response | Exception) -> None:
        self.responses = list(responses)
        self.requests: list[httpx2.Request] = []

    def __call__(self, request: httpx2.Request) -> httpx2.Response:
        self.requests.append(request)
        item = self.responses.pop(0) if len(self.responses) > 1 else self.responses[0]
        if isinstance(item, Exception):
            raise item
        return item

    def body(self, index: int = 0) -> dict[str, Any]:
        return json.loads(self.requests[index].content)


def ok(body: dict[str, Any]) -> httpx2.Response:
    return httpx2.Response(200, json=body)


def failing(status: int) -> httpx2.Response:
    return httpx2.Response(
        status, json={"type": "error", "error": {"type": "x", "message": f"status {status}"}}
    )


def sdk_client(provider: str, recorder: Recorder, **kwargs: Any) -> CompletionClient:
    kwargs.setdefault("backoff_initial_s", 0.001)
    kwargs.setdefault("backoff_max_s", 0.002)
    return CompletionClient(
        provider,  # type: ignore[arg-type]
        "test-model",
        api_key=KEY,
        http_client=httpx2.Client(transport=httpx2.MockTransport(recorder)),
        async_http_client=httpx2.AsyncClient(transport=httpx2.MockTransport(recorder)),
        **kwargs,
    )


def ask(client: CompletionClient) -> dict[str, Any]:
    return client.complete(system="be brief", user="hello", schema=SCHEMA, name="answer")


# --- the real SDKs, offline ------------------------------------------------------------------------


def test_anthropic_sdk_request_and_reply() -> None:
    recorder = Recorder(ok(anthropic_body({"answer": "hi"})))
    assert ask(sdk_client("anthropic", recorder, max_output_tokens=77)) == {"answer": "hi"}
    [request] = recorder.requests
    assert request.url.path == "/v1/messages"
    assert KEY in (
        request.headers.get("x-api-key", ""),
        request.headers.get("authorization", "").removeprefix("Bearer "),
    )
    body = recorder.body()
    assert body["max_tokens"] == 77 and body["system"] == "be brief"
    assert body["output_config"] == {"format": {"type": "json_schema", "schema": SCHEMA}}


@pytest.mark.parametrize(
    ("provider", "host"), [("openai", "api.openai.com"), ("openrouter", "openrouter.ai")]
)
def test_openai_sdk_request_and_reply(provider: str, host: str) -> None:
    recorder = Recorder(ok(openai_body({"answer": "hi"})))
    assert ask(sdk_client(provider, recorder)) == {"answer": "hi"}
    [request] = recorder.requests
    assert request.url.host == host and request.url.path.endswith("/chat/completions")
    assert request.headers["authorization"] == f"Bearer {KEY}"
    assert recorder.body()["response_format"]["json_schema"]["strict"] is True


@pytest.mark.parametrize("status", [429, 500, 529])
def test_real_sdk_transient_errors_are_retried_once_per_attempt(status: int) -> None:
    recorder = Recorder(failing(status), ok(anthropic_body({"answer": "second"})))
    assert ask(sdk_client("anthropic", recorder, max_attempts=3)) == {"answer": "second"}
    assert len(recorder.requests) == 2  # the SDK's own retries are off: one policy, ours


def test_real_sdk_permanent_errors_are_not_retried_and_name_the_key_variable() -> None:
    recorder = Recorder(failing(401))
    with pytest.raises(CompletionError, match="ANTHROPIC_API_KEY") as err:
        ask(sdk_client("anthropic", recorder, max_attempts=3))
    assert len(recorder.requests) == 1 and KEY not in str(err.value)


def test_real_sdk_timeout_is_a_completion_timeout() -> None:
    recorder = Recorder(httpx2.ReadTimeout("slow"))
    with pytest.raises(CompletionTimeoutError):
        ask(sdk_client("openai", recorder, max_attempts=2))
    assert len(recorder.requests) == 2


def test_real_sdk_truncated_reply_is_a_failure() -> None:
    recorder = Recorder(ok(openai_body({"answer": "x"}, finish_reason="length")))
    with pytest.raises(CompletionError, match="cut off"):
        ask(sdk_client("openai", recorder))


async def test_real_async_sdk_path() -> None:
    recorder = Recorder(failing(429), ok(anthropic_body({"answer": "async"})))
    client = sdk_client("anthropic", recorder)
    assert await client.acomplete(system="s", user="u", schema=SCHEMA, name="answer") == {"answer": "async"}
    assert len(recorder.requests) == 2


EXTRACTED = {
    "candidates": [
        {
            "type": "semantic",
            "content": "The user prefers concise answers.",
            "attribute": "answer_style",
            "source_kind": "user_statement",
            "evidence": "I prefer concise answers",
            "evidence_turn": 1,
            "entities": [],
            "event_at": None,
            "valid_from": None,
            "valid_until": None,
            "review_at": None,
            "confidence": 0.9,
        }
    ],
    "summary": {"content": "The user set a preference for short answers.", "decisions": [], "entities": []},
}


async def test_extraction_through_the_real_sdks(tmp_path: Path) -> None:
    extract = Recorder(ok(anthropic_body(EXTRACTED)))
    review = Recorder(
        ok(openai_body({"action": "accept", "reason": "a stable preference", "revision": None}))
    )
    extractor = StructuredLLMExtractor(sdk_client("anthropic", extract))
    reviewer = StructuredLLMReviewer(sdk_client("openai", review))
    async with retold.open_runtime(
        tmp_path / "m.sqlite", embedder=FakeEmbedder(), judge=FakeJudge(), clock=FakeClock(),
        extractor=extractor, reviewer=reviewer,
    ) as rt:  # fmt: skip
        await rt.host.provision_user("u1", aliases=["Aditya"])
        await rt.host.grant("planner", Scope("user", "u1"), read=True, write=True)
        p = await rt.hooks.on_session_start(Principal("planner", "u1", "s1"))
        p = await rt.hooks.on_turn(p, "user", "Hi. I prefer concise answers, please.")
        p = await rt.hooks.on_turn(p, "assistant", "Understood.")
        await rt.hooks.on_session_end(p)
        await rt.join_background()
        [run] = await rt.store.events(kind="extraction.run")
        assert run["payload"]["counts"]["created"] == 1
        assert run["payload"]["extractor"]["prompt_version"] == "extract_v1"
        sent = json.loads(extract.body()["messages"][0]["content"])
        assert sent["transcript"][0]["content"] == "Hi. I prefer concise answers, please."
        assert json.loads(review.body()["messages"][1]["content"])["candidate"]["evidence_turn"] == 1


async def test_rewriting_through_the_real_sdk() -> None:
    recorder = Recorder(ok(anthropic_body({"queries": ["Priya's preferred answer length"]})))
    rewriter = HostedLLMQueryRewriter(sdk_client("anthropic", recorder, timeout_s=0.8, max_attempts=2))
    context = "user: Tell Priya the plan."
    queries, status = await rewrite_stage(
        rewriter, ["what does she prefer"], context, enabled=True, max_context_chars=2000, timeout_ms=800
    )
    assert (queries, status) == (["Priya's preferred answer length"], "applied")
    invented = Recorder(ok(anthropic_body({"queries": ["Aditya's preferred answer length"]})))
    rewriter = HostedLLMQueryRewriter(sdk_client("anthropic", invented))
    assert await rewrite_stage(
        rewriter, ["what does she prefer"], context, enabled=True, max_context_chars=2000, timeout_ms=800
    ) == (["what does she prefer"], "failed")


# --- live ----------------------------------------------------------------------------------------


def _live_provider() -> tuple[str, str] | None:
    if os.environ.get("ANTHROPIC_API_KEY"):
        return "anthropic", os.environ.get("RETOLD_LIVE_ANTHROPIC_MODEL", "claude-haiku-4-5-20251001")
    if os.environ.get("OPENAI_API_KEY"):
        return "openai", os.environ.get("RETOLD_LIVE_OPENAI_MODEL", "gpt-4o-mini")
    return None


async def test_live_smoke_extraction_and_rewriting(
    tmp_path: Path, record_property: Callable[[str, object], None]
) -> None:
    live = _live_provider()
    if live is None:
        reason = "live hosted call not made: neither ANTHROPIC_API_KEY nor OPENAI_API_KEY is set"
        record_property("live_call", reason)
        # A builtin category: pytest-xdist's controller must import a warning's class to report it.
        warnings.warn(UserWarning(f"LiveCallNotMade: {reason}"), stacklevel=1)
        return
    provider, model = live
    record_property("live_call", f"{provider}:{model}")

    def make() -> CompletionClient:
        return CompletionClient.from_env(
            provider, model, setting="live", feature="live smoke test", timeout_s=60
        )  # type: ignore[arg-type]

    async with retold.open_runtime(
        tmp_path / "m.sqlite", embedder=FakeEmbedder(), judge=FakeJudge(),
        extractor=StructuredLLMExtractor(make()), reviewer=StructuredLLMReviewer(make()),
    ) as rt:  # fmt: skip
        await rt.host.provision_user("u1", aliases=["Aditya"])
        await rt.host.grant("planner", Scope("user", "u1"), read=True, write=True)
        p = await rt.hooks.on_session_start(Principal("planner", "u1", "s1"))
        p = await rt.hooks.on_turn(p, "user", "From now on I prefer concise answers with bullet lists.")
        p = await rt.hooks.on_turn(p, "assistant", "Got it: concise answers with bullet lists from now on.")
        await rt.store.end_session(SessionKey.of(p), rt.clock.now())
        result = await rt.extract_session("s1")
        assert result.status == "extracted", result
        assert result.summary is not None and result.summary["record_id"]
    rewriter = HostedLLMQueryRewriter(make())
    queries, status = await rewrite_stage(
        rewriter, ["what does she prefer"], "user: Ask Priya about the report format.", enabled=True,
        max_context_chars=2000, timeout_ms=30000,
    )  # fmt: skip
    assert status in ("applied", "unchanged") and len(queries) == 1
