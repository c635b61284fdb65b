"""Dates named in a query as event-time windows the dense channel prefers.

"What was Sam doing on December 4, 2023?" is about records whose event time is that day
(or a day either side: "yesterday" in a turn dated the 5th), yet the words that say so
("attended a meeting yesterday") share nothing with the question. The query's temporal
expressions are read with the same grammar the write path uses for evidence
(:func:`retold.ingest.write.temporal.find_expressions`), resolved against the searcher's clock;
the dense channel then ranks the best records inside those windows alongside its global
best (:func:`interleave`), so a dated question reaches its day without a date filter that
would hide everything else.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from typing import TYPE_CHECKING

from retold.ingest.write.temporal import find_expressions
from retold.models import Scope, SearchRequest

if TYPE_CHECKING:
    from retold.store import Store

__all__ = ["TimeWindow", "eligible_within", "interleave", "query_windows", "told_within", "within_request"]


@dataclass(frozen=True)
class TimeWindow:
    """Event times from ``start`` (inclusive) to ``end`` (exclusive), from the query's ``text``."""

    text: str
    start: datetime
    end: datetime


def _midnight(day: date) -> datetime:
    return datetime.combine(day, time(0), tzinfo=UTC)


# A query with none of these cannot name a date; most queries skip the full grammar.
_MAYBE_TEMPORAL = re.compile(
    r"\d|today|tonight|yesterday|tomorrow|day|week|fortnight|month|year|ago|since|last|next|"
    r"jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec",
    re.IGNORECASE,
)


def query_windows(queries: Sequence[str], now: datetime, slack_days: int) -> list[TimeWindow]:
    """Every date or period the queries name ("on May 8, 2022", "in October 2023", "last week"),
    widened by ``slack_days`` on each side. "since March" runs to ``now``; "until" and "by"
    name deadlines, not when something happened, and are left out. "As of" in a question asks
    how things stood then ("How many pets did she have, as of May?"): the period itself."""
    slack = timedelta(days=slack_days)
    out: list[TimeWindow] = []
    for query in (q for q in queries if _MAYBE_TEMPORAL.search(q)):
        for expr in find_expressions(query, now):
            if expr.role == "until":
                continue
            onwards = expr.role == "from" and expr.marker != "as of"
            for first, last in expr.spans:
                start = _midnight(first) - slack
                end = now if onwards else _midnight(last) + timedelta(days=1) + slack
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


def within_request(
    windows: Sequence[tuple[datetime, datetime]], request: SearchRequest
) -> list[tuple[datetime, datetime]]:
    """The windows cut to the request's own since/until; a window left empty is dropped."""
    bounded: list[tuple[datetime, datetime]] = []
    for start, end in windows:
        since = max(start, request.since) if request.since else start
        until = min(end, request.until) if request.until else end
        if since < until:
            bounded.append((since, until))
    return bounded


def told_within(text: str, told_at: datetime, windows: Sequence[TimeWindow]) -> bool:
    """Whether ``text``, said at ``told_at``, names a time inside one of the windows: "last Friday
    I went to the car show", said on a Sunday, is about that Friday, however much later it was
    stored. Only what the text says back in time counts; a plan ("next month") is not a report."""
    for expr in find_expressions(text, told_at):
        if expr.role == "until":
            continue
        for first, last in expr.spans:
            start, end = _midnight(first), _midnight(last) + timedelta(days=1)
            if start <= told_at and any(start < w.end and w.start < end for w in windows):
                return True
    return False


async def eligible_within(
    store: Store,
    windows: Sequence[tuple[datetime, datetime]],
    *,
    scopes: list[Scope],
    eligible: set[str],
    request: SearchRequest,
    now: datetime,
    exclude_source_kinds: tuple[str, ...],
    max_records: int,
) -> set[str]:
    """The eligible records whose event time falls in any ``[start, end)`` window, through the
    same hard filter as the search (and inside the request's own since/until).

    Empty when the windows hold more than ``max_records``: a preference for most of a large
    store is no preference, and the pass over it would cost the search more than it gives.
    """
    inside: set[str] = set()
    for since, until in within_request(windows, request):
        ids = await store.eligible_ids_upto(
            scopes, now=now, cap=max_records - len(inside), types=request.types, since=since, until=until,
            include_history=request.include_history, exclude_source_kinds=exclude_source_kinds,
        )  # fmt: skip
        if ids is None:
            return set()
        inside.update(rid for rid in ids if rid in eligible)
    return inside
