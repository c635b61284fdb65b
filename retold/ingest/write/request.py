"""What goes into the write path and what comes out (spec §8.1): requests, results, plans."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

import numpy as np

from retold.ingest.write.evidence import EvidenceOutcome
from retold.ingest.write.supersession import Decision, Judged
from retold.models import Entity, EntityMention, Record, RecordSource, Resolution, Scope

__all__ = [
    "RETRY", "WRITE_STAGES", "WRITE_STAGES_PENDING", "Plan", "Refused", "Revision", "WriteRequest",
    "WriteResult", "Written", "fail", "stage_timings", "written_by",
]  # fmt: skip

WRITE_STAGES: tuple[str, ...] = (
    "permission", "evidence", "entities", "embed", "dedup_search", "judge", "supersession",
    "persistence", "event_log", "transaction", "index_update", "activation",
)  # fmt: skip
"""Every write stage, in order: each result and event carries all of them (0.0 when one did no work),
so a dashboard never has to tell "skipped" from "not measured"."""

WRITE_STAGES_PENDING: tuple[str, ...] = ("event_log", "transaction", "index_update", "activation", "total")
"""The stages still running when the write event is appended: named in its ``timings_pending``, never
given a made-up 0.0 in its ``timings_ms`` (the result, returned afterwards, has them all)."""


def stage_timings(measured: dict[str, float], stages: tuple[str, ...] = WRITE_STAGES) -> dict[str, float]:
    """``stages`` in order, each the measured milliseconds (3 decimals) or 0.0 when it did no work."""
    return {s: round(measured.get(s, 0.0), 3) for s in stages}


RETRY = "concurrent_change"
"""Internal error code: a record the decision depended on changed before the commit."""


@dataclass
class WriteRequest:
    """One candidate memory. Tool handlers build it from validated tool input.

    ``trusted`` marks the host's own writes (``system`` facts, bulk import): they skip
    the evidence check and carry their own ``source_ref``. Everything else is verified.
    """

    type: Literal["semantic", "episodic", "procedural"]
    content: str
    scope: Scope
    source_kind: str = "agent_inference"
    attribute: str | None = None
    evidence: str | None = None
    evidence_turn: int | None = None
    entities: list[EntityMention] = field(default_factory=list)
    event_at: datetime | None = None
    valid_from: datetime | None = None
    valid_until: datetime | None = None
    review_at: datetime | None = None
    tags: list[str] = field(default_factory=list)
    source_ref: str | None = None  # trusted writes only
    trusted: bool = False


@dataclass
class WriteResult:
    """The answer to a write: ARCHITECTURE §5's tool result, before rendering to a dict."""

    ok: bool
    outcome: str | None = None
    record_id: str | None = None
    status: str | None = None
    note: str | None = None
    timings_ms: dict[str, float] = field(default_factory=dict)
    error: str | None = None
    message: str | None = None
    candidates: list[dict[str, Any]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    # Set after the commit by the activation policy (retold.ingest.activation): "ambient" puts
    # the record in the principal's profile; anything that fails leaves it "conditional".
    activation: str | None = None
    activation_reason: str | None = None

    def as_dict(self) -> dict[str, Any]:
        if not self.ok:
            out: dict[str, Any] = {"ok": False, "error": self.error, "message": self.message}
            if self.candidates:
                out["candidates"] = self.candidates
            return out
        return {
            "ok": True,
            "record_id": self.record_id,
            "status": self.status,
            "outcome": self.outcome,
            "note": self.note,
            "activation": self.activation or "conditional",
            "activation_reason": self.activation_reason or "not decided",
            "timings_ms": self.timings_ms,
        }


class Refused(Exception):
    """A write that must change nothing; carries its structured result."""

    def __init__(self, result: WriteResult, ambiguous: list[Resolution] | None = None) -> None:
        super().__init__(result.message)
        self.result = result
        self.ambiguous = ambiguous or []


def fail(error: str, message: str, **extra: Any) -> Refused:
    return Refused(WriteResult(ok=False, error=error, message=message, **extra))


@dataclass
class Plan:
    """Everything decided before the write transaction opens."""

    record: Record
    vector: np.ndarray
    evidence: EvidenceOutcome
    claimed: str
    links: list[tuple[Entity, str]]
    decision: Decision
    judged: list[Judged]
    truncated: bool
    notes: list[str]
    ambiguous: list[Resolution]
    revision_reason: str | None = None  # set for a memory_revise supersede (manual_revision)
    source: RecordSource | None = None  # what this write contributes (retold.ingest.write.sources)
    # records_version the decision read (None: not checked). A live record of the same fact
    # written after it, by any process, means the decision is stale: decide again.
    seen_version: int | None = None
    passages: np.ndarray | None = None  # a long record's passage vectors (retold.index.passages)


@dataclass(frozen=True)
class Revision:
    """A memory_revise ``supersede``: new content for an active record, with its own evidence."""

    content: str
    reason: str
    source_kind: str = "agent_inference"
    evidence: str | None = None
    evidence_turn: int | None = None


@dataclass(frozen=True)
class Written:
    """What a landed write planned, handed to activation after the commit (no read back needed)."""

    record: Record
    evidence_user: str | None  # the user in whose own user turn the write path found the evidence


def written_by(plan: Plan, request: WriteRequest, user_id: str | None) -> Written:
    """``plan`` as activation sees it: the evidence counts only when the write path verified it.

    A trusted (host) write vouches for its source but was not checked against the user's
    turns, so it never counts as the user's own words here.
    """
    check = plan.evidence.check
    verified = (
        not request.trusted
        and check is not None
        and check.found
        and check.role == "user"
        and plan.evidence.source_kind == "user_statement"
    )
    return Written(plan.record, user_id if verified else None)
