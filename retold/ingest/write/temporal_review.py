"""Time-driven review (spec §8.4): flag the records whose ``review_at`` has arrived.

:func:`review_due` claims at most ``ingestion.temporal_review_batch_size`` records whose
``review_at`` has arrived, setting ``review_flagged_at`` and appending one
``record.review_due`` each in the same transaction. Content and lifecycle stay as they were:
time passing is not evidence that a planned event happened. Which ``review_at`` a record may
carry is :mod:`retold.ingest.write.temporal`'s to decide.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from retold.config import Config
    from retold.store import Store
    from retold.util import Clock

__all__ = ["REVIEW_ACTOR", "DueReview", "review_due"]

REVIEW_ACTOR = "temporal_reviewer"


@dataclass(frozen=True)
class DueReview:
    """One record this worker flagged (its ``record.review_due`` event was appended)."""

    record_id: str
    review_at: datetime | None
    valid_from: datetime | None
    valid_until: datetime | None
    event_id: str


async def review_due(
    store: Store, config: Config, clock: Clock, *, operator: str | None = None, limit: int | None = None
) -> list[DueReview]:
    """Flag one bounded batch of records whose ``review_at`` has arrived (spec §8.4).

    Every flag and its event commit together, and the conditional update means only one
    of several racing workers (threads or processes) flags a record and emits its event.
    The event's actor is ``temporal_reviewer``; ``operator`` (the CLI's ``--as``) is
    recorded beside it.
    """
    now = clock.now()
    batch = config.ingestion.temporal_review_batch_size if limit is None else limit
    flagged: list[DueReview] = []
    async with store.transaction():
        for record in await store.due_reviews(now, batch):
            if not await store.flag_review(record.id, now):
                continue
            payload: dict[str, Any] = {
                "record_id": record.id,
                "scheduled_at": record.review_at,
                "valid_from": record.valid_from,
                "valid_until": record.valid_until,
                "status": record.status,
                "actor": REVIEW_ACTOR,
            }
            if operator is not None:
                payload["operator"] = operator
            event_id = await store.append_event(
                "record.review_due", REVIEW_ACTOR, record_id=record.id, payload=payload
            )
            flagged.append(
                DueReview(record.id, record.review_at, record.valid_from, record.valid_until, event_id)
            )
    return flagged
