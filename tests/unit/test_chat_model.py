"""A LangChain chat model answering the extractor, reviewer, rewriter and judge, offline.

``ScriptedChatModel`` is a real ``BaseChatModel`` (``bind_tools`` + ``_generate``), so the
base class's ``with_structured_output`` — the path a model without a JSON-schema mode
takes — runs unchanged; ``ChatOpenAI`` over an ``httpx`` mock transport runs the
JSON-schema path of a real integration without a network.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest
from langchain_core.exceptions import ModelRateLimitError, ModelTimeoutError
from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.utils.function_calling import convert_to_openai_tool
from pydantic import Field, SecretStr

import retold
from retold.chat_model import ChatModelCompleter, chat_model_name
from retold.config import Config, RewriteConfig
from retold.errors import ConfigError
from retold.hosted import (
    CompletionError,
    CompletionTimeoutError,
    SchemaMismatchError,
    StructuredCompleter,
    strict_object,
)
from retold.ingest.equivalence.llm import ENTAIL_SCORES, LLMJudge
from retold.ingest.extraction.structured import StructuredLLMExtractor, StructuredLLMReviewer
from retold.models import SearchRequest, SessionKey
from retold.retrieve.rewrite import HostedLLMQueryRewriter, RewriteError, rewrite_stage
from retold.testing import FakeEmbedder, FakeRewriter

from .test_hosted import CANDIDATE, CONTEXT, EXTRACTED, REVIEW_CONTEXT, TURNS
from .writepath import make_world

SCHEMA = strict_object({"answer": {"type": "string"}})
SECRET = "sk-chat-SECRET-987654321"


class ScriptedChatModel(BaseChatModel):
    """Answers each structured call with the scripted reply for its schema's name.

    A reply is a dict (sent as the tool call's arguments), an ``AIMessage`` (sent as is),
    an exception (raised), or a callable of the messages; a list holds one per call.
    ``delay_s`` sleeps before answering; ``requests`` records (name, messages).
    """

    answers: dict[str, Any]
    model_name: str = "scripted-1"
    api_key: SecretStr = SecretStr(SECRET)
    delay_s: float = 0.0
    requests: list[tuple[str, list[BaseMessage]]] = Field(default_factory=list)

    @property
    def _llm_type(self) -> str:
        return "scripted"

    def bind_tools(self, tools: Sequence[Any], *, tool_choice: Any = None, **kwargs: Any) -> Any:
        return self.bind(tools=[convert_to_openai_tool(t) for t in tools], tool_choice=tool_choice, **kwargs)

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: Any = None,
        **kwargs: Any,
    ) -> ChatResult:
        name = kwargs["tools"][0]["function"]["name"]
        self.requests.append((name, messages))
        if self.delay_s:
            time.sleep(self.delay_s)
        reply = self.answers[name]
        if isinstance(reply, list):
            reply = reply.pop(0)
        if isinstance(reply, BaseException):
            raise reply
        if callable(reply):
            reply = reply(messages)
        if isinstance(reply, dict):
            reply = AIMessage("", tool_calls=[{"name": name, "args": reply, "id": "call_1"}])
        return ChatResult(generations=[ChatGeneration(message=reply)])


def completer(answers: dict[str, Any], **kwargs: Any) -> tuple[ChatModelCompleter, ScriptedChatModel]:
    timeout_s = kwargs.pop("timeout_s", 5.0)
    model = ScriptedChatModel(answers=answers, **kwargs)
    return ChatModelCompleter(model, timeout_s=timeout_s), model


def ask(c: ChatModelCompleter) -> dict[str, Any]:
    return c.complete(system="be brief", user="hello", schema=SCHEMA, name="answer")


async def aask(c: ChatModelCompleter) -> dict[str, Any]:
    return await c.acomplete(system="be brief", user="hello", schema=SCHEMA, name="answer")


# --- the completer -------------------------------------------------------------------------------


async def test_sync_and_async_calls_send_the_prompt_and_return_the_validated_dict() -> None:
    c, model = completer({"answer": {"answer": "hi"}})
    assert ask(c) == {"answer": "hi"} and await aask(c) == {"answer": "hi"}
    name, messages = model.requests[0]
    assert name == "answer" and [(m.type, m.content) for m in messages] == [
        ("system", "be brief"),
        ("human", "hello"),
    ]
    completer_protocol: StructuredCompleter = c  # both clients satisfy the callers' protocol
    assert completer_protocol.provider == "langchain"


def test_the_identity_names_the_chat_model_class_and_its_model() -> None:
    c, _ = completer({})
    assert c.identity == "langchain:ScriptedChatModel:scripted-1"
    assert repr(c) == "ChatModelCompleter('langchain:ScriptedChatModel:scripted-1', timeout_s=5.0)"
    assert chat_model_name(object()) == "unknown"


@pytest.mark.parametrize(
    "reply",
    [
        {"answer": 3},  # wrong type
        {"reply": "hi"},  # missing the required property
        {"answer": "hi", "extra": 1},  # additionalProperties: false
        AIMessage('{"answer": "hi"}'),  # text, not the structured call it was asked for
        AIMessage(
            "",
            tool_calls=[{"name": "answer", "args": {"answer": "h"}, "id": "c"}],
            response_metadata={"stop_reason": "max_tokens"},
        ),  # cut off
    ],
)
async def test_a_reply_that_does_not_match_the_schema_is_a_failure_not_a_guess(reply: Any) -> None:
    c, _ = completer({"answer": [reply, reply]})
    with pytest.raises(SchemaMismatchError):
        ask(c)
    with pytest.raises(SchemaMismatchError):
        await aask(c)


@pytest.mark.parametrize(
    ("error", "kind", "retryable"),
    [
        (ValueError("boom"), CompletionError, False),
        (ModelRateLimitError("slow down"), CompletionError, True),
        (ModelTimeoutError("too slow"), CompletionTimeoutError, True),
        (TimeoutError(), CompletionTimeoutError, True),
    ],
)
async def test_a_raising_model_is_a_completion_error(error: Exception, kind: type, retryable: bool) -> None:
    c, _ = completer({"answer": error})
    with pytest.raises(kind) as info:
        ask(c)
    assert info.value.retryable is retryable and info.value.provider == "langchain"
    with pytest.raises(kind):
        await aask(c)


async def test_the_model_key_never_appears_in_an_error() -> None:
    c, _ = completer({"answer": RuntimeError(f"bad key {SECRET}")})
    with pytest.raises(CompletionError) as info:
        ask(c)
    assert SECRET not in str(info.value) and "***" in str(info.value)
    assert SECRET not in repr(c)


async def test_a_call_past_the_deadline_is_a_timeout() -> None:
    c, _ = completer({"answer": {"answer": "late"}}, delay_s=1.0, timeout_s=0.05)
    started = time.perf_counter()
    with pytest.raises(CompletionTimeoutError):
        ask(c)
    with pytest.raises(CompletionTimeoutError):
        await aask(c)
    assert time.perf_counter() - started < 0.9


async def test_without_a_deadline_the_model_s_own_timeout_applies() -> None:
    c = ChatModelCompleter(ScriptedChatModel(answers={"answer": {"answer": "hi"}}), timeout_s=None)
    assert ask(c) == {"answer": "hi"} and await aask(c) == {"answer": "hi"}


def test_a_chat_model_without_structured_output_is_refused_up_front() -> None:
    with pytest.raises(ConfigError, match="no structured output"):
        ChatModelCompleter(GenericFakeChatModel(messages=iter([])))


# --- the four callers ----------------------------------------------------------------------------

REVISION = {
    "content": "The user prefers concise answers.",
    "attribute": "answer_style",
    "source_kind": "agent_inference",
    "valid_from": None,
    "valid_until": None,
    "review_at": None,
}


def scripted(**answers: Any) -> ScriptedChatModel:
    return ScriptedChatModel(answers=answers)


async def test_extraction_runs_through_a_chat_model() -> None:
    model = scripted(extraction=[EXTRACTED, EXTRACTED])
    config = Config().override({"ingestion.extraction_timeout_ms": 12_000})
    extractor = StructuredLLMExtractor.from_chat_model(model, config)
    [candidate] = extractor.extract(TURNS, CONTEXT).candidates
    assert candidate.confidence == 0.9 and candidate.attribute == "answer_style"
    sent = json.loads(str(model.requests[0][1][1].content))
    assert [t["turn"] for t in sent["transcript"]] == [1, 2]
    assert str(model.requests[0][1][0].content).startswith("You extract durable long-term memories")
    assert extractor.model == "langchain:ScriptedChatModel:scripted-1"
    assert isinstance(extractor.client, ChatModelCompleter) and extractor.client.timeout_s == 12.0
    bad = json.loads(json.dumps(EXTRACTED))
    bad["candidates"][0]["confidence"] = 1.5
    model.answers["extraction"] = bad
    with pytest.raises(SchemaMismatchError):
        extractor.extract(TURNS, CONTEXT)


def test_review_runs_through_a_chat_model_and_a_malformed_review_fails() -> None:
    model = scripted(
        review=[
            {"action": "revise", "reason": "too strong", "revision": REVISION},
            {"action": "revise", "reason": "x", "revision": None},
        ]
    )
    reviewer = StructuredLLMReviewer.from_chat_model(model)
    decision = reviewer.review(CANDIDATE, REVIEW_CONTEXT)
    assert decision.action == "revise" and decision.candidate is not None
    assert decision.candidate.evidence == CANDIDATE.evidence
    assert decision.candidate.source_kind == "agent_inference"
    with pytest.raises(SchemaMismatchError):
        reviewer.review(CANDIDATE, REVIEW_CONTEXT)


def test_the_judge_runs_through_a_chat_model() -> None:
    model = scripted(
        equivalence={"verdict": "contradicts", "reason": "opposite styles"},
        entailment=[{"label": "entailed", "reason": "said so"}, {"label": "probably", "reason": "?"}],
    )
    judge = LLMJudge.from_chat_model(model)
    decision = judge.judge_with_reason("prefers concise", "prefers detailed")
    assert decision.verdict == "contradicts"
    assert decision.reason == "langchain:ScriptedChatModel:scripted-1: opposite styles"
    assert judge.entails("I prefer concise", "The user prefers concise.") == ENTAIL_SCORES["entailed"]
    with pytest.raises(SchemaMismatchError):
        judge.entails("I prefer concise", "The user prefers concise.")


async def test_the_rewriter_runs_through_a_chat_model_and_fails_open() -> None:
    model = scripted(rewrite=[{"queries": ["Priya's preferred answer style"]}, RuntimeError("down")])
    # A generous deadline: the first structured call binds the schema, slow on a loaded machine.
    rewriter = HostedLLMQueryRewriter.from_chat_model(model, RewriteConfig(timeout_ms=5000))
    assert isinstance(rewriter.client, ChatModelCompleter) and rewriter.client.timeout_s == 5.0
    context = "user: Tell Priya the plan."
    queries, status = await rewrite_stage(
        rewriter, ["what does she prefer"], context, enabled=True, max_context_chars=500, timeout_ms=5000
    )
    assert (queries, status) == (["Priya's preferred answer style"], "applied")
    with pytest.raises(RewriteError):
        rewriter.rewrite(["what does she prefer"], context)


# --- through the runtime -------------------------------------------------------------------------


def _by_task(messages: list[BaseMessage]) -> dict[str, Any]:
    task = json.loads(str(messages[1].content))["task"]
    if task == "equivalence":
        return {"verdict": "distinct", "reason": "different things"}
    return {"label": "entailed", "reason": "quoted"}


async def test_open_runtime_uses_the_chat_model_for_every_enabled_hosted_feature(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for variable in ("ANTHROPIC_API_KEY", "OPENAI_API_KEY", "OPENROUTER_API_KEY"):
        monkeypatch.delenv(variable, raising=False)
    extracted = json.loads(json.dumps(EXTRACTED))
    extracted["candidates"][0]["review_at"] = None
    judge_answer: Callable[[list[BaseMessage]], dict[str, Any]] = _by_task
    model = scripted(
        extraction=extracted,
        review={"action": "accept", "reason": "a clear preference", "revision": None},
        rewrite={"queries": ["what does Aditya prefer"]},
        equivalence=judge_answer,
        entailment=judge_answer,
    )
    config = Config().override(
        {
            "ingestion.extraction_enabled": True,
            "ingestion.equivalence.model": "anthropic:claude-haiku-4-5",
            "retrieval.rewrite.enabled": True,
        }
    )
    rt = await retold.open_runtime(tmp_path / "m.sqlite", config, embedder=FakeEmbedder(), chat_model=model)
    try:
        for stage in (rt.extractor, rt.reviewer, rt.rewriter, rt.judge):
            assert stage.model == "langchain:ScriptedChatModel:scripted-1", stage
        await rt.host.provision_user("u1", aliases=["Aditya"])
        await rt.host.grant("planner", retold.Scope("user", "u1"), read=True, write=True)
        p = await rt.hooks.on_session_start(retold.Principal("planner", "u1", "s1"))
        p = await rt.hooks.on_turn(p, "user", "I prefer concise answers. Ship it by Friday.")
        p = await rt.hooks.on_turn(p, "assistant", "Noted.")
        await rt.store.end_session(SessionKey.of(p), rt.clock.now())
        result = await rt.extract_session("s1")
        assert result.status == "extracted" and result.counts["created"] == 1
        [event] = await rt.store.events(kind="extraction.run")
        assert event["payload"]["extractor"]["model"] == "langchain:ScriptedChatModel:scripted-1"
        response = await rt.search(p, SearchRequest(queries=["what does he prefer"], context="ask Aditya"))
        assert response.rewrite_status == "applied"
        assert {name for name, _ in model.requests} >= {"extraction", "review", "rewrite"}
    finally:
        await rt.close()


async def test_a_passed_model_wins_over_the_chat_model(tmp_path: Path) -> None:
    fake = FakeRewriter({("q",): ["q"]})
    config = Config().override({"retrieval.rewrite.enabled": True})
    world = await make_world(tmp_path / "m.sqlite", config=config, rewriter=fake, chat_model=scripted())
    try:
        assert world.rt.rewriter is fake and world.rt.extractor is None  # extraction stays off
    finally:
        await world.rt.close()


# --- real integrations, offline --------------------------------------------------------------------


def _openai_transport(message: dict[str, Any], seen: list[dict[str, Any]]) -> Any:
    import httpx

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(json.loads(request.content))
        choice = {"index": 0, "finish_reason": "stop", "message": {"role": "assistant", **message}}
        usage = {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}
        body = {"id": "c1", "object": "chat.completion", "created": 0, "model": "gpt-4.1-mini"}
        return httpx.Response(200, json={**body, "choices": [choice], "usage": usage})

    return httpx.MockTransport(handler)


def _chat_openai(message: dict[str, Any], seen: list[dict[str, Any]]) -> Any:
    import httpx

    openai_chat = pytest.importorskip("langchain_openai")
    transport = _openai_transport(message, seen)
    return openai_chat.ChatOpenAI(
        model="gpt-4.1-mini",
        api_key=SECRET,
        max_retries=0,
        http_client=httpx.Client(transport=transport),
        http_async_client=httpx.AsyncClient(transport=transport),
    )


async def test_chat_openai_gets_a_strict_json_schema_and_its_reply_is_validated() -> None:
    seen: list[dict[str, Any]] = []
    c = ChatModelCompleter(_chat_openai({"content": json.dumps({"answer": "hi"})}, seen))
    assert c.identity == "langchain:ChatOpenAI:gpt-4.1-mini"
    assert ask(c) == {"answer": "hi"} and await aask(c) == {"answer": "hi"}
    response_format = seen[0]["response_format"]
    assert response_format["type"] == "json_schema"
    assert response_format["json_schema"]["name"] == "answer" and response_format["json_schema"]["strict"]
    assert [m["role"] for m in seen[0]["messages"]] == ["system", "user"]


@pytest.mark.parametrize(
    ("message", "kind"),
    [
        ({"content": None, "refusal": "I cannot help with that."}, CompletionError),
        ({"content": "{not json"}, SchemaMismatchError),
        ({"content": json.dumps({"answer": 1})}, SchemaMismatchError),
    ],
)
def test_chat_openai_refusals_and_bad_replies_fail_closed(message: dict[str, Any], kind: type) -> None:
    c = ChatModelCompleter(_chat_openai(message, []))
    with pytest.raises(kind) as info:
        ask(c)
    assert (type(info.value) is CompletionError) == (kind is CompletionError)


def test_chat_anthropic_builds_its_structured_request_offline(monkeypatch: pytest.MonkeyPatch) -> None:
    """Binding, request building and error mapping run; the one connection goes to a closed local port."""
    for variable in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
        monkeypatch.delenv(variable, raising=False)  # nothing may route the attempt off this machine
    anthropic_chat = pytest.importorskip("langchain_anthropic")
    model = anthropic_chat.ChatAnthropic(
        model="claude-haiku-4-5", api_key=SECRET, base_url="http://127.0.0.1:9", max_retries=0, timeout=5
    )
    c = ChatModelCompleter(model)
    assert c.identity == "langchain:ChatAnthropic:claude-haiku-4-5"
    with pytest.raises(CompletionError) as info:
        ask(c)
    assert info.value.retryable and "ConnectionError" in str(info.value)
    assert SECRET not in str(info.value) and SECRET not in repr(c)
