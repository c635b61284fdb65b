"""The hosted client, extractor, reviewer and judge (ARCHITECTURE §3), offline with a fake SDK."""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from retold.config import Config
from retold.errors import ConfigError, MissingExtraError
from retold.hosted import (
    OPENROUTER_BASE_URL,
    CompletionClient,
    CompletionError,
    CompletionTimeoutError,
    SchemaMismatchError,
    strict_object,
)
from retold.ingest.equivalence.llm import ENTAIL_SCORES, LLMJudge
from retold.ingest.extraction.structured import (
    EXTRACTION_SCHEMA,
    REVIEW_SCHEMA,
    StructuredLLMExtractor,
    StructuredLLMReviewer,
)
from retold.models import (
    CandidateRecord,
    EntityMention,
    ExtractionContext,
    Principal,
    ReviewContext,
    Scope,
    Turn,
)

from .extraction_world import make_xworld
from .hosted_fakes import (
    APITimeoutError,
    AuthenticationError,
    BadRequestError,
    FakeAsyncSDK,
    FakeSDK,
    InternalServerError,
    RateLimitError,
    anthropic_reply,
    openai_reply,
    pretend_sdks_installed,
)

KEY = "sk-test-SECRET-0123456789"
SCHEMA = strict_object({"answer": {"type": "string"}})


def client(provider: str = "anthropic", replies: Any = (), **kwargs: Any) -> tuple[CompletionClient, FakeSDK]:
    sdk = FakeSDK(replies)
    kwargs.setdefault("backoff_initial_s", 0.001)
    kwargs.setdefault("backoff_max_s", 0.002)
    return CompletionClient(provider, "some-model", api_key=KEY, sdk_client=sdk, **kwargs), sdk  # type: ignore[arg-type]


def ask(c: CompletionClient) -> dict[str, Any]:
    return c.complete(system="be brief", user="hello", schema=SCHEMA, name="answer")


# --- requests ------------------------------------------------------------------------------------


def test_anthropic_request_is_a_structured_output_call() -> None:
    c, sdk = client("anthropic", [anthropic_reply({"answer": "hi"})], max_output_tokens=123, timeout_s=7)
    assert ask(c) == {"answer": "hi"}
    [request] = sdk.requests
    assert request["model"] == "some-model" and request["max_tokens"] == 123 and request["timeout"] == 7
    assert request["system"] == "be brief" and request["messages"] == [{"role": "user", "content": "hello"}]
    assert request["output_config"] == {"format": {"type": "json_schema", "schema": SCHEMA}}


@pytest.mark.parametrize(
    ("provider", "tokens"), [("openai", "max_completion_tokens"), ("openrouter", "max_tokens")]
)
def test_openai_compatible_request_uses_a_strict_json_schema(provider: str, tokens: str) -> None:
    c, sdk = client(provider, [openai_reply({"answer": "hi"})], max_output_tokens=99)
    assert ask(c) == {"answer": "hi"}
    [request] = sdk.requests
    assert request[tokens] == 99
    assert request["messages"][0] == {"role": "system", "content": "be brief"}
    assert request["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "answer", "schema": SCHEMA, "strict": True},
    }
    assert c.base_url == (OPENROUTER_BASE_URL if provider == "openrouter" else None)


def test_the_schemas_are_strict_for_both_providers() -> None:
    def walk(schema: Any) -> None:
        if isinstance(schema, dict):
            if schema.get("type") == "object":
                assert schema["additionalProperties"] is False
                assert sorted(schema["required"]) == sorted(schema["properties"])
            for value in schema.values():
                walk(value)
        elif isinstance(schema, list):
            for value in schema:
                walk(value)

    walk(EXTRACTION_SCHEMA)
    walk(REVIEW_SCHEMA)


