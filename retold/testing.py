"""Deterministic fakes for tests and benchmarks (ARCHITECTURE §5). They never load a model.

from retold.testing import FakeClock, FakeEmbedder, FakeJudge
async with retold.open_runtime(path, embedder=FakeEmbedder(), judge=FakeJudge(),
                               clock=FakeClock()) as rt: ...
"""

from __future__ import annotations

import copy
import hashlib
import re
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any, Literal

import numpy as np

from retold.models import (
    CandidateRecord,
    ExtractionContext,
    ExtractionOutput,
    Record,
    ReviewContext,
    ReviewDecision,
    RewriteResult,
    Scope,
    Turn,
    Verdict,
)
from retold.util import new_id

__all__ = [
    "FakeClock",
    "FakeEmbedder",
    "FakeExtractor",
    "FakeJudge",
    "FakeReranker",
    "FakeReviewer",
    "FakeRewriter",
    "record_for_tests",
]

_WORD = re.compile(r"\w+", re.UNICODE)


class FakeClock:
    """A clock that moves only when told: ``clock.advance(days=31)``."""

    def __init__(self, start: datetime | None = None) -> None:
        start = start or datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
        self._now = start if start.tzinfo else start.replace(tzinfo=UTC)
        self._lock = threading.Lock()

    def now(self) -> datetime:
        with self._lock:
            return self._now

    def advance(self, delta: timedelta | None = None, **kwargs: float) -> datetime:
        """Move forward by ``delta`` or by ``timedelta(**kwargs)``; return the new time."""
        step = delta if delta is not None else timedelta(**kwargs)
        if step < timedelta(0):
            raise ValueError("a FakeClock only moves forward")
        with self._lock:
            self._now += step
            return self._now

    def set(self, value: datetime) -> None:
        with self._lock:
            self._now = value if value.tzinfo else value.replace(tzinfo=UTC)


class FakeEmbedder:
    """A hashed bag of lower-cased word tokens, L2-normalised.

    Texts that share words are similar and unrelated texts are near-orthogonal, which is
    enough to test dense search, duplicate collapse and gating without a model.
    ``delay_s`` sleeps per call to stand in for model latency in benchmarks.
    """

    def __init__(self, dims: int = 256, delay_s: float = 0.0, *, name: str = "fake-embedder",
                 version: str = "1") -> None:  # fmt: skip
        if dims < 8:
            raise ValueError("FakeEmbedder needs at least 8 dimensions")
        self.name = name
        self.version = version
        self.dims = dims
        self.delay_s = delay_s
        self.calls: list[tuple[str, int]] = []  # ("query" | "document", number of texts)

    @property
    def is_loaded(self) -> bool:
        return True

    def warm(self) -> None:
        """Nothing to load; present so callers can treat every embedder alike."""

    def _vector(self, text: str) -> np.ndarray:
        vec = np.zeros(self.dims, dtype=np.float32)
        tokens = _WORD.findall(text.lower()) or ["\x00empty"]
        for token in tokens:
            digest = hashlib.blake2b(token.encode("utf-8"), digest_size=8).digest()
            index = int.from_bytes(digest[:4], "little") % self.dims
            vec[index] += 1.0 if digest[4] & 1 else -1.0
        norm = float(np.linalg.norm(vec))
        if norm == 0.0:  # tokens that cancel out: fall back to the first token alone
            vec[int.from_bytes(hashlib.blake2b(tokens[0].encode()).digest()[:4], "little") % self.dims] = 1.0
            norm = 1.0
        return vec / norm

    def _embed(self, texts: list[str], kind: str) -> np.ndarray:
        self.calls.append((kind, len(texts)))
        if self.delay_s:
            time.sleep(self.delay_s)
        if not texts:
            return np.zeros((0, self.dims), dtype=np.float32)
        return np.stack([self._vector(t) for t in texts]).astype(np.float32)

    def embed_queries(self, texts: list[str]) -> np.ndarray:
        return self._embed(list(texts), "query")

    def embed_documents(self, texts: list[str]) -> np.ndarray:
        return self._embed(list(texts), "document")


