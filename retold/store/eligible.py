"""The hard filter (spec §10 step 3): its SQL, its result, and the cache that keeps it current.

:func:`eligible_where` is the predicate, :class:`EligibleSet` the ids it selected (with the
predicate, for large joins), :class:`EligibleCache` recent results, and :class:`EligibleMixin`
the store's queries, which bring a cached result forward past writes instead of re-reading it.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from datetime import UTC, datetime, time, timedelta
from itertools import chain
from typing import TYPE_CHECKING, Any

from retold.models import ACTIVE_STATUSES, Scope
from retold.store.rows import scope_clause
from retold.util import format_ts, parse_ts

if TYPE_CHECKING:
    from retold.store.database import Database

__all__ = [
    "TEMP_TABLE_MAX",
    "UNEXPIRED",
    "CachedEligible",
    "EligibleCache",
    "EligibleMixin",
    "EligibleSet",
    "eligible_where",
]

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
    ``index_version`` is newer (:meth:`EligibleMixin._cached_eligible`): a write costs one indexed
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


_HISTORY_STATUSES = ("provisional", "confirmed", "superseded", "expired")
UNEXPIRED = " AND (r.expires_at IS NULL OR r.expires_at > ?)"
_UNEXPIRED = UNEXPIRED
_FORWARD_MAX = 2000  # changed rows an eligible-set cache entry is brought forward over


def eligible_where(
    scopes: Sequence[Scope],
    *,
    types: Sequence[str] | None = None,
    since: datetime | None = None,
    until: datetime | None = None,
    include_history: bool = False,
    exclude_source_kinds: Sequence[str] = (),
) -> tuple[str, list[Any]]:
    """The hard filter's predicate over ``records r``, without the expiry bound (spec §10 step 3)."""
    statuses = _HISTORY_STATUSES if include_history else ACTIVE_STATUSES
    scope_sql, params = scope_clause(scopes, "r.")
    where = f"{scope_sql} AND r.status IN ({', '.join('?' for _ in statuses)})"
    params += statuses
    if types:
        where += f" AND r.type IN ({', '.join('?' for _ in types)})"
        params += list(types)
    if exclude_source_kinds:
        where += f" AND r.source_kind NOT IN ({', '.join('?' for _ in exclude_source_kinds)})"
        params += list(exclude_source_kinds)
    if since is not None:
        where += " AND r.event_at >= ?"
        params.append(format_ts(since))
    if until is not None:
        where += " AND r.event_at <= ?"
        params.append(format_ts(until))
    return where, params


def live_where(
    scopes: Sequence[Scope],
    *,
    now: datetime,
    types: Sequence[str] | None,
    since: datetime | None,
    until: datetime | None,
    include_history: bool,
    exclude_source_kinds: Sequence[str],
) -> tuple[str, list[Any]]:
    """:func:`eligible_where` with the expiry bound at ``now`` (none with ``include_history``)."""
    where, params = eligible_where(
        scopes, types=types, since=since, until=until, include_history=include_history,
        exclude_source_kinds=exclude_source_kinds,
    )  # fmt: skip
    if not include_history:
        where += _UNEXPIRED
        params.append(format_ts(now))
    return where, params


