"""Operator metrics (issue 21): what searches, writes and activation did over a window.

The figures come from what the store already records, nothing new is logged for them:

* **searches** from ``search_log``: how many, how many returned nothing, the mean number of
  results, the mean tokens returned, and the latency of every stage at p50 and p95 (nearest
  rank over the window's searches, a skipped stage counting as its logged 0 ms). The log
  keeps no token count; a search's tokens are read from its last result's explanation
  (``budget``: "fit at position 3 of 8, 412 tokens used"), the budget's own estimate
  (``len(content) // 4 + 30`` per result). A search whose explanations were erased counts
  in everything but the token mean (``tokens_known`` says how many did);
* **writes** from the ``record.created`` and ``record.reinforced`` events, by outcome
  (refused writes append no event and are not counted; an erased event's outcome is
  ``erased``);
* **activation** from ``record.activation_decided`` events, by activation and by who decided
  (``policy``, ``review``, ``operator``), and ``record.activation_skipped``;
* **reviews** opened and resolved in the window, and the backlog now (open items whose
  record is still active, and the age of the oldest).

:func:`collect_metrics` reads them through the store; everything else here is pure.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol

__all__ = [
    "ActivationFigures",
    "Backlog",
    "LatencyFigures",
    "Metrics",
    "ReviewFigures",
    "SearchFigures",
    "SearchTally",
    "WriteFigures",
    "collect_metrics",
    "percentile",
    "tokens_returned",
]

ERASED = "erased"  # the label of a count whose event payload was erased
_TOKENS = re.compile(r"(\d+) tokens used")
_PAGE = 500


def percentile(values: Sequence[float], fraction: float) -> float:
    """The nearest-rank percentile: the smallest value with at least ``fraction`` of them at or below it."""
    if not values:
        return 0.0
    ordered = sorted(values)
    rank = max(1, math.ceil(fraction * len(ordered)))
    return float(ordered[min(rank, len(ordered)) - 1])


def tokens_returned(returned: Sequence[Any], explanations: Sequence[Any]) -> int | None:
    """Tokens a logged search returned, from its explanations' budget lines; None when unknown.

    An empty search returned 0 tokens. Otherwise the running total of the last admitted
    result is the search's total; a search whose explanations were erased is unknown.
    """
    if not returned:
        return 0
    totals = [
        int(m.group(1))
        for e in explanations
        if isinstance(e, Mapping) and isinstance(e.get("budget"), str)
        for m in [_TOKENS.search(e["budget"])]
        if m is not None
    ]
    return max(totals) if totals else None


@dataclass(frozen=True)
class LatencyFigures:
    """One stage's latency over the window, in milliseconds."""

    p50: float
    p95: float
    max: float


@dataclass(frozen=True)
class SearchFigures:
    count: int
    empty: int
    empty_rate: float  # 0.0 when there were no searches
    mean_results: float
    mean_tokens: float | None  # over the searches whose tokens are known; None when none is
    tokens_known: int
    by_trigger: dict[str, int]
    latency_ms: dict[str, LatencyFigures]  # stage -> figures, in the log's stage order, "total" last


@dataclass
class SearchTally:
    """Running sums over logged searches; :meth:`figures` is the report."""

    count: int = 0
    empty: int = 0
    results: int = 0
    tokens: int = 0
    tokens_known: int = 0
    triggers: Counter[str] = field(default_factory=Counter)
    stages: dict[str, list[float]] = field(default_factory=dict)

    def add(
        self, trigger: str, returned: Sequence[Any], explanations: Sequence[Any], timings: Mapping[str, Any]
    ) -> None:
        self.count += 1
        self.triggers[trigger] += 1
        self.results += len(returned)
        if not returned:
            self.empty += 1
        tokens = tokens_returned(returned, explanations)
        if tokens is not None:
            self.tokens += tokens
            self.tokens_known += 1
        for stage, value in timings.items():
            if isinstance(value, int | float) and not isinstance(value, bool):
                self.stages.setdefault(str(stage), []).append(float(value))

    def figures(self) -> SearchFigures:
        order = [s for s in self.stages if s != "total"] + (["total"] if "total" in self.stages else [])
        latency = {
            s: LatencyFigures(
                round(percentile(self.stages[s], 0.5), 3),
                round(percentile(self.stages[s], 0.95), 3),
                round(max(self.stages[s]), 3),
            )
            for s in order
        }
        return SearchFigures(
            count=self.count,
            empty=self.empty,
            empty_rate=round(self.empty / self.count, 4) if self.count else 0.0,
            mean_results=round(self.results / self.count, 3) if self.count else 0.0,
            mean_tokens=round(self.tokens / self.tokens_known, 1) if self.tokens_known else None,
            tokens_known=self.tokens_known,
            by_trigger=dict(sorted(self.triggers.items())),
            latency_ms=latency,
        )


