"""The reranker without a real model (spec §2.2, §10.7): scoring, the timed pass, applying scores."""

from __future__ import annotations

import math
import sys
import threading
import time
from typing import Any

import anyio
import numpy as np
import pytest

from retold.config import RerankerConfig
from retold.errors import MissingExtraError
from retold.index.reranker import (
    CrossEncoderReranker,
    ModelLoadError,
    NoReranker,
    RerankApplied,
    RerankedRow,
    Reranker,
    RerankError,
    apply_rerank,
    rerank_with_timeout,
    reranker_from_config,
)
from retold.testing import FakeReranker

DOCS = [("r1", "alpha doc"), ("r2", "beta doc"), ("r3", "gamma doc")]


class StubCrossEncoder:
    """Stands in for CrossEncoder: returns raw logits, honouring ``activation_fn`` like the real one."""

    num_labels = 1

    def __init__(self, logits: dict[tuple[str, str], float] | None = None, shape: str = "flat") -> None:
        self.logits = logits or {}
        self.shape = shape
        self.calls: list[tuple[list[tuple[str, str]], dict[str, Any]]] = []

    def predict(self, inputs: list[tuple[str, str]], **kwargs: Any) -> np.ndarray:
        self.calls.append((list(inputs), kwargs))
        out = np.array([self.logits.get(pair, 0.0) for pair in inputs], dtype=np.float32)
        if self.shape == "column":
            out = out.reshape(-1, 1)
        elif self.shape == "two":
            out = np.stack([out, out], axis=1)
        activation = kwargs.get("activation_fn")
        return activation(out) if activation is not None else 1 / (1 + np.exp(-out))


async def rerank(reranker: Reranker, queries: list[str], docs: Any = DOCS, timeout_ms: int = 2000) -> Any:
    return await rerank_with_timeout(reranker, queries, docs, timeout_ms=timeout_ms)


# --- the timed pass ---------------------------------------------------------------------------


async def test_keeps_each_records_best_score_and_winning_query() -> None:
    fake = FakeReranker(
        {("q0", "alpha doc"): 0.2, ("q1", "alpha doc"): 0.9, "beta doc": 0.5, "gamma doc": 0.1}
    )
    outcome = await rerank(fake, ["q0", "q1"])
    assert outcome.status == "applied" and outcome.error is None
    assert outcome.scores == {"r1": (0.9, 1), "r2": (0.5, 0), "r3": (0.1, 0)}  # ties keep the first query
    assert fake.calls == [
        ("q0", ["alpha doc", "beta doc", "gamma doc"]),
        ("q1", ["alpha doc", "beta doc", "gamma doc"]),
    ]
    assert outcome.elapsed_ms >= 0


async def test_callable_scores_and_duplicate_ids_keep_the_max() -> None:
    fake = FakeReranker(lambda q, d: len(d) / 10 + (0.5 if q == "b" else 0.0))
    outcome = await rerank(fake, ["a", "b"], [("x", "ab"), ("x", "abcd")])
    assert outcome.scores == {"x": (pytest.approx(0.9), 1)}


async def test_timeout_returns_quickly_and_leaves_the_callers_data_alone() -> None:
    fake = FakeReranker({"alpha doc": 0.9}, delay_s=0.6)
    docs = list(DOCS)
    start = time.perf_counter()
    outcome = await rerank(fake, ["q"], docs, timeout_ms=50)
    assert time.perf_counter() - start < 0.4
    assert outcome.status == "timeout" and outcome.scores is None
    assert outcome.error == "reranker exceeded 50 ms"
    await anyio.sleep(0.7)  # let the abandoned thread finish
    assert docs == DOCS


async def test_a_reranker_that_mutates_its_input_cannot_reach_the_callers_list() -> None:
    class Vandal:
        def score(self, query: str, docs: list[str]) -> list[float]:
            scores = [1.0] * len(docs)
            docs.clear()
            return scores

    queries, docs = ["q"], list(DOCS)
    outcome = await rerank(Vandal(), queries, docs)
    assert outcome.status == "applied" and docs == DOCS and queries == ["q"]


