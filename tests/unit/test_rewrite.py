"""The query rewrite stage (spec §10.0): statuses, fallbacks, the timeout and the no-invention rule."""

from __future__ import annotations

import time
from typing import Any

import pytest

from retold.config import RewriteConfig
from retold.models import QueryRewriter, RewriteResult
from retold.retrieve.rewrite import (
    NoRewriter,
    RewriteError,
    rewrite_stage,
    rewriter_from_config,
    violates_no_invention,
)
from retold.testing import FakeRewriter

RAW = ["what does he prefer"]
CONTEXT = "user: Tell Priya the plan.\nassistant: Priya asked for short answers."


async def stage(
    rewriter: QueryRewriter,
    queries: list[str] = RAW,
    context: str | None = CONTEXT,
    *,
    enabled: bool = True,
    max_context_chars: int = 2000,
    timeout_ms: int = 800,
) -> tuple[list[str], str]:
    return await rewrite_stage(
        rewriter,
        queries,
        context,
        enabled=enabled,
        max_context_chars=max_context_chars,
        timeout_ms=timeout_ms,
    )


async def test_disabled_returns_raw_queries_without_calling_the_rewriter() -> None:
    fake = FakeRewriter({"what does he prefer": ["Priya's preferred style"]})
    assert await stage(fake, enabled=False) == (RAW, "disabled")
    assert fake.calls == []


async def test_applied_rewrite_uses_only_queries_and_context() -> None:
    fake = FakeRewriter({("what does he prefer",): ["Priya's preferred answer style"]})
    queries, status = await stage(fake)
    assert (queries, status) == (["Priya's preferred answer style"], "applied")
    assert fake.calls == [(RAW, CONTEXT)]  # the rewriter saw nothing but queries and context


async def test_unknown_or_identical_rewrite_is_unchanged() -> None:
    assert await stage(FakeRewriter({})) == (RAW, "unchanged")
    assert await stage(FakeRewriter({"what does he prefer": ["what does he prefer "]})) == (RAW, "unchanged")
    assert await stage(NoRewriter()) == (RAW, "unchanged")


async def test_context_is_truncated_and_absent_context_is_none() -> None:
    fake = FakeRewriter()
    await stage(fake, context="x" * 50, max_context_chars=10)
    await stage(fake, context=None)
    await stage(fake, context="")
    assert fake.calls == [(RAW, "x" * 10), (RAW, None), (RAW, None)]


async def test_the_rewriter_gets_a_copy_of_the_queries() -> None:
    def mutate(queries: list[str], context: str | None) -> list[str]:
        queries.append("injected")
        return ["Priya's style"]

    raw = ["what does he prefer"]
    await stage(FakeRewriter(mutate), raw)
    assert raw == ["what does he prefer"]


async def test_timeout_falls_back_to_raw_queries_quickly() -> None:
    fake = FakeRewriter({"what does he prefer": ["Priya's style"]}, delay_s=1.0)
    start = time.perf_counter()
    assert await stage(fake, timeout_ms=50) == (RAW, "failed")
    assert time.perf_counter() - start < 0.5


@pytest.mark.parametrize("error", [RewriteError("boom"), RuntimeError, TimeoutError("slow"), ValueError])
async def test_exceptions_fall_back_to_raw_queries(error: Any) -> None:
    assert await stage(FakeRewriter(error)) == (RAW, "failed")


@pytest.mark.parametrize(
    "answer",
    [
        ["Priya's style", "a second query"],  # wrong count
        [],  # wrong count
        ["   "],  # blank
        RewriteResult(["Priya's style"], "failed"),
    ],
)
async def test_invalid_rewrites_fail(answer: Any) -> None:
    fake = FakeRewriter({"what does he prefer": answer})
    assert await stage(fake) == (RAW, "failed")


async def test_a_rewriter_returning_the_wrong_type_fails() -> None:
    class Broken:
        def rewrite(self, queries: list[str], context: str | None) -> Any:
            return ["Priya"]

    assert await stage(Broken()) == (RAW, "failed")


async def test_no_invention_rejects_a_name_absent_from_the_inputs() -> None:
    fake = FakeRewriter({"what does he prefer": ["Priya's preferred style"]})
    context = "user: what does he prefer?\nassistant: He asked for short answers."
    assert await stage(fake, context=context) == (RAW, "failed")
    assert await stage(fake, context=None) == (RAW, "failed")


async def test_no_invention_checks_the_truncated_context() -> None:
    fake = FakeRewriter({"what does he prefer": ["Priya's preferred style"]})
    context = "assistant: he likes short answers. Later: Priya"
    assert await stage(fake, context=context, max_context_chars=20) == (RAW, "failed")
    assert (await stage(fake, context=context))[1] == "applied"


def test_no_invention_rule_details() -> None:
    raw = ["what does he prefer"]
    assert violates_no_invention(raw, "Priya asked", ["Where does Priya's team meet"]) is False
    assert violates_no_invention(raw, "Priya\u2019s manager", ["Priya's manager"]) is False  # folded ’
    assert violates_no_invention(raw, None, ["Preferred style"]) is False  # first word may be capitalised
    assert violates_no_invention(raw, None, ["the style I prefer"]) is False  # the pronoun names nobody
    assert violates_no_invention(raw, "priya asked", ["style of Priya"]) is True  # case-sensitive
    assert violates_no_invention(raw, "Priya asked", ["style of Priya, and Aditya"]) is True
    assert violates_no_invention(raw, None, ["style", "deploy of Kubernetes"]) is True  # any query
    assert violates_no_invention(["deploy bge-m3 on GPU"], None, ["bge-m3 deploy on GPU"]) is False
    assert violates_no_invention(raw, "the Priya-led team", ["Priya's team"]) is False
    # A possessive first word is a name, not sentence case: it must come from the inputs.
    assert violates_no_invention(raw, "he asked", ["Priya's preferred style"]) is True
    assert violates_no_invention(["what does priya's team use"], None, ["Priya's team tools"]) is False
    assert violates_no_invention(raw, "Priya asked", ["Priya's preferred style"]) is False


async def test_name_in_the_raw_queries_passes() -> None:
    fake = FakeRewriter({("what does Priya prefer", "and her team"): ["Priya's preference", "Priya's team"]})
    queries, status = await stage(fake, ["what does Priya prefer", "and her team"], None)
    assert (queries, status) == (["Priya's preference", "Priya's team"], "applied")


async def test_callable_rewriter_gets_queries_and_context() -> None:
    seen: list[tuple[list[str], str | None]] = []

    def rewrite(queries: list[str], context: str | None) -> RewriteResult:
        seen.append((queries, context))
        return RewriteResult(["Priya's preferred style"], "applied")

    assert await stage(FakeRewriter(rewrite)) == (["Priya's preferred style"], "applied")
    assert seen == [(RAW, CONTEXT)]


def test_rewriter_from_config() -> None:
    assert isinstance(rewriter_from_config(RewriteConfig()), NoRewriter)
    fake = FakeRewriter()
    assert rewriter_from_config(RewriteConfig(enabled=True), fake) is fake
    assert isinstance(fake, QueryRewriter) and isinstance(NoRewriter(), QueryRewriter)
