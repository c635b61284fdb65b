"""The deterministic fakes of retold.testing honour the model protocols of spec §5."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import numpy as np
import pytest

from retold.models import Embedder, EquivalenceJudge
from retold.testing import FakeClock, FakeEmbedder, FakeJudge


def test_fake_embedder_is_deterministic_normalised_float32() -> None:
    texts = ["Aditya prefers concise answers", "the build uses make", ""]
    first = FakeEmbedder(dims=64).embed_documents(texts)
    second = FakeEmbedder(dims=64).embed_queries(texts)
    assert first.shape == (3, 64)
    assert first.dtype == np.float32
    np.testing.assert_array_equal(first, second)
    np.testing.assert_allclose(np.linalg.norm(first, axis=1), 1.0, rtol=1e-6)


def test_fake_embedder_shared_words_are_closer_than_unrelated_text() -> None:
    embedder = FakeEmbedder()
    anchor, related, unrelated = embedder.embed_documents(
        ["prefers concise answers in code review", "prefers concise answers", "deploy the kubernetes cluster"]
    )
    assert float(anchor @ related) > float(anchor @ unrelated) + 0.3
    assert float(anchor @ anchor) == pytest.approx(1.0)


def test_fake_embedder_is_case_insensitive_and_records_calls() -> None:
    embedder = FakeEmbedder(dims=32)
    upper, lower = embedder.embed_queries(["Concise Answers", "concise answers"])
    np.testing.assert_array_equal(upper, lower)
    assert embedder.embed_documents([]).shape == (0, 32)
    assert embedder.calls == [("query", 2), ("document", 0)]
    assert isinstance(embedder, Embedder)
    assert embedder.is_loaded


def test_fake_embedder_refuses_tiny_widths() -> None:
    with pytest.raises(ValueError):
        FakeEmbedder(dims=4)


def test_fake_judge_looks_up_the_table_in_both_orders() -> None:
    judge = FakeJudge({("uses vim", "uses emacs"): "contradicts", ("likes tea", "enjoys tea"): "same"})
    assert judge.judge("uses vim", "uses emacs") == "contradicts"
    assert judge.judge("uses emacs", "uses vim") == "contradicts"
    assert judge.judge("enjoys tea", "likes tea") == "same"
    assert judge.judge("uses vim", "uses vim") == "same"
    assert judge.judge("uses vim", "likes tea") == "distinct"
    assert FakeJudge(default="contradicts").judge("a", "b") == "contradicts"
    assert judge.calls[0] == ("judge", "uses vim", "uses emacs")
    assert isinstance(judge, EquivalenceJudge)


def test_fake_judge_entails_returns_the_configured_score() -> None:
    assert FakeJudge().entails("premise", "hypothesis") == 1.0
    judge = FakeJudge(entail=0.25)
    assert judge.entails("premise", "hypothesis") == 0.25
    assert judge.calls == [("entails", "premise", "hypothesis")]


def test_fake_clock_moves_only_forward_when_told() -> None:
    clock = FakeClock()
    start = clock.now()
    assert start == datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
    assert clock.now() == start
    assert clock.advance(days=31) == start + timedelta(days=31)
    assert clock.advance(timedelta(minutes=5)) == start + timedelta(days=31, minutes=5)
    assert clock.now() == start + timedelta(days=31, minutes=5)
    with pytest.raises(ValueError):
        clock.advance(seconds=-1)
    naive = FakeClock(datetime(2025, 5, 5))
    assert naive.now().tzinfo == UTC
    naive.set(datetime(2024, 1, 1))
    assert naive.now() == datetime(2024, 1, 1, tzinfo=UTC)