@pytest.mark.parametrize(
    "error", [RuntimeError("cuda out of memory"), ValueError, MissingExtraError("x", "local", "y")]
)
async def test_exceptions_return_failed(error: Any) -> None:
    outcome = await rerank(FakeReranker(error), ["q"])
    assert outcome.status == "failed" and outcome.scores is None
    name = error.__name__ if isinstance(error, type) else type(error).__name__
    assert outcome.error is not None and outcome.error.startswith(name)


async def test_bad_score_counts_and_nan_are_failures() -> None:
    class Short:
        def score(self, query: str, docs: list[str]) -> list[float]:
            return [0.5]

    assert (await rerank(Short(), ["q"])).status == "failed"
    nan = await rerank(FakeReranker({"beta doc": math.nan}), ["q"])
    assert nan.status == "failed" and "non-finite" in (nan.error or "")


async def test_no_reranker_fails_the_pass_and_empty_input_applies() -> None:
    outcome = await rerank(NoReranker(), ["q"])
    assert outcome.status == "failed" and "disabled" in (outcome.error or "")
    empty = await rerank(FakeReranker(), ["q"], [])
    assert (empty.status, empty.scores) == ("applied", {})
    assert (await rerank(FakeReranker(), [], DOCS)).status == "failed"


# --- applying the scores -----------------------------------------------------------------------


def test_apply_rerank_orders_logs_and_applies_the_floor() -> None:
    scores = {"a": (0.2, 0), "b": (0.8, 1), "c": (0.5, 2), "d": (0.8, 0), "e": (0.3, 1)}
    result = apply_rerank(["a", "b", "c", "d", "e"], scores, 0.3)
    assert isinstance(result, RerankApplied)
    assert result.order == ["b", "d", "c", "e", "a"]  # the tie at 0.8 keeps the prior order
    assert result.kept == ["b", "d", "c", "e"]  # 0.3 is at the floor: kept
    assert result.logged == [
        RerankedRow("b", 2, 1, 0.8, 1),
        RerankedRow("d", 4, 2, 0.8, 0),
        RerankedRow("c", 3, 3, 0.5, 2),
        RerankedRow("e", 5, 4, 0.3, 1),
        RerankedRow("a", 1, 5, 0.2, 0),
    ]
    assert result.below_floor == [("a", "below reranker floor 0.30", 0.2)]


def test_apply_rerank_without_a_floor_and_with_a_fine_floor() -> None:
    scores = {"a": (0.004, 0), "b": (0.02, 0)}
    assert apply_rerank(["a", "b"], scores, None).kept == ["b", "a"]
    fine = apply_rerank(["a", "b"], scores, 0.005)
    assert fine.kept == ["b"] and fine.below_floor == [("a", "below reranker floor 0.005", 0.004)]
    assert apply_rerank([], {}, 0.5) == RerankApplied([], [], [], [])


def test_apply_rerank_rejects_wiring_bugs() -> None:
    with pytest.raises(ValueError, match="no reranker score"):
        apply_rerank(["a", "b"], {"a": (0.5, 0)}, None)
    with pytest.raises(ValueError, match="duplicate"):
        apply_rerank(["a", "a"], {"a": (0.5, 0)}, None)


async def test_timed_pass_then_apply_end_to_end() -> None:
    fake = FakeReranker({"gamma doc": 0.9, "alpha doc": 0.1, "beta doc": 0.4})
    outcome = await rerank(fake, ["q"])
    assert outcome.scores is not None
    result = apply_rerank([rid for rid, _ in DOCS], outcome.scores, 0.3)
    assert result.kept == ["r3", "r2"] and [row.rank_before for row in result.logged] == [3, 2, 1]


# --- the cross-encoder --------------------------------------------------------------------------


