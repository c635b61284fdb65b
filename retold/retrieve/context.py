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
passes read their anchors' days once (:func:`read_anchor_days`). A day holding more than
``retrieval.context_max_records`` (a bulk import, or writes that carry no event time) is
not read: the context pass is skipped, and the neighbours and replies come from one indexed
lookup each on either side of their anchors (:func:`read_beside`), since the order of the
writes still says what was said together when the dates do not.
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

__all__ = ["AnchorDays", "Beside", "anchor_days", "read_anchor_days", "read_beside", "same_day_hits"]


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

    def sides(self, anchors: Sequence[str]) -> dict[str, tuple[str | None, str | None]]:
        """For each anchor read here: the records just before and just after it in its scope's day."""
        position = {rid: (seq, i) for seq in self.sequences.values() for i, rid in enumerate(seq)}
        out: dict[str, tuple[str | None, str | None]] = {}
        for rid in anchors:
            if rid in position:
                sequence, i = position[rid]
                out[rid] = (
                    sequence[i - 1] if i > 0 else None,
                    sequence[i + 1] if i + 1 < len(sequence) else None,
                )
        return out

    def replies(self, askers: Sequence[str]) -> dict[str, str]:
        """For each asker: the record just after it in its scope's day (the turn that answers it)."""
        return replies_of(askers, self.sides(askers))

    def neighbours(self, anchors: Sequence[str]) -> list[str]:
        """For each anchor in order: the record just after it and the one just before it in its
        scope's day, each once and never an anchor itself."""
        return neighbours_of(anchors, self.sides(anchors))


@dataclass(frozen=True)
class Beside:
    """The records just before and after each anchor, read one lookup each
    (``Store.eligible_beside``): the neighbours and replies of a day too busy to read whole,
    where the context pass has nothing to rank."""

    found: dict[str, tuple[str | None, str | None]]

    def replies(self, askers: Sequence[str]) -> dict[str, str]:
        return replies_of(askers, self.found)

    def neighbours(self, anchors: Sequence[str]) -> list[str]:
        return neighbours_of(anchors, self.found)


def replies_of(askers: Sequence[str], sides: dict[str, tuple[str | None, str | None]]) -> dict[str, str]:
    """For each asker with a record after it: that record (the turn that answers it)."""
    return {rid: after for rid in askers if (after := sides.get(rid, (None, None))[1]) is not None}


def neighbours_of(anchors: Sequence[str], sides: dict[str, tuple[str | None, str | None]]) -> list[str]:
    """For each anchor in order: what is just after it, then just before it, each once and never
    an anchor itself."""
    skip, out = set(anchors), []
    for rid in anchors:
        before, after = sides.get(rid, (None, None))
        for near in (after, before):
            if near is not None and near not in skip and near not in out:
                out.append(near)
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


async def read_beside(
    store: Store,
    anchors: Sequence[str],
    *,
    scopes: list[Scope],
    eligible: set[str],
    request: SearchRequest,
    now: datetime,
    exclude_source_kinds: tuple[str, ...],
) -> Beside:
    """The eligible records just before and after each anchor in its scope and day, one indexed
    lookup each however busy the day (inside the request's own since/until)."""
    found = await store.eligible_beside(
        anchors, scopes, now=now, types=request.types, since=request.since, until=request.until,
        include_history=request.include_history, exclude_source_kinds=exclude_source_kinds,
    )  # fmt: skip
    keep = eligible.__contains__
    return Beside({
        rid: (before if before and keep(before) else None, after if after and keep(after) else None)
        for rid, (before, after) in found.items()
    })  # fmt: skip


async def same_day_hits(
    dense: DenseSearch, qvecs: np.ndarray, inside: set[str], *, skip: set[str], k: int
) -> list[tuple[str, float]]:
    """The ``k`` records of ``inside`` closest to the query, but ``skip`` (best first)."""
    inside = inside - skip
    if not inside:
        return []
    return [(rid, cos) for rid, cos in await dense.search(qvecs, inside, k) if rid in inside]
