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
