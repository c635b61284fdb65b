"""SQL for session extraction (spec §8.2) and time-driven review (spec §8.4).

The claims here are what keep two workers from doing one job twice: a session is
claimed by a conditional update inside ``BEGIN IMMEDIATE``, and a due record is
flagged by an update that only the first worker's statement can change. The callers in
:mod:`retold.ingest.extraction.stages` and :mod:`retold.ingest.write.temporal` decide what the
outcomes mean; this module only reads and writes rows.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Literal

from retold.models import Record, Scope, SessionKey
from retold.store.database import Database
from retold.store.rows import scope_clause
from retold.util import Clock, format_ts, parse_ts

__all__ = ["ExtractionMixin", "SessionClaim"]

ClaimStatus = Literal["claimed", "not_found", "not_ended", "already_extracted", "claimed_by_other"]


@dataclass(frozen=True)
class SessionClaim:
    """The outcome of one attempt to claim a session for extraction."""

    status: ClaimStatus
    claimed_at: datetime | None = None  # this worker's claim (the value it wrote)
    previous_claim: datetime | None = None  # the claim it found (stale when reclaimed, live when refused)
    reclaimed: bool = False  # an earlier worker's claim had expired without finishing
    rerun: bool = False  # the session had already been extracted (a forced re-run)
    extracted_at: datetime | None = None


class ExtractionMixin:
    db: Database
    clock: Clock

    if TYPE_CHECKING:  # provided by Store

        async def get_records(self, record_ids: Iterable[str]) -> list[Record]: ...

    # --- session claims -----------------------------------------------------------------------

    async def claim_session(
        self, key: SessionKey, *, now: datetime, stale_before: datetime, force: bool = False
    ) -> SessionClaim:
        """Claim an ended session for extraction, atomically across processes.

        A claim is live while ``extraction_started_at`` is newer than both ``extracted_at``
        and ``stale_before``; a live claim is never taken over. An extracted session is
        claimed again only with ``force``. An expired, unfinished claim is taken over and
        reported as ``reclaimed``.
        """
        async with self.db.transaction():
            row = await self.db.fetchone(
                """SELECT ended_at, extraction_started_at, extracted_at FROM sessions
                    WHERE agent_id = ? AND user_id = ? AND id = ?""",
                (key.agent_id, key.user_id, key.session_id),
            )
            if row is None:
                return SessionClaim("not_found")
            if row["ended_at"] is None:
                return SessionClaim("not_ended")
            started = parse_ts(row["extraction_started_at"])
            extracted = parse_ts(row["extracted_at"])
            unfinished = started is not None and (extracted is None or extracted < started)
            if unfinished and started is not None and started > stale_before:
                return SessionClaim("claimed_by_other", previous_claim=started, extracted_at=extracted)
            if extracted is not None and not unfinished and not force:
                return SessionClaim("already_extracted", previous_claim=started, extracted_at=extracted)
            changed = await self.db.execute(
                """UPDATE sessions SET extraction_started_at = ?
                    WHERE agent_id = ? AND user_id = ? AND id = ? AND extraction_started_at IS ?""",
                (format_ts(now), key.agent_id, key.user_id, key.session_id, row["extraction_started_at"]),
            )
            if not changed:  # unreachable under BEGIN IMMEDIATE; kept as the compare-and-set guard
                return SessionClaim("claimed_by_other", previous_claim=started, extracted_at=extracted)
        return SessionClaim(
            "claimed",
            claimed_at=parse_ts(format_ts(now)),
            previous_claim=started,
            reclaimed=unfinished,
            rerun=extracted is not None,
            extracted_at=extracted,
        )

    async def finish_session_extraction(
        self, key: SessionKey, *, claimed_at: datetime, now: datetime
    ) -> bool:
        """Set ``extracted_at`` if this worker's claim still stands; False when it was taken over."""
        async with self.db.transaction():
            changed = await self.db.execute(
                """UPDATE sessions SET extracted_at = ?
                    WHERE agent_id = ? AND user_id = ? AND id = ? AND extraction_started_at = ?""",
                (format_ts(now), key.agent_id, key.user_id, key.session_id, format_ts(claimed_at)),
            )
        return bool(changed)

    async def live_session_summaries(self, origin: str) -> list[Record]:
        """The live summary of an owned session (any scope): the partial unique index allows one (§6.2)."""
        rows = await self.db.fetchall(
            """SELECT id FROM records WHERE source_origin = ? AND source_kind = 'session_summary'
                 AND status IN ('provisional', 'confirmed') ORDER BY created_at, id""",
            (origin,),
        )
        return await self.get_records(r[0] for r in rows)

    # --- extraction context -------------------------------------------------------------------

    async def readable_entity_names(self, scopes: Sequence[Scope], limit: int) -> list[tuple[str, str, str]]:
        """``(entity_id, kind, canonical)`` of live entities in ``scopes``, newest first."""
        if limit <= 0:
            return []
        where, params = scope_clause(scopes)
        rows = await self.db.fetchall(
            f"""SELECT id, kind, canonical FROM entities WHERE {where}
                  AND status IN ('provisional', 'confirmed')
                ORDER BY created_at DESC, id DESC LIMIT ?""",
            (*params, limit),
        )
        return [(r[0], r[1], r[2]) for r in rows]

    async def active_subjects(self, scopes: Sequence[Scope], limit: int) -> list[str]:
        """``<entity name>/<attribute>`` of active semantic and procedural facts, most recent first."""
        if limit <= 0:
            return []
        where, params = scope_clause(scopes, "r.")
        rows = await self.db.fetchall(
            f"""SELECT coalesce(e.canonical, '-') AS name, r.attribute,
                       max(coalesce(r.last_reinforced_at, r.created_at)) AS latest
                  FROM records r LEFT JOIN entities e ON e.id = r.subject_entity_id
                 WHERE {where} AND r.status IN ('provisional', 'confirmed')
                   AND r.type IN ('semantic', 'procedural') AND r.attribute IS NOT NULL AND r.attribute != '-'
                 GROUP BY r.subject_entity_id, e.canonical, r.attribute
                 ORDER BY latest DESC, name, r.attribute LIMIT ?""",
            (*params, limit),
        )
        return [f"{r[0]}/{r[1]}" for r in rows]

    async def live_records_about(self, scope: Scope, entity_id: str, limit: int) -> list[Record]:
        """Active records in one scope linked to one entity, most recently reinforced first."""
        rows = await self.db.fetchall(
            """SELECT DISTINCT r.id, coalesce(r.last_reinforced_at, r.created_at) AS latest
                 FROM records r JOIN record_entities l ON l.record_id = r.id
                WHERE l.entity_id = ? AND r.scope_kind = ? AND r.scope_id = ?
                  AND r.status IN ('provisional', 'confirmed')
                ORDER BY latest DESC, r.id DESC LIMIT ?""",
            (entity_id, scope.kind, scope.id, limit),
        )
        return await self.get_records(r[0] for r in rows)

    # --- time-driven review -------------------------------------------------------------------

    async def due_reviews(self, now: datetime, limit: int) -> list[Record]:
        """Active records whose ``review_at`` has arrived and that no worker has flagged yet."""
        rows = await self.db.fetchall(
            """SELECT id FROM records
                WHERE review_at IS NOT NULL AND review_at <= ? AND review_flagged_at IS NULL
                  AND status IN ('provisional', 'confirmed')
                ORDER BY review_at, id LIMIT ?""",
            (format_ts(now), limit),
        )
        return await self.get_records(r[0] for r in rows)

    async def flag_review(self, record_id: str, now: datetime) -> bool:
        """Set ``review_flagged_at`` once; only the worker whose update changes the row gets True.

        Nothing else about the record changes — not its content, lifecycle, version or
        index version: a due review is a flag for inspection, not an edit.
        """
        async with self.db.transaction():
            changed = await self.db.execute(
                """UPDATE records SET review_flagged_at = ?
                    WHERE id = ? AND review_flagged_at IS NULL AND status IN ('provisional', 'confirmed')""",
                (format_ts(now), record_id),
            )
        return bool(changed)
