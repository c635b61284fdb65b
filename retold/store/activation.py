"""Activation rows and the review queue (spec §8.2, §11): the SQL behind the ambient profile.

A record's activation lives in ``record_activation`` (one row once the policy has decided),
beside ``records`` rather than in it, so the write and search paths never read it. The
profile reads the ambient rows of live records; superseded, expired, forgotten and erased
records leave it through their status, in the same transaction that changed it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from retold.models import ACTIVE_STATUSES, Record, Scope
from retold.store.rows import record_from_row, scope_clause
from retold.util import format_ts, new_id, parse_ts

__all__ = ["ActivationMixin", "ActivationRow", "EvidenceTurn", "ReviewItem"]

_ACTIVE = ", ".join(f"'{s}'" for s in ACTIVE_STATUSES)
# store_meta's key once a store's ambient records were re-read for quoted evidence (issue 45).
_RECHECKED = "ambient_voice_rechecked"


@dataclass(frozen=True)
class ActivationRow:
    """What was last decided about one record."""

    record_id: str
    activation: str  # ambient | conditional
    category: str | None
    reason: str
    decided_by: str  # policy | review | operator
    actor: str
    decided_at: datetime


@dataclass(frozen=True)
class EvidenceTurn:
    """A user turn holding a record's ``user_statement`` evidence, as the store keeps it."""

    user_id: str
    content: str  # the turn's text; empty once the transcript was retained
    evidence: str | None  # the quote this source contributed


@dataclass(frozen=True)
class ReviewItem:
    """One borderline activation decision waiting for (or given) a person's answer."""

    id: str
    record_id: str
    scope: Scope
    category: str | None
    reason: str
    status: str  # open | resolved
    resolution: str | None
    resolver: str | None
    note: str | None
    created_at: datetime
    resolved_at: datetime | None
    record_status: str | None = None  # the record's status now (a stale item's is not active)


def _activation(row: Any) -> ActivationRow:
    return ActivationRow(
        record_id=row["record_id"], activation=row["activation"], category=row["category"],
        reason=row["reason"], decided_by=row["decided_by"], actor=row["actor"],
        decided_at=parse_ts(row["decided_at"]),
    )  # fmt: skip


def _review(row: Any) -> ReviewItem:
    keys = row.keys()
    return ReviewItem(
        id=row["id"], record_id=row["record_id"], scope=Scope(row["scope_kind"], row["scope_id"]),
        category=row["category"], reason=row["reason"], status=row["status"],
        resolution=row["resolution"], resolver=row["resolver"], note=row["note"],
        created_at=parse_ts(row["created_at"]),
        resolved_at=parse_ts(row["resolved_at"]) if row["resolved_at"] else None,
        record_status=row["record_status"] if "record_status" in keys else None,
    )  # fmt: skip


