"""The optional cross-encoder reranker (spec §2.2, §10.7) and the timeout-bounded pass around it.

Reranking is off by default. When it is on, the pipeline sends the gate and
duplicate-collapse survivors (at most ``reranker.candidates``) through
:func:`rerank_with_timeout`, which scores *copies* of ``(record_id, content)`` in a
worker thread and gives up at ``reranker.timeout_ms`` (cold model load included). It
never raises: the caller reads :attr:`RerankOutcome.status` and either falls back to
the RRF order or raises :class:`RerankError`, as ``reranker.on_failure`` says. An
applied outcome goes through the pure :func:`apply_rerank`, which reorders the
shortlist, builds the ``reranked`` log rows and drops records below ``reranker.floor``.

torch and sentence-transformers are imported on first use, never at import time.

    reranker = reranker_from_config(config.reranker)
    reranker.warm()  # a serving process loads at start, so no search spends its timeout on it
    outcome = await rerank_with_timeout(reranker, queries, docs, timeout_ms=2000)
    if outcome.status == "applied":
        ranked = apply_rerank([rid for rid, _ in docs], outcome.scores, config.reranker.floor)
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, NamedTuple, Protocol

import anyio
import anyio.to_thread
import numpy as np

from retold.errors import MissingExtraError, RetoldError
from retold.index.embedder import ModelLoadError, resolve_device
from retold.index.lazy_model import LazyModel, load_local_or_cached
from retold.models import Reranker

if TYPE_CHECKING:
    from retold.config import RerankerConfig

__all__ = [
    "BgeReranker",
    "CrossEncoderModel",
    "CrossEncoderReranker",
    "ModelLoadError",
    "NoReranker",
    "RerankApplied",
    "RerankError",
    "RerankOutcome",
    "RerankedRow",
    "Reranker",
    "apply_rerank",
    "rerank_with_timeout",
    "reranker_from_config",
]

RerankStatus = Literal["applied", "timeout", "failed"]
_TRUTHY = frozenset({"1", "true", "yes", "on"})


class RerankError(RetoldError):
    """The reranker pass timed out or failed and ``reranker.on_failure`` is ``fail``.

    Also raised inside a pass (and reported as ``failed``) when a model returns
    something that is not one score per pair.
    """


class CrossEncoderModel(Protocol):
    """The part of sentence-transformers' ``CrossEncoder`` the reranker uses (tests inject a stub)."""

    def predict(self, inputs: list[tuple[str, str]], **kwargs: Any) -> Any: ...


class NoReranker:
    """The reranker of a deployment with ``reranker.enabled: false``: it scores nothing.

    The pipeline checks ``enabled`` (or the config) and skips the stage; calling
    :meth:`score` is a wiring error, so it raises rather than inventing scores that a
    floor would then act on.
    """

    enabled = False
    is_loaded = True

    def warm(self) -> None:
        """Nothing to load."""

    def score(self, query: str, docs: list[str]) -> list[float]:
        if not docs:
            return []
        raise RerankError("reranking is disabled (NoReranker); enable reranker.enabled to score records")


def _identity(scores: Any) -> Any:
    """Passed as ``activation_fn`` so ``predict`` returns raw logits whatever the model config says."""
    return scores


def _sigmoid(logits: np.ndarray) -> np.ndarray:
    # tanh form: no overflow warnings for large negative logits
    return 0.5 * (1.0 + np.tanh(0.5 * logits))