class FakeJudge:
    """Answers from a table keyed by ``(a, b)`` text pairs, looked up in both orders.

    Identical texts are ``same``; anything not in the table gets ``default``.
    :meth:`entails` returns ``entail`` for every pair.
    """

    name = "fake-judge"
    model = "fake"

    def __init__(
        self,
        table: Mapping[tuple[str, str], Verdict] | None = None,
        default: Verdict = "distinct",
        entail: float = 1.0,
    ) -> None:
        self.table: dict[tuple[str, str], Verdict] = dict(table or {})
        self.default: Verdict = default
        self.entail = entail
        self.calls: list[tuple[str, Any, Any]] = []

    def judge(self, a: str, b: str) -> Verdict:
        self.calls.append(("judge", a, b))
        if a == b:
            return "same"
        return self.table.get((a, b)) or self.table.get((b, a)) or self.default

    def entails(self, premise: str, hypothesis: str) -> float:
        self.calls.append(("entails", premise, hypothesis))
        return self.entail


def _is_exception(value: object) -> bool:
    return isinstance(value, BaseException) or (isinstance(value, type) and issubclass(value, BaseException))


class FakeRewriter:
    """A :class:`~retold.models.QueryRewriter` that answers from a table, a function, or an error.

    ``mapping_or_exception`` is one of: a dict from a tuple of raw queries (or, for a
    one-query search, the query string) to the rewritten list (or a ``RewriteResult``
    to control the status); a callable ``(queries, context)`` returning either; or an
    exception instance or class to raise. Input the table does not know comes back
    unchanged. ``.calls`` captures ``(queries, context)`` so tests can assert the
    rewriter saw nothing else; ``delay_s`` sleeps first to stand in for a slow model.
    """

    def __init__(self, mapping_or_exception: object = None, *, delay_s: float = 0.0) -> None:
        self.behaviour = mapping_or_exception
        self.delay_s = delay_s
        self.calls: list[tuple[list[str], str | None]] = []

    def rewrite(self, queries: list[str], context: str | None) -> RewriteResult:
        self.calls.append((list(queries), context))
        if self.delay_s:
            time.sleep(self.delay_s)
        behaviour = self.behaviour
        if _is_exception(behaviour):
            raise behaviour
        answer: object = None
        if isinstance(behaviour, Mapping):
            answer = behaviour.get(tuple(queries))
            if answer is None and len(queries) == 1:
                answer = behaviour.get(queries[0])
        elif callable(behaviour):
            answer = behaviour(list(queries), context)
        if answer is None:
            return RewriteResult(list(queries), "unchanged")
        if isinstance(answer, RewriteResult):
            return answer
        rewritten = [answer] if isinstance(answer, str) else list(answer)
        return RewriteResult(rewritten, "applied" if rewritten != list(queries) else "unchanged")


class FakeReranker:
    """A :class:`~retold.models.Reranker` with known query–document scores.

    ``scores`` maps ``(query, doc)`` or just ``doc`` to a score (anything else scores
    ``default``), or is a callable ``(query, doc) -> float``, or an exception instance
    or class to raise. ``delay_s`` sleeps per :meth:`score` call to force timeouts;
    ``.calls`` captures ``(query, docs)``.
    """

    name = "fake-reranker"
    enabled = True

    def __init__(self, scores: object = None, *, delay_s: float = 0.0, default: float = 0.0) -> None:
        self.scores = scores
        self.delay_s = delay_s
        self.default = default
        self.calls: list[tuple[str, list[str]]] = []

    @property
    def is_loaded(self) -> bool:
        return True

    def warm(self) -> None:
        """Nothing to load."""

    def _one(self, query: str, doc: str) -> float:
        scores = self.scores
        if isinstance(scores, Mapping):
            if (query, doc) in scores:
                return float(scores[(query, doc)])
            return float(scores.get(doc, self.default))
        if callable(scores):
            fn: Callable[[str, str], float] = scores
            return float(fn(query, doc))
        return self.default

    def score(self, query: str, docs: Sequence[str]) -> list[float]:
        self.calls.append((query, list(docs)))
        if self.delay_s:
            time.sleep(self.delay_s)
        if _is_exception(self.scores):
            raise self.scores
        return [self._one(query, doc) for doc in docs]


