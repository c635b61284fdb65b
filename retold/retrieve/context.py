"""Same-day context: the dense channel's second pass over the days of the best matches.

A question's evidence is often said next to what matches it best: the answer a turn after
the question it answers, the second half of a story told across a session. In LoCoMo, 220
of the 1,007 gold turns missing from the top 10 sat next to one of the top 5, and 471 in the
same session. After a first fusion, the event days of the ``retrieval.context_anchors`` best
candidates become windows; the dense channel ranks the eligible records of those days
against the query, and the ``retrieval.context_k`` best join fusion as one more list at
``retrieval.context_weight``. They are dense hits (their cosine is real and logged with the
rest), so the gate judges them by the same floors and a replay reproduces the search.

Neighbours are the narrow form of the same idea: the records written just before and after
each of the ``retrieval.neighbour_anchors`` best candidates (same scope, same event day, in
event order), fused in the order of their anchors at ``retrieval.neighbour_weight``. Both
passes read their anchors' days once (:func:`read_anchor_days`).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from typing import TYPE_CHECKING

import numpy as np

from retold.models import Scope, SearchRequest
from retold.retrieve.time_window import within_request

if TYPE_CHECKING:
    from retold.index.dense import DenseSearch
    from retold.store import Store

__all__ = ["AnchorDays", "anchor_days", "read_anchor_days", "same_day_hits"]


def anchor_days(event_times: Iterable[datetime | None]) -> list[tuple[datetime, datetime]]:
    """The distinct UTC calendar days of ``event_times`` as ``[start, end)`` windows, in order."""
    days: dict[datetime, None] = {}
    for at in event_times:
        if at is not None:
            days.setdefault(datetime.combine(at.astimezone(UTC).date(), time(0), tzinfo=UTC), None)
    return [(day, day + timedelta(days=1)) for day in days]


@dataclass(frozen=True)
class AnchorDays:
    """The eligible records of the anchors' days, in event order per scope and day: what both
    passes read, fetched once."""

    sequences: dict[tuple[Scope, date], list[str]]

    def on(self, days: Sequence[tuple[datetime, datetime]]) -> set[str]:
        """The records of ``days`` (a subset of the days this was read for)."""
        wanted = {start.date() for start, _ in days}
        return {rid for (_, day), ids in self.sequences.items() if day in wanted for rid in ids}

    def replies(self, askers: Sequence[str]) -> dict[str, str]:
        """For each asker: the record just after it in its scope's day (the turn that answers it)."""
        position = {rid: (seq, i) for seq in self.sequences.values() for i, rid in enumerate(seq)}
        return {
            rid: position[rid][0][position[rid][1] + 1]
            for rid in askers
            if rid in position and position[rid][1] + 1 < len(position[rid][0])
        }

    def neighbours(self, anchors: Sequence[str]) -> list[str]:
        """For each anchor in order: the record just after it and the one just before it in its
        scope's day, each once and never an anchor itself."""
        position = {rid: (seq, i) for seq in self.sequences.values() for i, rid in enumerate(seq)}
        skip, out = set(anchors), []
        for rid in anchors:
            if rid in position:
                sequence, i = position[rid]
                for j in (i + 1, i - 1):
                    if 0 <= j < len(sequence) and sequence[j] not in skip and sequence[j] not in out:
                        out.append(sequence[j])
        return out


async def read_anchor_days(
    store: Store,
    days: Sequence[tuple[datetime, datetime]],
    *,
    scopes: list[Scope],
    eligible: set[str],
    request: SearchRequest,
    now: datetime,
    exclude_source_kinds: tuple[str, ...],
    max_records: int,
) -> AnchorDays | None:
    """The eligible records of ``days`` (inside the request's own since/until), or None when
    those days hold more than ``max_records``: a day that busy (a bulk import written with one
    event time) says nothing about what belongs together, and has no order worth reading."""
    rows = await store.eligible_sequence_upto(
        scopes, within_request(days, request), now=now, cap=max_records, types=request.types,
        include_history=request.include_history, exclude_source_kinds=exclude_source_kinds,
    )  # fmt: skip
    if rows is None:
        return None
    sequences: dict[tuple[Scope, date], list[str]] = {}
    for rid, scope, at in rows:
        if rid in eligible:
            sequences.setdefault((scope, at.astimezone(UTC).date()), []).append(rid)
    return AnchorDays(sequences)


async def same_day_hits(
    dense: DenseSearch, qvecs: np.ndarray, inside: set[str], *, skip: set[str], k: int
) -> list[tuple[str, float]]:
    """The ``k`` records of ``inside`` closest to the query, but ``skip`` (best first)."""
    inside = inside - skip
    if not inside:
        return []
    return [(rid, cos) for rid, cos in await dense.search(qvecs, inside, k) if rid in inside]
