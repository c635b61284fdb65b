"""The shape of a judge's answer: :class:`JudgeDecision`, a verdict with its reason and scores.

Why a module of its own: every judge (:mod:`retold.ingest.equivalence.conservative`,
:mod:`retold.ingest.equivalence.nli`) returns it and :mod:`retold.ingest.equivalence.judge` (which
re-exports it, and imports the judges) consumes it. Defining it here, below all of them,
keeps the imports one-way with no cycle. Import it from :mod:`retold.ingest.equivalence.judge`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from retold.models import Verdict

__all__ = ["JudgeDecision"]


@dataclass(frozen=True)
class JudgeDecision:
    """One verdict with the evidence for it, as audit events record it.

    ``reason`` names the rule (``"antonyms: concise vs detailed"``) or model scores behind a
    verdict, and is ``None`` when the judge gives none; ``scores`` holds the numbers it used.
    """

    verdict: Verdict
    reason: str | None = None
    scores: dict[str, float] = field(default_factory=dict)