async def test_cross_encoder_returns_sigmoid_scores_in_one_predict_call() -> None:
    stub = StubCrossEncoder({("q0", "alpha doc"): 3.0, ("q1", "beta doc"): -2.0, ("q1", "gamma doc"): 40.0})
    reranker = CrossEncoderReranker("stub/model", batch_size=7, model_factory=lambda: stub)
    assert not reranker.is_loaded
    outcome = await rerank(reranker, ["q0", "q1"])
    assert outcome.status == "applied" and outcome.scores is not None
    assert len(stub.calls) == 1  # every pair of the search in one predict call
    pairs, kwargs = stub.calls[0]
    assert len(pairs) == 6 and pairs[0] == ("q0", "alpha doc") and pairs[3] == ("q1", "alpha doc")
    assert (
        kwargs["batch_size"] == 7
        and kwargs["apply_softmax"] is False
        and kwargs["show_progress_bar"] is False
    )
    assert outcome.scores["r1"] == (pytest.approx(1 / (1 + math.exp(-3.0))), 0)
    assert outcome.scores["r2"] == (pytest.approx(0.5), 0)  # logit 0 for q0 beats sigmoid(-2) for q1
    assert 0.0 < outcome.scores["r1"][0] < 1.0
    assert reranker.is_loaded


def test_cross_encoder_score_and_shapes() -> None:
    stub = StubCrossEncoder({("q", "a"): -1.0, ("q", "b"): 1.0}, shape="column")
    reranker = CrossEncoderReranker("stub", model_factory=lambda: stub)
    scores = reranker.score("q", ["a", "b"])
    assert scores == pytest.approx([1 / (1 + math.e), 1 / (1 + math.exp(-1.0))])
    assert reranker.score("q", []) == [] and len(stub.calls) == 1  # nothing to score: no call
    two = CrossEncoderReranker("stub", model_factory=lambda: StubCrossEncoder(shape="two"))
    with pytest.raises(RerankError, match="single-label"):
        two.score("q", ["a"])


def test_cross_encoder_loads_once_and_warm_loads() -> None:
    made: list[StubCrossEncoder] = []

    def factory() -> StubCrossEncoder:
        made.append(StubCrossEncoder())
        return made[-1]

    reranker = CrossEncoderReranker("stub", model_factory=factory)
    reranker.warm()
    assert reranker.is_loaded and len(made) == 1
    threads = [threading.Thread(target=reranker.score, args=("q", ["a"])) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(made) == 1 and len(made[0].calls) == 8


def test_cross_encoder_refuses_a_multi_label_model() -> None:
    class ThreeLabels(StubCrossEncoder):
        num_labels = 3

    reranker = CrossEncoderReranker("nli/model", model_factory=ThreeLabels)
    with pytest.raises(ModelLoadError, match="nli/model"):
        reranker.warm()


def test_missing_sentence_transformers_is_a_missing_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "sentence_transformers", None)
    with pytest.raises(MissingExtraError, match="The reranker"):
        CrossEncoderReranker("BAAI/bge-reranker-v2-m3").warm()


def test_load_failure_names_the_model(monkeypatch: pytest.MonkeyPatch) -> None:
    import types

    import retold.index.reranker as reranker_module

    def broken(*args: Any, **kwargs: Any) -> Any:
        raise OSError("not found")

    monkeypatch.setitem(sys.modules, "sentence_transformers", types.SimpleNamespace(CrossEncoder=broken))
    monkeypatch.setattr(reranker_module, "resolve_device", lambda device: "cpu")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(ModelLoadError, match=r"'nobody/no-such-reranker'.*HF_HUB_OFFLINE"):
        CrossEncoderReranker("nobody/no-such-reranker").warm()


async def test_a_failed_load_is_a_failed_pass() -> None:
    def factory() -> Any:
        raise ModelLoadError("cannot load reranker model 'x'")

    outcome = await rerank(CrossEncoderReranker("x", model_factory=factory), ["q"])
    assert outcome.status == "failed" and "cannot load reranker model 'x'" in (outcome.error or "")


def test_reranker_from_config() -> None:
    assert isinstance(reranker_from_config(RerankerConfig()), NoReranker)
    built = reranker_from_config(RerankerConfig(enabled=True, floor=0.3, batch_size=8, model="some/model"))
    assert isinstance(built, CrossEncoderReranker)
    assert (built.name, built.batch_size, built.is_loaded) == ("some/model", 8, False)
    assert isinstance(built, Reranker) and isinstance(FakeReranker(), Reranker)
    assert NoReranker.enabled is False and NoReranker().score("q", []) == []
