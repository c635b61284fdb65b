"""The hosted query rewriter (spec §10.0): one structured call, no invention, bounded, fail-open to raw."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from retold.config import Config, RewriteConfig
from retold.errors import ConfigError
from retold.hosted import CompletionClient
from retold.models import SearchRequest
from retold.retrieve.rewrite import (
    HostedLLMQueryRewriter,
    NoRewriter,
    RewriteError,
    rewrite_stage,
    rewriter_from_config,
)
from retold.testing import FakeRewriter

from .hosted_fakes import FakeSDK, RateLimitError, anthropic_reply, pretend_sdks_installed
from .writepath import make_world

RAW = ["what does he prefer"]
CONTEXT = "user: Tell Priya the plan.\nassistant: Priya asked for short answers."


def hosted(replies: Any, *, delay_s: float = 0.0, **kwargs: Any) -> tuple[HostedLLMQueryRewriter, FakeSDK]:
    sdk = FakeSDK(replies, delay_s=delay_s)
    kwargs.setdefault("backoff_initial_s", 0.001)
    client = CompletionClient("anthropic", "haiku", api_key="k", sdk_client=sdk, **kwargs)
    return HostedLLMQueryRewriter(client), sdk


async def stage(rewriter: Any, queries: list[str] = RAW, context: str | None = CONTEXT, **kw: Any) -> Any:
    return await rewrite_stage(
        rewriter, queries, context, enabled=True, max_context_chars=kw.get("max_context_chars", 2000),
        timeout_ms=kw.get("timeout_ms", 800),
    )  # fmt: skip


async def test_a_valid_rewrite_is_applied_from_queries_and_context_only() -> None:
    rewriter, sdk = hosted([anthropic_reply({"queries": ["Priya's preferred answer length"]})])
    assert await stage(rewriter) == (["Priya's preferred answer length"], "applied")
    [request] = sdk.requests
    assert json.loads(request["messages"][0]["content"]) == {"queries": RAW, "context": CONTEXT}
    assert request["system"].startswith("You rewrite the search queries")
    assert rewriter.prompt_version == "rewrite_v1"


async def test_an_invented_name_fails_the_rewrite_and_the_raw_queries_are_searched() -> None:
    rewriter, _ = hosted([anthropic_reply({"queries": ["Aditya's preferred answer length"]})])
    with pytest.raises(RewriteError, match="capitalised"):
        rewriter.rewrite(RAW, CONTEXT)
    assert await stage(rewriter) == (RAW, "failed")


@pytest.mark.parametrize("queries", [[], ["one", "two"], ["  "]])
async def test_a_different_number_of_queries_or_a_blank_one_fails(queries: list[str]) -> None:
    rewriter, _ = hosted([anthropic_reply({"queries": queries})])
    assert await stage(rewriter) == (RAW, "failed")


async def test_a_slow_model_times_out_to_the_raw_queries() -> None:
    rewriter, _ = hosted([anthropic_reply({"queries": ["Priya's style"]})], delay_s=0.5)
    assert await stage(rewriter, timeout_ms=50) == (RAW, "failed")


async def test_a_provider_failure_is_a_rewrite_error_and_the_search_goes_on() -> None:
    rewriter, sdk = hosted([RateLimitError("busy")], max_attempts=2)
    with pytest.raises(RewriteError):
        rewriter.rewrite(RAW, CONTEXT)
    assert len(sdk.requests) == 2
    assert await stage(rewriter) == (RAW, "failed")


def test_rewriter_from_config_builds_the_hosted_rewriter_or_says_what_is_missing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    assert isinstance(rewriter_from_config(RewriteConfig()), NoRewriter)
    with pytest.raises(ConfigError, match="ANTHROPIC_API_KEY") as err:
        rewriter_from_config(RewriteConfig(enabled=True))
    assert err.value.key == "retrieval.rewrite.provider"
    monkeypatch.setenv("ANTHROPIC_API_KEY", "k")
    pretend_sdks_installed(monkeypatch)
    built = rewriter_from_config(RewriteConfig(enabled=True, timeout_ms=500))
    assert isinstance(built, HostedLLMQueryRewriter) and built.client.timeout_s == 0.5


async def test_the_rewriter_never_receives_candidates_or_store_content(tmp_path: Path) -> None:
    fake = FakeRewriter({("what does he prefer",): ["Aditya answer preference"]})
    config = Config().override({"retrieval.rewrite.enabled": True})
    world = await make_world(tmp_path / "m.sqlite", config=config, rewriter=fake)
    try:
        quote = "I prefer concise answers, always"
        await world.say("user", quote)
        secret = "Aditya prefers concise answers and keeps a SECRET-CODE-42."
        assert (await world.write(secret, evidence=quote)).ok
        request = SearchRequest(queries=["what does he prefer"], context="user: ask Aditya")
        response = await world.rt.search(world.p, request)
        assert response.rewrite_status == "applied"
        assert fake.calls == [(["what does he prefer"], "user: ask Aditya")]
        assert "SECRET-CODE-42" not in repr(fake.calls)  # no candidate, record or result reached it
    finally:
        await world.rt.close()
