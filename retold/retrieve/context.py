"""Same-day context: the dense channel's second pass over the days of the best matches.

A question's evidence is often said next to what matches it best: the answer a turn after
the question it answers, the second half of a story told across a session. In LoCoMo, 220
of the 1,007 gold turns missing from the top 10 sat next to one of the top 5, and 471 in the
same session. After a first fusion, the event days of the ``retrieval.context_anchors`` best
candidates become windows; the dense channel ranks the eligible records of those days
against the query, and the ``retrieval.context_k`` best join fusion as one more list at
``retrieval.context_weight``. They are dense hits (their cosine is real and logged with the
rest), so the gate judges them by the same floors and a replay reproduces the search.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import UTC, datetime, time, timedelta
from typing import TYPE_CHECKING

import numpy as np

from retold.models import Scope, SearchRequest
from retold.retrieve.time_window import eligible_within

if TYPE_CHECKING:
    from retold.index.dense import DenseSearch
    from retold.store import Store

__all__ = ["anchor_days", "same_day_hits"]


def anchor_days(event_times: Iterable[datetime | None]) -> list[tuple[datetime, datetime]]:
    """The distinct UTC calendar days of ``event_times`` as ``[start, end)`` windows, in order."""
    days: dict[datetime, None] = {}
    for at in event_times:
        if at is not None:
            days.setdefault(datetime.combine(at.astimezone(UTC).date(), time(0), tzinfo=UTC), None)
    return [(day, day + timedelta(days=1)) for day in days]


async def same_day_hits(
    store: Store,
    dense: DenseSearch,
    qvecs: np.ndarray,
    *,
    days: Sequence[tuple[datetime, datetime]],
    scopes: list[Scope],
    eligible: set[str],
    request: SearchRequest,
    now: datetime,
    exclude_source_kinds: tuple[str, ...],
    skip: set[str],
    k: int,
    max_records: int,
) -> list[tuple[str, float]]:
    """The ``k`` eligible records of ``days`` closest to the query, but ``skip`` (best first);
    nothing when those days hold more than ``max_records`` (a day that busy is no context)."""
    inside = await eligible_within(
        store, days, scopes=scopes, eligible=eligible, request=request, now=now,
        exclude_source_kinds=exclude_source_kinds, max_records=max_records,
    )  # fmt: skip
    inside -= skip
    if not inside:
        return []
    return [(rid, cos) for rid, cos in await dense.search(qvecs, inside, k) if rid in inside]