class CrossEncoderReranker(LazyModel[CrossEncoderModel]):
    """A :class:`~retold.models.Reranker` over a single-label sentence-transformers ``CrossEncoder``.

    Scores are sigmoid probabilities, so ``reranker.floor`` is compared on a (0, 1)
    scale. sentence-transformers' ``predict`` applies the activation stored in the
    model's config (sigmoid by default for one label, but some checkpoints store
    Identity); to keep the scale independent of that, the model is asked for raw
    logits (``activation_fn`` = identity, ``apply_softmax=False``) and the sigmoid is
    applied here. The model loads on first use or :meth:`warm`; loading and ``predict``
    are each serialised by a lock, so one instance is safe from any thread.

    ``model_factory`` replaces the loader (it returns the model object); tests use it
    to avoid torch.
    """

    enabled = True

    def __init__(
        self,
        model: str,
        *,
        device: str = "auto",
        batch_size: int = 32,
        model_factory: Callable[[], CrossEncoderModel] | None = None,
    ) -> None:
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        self.name = model
        self.device = device
        self.batch_size = batch_size
        super().__init__(model_factory)
        self._predict_lock = threading.Lock()

    def __repr__(self) -> str:
        return f"CrossEncoderReranker(model={self.name!r}, loaded={self.is_loaded})"

    def _load(self) -> CrossEncoderModel:
        try:
            from sentence_transformers import CrossEncoder
        except ImportError as exc:
            raise MissingExtraError("sentence-transformers", "local", "The reranker") from exc
        device = resolve_device(self.device)
        return load_local_or_cached(
            CrossEncoder,
            self.name,
            Path(self.name).expanduser(),
            device=device,
            what="reranker model",
            hint="point reranker.model at a local folder, or set reranker.enabled: false.",
        )

    def _check(self, model: CrossEncoderModel) -> None:
        labels = getattr(model, "num_labels", 1)
        if isinstance(labels, int) and labels != 1:
            raise ModelLoadError(
                f"reranker model {self.name!r} has {labels} output labels; the reranker needs a "
                "single-label cross-encoder whose score is one relevance logit"
            )

    def score_pairs(self, pairs: Sequence[tuple[str, str]]) -> list[float]:
        """Sigmoid scores for ``(query, doc)`` pairs, all in one ``predict`` call (batched inside)."""
        items = [(str(q), str(d)) for q, d in pairs]
        if not items:
            return []
        model = self._ensure_model()
        with self._predict_lock:
            raw = model.predict(
                items,
                batch_size=self.batch_size,
                activation_fn=_identity,
                apply_softmax=False,
                convert_to_numpy=True,
                show_progress_bar=False,
            )
        if hasattr(raw, "detach"):  # a torch tensor from a model that ignored convert_to_numpy
            raw = raw.detach().float().cpu().numpy()
        logits = np.asarray(raw, dtype=np.float64)
        if logits.ndim == 2 and logits.shape[1] == 1:
            logits = logits.reshape(-1)
        if logits.shape != (len(items),):
            raise RerankError(
                f"reranker model {self.name!r} returned scores of shape {logits.shape} for "
                f"{len(items)} pairs; it must be a single-label cross-encoder"
            )
        return [float(s) for s in _sigmoid(logits)]

    def score(self, query: str, docs: list[str]) -> list[float]:
        """Sigmoid scores of ``query`` against each doc, in order."""
        return self.score_pairs([(query, d) for d in docs])


BgeReranker = CrossEncoderReranker
"""The spec's name for the reranker (its default model is BAAI/bge-reranker-v2-m3)."""


def reranker_from_config(config: RerankerConfig) -> Reranker:
    """A lazily loaded :class:`CrossEncoderReranker` when ``reranker.enabled``, else :class:`NoReranker`."""
    if not config.enabled:
        return NoReranker()
    return CrossEncoderReranker(config.model, batch_size=config.batch_size)


# --- the timeout-bounded pass ----------------------------------------------------------------


@dataclass
class RerankOutcome:
    """What one reranker pass produced; ``scores`` is set only when ``status`` is ``applied``.

    ``scores`` maps record_id to ``(best score over queries, index of the query that
    produced it)``. ``error`` says why a ``timeout`` or ``failed`` pass produced nothing.
    """

    status: RerankStatus
    scores: dict[str, tuple[float, int]] | None
    error: str | None
    elapsed_ms: float


def _score_all(
    reranker: Reranker, queries: tuple[str, ...], docs: tuple[tuple[str, str], ...]
) -> dict[str, tuple[float, int]]:
    """Runs in the worker thread on private copies; returns a fresh dict the caller may adopt."""
    contents = [content for _, content in docs]
    score_pairs = getattr(reranker, "score_pairs", None)
    per_query: list[list[float]] = []
    if callable(score_pairs):
        flat = list(score_pairs([(q, c) for q in queries for c in contents]))
        if len(flat) != len(queries) * len(contents):
            raise RerankError(
                f"the reranker returned {len(flat)} scores for {len(queries) * len(contents)} pairs"
            )
        per_query = [flat[i * len(contents) : (i + 1) * len(contents)] for i in range(len(queries))]
    else:
        for query in queries:
            row = list(reranker.score(query, list(contents)))
            if len(row) != len(contents):
                raise RerankError(f"the reranker returned {len(row)} scores for {len(contents)} records")
            per_query.append(row)
    best: dict[str, tuple[float, int]] = {}
    for qi, row in enumerate(per_query):
        for (record_id, _), value in zip(docs, row, strict=True):
            score = float(value)
            if not math.isfinite(score):
                raise RerankError(f"the reranker returned a non-finite score ({score}) for {record_id}")
            held = best.get(record_id)
            if held is None or score > held[0]:  # ties keep the earlier query
                best[record_id] = (score, qi)
    return best


