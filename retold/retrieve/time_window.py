"""Dates named in a query as event-time windows the dense channel prefers.

"What was Sam doing on December 4, 2023?" is about records whose event time is that day
(or a day either side: "yesterday" in a turn dated the 5th), yet the words that say so
("attended a meeting yesterday") share nothing with the question. The query's temporal
expressions are read with the same grammar the write path uses for evidence
(:func:`retold.ingest.temporal.find_expressions`), resolved against the searcher's clock;
the dense channel then ranks the best records inside those windows alongside its global
best (:func:`interleave`), so a dated question reaches its day without a date filter that
would hide everything else.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from typing import TYPE_CHECKING

from retold.ingest.temporal import find_expressions
from retold.models import Scope, SearchRequest

if TYPE_CHECKING:
    from retold.store import Store

__all__ = ["TimeWindow", "eligible_within", "interleave", "query_windows"]


@dataclass(frozen=True)
class TimeWindow:
    """Event times from ``start`` (inclusive) to ``end`` (exclusive), from the query's ``text``."""

    text: str
    start: datetime
    end: datetime


def _midnight(day: date) -> datetime:
    return datetime.combine(day, time(0), tzinfo=UTC)


def query_windows(queries: Sequence[str], now: datetime, slack_days: int) -> list[TimeWindow]:
    """Every date or period the queries name ("on May 8, 2022", "in October 2023", "last week"),
    widened by ``slack_days`` on each side. "since March" runs to ``now``; "until" and "by"
    name deadlines, not when something happened, and are left out."""
    slack = timedelta(days=slack_days)
    out: list[TimeWindow] = []
    for query in queries:
        for expr in find_expressions(query, now):
            if expr.role == "until":
                continue
            for first, last in expr.spans:
                start = _midnight(first) - slack
                end = now if expr.role == "from" else _midnight(last) + timedelta(days=1) + slack
                if start < end:
                    out.append(TimeWindow(expr.text, start, end))
    return out


def interleave(
    best: Sequence[tuple[str, float]], windowed: Sequence[tuple[str, float]], k: int
) -> list[tuple[str, float]]:
    """The dense ranking: the window's best and the global best alternate, window first, each
    record once, ``k`` in all. Neither list pushes the other's leaders far down."""
    out: list[tuple[str, float]] = []
    seen: set[str] = set()
    for pair in zip(windowed, best, strict=False):
        for rid, cosine in pair:
            if rid not in seen:
                seen.add(rid)
                out.append((rid, cosine))
    longer = windowed if len(windowed) > len(best) else best
    for rid, cosine in longer[min(len(windowed), len(best)) :]:
        if rid not in seen:
            seen.add(rid)
            out.append((rid, cosine))
    return out[:k]


async def eligible_within(
    store: Store,
    windows: Sequence[tuple[datetime, datetime]],
    *,
    scopes: list[Scope],
    eligible: set[str],
    request: SearchRequest,
    now: datetime,
    exclude_source_kinds: tuple[str, ...],
) -> set[str]:
    """The eligible records whose event time falls in any ``[start, end)`` window, through the
    same hard filter as the search (and inside the request's own since/until)."""
    inside: set[str] = set()
    for start, end in windows:
        since = max(start, request.since) if request.since else start
        until = min(end, request.until) if request.until else end
        if since >= until:
            continue
        ids = await store.eligible_ids(
            scopes, now=now, types=request.types, since=since, until=until,
            include_history=request.include_history, exclude_source_kinds=exclude_source_kinds,  # type: ignore[arg-type]
        )  # fmt: skip
        inside.update(rid for rid in ids if rid in eligible)
    return inside