class EligibleMixin:
    """The hard filter of spec §10 step 3 as SQL, and its cache kept current across writes."""

    db: Database
    _eligible_cache: EligibleCache

    if TYPE_CHECKING:

        async def records_version(self) -> int: ...

    async def eligible_ids(
        self,
        scopes: Sequence[Scope],
        *,
        now: datetime,
        types: Sequence[str] | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
        include_history: bool = False,
        exclude_source_kinds: Sequence[str] = (),
        within: Iterable[str] | None = None,
    ) -> EligibleSet:
        """Ids a search may rank: readable scope, live status, unexpired, wanted type and time.

        This is the hard filter of spec §10 step 3: it runs before any ranking, so no
        generator can see a record outside it. ``include_history`` admits superseded
        and expired rows (never deleted ones) regardless of ``expires_at``. The returned
        set also carries the SQL predicate that selected it (see :class:`EligibleSet`).
        """
        if not scopes:
            return EligibleSet()
        where, params = eligible_where(
            scopes, types=types, since=since, until=until, include_history=include_history,
            exclude_source_kinds=exclude_source_kinds,
        )  # fmt: skip
        if within is None:
            return await self._cached_eligible(where, params, include_history, now)
        if not include_history:
            where += _UNEXPIRED
            params.append(format_ts(now))
        async with self.db.temp_ids(within) as table:
            rows = await self.db.fetchall(
                f"SELECT r.id FROM records r JOIN {table} w ON w.id = r.id WHERE {where}", params
            )
        return EligibleSet(r[0] for r in rows)

    async def eligible_ids_upto(
        self,
        scopes: Sequence[Scope],
        *,
        now: datetime,
        cap: int,
        types: Sequence[str] | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
        include_history: bool = False,
        exclude_source_kinds: Sequence[str] = (),
    ) -> list[str] | None:
        """:meth:`eligible_ids` for a set the caller wants only while it is small: the ids, or
        None once more than ``cap`` match (one bounded query either way, never the whole set)."""
        rows = await self._eligible_upto(
            "r.id", "", scopes, now=now, cap=cap, types=types, since=since, until=until,
            include_history=include_history, exclude_source_kinds=exclude_source_kinds,
        )  # fmt: skip
        return None if rows is None else [row[0] for row in rows]

    async def eligible_sequence_upto(
        self,
        scopes: Sequence[Scope],
        windows: Sequence[tuple[datetime, datetime]],
        *,
        now: datetime,
        cap: int,
        types: Sequence[str] | None = None,
        include_history: bool = False,
        exclude_source_kinds: Sequence[str] = (),
    ) -> list[tuple[str, Scope, datetime]] | None:
        """The eligible records with an event time in any ``[start, end)`` window, in the order
        they happened: ``(id, scope, event_at)`` by event time, then id (UUIDv7: creation order,
        so turns written together with one event time keep their order). None once more than
        ``cap`` match; one bounded query either way."""
        if not windows:
            return []
        within = " OR ".join("(r.event_at >= ? AND r.event_at < ?)" for _ in windows)
        rows = await self._eligible_upto(
            "r.id, r.scope_kind, r.scope_id, r.event_at", f" AND ({within})", scopes, now=now, cap=cap,
            types=types, since=None, until=None, include_history=include_history,
            exclude_source_kinds=exclude_source_kinds,
            extra=[format_ts(t) for window in windows for t in window],
        )  # fmt: skip
        if rows is None:
            return None
        # Sorted here, not in SQL: LIMIT then stops the scan at cap + 1 rows on a busy day
        # instead of sorting every record of it first.
        out = [(str(r[0]), Scope(r[1], r[2]), parse_ts(r[3])) for r in rows]  # type: ignore[misc]
        return sorted(out, key=lambda row: (row[2], row[0]))

    async def eligible_beside(
        self,
        anchors: Sequence[str],
        scopes: Sequence[Scope],
        *,
        now: datetime,
        types: Sequence[str] | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
        include_history: bool = False,
        exclude_source_kinds: Sequence[str] = (),
    ) -> dict[str, tuple[str | None, str | None]]:
        """For each anchor: the eligible records just before and just after it in its scope and
        UTC day, in the order :meth:`eligible_sequence_upto` gives (event time, then id), as
        ``(before, after)``. Anchors outside ``scopes`` or gone are left out.

        Two indexed lookups an anchor in one query, however busy the day: for a day too busy
        to read whole (a bulk import on one date), what was written next to a match."""
        rows = await self.db.fetchall(
            f"SELECT r.id, r.event_at, r.scope_kind, r.scope_id FROM records r"
            f" WHERE r.id IN ({', '.join('?' for _ in anchors)})",
            list(anchors),
        ) if anchors and scopes else []  # fmt: skip
        # By id alone (the planner would otherwise walk a busy scope), then the scopes here.
        wanted = set(scopes)
        readable = [row for row in rows if Scope(row[2], row[3]) in wanted]
        if not readable:
            return {}
        where, params = live_where(
            scopes, now=now, types=types, since=since, until=until, include_history=include_history,
            exclude_source_kinds=exclude_source_kinds,
        )  # fmt: skip
        # The anchor's own scope, one side of it in (event_at, id) order, inside its UTC day:
        # row values, so the index walks from the anchor itself, even past a million ties.
        sides = {
            "before": ("(r.event_at, r.id) < (?, ?) AND r.event_at >= ?", "DESC"),
            "after": ("(r.event_at, r.id) > (?, ?) AND r.event_at < ?", "ASC"),
        }
        parts, args = [], []
        for rid, at, kind, sid in readable:
            at = str(at)
            day = parse_ts(at).astimezone(UTC).date()
            start = datetime.combine(day, time(0), tzinfo=UTC)
            bounds = {"before": format_ts(start), "after": format_ts(start + timedelta(days=1))}
            for side, (order_sql, direction) in sides.items():
                parts.append(
                    "SELECT * FROM (SELECT CAST(? AS TEXT), CAST(? AS TEXT), r.id FROM records r"
                    f" WHERE {where} AND r.scope_kind = ? AND r.scope_id = ? AND {order_sql}"
                    f" ORDER BY r.event_at {direction}, r.id {direction} LIMIT 1) AS {side}_{len(parts)}"
                )
                args += [rid, side, *params, kind, sid, at, rid, bounds[side]]
        rows = await self.db.fetchall(" UNION ALL ".join(parts), args)
        found: dict[str, dict[str, str]] = {str(row[0]): {} for row in readable}
        for anchor, side, rid in rows:
            found[str(anchor)][str(side)] = str(rid)
        return {anchor: (got.get("before"), got.get("after")) for anchor, got in found.items()}

    async def _eligible_upto(
        self,
        columns: str,
        tail: str,
        scopes: Sequence[Scope],
        *,
        now: datetime,
        cap: int,
        types: Sequence[str] | None,
        since: datetime | None,
        until: datetime | None,
        include_history: bool,
        exclude_source_kinds: Sequence[str],
        extra: Sequence[Any] = (),
    ) -> list[Any] | None:
        """``columns`` of the eligible records (``tail`` appended to the filter with ``extra``
        parameters), or None once more than ``cap`` match."""
        if not scopes:
            return []
        where, params = live_where(
            scopes, now=now, types=types, since=since, until=until, include_history=include_history,
            exclude_source_kinds=exclude_source_kinds,
        )  # fmt: skip
        rows = await self.db.fetchall(
            f"SELECT {columns} FROM records r WHERE {where}{tail} LIMIT ?", [*params, *extra, cap + 1]
        )
        return None if len(rows) > cap else list(rows)

    async def _cached_eligible(
        self, base: str, base_params: list[Any], include_history: bool, now: datetime
    ) -> EligibleSet:
        """The filter's ids from :class:`EligibleCache`, brought forward past any writes since.

        ``base`` is the predicate without the expiry bound, which is the only part that
        depends on ``now``; it is the cache key.
        """
        key = (base, tuple(base_params))
        now_ts = format_ts(now)
        version = await self.records_version()  # before the rows: see EligibleCache
        entry = self._eligible_cache.get(key, now_ts)
        if entry is not None and entry.version == version:
            return entry.ids
        if entry is not None and entry.version < version:
            forward = await self._eligible_forward(entry, base, base_params, include_history, now_ts, version)
            if forward is not None:
                self._eligible_cache.put(key, forward)
                return forward.ids
        where, params = base, list(base_params)
        valid_until = None
        if not include_history:
            where += _UNEXPIRED
            params.append(now_ts)
            # The earliest moment a row this filter would admit leaves it by expiring.
            valid_until = await self.db.fetchval(
                f"SELECT min(r.expires_at) FROM records r WHERE {base} AND r.expires_at > ?",
                [*base_params, now_ts],
            )
        ids = EligibleSet(
            await self.db.fetch_column(f"SELECT r.id FROM records r WHERE {where}", params),
            where=where, params=tuple(params),
        )  # fmt: skip
        self._eligible_cache.put(key, CachedEligible(version, now_ts, valid_until, ids))
        return ids

    async def _eligible_forward(
        self, entry: CachedEligible, base: str, base_params: list[Any], include_history: bool,
        now_ts: str, version: int,
    ) -> CachedEligible | None:  # fmt: skip
        """``entry`` brought up to ``version`` from the rows changed since, or None to recompute.

        Every change to a record stamps it with the ``index_version`` of its write (records
        are never deleted, only marked so), so the rows above the entry's version are all
        that can have entered or left the set; each is tested against the filter as it
        stands now. None when too many changed (a bulk import or a re-embed: one full read is
        cheaper), or when a changed row would make the set disagree with its predicate, whose
        expiry bound is the entry's ``filled_at`` (a row written already expired since then).
        """
        rows = await self.db.fetchall(
            f"""SELECT r.id, CASE WHEN {base} THEN 1 ELSE 0 END, r.expires_at FROM records r
                 WHERE r.index_version > ? LIMIT ?""",
            [*base_params, entry.version, _FORWARD_MAX + 1],
        )
        if len(rows) > _FORWARD_MAX:
            return None
        entering: list[str] = []
        leaving: list[str] = []
        valid_until = entry.valid_until
        for rid, matches, expires_at in rows:
            live = include_history or expires_at is None or expires_at > now_ts
            if matches and not include_history and expires_at is not None:
                if not live and expires_at > entry.filled_at:
                    return None
                if live and (valid_until is None or expires_at < valid_until):
                    valid_until = expires_at
            if matches and live:
                if rid not in entry.ids:
                    entering.append(rid)
            elif rid in entry.ids:
                leaving.append(rid)
        ids = entry.ids.changed(entering, leaving) if entering or leaving else entry.ids
        return CachedEligible(version, entry.filled_at, valid_until, ids)