class ActivationMixin:
    """Store methods for activation; mixed into :class:`retold.store.Store`."""

    db: Any

    async def activation_of(self, record_ids: Sequence[str]) -> dict[str, ActivationRow]:
        """The decided activation of each record that has one (undecided ones are conditional)."""
        ids = list(dict.fromkeys(record_ids))
        if not ids:
            return {}
        out: dict[str, ActivationRow] = {}
        for start in range(0, len(ids), 500):
            part = ids[start : start + 500]
            marks = ", ".join("?" for _ in part)
            rows = await self.db.fetchall(
                f"SELECT * FROM record_activation WHERE record_id IN ({marks})", part
            )
            out.update((r["record_id"], _activation(r)) for r in rows)
        return out

    async def set_activation(
        self,
        record: Record,
        activation: str,
        *,
        category: str | None,
        reason: str,
        decided_by: str,
        actor: str,
        at: datetime,
    ) -> None:
        """Record a decision (replacing the previous one); the caller appends its event."""
        async with self.db.transaction():
            await self.db.execute("DELETE FROM record_activation WHERE record_id = ?", (record.id,))
            await self.db.execute(
                """INSERT INTO record_activation(record_id, scope_kind, scope_id, activation, category,
                                                 reason, decided_by, actor, decided_at)
                   VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)""",
                (record.id, record.scope.kind, record.scope.id, activation, category, reason, decided_by,
                 actor, format_ts(at)),
            )  # fmt: skip

    async def ambient_records(
        self, scopes: Sequence[Scope], now: datetime
    ) -> list[tuple[Record, str | None]]:
        """Live ambient semantic records in ``scopes`` with their category, oldest first.

        Live means active, not past its expiry and not past its ``valid_until``: a record
        leaves the profile the moment any of those stops holding, with no job to run. The
        CROSS JOIN keeps SQLite's loop on the few activation rows of these scopes (its planner
        would otherwise walk every semantic record); PostgreSQL plans it as the join it is.
        """
        if not scopes:
            return []
        where, params = scope_clause(scopes, "a.")
        stamp = format_ts(now)
        rows = await self.db.fetchall(
            f"""SELECT r.*, a.category AS activation_category
                  FROM record_activation a CROSS JOIN records r
                 WHERE {where} AND a.activation = 'ambient' AND r.id = a.record_id
                   AND r.type = 'semantic' AND r.status IN ({_ACTIVE})
                   AND (r.expires_at IS NULL OR r.expires_at > ?)
                   AND (r.valid_until IS NULL OR r.valid_until > ?)
                 ORDER BY r.created_at, r.id""",
            (*params, stamp, stamp),
        )
        return [(record_from_row(r, []), r["activation_category"]) for r in rows]

    async def ambient_record_ids(self) -> list[str]:
        """Every record decided ambient, whoever decided it, oldest decision first."""
        rows = await self.db.fetchall(
            "SELECT record_id FROM record_activation WHERE activation = 'ambient'"
            " ORDER BY decided_at, record_id"
        )
        return [str(r["record_id"]) for r in rows]

    async def ambient_rechecked(self) -> bool:
        """Whether this store's ambient records were read again for quoted evidence (issue 45)."""
        return bool(await self.db.fetchval(f"SELECT count(*) FROM store_meta WHERE key = '{_RECHECKED}'"))

    async def mark_ambient_rechecked(self) -> None:
        """Record that they were: later opens skip the re-check."""
        await self.db.execute_atomic(
            f"INSERT OR IGNORE INTO store_meta(key, value) VALUES ('{_RECHECKED}', 1)"
        )

    async def user_evidence_turns(self, record_id: str) -> list[EvidenceTurn]:
        """The user turns that hold the record's ``user_statement`` evidence, oldest source first.

        Each source must be a ``user_statement`` from a session of its user whose referenced
        turn exists and is a user turn: what the host verified, read back from the store so a
        person's promotion applies the same checks as the policy. The turn's text comes along
        so the caller can check again that the evidence is the user's own words and not
        material they quoted (issue 45); it is empty once ``retold retain`` blanked it.
        """
        rows = await self.db.fetchall(
            """SELECT s.user_id, s.agent_id, s.session_id, s.source_ref, s.evidence
                 FROM record_sources s JOIN records r ON r.id = s.record_id
                WHERE s.record_id = ? AND s.source_kind = 'user_statement'
                  AND r.source_kind = 'user_statement'
                  AND s.user_id IS NOT NULL AND s.session_id IS NOT NULL AND s.source_ref IS NOT NULL
                ORDER BY s.added_at""",
            (record_id,),
        )
        out: list[EvidenceTurn] = []
        for row in rows:
            turn = _turn_of(row["source_ref"], row["session_id"])
            if turn is None:
                continue
            found = await self.db.fetchone(
                """SELECT role, content FROM session_turns
                    WHERE agent_id = ? AND user_id = ? AND session_id = ? AND turn = ?""",
                (row["agent_id"], row["user_id"], row["session_id"], turn),
            )
            if found is not None and found["role"] == "user":
                out.append(EvidenceTurn(str(row["user_id"]), str(found["content"]), row["evidence"]))
        return out

    # --- the review queue -------------------------------------------------------------------

    async def open_activation_review(
        self, record: Record, *, category: str | None, reason: str, at: datetime
    ) -> str | None:
        """Queue ``record`` for a person's decision; None when it already has an open item."""
        async with self.db.transaction():
            if await self.db.fetchval(
                "SELECT 1 FROM activation_reviews WHERE record_id = ? AND status = 'open'", (record.id,)
            ):
                return None
            review_id = new_id()
            await self.db.execute(
                """INSERT INTO activation_reviews(id, record_id, scope_kind, scope_id, category, reason,
                                                  status, created_at)
                   VALUES (?, ?, ?, ?, ?, ?, 'open', ?)""",
                (review_id, record.id, record.scope.kind, record.scope.id, category, reason, format_ts(at)),
            )
        return review_id

    async def activation_reviews(
        self, *, status: str | None = "open", record_id: str | None = None, limit: int = 100
    ) -> list[ReviewItem]:
        """Review items, oldest first, each with its record's current status."""
        clauses, params = [], []
        if status is not None:
            clauses.append("q.status = ?")
            params.append(status)
        if record_id is not None:
            clauses.append("q.record_id = ?")
            params.append(record_id)
        where = " WHERE " + " AND ".join(clauses) if clauses else ""
        rows = await self.db.fetchall(
            f"""SELECT q.*, r.status AS record_status FROM activation_reviews q
                  LEFT JOIN records r ON r.id = q.record_id{where}
                 ORDER BY q.created_at, q.id LIMIT ?""",
            (*params, limit),
        )
        return [_review(r) for r in rows]

    async def activation_review(self, ref: str) -> list[ReviewItem]:
        """Items ``ref`` names: a full review id or its last 12 characters (as lists show them)."""
        rows = await self.db.fetchall(
            """SELECT q.*, r.status AS record_status FROM activation_reviews q
                 LEFT JOIN records r ON r.id = q.record_id
                WHERE q.id = ? OR (length(?) = 12 AND substr(q.id, -12) = ?) ORDER BY q.id""",
            (ref, ref, ref),
        )
        return [_review(r) for r in rows]

    async def close_activation_review(
        self, review_id: str, *, resolution: str, resolver: str, note: str | None, at: datetime
    ) -> bool:
        """Resolve an open item; False when it was no longer open (someone else resolved it)."""
        async with self.db.transaction():
            still_open = await self.db.fetchval(
                "SELECT 1 FROM activation_reviews WHERE id = ? AND status = 'open'", (review_id,)
            )
            if not still_open:
                return False
            await self.db.execute(
                """UPDATE activation_reviews SET status = 'resolved', resolution = ?, resolver = ?,
                          note = ?, resolved_at = ? WHERE id = ?""",
                (resolution, resolver, note, format_ts(at), review_id),
            )
        return True

    async def activation_backlog(self) -> tuple[int, datetime | None]:
        """Open items whose record is still active, and when the oldest of them was opened."""
        row = await self.db.fetchone(
            f"""SELECT count(*) AS n, min(q.created_at) AS oldest FROM activation_reviews q
                  JOIN records r ON r.id = q.record_id
                 WHERE q.status = 'open' AND r.status IN ({_ACTIVE})"""
        )
        return int(row["n"]), parse_ts(row["oldest"]) if row["oldest"] else None


def _turn_of(source_ref: str, session_id: str) -> int | None:
    """The turn number in ``session:<session_id><turn:N>``; None for any other reference."""
    prefix = f"session:{session_id}<turn:"
    if not (source_ref.startswith(prefix) and source_ref.endswith(">")):
        return None
    number = source_ref[len(prefix) : -1]
    return int(number) if number.isdigit() else None