# --- replies -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "reply",
    [
        anthropic_reply("not json at all"),
        anthropic_reply({"answer": 3}),
        anthropic_reply({"answer": "x", "PRIVATE": 1}),
        anthropic_reply({"answer": "PRIVATE"}, stop_reason="max_tokens"),
    ],
)
def test_a_reply_that_does_not_match_the_schema_is_a_failure_not_a_guess(reply: Any) -> None:
    c, _ = client("anthropic", [reply])
    with pytest.raises(SchemaMismatchError) as err:
        ask(c)
    assert "PRIVATE" not in str(err.value) and "extra" not in str(err.value)  # rule, never content


def test_openai_truncation_and_refusal_are_failures() -> None:
    c, _ = client("openai", [openai_reply({"answer": "x"}, finish_reason="length")])
    with pytest.raises(SchemaMismatchError, match="cut off"):
        ask(c)
    c, _ = client("openai", [openai_reply("", refusal="no")])
    with pytest.raises(CompletionError, match="refused"):
        ask(c)


# --- retries -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "error", [RateLimitError("slow down"), InternalServerError("oops"), ConnectionError("x")]
)
def test_transient_errors_are_retried_a_bounded_number_of_times(error: Exception) -> None:
    c, sdk = client("anthropic", [error, anthropic_reply({"answer": "second time"})], max_attempts=3)
    assert ask(c) == {"answer": "second time"} and len(sdk.requests) == 2
    c, sdk = client("anthropic", [error], max_attempts=3)
    with pytest.raises(CompletionError) as err:
        ask(c)
    assert len(sdk.requests) == 3 and err.value.retryable


@pytest.mark.parametrize("error", [BadRequestError("bad schema"), AuthenticationError("invalid x-api-key")])
def test_permanent_errors_are_not_retried(error: Exception) -> None:
    c, sdk = client("openai", [error], max_attempts=3)
    with pytest.raises(CompletionError) as err:
        ask(c)
    assert len(sdk.requests) == 1 and not err.value.retryable
    if isinstance(error, AuthenticationError):
        assert "OPENAI_API_KEY" in str(err.value)


def test_a_timeout_is_a_timeout_error() -> None:
    c, sdk = client("anthropic", [APITimeoutError("timed out")], max_attempts=2)
    with pytest.raises(TimeoutError) as err:
        ask(c)
    assert isinstance(err.value, CompletionTimeoutError) and len(sdk.requests) == 2


def test_the_key_never_appears_in_errors_logs_or_repr(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    c, _ = client("anthropic", [RateLimitError(f"limit for key {KEY}")], max_attempts=2)
    with pytest.raises(CompletionError) as err:
        ask(c)
    assert KEY not in str(err.value) and "***" in str(err.value)
    assert KEY not in caplog.text and "attempt 1 of 2" in caplog.text
    assert KEY not in repr(c)


async def test_the_async_path_shares_parsing_and_retries() -> None:
    sdk = FakeAsyncSDK([RateLimitError("x"), openai_reply({"answer": "async"})])
    c = CompletionClient("openai", "m", api_key=KEY, async_sdk_client=sdk, backoff_initial_s=0.001)
    assert await c.acomplete(system="s", user="u", schema=SCHEMA, name="answer") == {"answer": "async"}
    assert len(sdk.requests) == 2


# --- configuration -------------------------------------------------------------------------------


def test_from_env_names_the_missing_variable_and_the_setting() -> None:
    with pytest.raises(ConfigError) as err:
        CompletionClient.from_env(
            "openrouter", "m", setting="ingestion.review_provider", feature="Review", env={}
        )
    assert "OPENROUTER_API_KEY" in str(err.value) and err.value.key == "ingestion.review_provider"
    made = CompletionClient.from_env(
        "anthropic", "m", setting="x", feature="Y", env={"ANTHROPIC_API_KEY": KEY}, sdk_client=FakeSDK()
    )
    assert made.identity == "anthropic:m"


def test_from_env_without_the_sdk_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "openai" else real(name, *a)
    )
    with pytest.raises(MissingExtraError, match=r"retold\[hosted\]"):
        CompletionClient.from_env("openai", "m", setting="x", feature="Y", env={"OPENAI_API_KEY": KEY})