class FakeExtractor:
    """An :class:`~retold.models.Extractor` that returns ``output`` (an ``ExtractionOutput``).

    When ``output`` is an exception instance or class it is raised instead; a callable
    ``(transcript, context)`` is called. ``delay_s`` sleeps first (to force the extraction
    timeout); ``.calls`` captures ``(transcript, context)``.
    """

    name = "fake-extractor"
    model = "fake"

    def __init__(
        self, output: object = None, *, delay_s: float = 0.0, prompt_version: str = "fake_v1"
    ) -> None:
        self.output = output if output is not None else ExtractionOutput([], None)
        self.delay_s = delay_s
        self.prompt_version = prompt_version
        self.calls: list[tuple[list[Turn], ExtractionContext]] = []

    def extract(self, transcript: list[Turn], context: ExtractionContext) -> ExtractionOutput:
        self.calls.append((list(transcript), context))
        if self.delay_s:
            time.sleep(self.delay_s)
        output = self.output
        if _is_exception(output):
            raise output  # type: ignore[misc]
        if callable(output):
            return output(list(transcript), context)  # type: ignore[no-any-return]
        return copy.deepcopy(output)  # type: ignore[return-value]


class FakeReviewer:
    """A :class:`~retold.models.CandidateReviewer` that returns ``decisions[i]`` for the i-th candidate.

    Past the end of ``decisions`` (or without it) every candidate gets
    ``ReviewDecision(default, None, "fake")``. A decision that is an exception is raised
    instead, and ``delay_s`` sleeps before answering, so tests can force a reviewer
    failure or timeout. ``.calls`` captures ``(candidate, context)``.
    """

    name = "fake-reviewer"
    model = "fake"

    def __init__(
        self,
        default: Literal["accept", "reject", "revise"] = "accept",
        decisions: Sequence[object] | None = None,
        *,
        delay_s: float = 0.0,
        prompt_version: str = "fake_v1",
    ) -> None:
        self.default = default
        self.decisions = list(decisions or [])
        self.delay_s = delay_s
        self.prompt_version = prompt_version
        self.calls: list[tuple[CandidateRecord, ReviewContext]] = []

    def review(self, candidate: CandidateRecord, context: ReviewContext) -> ReviewDecision:
        index = len(self.calls)
        self.calls.append((candidate, context))
        if self.delay_s:
            time.sleep(self.delay_s)
        if index < len(self.decisions):
            decision = self.decisions[index]
            if _is_exception(decision):
                raise decision  # type: ignore[misc]
            return decision  # type: ignore[return-value]
        return ReviewDecision(self.default, None, "fake")


def record_for_tests(now: datetime, **overrides: Any) -> Record:
    """A confirmed semantic user statement in ``user:u1`` created and dated ``now``; override any field.

    For fixtures and benchmarks that write records straight to the store (bulk loads),
    bypassing the write path.
    """
    values: dict[str, Any] = {
        "id": new_id(),
        "type": "semantic",
        "version": 1,
        "content": "Aditya prefers concise answers",
        "subject": "-",
        "subject_entity_id": None,
        "attribute": None,
        "scope": Scope("user", "u1"),
        "source_kind": "user_statement",
        "source_ref": None,
        "creator_agent_id": "planner",
        "evidence": None,
        "created_at": now,
        "event_at": now,
        "expires_at": None,
        "valid_from": None,
        "valid_until": None,
        "review_at": None,
        "review_flagged_at": None,
        "confidence": 0.95,
        "status": "confirmed",
        "supersedes_id": None,
        "reinforcements": 0,
        "last_reinforced_at": None,
        "tags": [],
        "entity_ids": [],
    }
    unknown = set(overrides) - set(values) - {"index_version"}
    if unknown:
        raise TypeError(f"record_for_tests got unknown field(s): {sorted(unknown)}")
    values.update(overrides)
    return Record(**values)