@dataclass(frozen=True)
class WriteFigures:
    total: int
    by_outcome: dict[str, int]  # created, reinforced, already_reinforced, superseded, conflict...


@dataclass(frozen=True)
class ActivationFigures:
    decisions: int
    by_activation: dict[str, int]  # ambient | conditional
    by_decider: dict[str, int]  # policy | review | operator
    by_activation_and_decider: dict[str, dict[str, int]]
    skipped: int  # record.activation_skipped: the policy failed and the record stayed conditional


@dataclass(frozen=True)
class Backlog:
    """Open review items whose record is still active: what ``retold reviews backlog`` checks."""

    open: int
    oldest: datetime | None
    oldest_age_days: float | None
    open_stale: int  # open items whose record is no longer active (not part of the backlog)


@dataclass(frozen=True)
class ReviewFigures:
    opened: int
    resolved: int
    by_resolution: dict[str, int]  # promote | conditional | reject
    backlog: Backlog


@dataclass(frozen=True)
class Metrics:
    since: datetime | None
    until: datetime | None
    now: datetime
    searches: SearchFigures
    writes: WriteFigures
    activation: ActivationFigures
    reviews: ReviewFigures


def _label(value: Any) -> str:
    return ERASED if value is None else str(value)


def write_figures(counts: Mapping[str | None, int]) -> WriteFigures:
    by_outcome: Counter[str] = Counter()
    for outcome, n in counts.items():
        by_outcome[_label(outcome)] += n
    return WriteFigures(sum(by_outcome.values()), dict(sorted(by_outcome.items())))


def activation_figures(rows: Iterable[tuple[str | None, str | None, int]], skipped: int) -> ActivationFigures:
    by_activation: Counter[str] = Counter()
    by_decider: Counter[str] = Counter()
    both: dict[str, Counter[str]] = {}
    for activation, decider, n in rows:
        by_activation[_label(activation)] += n
        by_decider[_label(decider)] += n
        both.setdefault(_label(activation), Counter())[_label(decider)] += n
    return ActivationFigures(
        decisions=sum(by_activation.values()),
        by_activation=dict(sorted(by_activation.items())),
        by_decider=dict(sorted(by_decider.items())),
        by_activation_and_decider={a: dict(sorted(c.items())) for a, c in sorted(both.items())},
        skipped=skipped,
    )


def backlog(open_active: int, oldest: datetime | None, open_all: int, now: datetime) -> Backlog:
    age = None if oldest is None else round(max(0.0, (now - oldest).total_seconds()) / 86400, 3)
    return Backlog(open_active, oldest, age, max(0, open_all - open_active))


class _MetricsSource(Protocol):
    async def search_log_page(
        self, since: datetime | None, until: datetime | None, *, after: str | None = None, limit: int = 500
    ) -> list[tuple[str, str, list[Any], list[Any], dict[str, Any]]]: ...

    async def write_outcome_counts(
        self, since: datetime | None, until: datetime | None
    ) -> dict[str | None, int]: ...

    async def activation_decision_counts(
        self, since: datetime | None, until: datetime | None
    ) -> list[tuple[str | None, str | None, int]]: ...

    async def event_count(self, kind: str, since: datetime | None, until: datetime | None) -> int: ...

    async def reviews_opened(self, since: datetime | None, until: datetime | None) -> int: ...

    async def reviews_resolved(self, since: datetime | None, until: datetime | None) -> dict[str, int]: ...

    async def open_review_count(self) -> int: ...

    async def activation_backlog(self) -> tuple[int, datetime | None]: ...


async def current_backlog(store: _MetricsSource, now: datetime) -> Backlog:
    """The review backlog as of ``now`` (no window: what is open is open)."""
    open_active, oldest = await store.activation_backlog()
    return backlog(open_active, oldest, await store.open_review_count(), now)


async def collect_metrics(
    store: _MetricsSource, *, now: datetime, since: datetime | None = None, until: datetime | None = None
) -> Metrics:
    """Every figure for ``[since, until)`` (open ends: all of the log), the backlog as of ``now``."""
    tally = SearchTally()
    after = None
    while True:
        page = await store.search_log_page(since, until, after=after, limit=_PAGE)
        for _id, trigger, returned, explanations, timings in page:
            tally.add(trigger, returned, explanations, timings)
        if len(page) < _PAGE:
            break
        after = page[-1][0]
    resolved = await store.reviews_resolved(since, until)
    return Metrics(
        since=since,
        until=until,
        now=now,
        searches=tally.figures(),
        writes=write_figures(await store.write_outcome_counts(since, until)),
        activation=activation_figures(
            await store.activation_decision_counts(since, until),
            await store.event_count("record.activation_skipped", since, until),
        ),
        reviews=ReviewFigures(
            opened=await store.reviews_opened(since, until),
            resolved=sum(resolved.values()),
            by_resolution=resolved,
            backlog=await current_backlog(store, now),
        ),
    )
