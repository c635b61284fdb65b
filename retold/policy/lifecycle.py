"""Source authority, initial status, reinforcement and expiry (spec §6.2, §6.4, §6.5).

Plain functions over records and config: the ingestor and the operations call them,
and nothing here touches the store.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from datetime import datetime, timedelta

from retold.config import Config
from retold.models import ACTIVE_STATUSES, Record, RecordSource
from retold.util import normalize_ws

__all__ = [
    "INITIAL_CONFIDENCE",
    "has_authority",
    "initial_confidence",
    "initial_expiry",
    "initial_status",
    "is_expired",
    "needs_expiry",
    "reinforce",
    "resupport",
    "source_rank",
]

INITIAL_CONFIDENCE: dict[str, float] = {
    "user_statement": 0.95,
    "system": 0.9,
    "tool_result": 0.85,
    "session_summary": 0.8,
    "agent_inference": 0.6,
}


def source_rank(source_kind: str, config: Config) -> int:
    """The configured authority of a source kind (``policy.source_rank``)."""
    return config.policy.source_rank.rank_of(source_kind)  # type: ignore[arg-type]


def initial_status(source_kind: str) -> str:
    """Only an unsupported inference starts provisional; every evidenced kind starts confirmed."""
    return "provisional" if source_kind == "agent_inference" else "confirmed"


def initial_confidence(source_kind: str) -> float:
    return INITIAL_CONFIDENCE[source_kind]


def initial_expiry(source_kind: str, now: datetime, config: Config) -> datetime | None:
    """Inferences and summaries expire unless something keeps them alive; other kinds never do."""
    if source_kind == "agent_inference":
        return now + timedelta(days=config.ingestion.provisional_ttl_days)
    if source_kind == "session_summary":
        return now + timedelta(days=config.ingestion.summary_ttl_days)
    return None


def kept_while_saved(record: Record) -> dict[str, object]:
    """What changes when a host saves a record through a surface whose users expect it kept until
    they delete it (a LangGraph store put without a ttl, a CrewAI ``remember``): an unevidenced
    claim loses its provisional lifetime, and keeps its status and rank. Empty when nothing
    changes. A reinforcement never gives it a lifetime back (:func:`reinforce`)."""
    if record.status == "provisional" and record.expires_at is not None:
        return {"expires_at": None}
    return {}


def has_authority(new: Record, old: Record, config: Config) -> bool:
    """Rank first, then the later event, then the later write (spec §6.3)."""
    new_rank, old_rank = source_rank(new.source_kind, config), source_rank(old.source_kind, config)
    if new_rank != old_rank:
        return new_rank > old_rank
    if new.event_at != old.event_at:
        return new.event_at > old.event_at
    return new.created_at >= old.created_at


def reinforce(
    record: Record,
    now: datetime,
    config: Config,
    *,
    source_kind: str | None = None,
    source_ref: str | None = None,
    evidence: str | None = None,
) -> Record:
    """Return the record after one independent observation (spec §6.4).

    The caller decides independence (a source reference not seen before). A
    higher-ranked observation also replaces the stored provenance with its own.
    """
    changes: dict[str, object] = {
        "reinforcements": record.reinforcements + 1,
        "last_reinforced_at": now,
        "confidence": min(0.99, round(record.confidence + 0.1, 10)),
    }
    if record.status == "provisional":
        if record.expires_at is not None:  # one a LangGraph store key keeps has no lifetime to extend
            changes["expires_at"] = now + timedelta(days=config.ingestion.provisional_ttl_days)
        if record.reinforcements + 1 >= config.ingestion.reinforcements_to_confirm:
            changes["status"] = "confirmed"
            changes["expires_at"] = None
    if source_kind is not None and source_rank(source_kind, config) > source_rank(record.source_kind, config):
        changes.update(source_kind=source_kind, source_ref=source_ref, evidence=evidence)
    return dataclasses.replace(record, **changes)  # type: ignore[arg-type]


def resupport(
    record: Record, remaining: Sequence[RecordSource], *, primary_removed: bool, now: datetime, config: Config
) -> dict[str, object]:
    """A record's columns once some of its sources are erased and ``remaining`` still support it.

    The strongest remaining source (rank, then the latest) takes over the provenance when
    the record's own source was among those erased, and its wording replaces the content
    when it differs (it was judged the same fact). The count of independent observations,
    the confidence and, for a live record, the status follow what is left: a fact that
    only the erased user's statement confirmed is again a provisional inference.
    Returns only the columns that change (``source_origin`` included, for the store).
    """
    if not remaining:
        raise ValueError("resupport needs at least one remaining source; erase the record instead")
    best = max(remaining, key=lambda s: (source_rank(s.source_kind, config), s.added_at))
    reinforcements = max(0, sum(1 for s in remaining if s.counted) - 1)
    kind = best.source_kind if primary_removed else record.source_kind
    wanted: dict[str, object] = {
        "reinforcements": reinforcements,
        "confidence": min(0.99, round(initial_confidence(kind) + 0.1 * reinforcements, 10)),
    }
    if primary_removed:
        wanted.update(
            source_kind=best.source_kind, source_ref=best.source_ref, evidence=best.evidence,
            source_origin=best.origin,
        )  # fmt: skip
        if normalize_ws(best.content) != normalize_ws(record.content):
            wanted["content"] = best.content
        if record.status in ACTIVE_STATUSES:
            confirmed = initial_status(kind) == "confirmed" or (
                reinforcements + 1 >= config.ingestion.reinforcements_to_confirm
            )
            if confirmed and record.status == "provisional":
                wanted.update(status="confirmed", expires_at=None)
            elif not confirmed and record.status == "confirmed":
                wanted.update(
                    status="provisional",
                    expires_at=now + timedelta(days=config.ingestion.provisional_ttl_days),
                )
    return {k: v for k, v in wanted.items() if k == "source_origin" or getattr(record, k) != v}


def is_expired(record: Record, now: datetime) -> bool:
    """Past ``expires_at``: ineligible for ordinary retrieval whatever its stored status (§6.5)."""
    return record.expires_at is not None and record.expires_at <= now


def needs_expiry(record: Record, now: datetime) -> bool:
    """An active record that ``retold expire`` should move to ``expired``."""
    return record.status in ACTIVE_STATUSES and is_expired(record, now)
