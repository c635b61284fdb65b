"""The current-fact decision of spec §6.3 as plain functions over records and verdicts.

Given a candidate record and the judged active records about the same entity, decide
whether it reinforces one of them, supersedes one, arrives already superseded, or is
stored as a provisional conflict. Nothing here reads the store or calls a model, so
every ordering rule is testable on its own.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

from retold.config import Config
from retold.models import Record
from retold.policy.lifecycle import has_authority, source_rank

__all__ = [
    "Decision",
    "Judged",
    "authority_incumbent",
    "decide_current_fact",
    "scan_window",
    "supersession_action",
]

Action = Literal["create", "reinforce", "supersede", "superseded_on_arrival", "conflict"]


@dataclass(frozen=True)
class Judged:
    """One existing record with the judge's verdict against the candidate."""

    record: Record
    verdict: str
    reason: str | None
    cosine: float


@dataclass(frozen=True)
class Decision:
    action: Action
    target: Record | None = None
    rule: str = "none"  # same_attribute | attribute_alias | nearby | none
    also_superseded: tuple[str, ...] = ()
    attribute_aliased_from: str | None = None
    adopt_attribute: str | None = None  # the survivor keeps the incumbent's attribute (rule 3)
    verdict: str | None = None
    reason: str | None = None
    notes: tuple[str, ...] = field(default_factory=tuple)


def _authority_key(record: Record, config: Config) -> tuple[int, object, object]:
    return (source_rank(record.source_kind, config), record.event_at, record.created_at)


def authority_incumbent(records: Sequence[Record], config: Config) -> Record:
    """Highest source rank, then latest event_at, then latest created_at."""
    return max(records, key=lambda r: _authority_key(r, config))


def scan_window(window: Sequence[Record], same_attribute: Sequence[Record], config: Config) -> list[Record]:
    """The records to judge: the capped window plus the same-attribute authority incumbent.

    The cap follows the store's order (most recently reinforced first); the incumbent is
    always kept, even past the cap, because rule 1 owes it the decision.
    """
    scanned = list(window)
    if same_attribute:
        incumbent = authority_incumbent(same_attribute, config)
        if incumbent.id not in {r.id for r in scanned}:
            scanned.append(incumbent)
    return scanned


def supersession_action(candidate: Record, old: Record, config: Config) -> Action:
    """The supersession rule: authority replaces; a stale equal rank arrives superseded; else conflict."""
    if has_authority(candidate, old, config):
        return "supersede"
    if source_rank(candidate.source_kind, config) == source_rank(old.source_kind, config):
        return "superseded_on_arrival"
    return "conflict"


def decide_current_fact(candidate: Record, judged: Sequence[Judged], config: Config) -> Decision | None:
    """Rules 1–3 of spec §6.3 over records already judged; None means "go on to rule 4".

    Every scanned record is judged before this runs, so no verdict can short-circuit
    the decision the authority incumbent is owed (rule 1 before rule 2).
    """
    attribute = candidate.attribute
    same_attr = [j for j in judged if j.record.attribute == attribute]
    if same_attr:
        incumbent = authority_incumbent([j.record for j in same_attr], config)
        verdict = next(j for j in same_attr if j.record.id == incumbent.id)
        if verdict.verdict == "same":
            return Decision("reinforce", incumbent, "same_attribute", verdict="same", reason=verdict.reason)
        action = supersession_action(candidate, incumbent, config)
        also: tuple[str, ...] = ()
        if action == "supersede":
            also = tuple(
                j.record.id for j in same_attr if j.record.id != incumbent.id and j.verdict == "same"
            )
        return Decision(
            action, incumbent, "same_attribute", also_superseded=also, verdict=verdict.verdict,
            reason=verdict.reason,
        )  # fmt: skip

    floor = config.ingestion.attribute_alias_cosine
    other = [j for j in judged if j.record.attribute != attribute and j.cosine >= floor]
    same_other = [j for j in other if j.verdict == "same"]
    if same_other:
        target = authority_incumbent([j.record for j in same_other], config)
        verdict = next(j for j in same_other if j.record.id == target.id)
        return Decision(
            "reinforce", target, "attribute_alias", attribute_aliased_from=attribute, verdict="same",
            reason=verdict.reason,
        )  # fmt: skip
    contradicting = [j for j in other if j.verdict == "contradicts"]
    if contradicting:
        target = authority_incumbent([j.record for j in contradicting], config)
        verdict = next(j for j in contradicting if j.record.id == target.id)
        return Decision(
            supersession_action(candidate, target, config), target, "attribute_alias",
            attribute_aliased_from=attribute, adopt_attribute=target.attribute, verdict="contradicts",
            reason=verdict.reason,
        )  # fmt: skip
    return None
