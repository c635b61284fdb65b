"""The hard filter's result: an id set that remembers the SQL predicate that selected it."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

__all__ = ["TEMP_TABLE_MAX", "EligibleSet"]

TEMP_TABLE_MAX = 2000
"""Above this many ids, a join uses the predicate instead of copying the ids into a temp table.

Copying costs a few microseconds per id (50K ids: ~150 ms); the predicate selects exactly
the same rows (it is what produced the set, in the same snapshot-free statement order a
search already tolerates), so generators still join eligibility *before* their LIMIT and
ineligible rows still cannot crowd eligible ones out.
"""


class EligibleSet(frozenset[str]):
    """A frozenset of record ids plus ``where``/``params``: the predicate over ``records r``."""

    where: str | None
    params: tuple[Any, ...]

    def __new__(
        cls, ids: Iterable[str] = (), *, where: str | None = None, params: tuple[Any, ...] = ()
    ) -> EligibleSet:
        self = super().__new__(cls, ids)
        self.where = where
        self.params = params
        return self

    def join_clause(self, column: str) -> tuple[str, tuple[Any, ...]] | None:
        """``JOIN records r ON r.id = <column> AND <predicate>`` for a large set, else None."""
        if self.where is None or len(self) <= TEMP_TABLE_MAX:
            return None
        return f"JOIN records r ON r.id = {column} AND {self.where}", self.params


class EligibleCache:
    """Recent hard-filter results, valid while ``records_version`` and the clock allow.

    Materialising a 50K-id set costs tens of milliseconds per search, yet between two
    writes the answer to the same filter only changes when a record's ``expires_at``
    passes. An entry therefore stays valid while the store's durable ``records_version``
    (bumped by every record, status and embedding change, in any process) is the one it
    was computed under and ``now`` is before the earliest future expiry among the rows the
    filter could admit. The version is read *before* the rows, so a concurrent write can
    only make an entry look older than it is (a recomputation), never newer.
    """

    def __init__(self, max_entries: int = 32) -> None:
        self._max = max_entries
        self._entries: dict[tuple[Any, ...], tuple[int, str, str | None, EligibleSet]] = {}

    def get(self, key: tuple[Any, ...], version: int, now_ts: str) -> EligibleSet | None:
        """The cached ids, or None when a write, an expiry or a clock set back intervened."""
        entry = self._entries.get(key)
        if entry is None:
            return None
        cached_version, filled_at, valid_until, ids = entry
        if (
            cached_version != version
            or now_ts < filled_at
            or (valid_until is not None and now_ts >= valid_until)
        ):
            del self._entries[key]
            return None
        return ids

    def put(
        self, key: tuple[Any, ...], version: int, filled_at: str, valid_until: str | None, ids: EligibleSet
    ) -> None:
        if len(self._entries) >= self._max:
            self._entries.pop(next(iter(self._entries)))  # oldest first: insertion order
        self._entries[key] = (version, filled_at, valid_until, ids)

    def clear(self) -> None:
        self._entries.clear()
