"""Episodic recency (spec §10.4): old episodes sink, current facts do not.

Semantic and procedural records keep their fused score because supersession already
retires stale facts; only episodes decay, halving every ``episodic_half_life_days`` down
to ``freshness.floor``. A request with ``since``/``until`` skips it: the caller chose the
time range.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Protocol

from retold.config import FreshnessConfig
from retold.models import Candidate

__all__ = ["apply_freshness", "freshness_multiplier"]


class Dated(Protocol):
    """A record, or the gate's subject of one: its type and when the event happened."""

    @property
    def type(self) -> str: ...

    @property
    def event_at(self) -> datetime | None: ...


def freshness_multiplier(event_at: datetime, now: datetime, config: FreshnessConfig) -> float:
    age_days = max(0.0, (now - event_at).total_seconds() / 86400.0)
    return max(config.floor, 0.5 ** (age_days / config.episodic_half_life_days))


def apply_freshness(
    candidates: list[Candidate],
    records: Mapping[str, Dated],
    now: datetime,
    config: FreshnessConfig,
    *,
    skip: bool = False,
) -> list[Candidate]:
    """Set ``freshness_multiplier`` and ``score`` on episodic candidates; re-sort by score."""
    for candidate in candidates:
        record = records.get(candidate.record_id)
        if skip or record is None or record.type != "episodic" or record.event_at is None:
            candidate.freshness_multiplier = None
            candidate.score = candidate.rrf_score
            continue
        candidate.freshness_multiplier = freshness_multiplier(record.event_at, now, config)
        candidate.score = candidate.rrf_score * candidate.freshness_multiplier
    return sorted(candidates, key=lambda c: (-c.score, c.fused_rank))