def test_hosted_judge_is_chosen_by_provider_prefix(monkeypatch: pytest.MonkeyPatch) -> None:
    from retold.ingest.equivalence.judge import build_judge
    from retold.testing import FakeEmbedder

    config = Config().override({"ingestion.equivalence.model": "anthropic:claude-haiku-4-5-20251001"})
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    with pytest.raises(ConfigError, match="ANTHROPIC_API_KEY"):
        build_judge(config, FakeEmbedder())
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    pretend_sdks_installed(monkeypatch)
    judge = build_judge(config, FakeEmbedder())
    assert isinstance(judge, LLMJudge) and judge.model == "anthropic:claude-haiku-4-5-20251001"


# --- the extractor, the reviewer, the judge ------------------------------------------------------

TURNS = [
    Turn(
        "s1", 1, "user", "I prefer concise answers. Ship it by Friday.", datetime(2026, 3, 4, 10, tzinfo=UTC)
    ),
    Turn("s1", 2, "assistant", "Noted.", datetime(2026, 3, 4, 10, 1, tzinfo=UTC)),
]
CONTEXT = ExtractionContext(
    Principal("planner", "u1", "s1"), [("e1", "person", "Aditya")], ["Aditya/answer_style"], "x"
)
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
            "review_at": "2026-03-06T00:00:00Z",
            "confidence": 0.9,
        }
    ],
    "summary": {"content": "We agreed on style.", "decisions": ["concise"], "entities": []},
}


def test_the_extractor_sends_the_numbered_transcript_and_parses_the_output() -> None:
    c, sdk = client("anthropic", [anthropic_reply(EXTRACTED)])
    extractor = StructuredLLMExtractor(c)
    output = extractor.extract(TURNS, CONTEXT)
    [candidate] = output.candidates
    assert candidate.review_at == datetime(2026, 3, 6, tzinfo=UTC) and candidate.confidence == 0.9
    assert output.summary is not None and output.summary.decisions == ["concise"]
    sent = json.loads(sdk.requests[0]["messages"][0]["content"])
    assert [t["turn"] for t in sent["transcript"]] == [1, 2] and sent["transcript"][0][
        "at"
    ] == "2026-03-04T10:00:00Z"
    assert sent["known_entities"] == [{"kind": "person", "name": "Aditya"}]
    assert sent["existing_subjects"] == ["Aditya/answer_style"] and sent["user_id"] == "u1"
    assert sdk.requests[0]["system"].startswith("You extract durable long-term memories")
    assert extractor.prompt_version == "extract_v1" and extractor.model == "anthropic:some-model"


@pytest.mark.parametrize(("field", "value"), [("review_at", "next friday"), ("confidence", 1.5)])
def test_the_extractor_refuses_values_it_cannot_trust(field: str, value: Any) -> None:
    bad = json.loads(json.dumps(EXTRACTED))
    bad["candidates"][0][field] = value
    c, _ = client("anthropic", [anthropic_reply(bad)])
    with pytest.raises(SchemaMismatchError):
        StructuredLLMExtractor(c).extract(TURNS, CONTEXT)


CANDIDATE = CandidateRecord(
    "semantic", "The user prefers very concise answers always.", "answer_style", "user_statement",
    "I prefer concise answers", 1, [EntityMention("person", "Aditya", "about")],
)  # fmt: skip
REVIEW_CONTEXT = ReviewContext(TURNS, Scope("user", "u1"), "e1", [], "review_v1")


def test_the_reviewer_can_only_narrow_a_candidate() -> None:
    revision = {
        "content": "The user prefers concise answers.",
        "attribute": "answer_style",
        "source_kind": "agent_inference",
        "valid_from": None,
        "valid_until": None,
        "review_at": None,
    }
    c, sdk = client(
        "openai", [openai_reply({"action": "revise", "reason": "too strong", "revision": revision})]
    )
    decision = StructuredLLMReviewer(c).review(CANDIDATE, REVIEW_CONTEXT)
    assert decision.action == "revise" and decision.candidate is not None
    revised = decision.candidate
    assert (revised.content, revised.source_kind) == ("The user prefers concise answers.", "agent_inference")
    assert (revised.evidence, revised.evidence_turn, revised.entity_mentions, revised.type) == (
        CANDIDATE.evidence,
        CANDIDATE.evidence_turn,
        CANDIDATE.entity_mentions,
        CANDIDATE.type,
    )
    sent = json.loads(sdk.requests[0]["messages"][1]["content"])
    assert set(sent) == {"candidate", "transcript_window", "live_records"}


