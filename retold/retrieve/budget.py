"""Budget fill (spec §10.8): k results and a token ceiling, with conflict pairs kept whole.

A result costs ``len(content) // 4`` tokens plus 30 for its envelope line. A record that
does not fit is skipped (never truncated) and the next one tried. A provisional record with
an eligible higher-authority conflict counterpart is admitted or rejected together with it,
so the caller never sees one half of a disagreement; the counterpart keeps its own rank when
it is already stronger, is pulled forward otherwise, and does not use a primary k slot.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from retold.models import Candidate, Record

__all__ = ["ENVELOPE_TOKENS", "Admission", "fill_budget", "record_tokens"]

ENVELOPE_TOKENS = 30


def record_tokens(record: Record) -> int:
    return len(record.content) // 4 + ENVELOPE_TOKENS


@dataclass
class Admission:
    """One admitted record: where it landed and what it cost."""

    candidate: Candidate
    position: int  # 1-based position in the response
    tokens_used: int  # running total after this record
    counterpart_of: str | None = None  # set when admitted as a conflict counterpart


def fill_budget(
    ranked: Sequence[Candidate],
    records: Mapping[str, Record],
    counterpart: Callable[[Record], Candidate | None],
    *,
    k: int,
    token_budget: int,
) -> tuple[list[Admission], list[str]]:
    """Admit ranked candidates until ``k`` primaries or the budget; return admissions and budget_out.

    ``counterpart(record)`` gives the candidate to pair with a provisional record (its
    eligible higher-authority conflict partner), or None.
    """
    admitted: list[Admission] = []
    ids: set[str] = set()
    primaries = 0
    used = 0
    budget_out: list[str] = []

    def admit(candidate: Candidate, counterpart_of: str | None = None) -> None:
        nonlocal used
        used += record_tokens(records[candidate.record_id])
        ids.add(candidate.record_id)
        admitted.append(Admission(candidate, len(admitted) + 1, used, counterpart_of))

    for candidate in ranked:
        if candidate.record_id in ids:
            continue  # already admitted as a counterpart
        if primaries >= k:
            budget_out.append(candidate.record_id)
            continue
        record = records[candidate.record_id]
        partner = counterpart(record) if record.status == "provisional" else None
        group = [candidate]
        if partner is not None and partner.record_id not in ids:
            group = [partner, candidate]  # the stronger claim sits right before the provisional one
        cost = sum(record_tokens(records[c.record_id]) for c in group)
        if used + cost > token_budget:
            budget_out.extend(c.record_id for c in group if c.record_id not in budget_out)
            continue
        for member in group:
            admit(member, candidate.record_id if member is not candidate else None)
        primaries += 1
    # A counterpart admitted early was also a ranked candidate later: it is not "out".
    budget_out = [rid for rid in budget_out if rid not in ids]
    return admitted, budget_out
