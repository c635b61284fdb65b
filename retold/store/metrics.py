"""The SQL behind ``retold metrics`` and the inspector's metrics page: operator-wide figures.

Each method reads one window of one table (``search_log``, ``events``, ``activation_reviews``)
and returns plain values; :mod:`retold.policy.metrics` turns them into the report. A window
is ``[since, until)``, either end open when None; timestamps are compared as the fixed-width
text :func:`~retold.util.format_ts` stores, so both backends order them alike. Counts are
grouped in SQL; only the search log comes back row by row (its latencies are percentiles,
computed in Python), a page at a time and only the columns the figures need.

Event payloads are JSON text on both backends; ``json_extract`` exists on PostgreSQL as a
function the schema creates (:mod:`retold.store.postgres.schema`), so these statements run
unchanged there. An erased event's payload is ``{"erased": true}``: its outcome or activation
reads as NULL and is counted as such, never dropped.

:meth:`MetricsMixin.record_ids_named` is the operator commands' record lookup (a full or
short id anywhere in the store), kept here beside the other operator-wide reads.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from retold.store.database import Database
from retold.util import format_ts, maybe_json

__all__ = ["WRITE_EVENT_KINDS", "MetricsMixin", "SearchLogEntry"]

WRITE_EVENT_KINDS = ("record.created", "record.reinforced")
"""The events a landed write appends; their payload's ``outcome`` is the write's answer."""

SearchLogEntry = tuple[str, str, list[Any], list[Any], dict[str, Any]]
"""``(id, trigger, returned, explanations, timings_ms)`` of one logged search, JSON decoded."""

# The outcome without the id it names: "superseded:<id>" -> "superseded".
_OUTCOME = "CASE WHEN instr(o, ':') > 0 THEN substr(o, 1, instr(o, ':') - 1) ELSE o END"


def _window(column: str, since: datetime | None, until: datetime | None) -> tuple[list[str], list[Any]]:
    clauses: list[str] = []
    params: list[Any] = []
    if since is not None:
        clauses.append(f"{column} >= ?")
        params.append(format_ts(since))
    if until is not None:
        clauses.append(f"{column} < ?")
        params.append(format_ts(until))
    return clauses, params


def _where(clauses: list[str]) -> str:
    return " WHERE " + " AND ".join(clauses) if clauses else ""


def _and(clauses: list[str]) -> str:
    return "".join(" AND " + c for c in clauses)


class MetricsMixin:
    """Store methods for the metrics report; mixed into :class:`retold.store.Store`."""

    db: Database

    async def search_log_page(
        self, since: datetime | None, until: datetime | None, *, after: str | None = None, limit: int = 500
    ) -> list[SearchLogEntry]:
        """Up to ``limit`` logged searches of the window with ids above ``after``, by id."""
        clauses, params = _window("at", since, until)
        if after is not None:
            clauses.append("id > ?")
            params.append(after)
        rows = await self.db.fetchall(
            f"""SELECT id, trigger, returned, explanations, timings_ms FROM search_log{_where(clauses)}
                 ORDER BY id LIMIT ?""",
            [*params, limit],
        )
        out: list[SearchLogEntry] = []
        for row in rows:
            returned, explanations, timings = (
                maybe_json(row[c]) for c in ("returned", "explanations", "timings_ms")
            )
            out.append((
                str(row["id"]), str(row["trigger"]),
                returned if isinstance(returned, list) else [],
                explanations if isinstance(explanations, list) else [],
                timings if isinstance(timings, dict) else {},
            ))  # fmt: skip
        return out

    async def write_outcome_counts(
        self, since: datetime | None, until: datetime | None
    ) -> dict[str | None, int]:
        """Landed writes of the window by outcome (``created``, ``reinforced``, ``superseded``...).

        ``None`` counts the writes whose event payload was erased.
        """
        clauses, params = _window("at", since, until)
        kinds = ", ".join(f"'{k}'" for k in WRITE_EVENT_KINDS)
        rows = await self.db.fetchall(
            f"""SELECT outcome, count(*) AS n FROM (
                    SELECT {_OUTCOME} AS outcome FROM (
                        SELECT json_extract(payload, '$.outcome') AS o FROM events
                         WHERE kind IN ({kinds}){_and(clauses)}
                    ) raw
                ) named GROUP BY outcome ORDER BY outcome""",
            params,
        )
        return {r["outcome"]: int(r["n"]) for r in rows}

    async def activation_decision_counts(
        self, since: datetime | None, until: datetime | None
    ) -> list[tuple[str | None, str | None, int]]:
        """``(activation, decided_by, n)`` of the window's ``record.activation_decided`` events."""
        clauses, params = _window("at", since, until)
        rows = await self.db.fetchall(
            f"""SELECT activation, decider, count(*) AS n FROM (
                    SELECT json_extract(payload, '$.activation') AS activation,
                           json_extract(payload, '$.by') AS decider
                      FROM events WHERE kind = 'record.activation_decided'{_and(clauses)}
                ) decided GROUP BY activation, decider ORDER BY activation, decider""",
            params,
        )
        return [(r["activation"], r["decider"], int(r["n"])) for r in rows]

    async def event_count(self, kind: str, since: datetime | None, until: datetime | None) -> int:
        """How many events of ``kind`` the window holds."""
        clauses, params = _window("at", since, until)
        return int(
            await self.db.fetchval(
                f"SELECT count(*) FROM events WHERE kind = ?{_and(clauses)}",
                [kind, *params],
            )
        )

    async def reviews_opened(self, since: datetime | None, until: datetime | None) -> int:
        """Review items opened in the window (whatever became of them since)."""
        clauses, params = _window("created_at", since, until)
        return int(
            await self.db.fetchval(f"SELECT count(*) FROM activation_reviews{_where(clauses)}", params)
        )

    async def reviews_resolved(self, since: datetime | None, until: datetime | None) -> dict[str, int]:
        """Review items resolved in the window, by resolution."""
        clauses, params = _window("resolved_at", since, until)
        rows = await self.db.fetchall(
            f"""SELECT resolution, count(*) AS n FROM activation_reviews
                 WHERE status = 'resolved'{_and(clauses)}
                 GROUP BY resolution ORDER BY resolution""",
            params,
        )
        return {str(r["resolution"]): int(r["n"]) for r in rows}

    async def open_review_count(self) -> int:
        """Every open review item, including those whose record is no longer active."""
        return int(await self.db.fetchval("SELECT count(*) FROM activation_reviews WHERE status = 'open'"))

    async def record_ids_named(self, ref: str) -> list[str]:
        """Every record ``ref`` names, in any scope: a full id, or the 12-character short id.

        The operator's counterpart of :meth:`Store.resolve_record_ref` (which takes the
        caller's readable scopes): the operator commands (``retold activation``) read the
        whole store, as ``retold get`` does.
        """
        exact = await self.db.fetch_column("SELECT id FROM records WHERE id = ?", (ref,))
        if exact or len(ref) != 12:
            return [str(i) for i in exact]
        found = await self.db.fetch_column(
            "SELECT id FROM records WHERE substr(id, -12) = ? ORDER BY id", (ref,)
        )
        return [str(i) for i in found]