@pytest.mark.parametrize(
    "reply",
    [
        {"action": "revise", "reason": "x", "revision": None},
        {"action": "accept", "reason": "x", "revision": {"content": "y"}},
        {"action": "maybe", "reason": "x", "revision": None},
    ],
)
def test_a_malformed_review_is_a_failure(reply: dict[str, Any]) -> None:
    c, _ = client("anthropic", [anthropic_reply(reply)])
    with pytest.raises(SchemaMismatchError):
        StructuredLLMReviewer(c).review(CANDIDATE, REVIEW_CONTEXT)


def test_the_llm_judge_answers_the_judge_protocol() -> None:
    replies = [
        anthropic_reply({"verdict": "contradicts", "reason": "opposite styles"}),
        anthropic_reply({"label": "entailed", "reason": "said so"}),
    ]
    c, sdk = client("anthropic", replies)
    judge = LLMJudge(c)
    assert judge.judge("prefers concise", "prefers detailed") == "contradicts"
    assert (
        judge.entails("I prefer concise answers", "The user prefers concise answers.")
        == ENTAIL_SCORES["entailed"]
    )
    assert [json.loads(r["messages"][0]["content"])["task"] for r in sdk.requests] == [
        "equivalence",
        "entailment",
    ]


# --- through the extraction graph ------------------------------------------------------------------


async def test_hosted_extractor_and_reviewer_run_the_extraction_graph(tmp_path: Path) -> None:
    extracted = json.loads(json.dumps(EXTRACTED))
    extracted["candidates"][0]["review_at"] = None
    accept = {"action": "accept", "reason": "a clear preference", "revision": None}
    extractor = StructuredLLMExtractor(client("anthropic", [anthropic_reply(extracted)])[0])
    reviewer_client, reviewer_sdk = client("openai", [openai_reply(accept)])
    w = await make_xworld(
        tmp_path / "m.sqlite", extractor=extractor, reviewer=StructuredLLMReviewer(reviewer_client)
    )
    try:
        await w.say("user", "I prefer concise answers. Ship it by Friday.")
        await w.say("assistant", "Noted.")
        await w.end()
        result = await w.extract()
        assert result.status == "extracted" and result.counts["created"] == 1
        payload = (await w.events("extraction.run"))[0]["payload"]
        assert payload["extractor"] == {
            "name": "structured-llm-extractor",
            "model": "anthropic:some-model",
            "prompt_version": "extract_v1",
        }
        assert payload["reviewer"]["prompt_version"] == "review_v1"
        reviewed = json.loads(reviewer_sdk.requests[0]["messages"][1]["content"])
        assert reviewed["candidate"]["content"] == "The user prefers concise answers."
    finally:
        await w.rt.close()


async def test_an_invalid_hosted_review_fails_the_run_closed(tmp_path: Path) -> None:
    extractor = StructuredLLMExtractor(client("anthropic", [anthropic_reply(EXTRACTED)])[0])
    reviewer = StructuredLLMReviewer(client("anthropic", [anthropic_reply("{not json")])[0])
    w = await make_xworld(tmp_path / "m.sqlite", extractor=extractor, reviewer=reviewer)
    try:
        await w.say("user", "I prefer concise answers. Ship it by Friday.")
        await w.say("assistant", "Noted.")
        await w.end()
        result = await w.extract()
        assert (result.status, result.reason) == ("failed", "invalid_review")
        assert await w.records() == []
    finally:
        await w.rt.close()
