"""One search's state and services: what every stage of the pipeline reads and writes.

:class:`SearchServices` is what the stages use (store, embedder, dense index, models,
config) and :class:`SearchRun` everything one search computes, from the request to the
response; the search_log row is written from it (retold.retrieve.search_log) and the graph's
stage views read it (retold.retrieve.stage_views). The stages themselves are in
retold.retrieve.retriever and retold.retrieve.ranking.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

import numpy as np

from retold.errors import InvalidArgumentError
from retold.models import RECORD_TYPES, Candidate, Principal, Record, Scope, SearchRequest, SearchResponse
from retold.retrieve.gate import GateSubject
from retold.retrieve.query_kind import about_self, asks
from retold.retrieve.time_window import TimeWindow
from retold.util import new_id

if TYPE_CHECKING:
    from retold.config import Config, GateFloors
    from retold.index.dense import DenseSearch
    from retold.retrieve.context import AnchorDays
    from retold.store import Store
    from retold.util import Clock

__all__ = [
    "MAX_K", "MAX_QUERIES", "SEARCH_STAGES", "SearchRun", "SearchServices", "run_floors", "validate_request",
]  # fmt: skip

MAX_QUERIES = 3
MAX_K = 50


SEARCH_STAGES: tuple[str, ...] = (
    "rewrite", "scopes", "filter", "index_refresh", "embed", "dense", "lexical", "entity", "fuse",
    "freshness", "gate", "dedup", "rerank", "budget", "explain", "log",
)  # fmt: skip
"""Every search stage, in order: each response and search_log row carries all of them (0.0 when one
was skipped); the log row lacks only ``log`` itself, still running when the row is written."""


@dataclass(frozen=True, slots=True)
class SearchServices:
    """What the search stages use, and nothing else: the runtime builds one per search."""

    config: Config
    store: Store
    clock: Clock
    embedder: Any
    dense: DenseSearch
    rewriter: Any
    reranker: Any


@dataclass
class SearchRun:
    """Everything one search computes; the log row is written from it."""

    principal: Principal
    request: SearchRequest
    search_id: str = field(default_factory=new_id)
    started_at: datetime | None = None
    t0: float = field(default_factory=time.perf_counter)
    warm: bool = False
    timings: dict[str, float] = field(default_factory=dict)
    queries: list[str] = field(default_factory=list)
    dense_queries: list[str] = field(default_factory=list)  # what the dense channel embedded
    windows: list[TimeWindow] = field(default_factory=list)  # event-time windows the query names
    in_windows: set[str] = field(default_factory=set)  # the eligible records inside them
    qvecs: np.ndarray | None = None  # the dense query vectors, for the context pass
    # (texts, their vectors on the way): the query embedding, started as soon as its text is known
    embedding: tuple[list[str], asyncio.Future[np.ndarray]] | None = None
    floors: GateFloors | None = None  # set once by run_floors
    context: list[tuple[str, float]] = field(default_factory=list)  # the same-day context hits
    neighbours: list[tuple[str, float]] = field(default_factory=list)  # beside the best matches
    rewrite_status: str = "disabled"
    scopes: list[Scope] = field(default_factory=list)
    eligible: set[str] = field(default_factory=set)
    index_refresh: str = ""
    dense: list[tuple[str, float]] = field(default_factory=list)
    windowed: list[tuple[str, float]] = field(default_factory=list)  # the best inside the query's dates
    from_passage: set[str] = field(default_factory=set)  # dense scores that are a passage's
    lexical: list[Any] = field(default_factory=list)
    entity: list[Any] = field(default_factory=list)
    candidates: list[Candidate] = field(default_factory=list)  # fused, freshness applied, eligible only
    fused_log: list[list[Any]] = field(default_factory=list)
    records: dict[str, Record] = field(default_factory=dict)
    snippets: dict[str, str] = field(default_factory=dict)  # short text of candidates not loaded whole
    prefetch_ms: float = 0.0
    broad_entities: list[str] = field(default_factory=list)  # named, but too broad to select
    named: dict[str, str] = field(default_factory=dict)  # entity id -> kind, for those the query names
    own_entities: frozenset[str] = frozenset()  # the searcher's own person entities
    about_read: set[str] = field(default_factory=set)  # candidates whose 'about' links were read
    other_subject: set[str] = field(default_factory=set)  # about someone else (retold.retrieve.subjects)
    time_answers: list[str] = field(default_factory=list)  # tell a time; the query asks when
    best: list[str] = field(default_factory=list)  # the channels' best matches, which no pass outranks
    reply_of: dict[str, str] = field(default_factory=dict)  # asker -> its reply (retold.retrieve.replies)
    replies: list[str] = field(default_factory=list)  # the replies, in their askers' order
    # The last days read whole, and the sets of days found too busy to read (retold.retrieve.
    # ranking): the replies reuse the one and do not try the others again.
    days_read: tuple[frozenset[datetime], AnchorDays] | None = None
    crowded_days: list[frozenset[datetime]] = field(default_factory=list)
    subjects: dict[str, GateSubject] = field(default_factory=dict)
    kept: list[Candidate] = field(default_factory=list)
    gated_out: list[tuple[str, str]] = field(default_factory=list)
    deduped_out: list[tuple[str, str, float]] = field(default_factory=list)
    reranked: list[list[Any]] | None = None
    reranked_out: list[list[Any]] = field(default_factory=list)
    rerank_status: str = "disabled"
    rerank_error: str | None = None
    response: SearchResponse | None = None

    def mark(self, stage: str, since: float) -> float:
        now = time.perf_counter()
        self.timings[stage] = round((now - since) * 1000.0, 3)
        return now


def validate_request(request: SearchRequest) -> SearchRequest:
    """Refuse a malformed request before any work; the tool layer turns this into invalid_input."""
    queries = (
        [q.strip() for q in request.queries if isinstance(q, str)]
        if isinstance(request.queries, list)
        else []
    )
    if not queries or len(queries) != len(request.queries) or not all(queries) or len(queries) > MAX_QUERIES:
        raise InvalidArgumentError("queries must be a list of 1 to 3 non-blank strings")
    if request.types is not None and any(t not in RECORD_TYPES for t in request.types):
        raise InvalidArgumentError(f"types must be drawn from {', '.join(RECORD_TYPES)}")
    if request.k is not None and (not isinstance(request.k, int) or not 1 <= request.k <= MAX_K):
        raise InvalidArgumentError(f"k must be an integer from 1 to {MAX_K}")
    if request.trigger not in ("tool", "auto"):
        raise InvalidArgumentError("trigger must be 'tool' or 'auto'")
    if not isinstance(request.gate, bool):
        raise InvalidArgumentError("gate must be true or false")
    if request.scopes is not None and (
        not isinstance(request.scopes, list) or not all(isinstance(s, Scope) for s in request.scopes)
    ):
        raise InvalidArgumentError("scopes must be a list of Scope values (or None for every readable one)")
    if request.since and request.until and request.since > request.until:
        raise InvalidArgumentError("since must not be after until")
    return dataclasses.replace(request, queries=queries)


def run_floors(config: Config, run: SearchRun) -> GateFloors:
    """The floors this search must clear: its trigger's, for auto by whether the request's own
    queries ask something, for both by whether they ask about the searcher (query_kind; a
    rewriter's keywords change neither), all at zero
    when the request turned the gate off. Worked out once per search."""
    if run.floors is None:
        req = run.request
        floors = config.retrieval.gate.floors_for(
            req.trigger, asks=asks(req.queries), about_self=about_self(req.queries)
        )
        run.floors = floors.for_request(req.gate)
    return run.floors
