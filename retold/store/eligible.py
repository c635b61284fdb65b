"""The hard filter's result: an id set that remembers the SQL predicate that selected it."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from itertools import chain
from typing import Any

__all__ = ["TEMP_TABLE_MAX", "CachedEligible", "EligibleCache", "EligibleSet"]

TEMP_TABLE_MAX = 2000
"""Above this many ids, a join uses the predicate instead of copying the ids into a temp table.

Copying costs a few microseconds per id (50K ids: ~150 ms); the predicate selects exactly
the same rows (it is what produced the set, in the same snapshot-free statement order a
search already tolerates), so generators still join eligibility *before* their LIMIT and
ineligible rows still cannot crowd eligible ones out.
"""


class EligibleSet(AbstractSet[str]):
    """Record ids plus ``where``/``params``: the predicate over ``records r`` that selected them.

    Immutable, and shared by concurrent searches. A write changes a cached set by a row or
    two, and copying 200K ids costs milliseconds, so :meth:`changed` returns a new set that
    shares this one's ids and keeps the difference beside them (ids that entered, ids that
    left), folding it into a fresh copy only once it has grown (``_FOLD_AT``). Set algebra
    (``-``, ``&``, ``|``) yields plain frozensets.
    """

    __slots__ = ("_base", "_entered", "_left", "_size", "params", "where")

    def __init__(
        self, ids: Iterable[str] = (), *, where: str | None = None, params: tuple[Any, ...] = ()
    ) -> None:
        self._base: frozenset[str] = ids if type(ids) is frozenset else frozenset(ids)
        self._entered: frozenset[str] = _EMPTY
        self._left: frozenset[str] = _EMPTY
        self._size = len(self._base)
        self.where = where
        self.params = params

    def __contains__(self, item: object) -> bool:
        if item in self._base:
            return not self._left or item not in self._left
        return bool(self._entered) and item in self._entered

    def __iter__(self) -> Iterator[str]:
        if not self._left:
            return chain(self._base, self._entered)
        left = self._left
        return chain((i for i in self._base if i not in left), self._entered)

    def __len__(self) -> int:
        return self._size

    def __hash__(self) -> int:
        return self._hash()

    def __repr__(self) -> str:
        return f"EligibleSet({len(self)} ids)"

    @classmethod
    def _from_iterable(cls, it: Iterable[str]) -> frozenset[str]:
        return frozenset(it)

    def changed(self, entering: Iterable[str], leaving: Iterable[str]) -> EligibleSet:
        """This set with ``entering`` ids added and ``leaving`` ids removed (same predicate)."""
        entered, left = set(self._entered), set(self._left)
        for rid in leaving:
            entered.discard(rid)
            if rid in self._base:
                left.add(rid)
        for rid in entering:
            left.discard(rid)
            if rid not in self._base:
                entered.add(rid)
        if len(entered) + len(left) > _FOLD_AT:
            return EligibleSet((self._base - left) | entered, where=self.where, params=self.params)
        out = EligibleSet(self._base, where=self.where, params=self.params)
        out._entered, out._left = frozenset(entered), frozenset(left)
        out._size = len(self._base) - len(left) + len(entered)
        return out

    def join_clause(self, column: str) -> tuple[str, tuple[Any, ...]] | None:
        """``JOIN records r ON r.id = <column> AND <predicate>`` for a large set, else None."""
        if self.where is None or len(self) <= TEMP_TABLE_MAX:
            return None
        return f"JOIN records r ON r.id = {column} AND {self.where}", self.params


_EMPTY: frozenset[str] = frozenset()
_FOLD_AT = 512
"""Ids kept beside a shared set before :meth:`EligibleSet.changed` makes a fresh copy."""


@dataclass(frozen=True)
class CachedEligible:
    """One hard-filter result: the ids, the ``records_version`` they reflect, and their clock bounds."""

    version: int
    filled_at: str  # the ``now`` of the predicate's expiry bound
    valid_until: str | None  # the earliest expiry among the admitted rows
    ids: EligibleSet


class EligibleCache:
    """Recent hard-filter results, kept current as the store changes instead of recomputed.

    Materialising a 50K-id set costs tens of milliseconds, yet a write changes it by at
    most a few rows. An entry is exact while the store's durable ``records_version``
    (bumped by every record, status and embedding change, in any process) is the one it
    was computed under and ``now`` is before the earliest expiry among its rows. When the
    version has moved, the store brings the entry forward from the rows whose
    ``index_version`` is newer (:meth:`Store._cached_eligible`): a write costs one indexed
    read of the rows it touched, not a scan of the scope. The version is read *before* the
    rows, so a concurrent write can only make an entry look older than it is (it is brought
    forward again, idempotently), never newer.
    """

    def __init__(self, max_entries: int = 32) -> None:
        self._max = max_entries
        self._entries: dict[tuple[Any, ...], CachedEligible] = {}

    def get(self, key: tuple[Any, ...], now_ts: str) -> CachedEligible | None:
        """The entry for ``key`` unless an expiry or a clock set back voided it (any version)."""
        entry = self._entries.get(key)
        if entry is None:
            return None
        if now_ts < entry.filled_at or (entry.valid_until is not None and now_ts >= entry.valid_until):
            del self._entries[key]
            return None
        return entry

    def put(self, key: tuple[Any, ...], entry: CachedEligible) -> None:
        self._entries.pop(key, None)
        if len(self._entries) >= self._max:
            self._entries.pop(next(iter(self._entries)))  # least recently filled first
        self._entries[key] = entry

    def clear(self) -> None:
        self._entries.clear()