async def rerank_with_timeout(
    reranker: Reranker,
    queries: Sequence[str],
    docs: Sequence[tuple[str, str]],
    *,
    timeout_ms: int,
) -> RerankOutcome:
    """Score every (query, doc) pair in a worker thread, keeping each record's best score.

    ``docs`` are ``(record_id, content)`` pairs; the worker gets tuple copies of them and
    of ``queries``, and returns a new dict, so a pass that is abandoned at ``timeout_ms``
    (the thread runs on in the background, its result dropped) or that fails cannot
    touch anything the search goes on to use. Never raises for a timeout or an error in
    the reranker: the caller picks fallback or :class:`RerankError` from
    ``reranker.on_failure``. Cancellation of the caller itself still propagates.
    """
    start = time.perf_counter()

    def elapsed() -> float:
        return (time.perf_counter() - start) * 1000.0

    query_copy = tuple(str(q) for q in queries)
    doc_copy = tuple((str(rid), str(content)) for rid, content in docs)
    if not doc_copy:
        return RerankOutcome("applied", {}, None, elapsed())
    if not query_copy:
        return RerankOutcome("failed", None, "no queries to rerank against", elapsed())
    result: dict[str, tuple[float, int]] | None = None
    try:
        with anyio.move_on_after(timeout_ms / 1000.0):
            result = await anyio.to_thread.run_sync(
                _score_all, reranker, query_copy, doc_copy, abandon_on_cancel=True
            )
    except Exception as exc:
        detail = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
        return RerankOutcome("failed", None, detail, elapsed())
    if result is None:
        return RerankOutcome("timeout", None, f"reranker exceeded {timeout_ms} ms", elapsed())
    return RerankOutcome("applied", result, None, elapsed())


# --- applying the scores -----------------------------------------------------------------------


class RerankedRow(NamedTuple):
    """One ``search_log.reranked`` row; ranks are 1-based, ``winning_query`` indexes the searched queries."""

    record_id: str
    rank_before: int
    rank_after: int
    score: float
    winning_query: int


@dataclass
class RerankApplied:
    """The shortlist after an applied reranker pass.

    ``order`` is every shortlisted id by descending score (ties keep the prior order);
    ``kept`` is ``order`` without the records below the floor; ``logged`` is the
    ``reranked`` log column (one row per shortlisted record, in ``order``, including
    records then dropped by the floor, so the floor can be re-swept offline);
    ``below_floor`` holds the ``reranked_out`` entries ``(record_id, reason, score)``.
    """

    order: list[str]
    kept: list[str]
    logged: list[RerankedRow] = field(default_factory=list)
    below_floor: list[tuple[str, str, float]] = field(default_factory=list)


def _floor_text(floor: float) -> str:
    return f"{floor:.2f}" if round(floor, 2) == floor else f"{floor:g}"


def apply_rerank(
    candidates_in_order: Sequence[str],
    outcome_scores: Mapping[str, tuple[float, int]],
    floor: float | None,
) -> RerankApplied:
    """Reorder the shortlist by reranker score and apply ``reranker.floor`` (spec §10.7).

    ``candidates_in_order`` is the shortlist sent to :func:`rerank_with_timeout`, in its
    prior (RRF) order; ``outcome_scores`` is that outcome's ``scores``. A record is kept
    when its best score is at least ``floor`` (``None``: nothing is dropped). Pure: the
    pipeline copies ``rank_after`` and ``score`` onto its candidates from the result.
    Raises ``ValueError`` for a duplicate id or an id without a score, both wiring bugs.
    """
    ids = list(candidates_in_order)
    if len(set(ids)) != len(ids):
        raise ValueError("apply_rerank got a shortlist with duplicate record ids")
    missing = [rid for rid in ids if rid not in outcome_scores]
    if missing:
        raise ValueError(f"apply_rerank has no reranker score for {missing[:3]}")
    before = {rid: i for i, rid in enumerate(ids, start=1)}
    order = sorted(ids, key=lambda rid: (-outcome_scores[rid][0], before[rid]))
    logged: list[RerankedRow] = []
    kept: list[str] = []
    below: list[tuple[str, str, float]] = []
    for after, rid in enumerate(order, start=1):
        score, winning = outcome_scores[rid]
        logged.append(RerankedRow(rid, before[rid], after, float(score), int(winning)))
        if floor is not None and score < floor:
            below.append((rid, f"below reranker floor {_floor_text(floor)}", float(score)))
        else:
            kept.append(rid)
    return RerankApplied(order=order, kept=kept, logged=logged, below_floor=below)
