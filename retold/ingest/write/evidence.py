"""Evidence validation (spec §6.6): does a quote exist in this session, and what does it support?

Both write paths use it, so an explicit write and an extracted candidate meet the same
standard. A paraphrase is not evidence: the whitespace-normalised quote must appear
whole inside one turn. The turn's role caps the source kind the quote can support
(user → ``user_statement``, tool → ``tool_result``, assistant → ``agent_inference``),
and a direct claim is also checked for entailment so a real quote cannot carry an
unrelated claim.

A user turn supports ``user_statement`` only for the user's own words: a quote from inside
material the user quoted, pasted or forwarded (:mod:`retold.ingest.write.voice`) is a third
party's text the user showed the agent, the same observation a tool turn fetching it would
be, so it is capped at ``tool_result`` (issue 45). It can never be the user's statement,
and so never ambient; it still outranks an inference and is kept confirmed, because the
text really is in the session.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

import anyio

from retold.config import Config
from retold.ingest.write.voice import read_voice
from retold.models import EquivalenceJudge, EvidenceCheck, Turn
from retold.util import normalize_ws

__all__ = [
    "NOTE_NOT_FOUND",
    "NOTE_NOT_PROVIDED",
    "NOTE_NOT_SUPPORTED",
    "EvidenceOutcome",
    "as_the_user",
    "assess_evidence",
    "locate_quote",
    "source_ref_for",
    "supported_kind",
]

NOTE_NOT_PROVIDED = "evidence not provided"
NOTE_NOT_FOUND = "evidence not found in session"
NOTE_NOT_SUPPORTED = "evidence does not support claim"

_RANK = {"agent_inference": 1, "tool_result": 2, "user_statement": 4}
_SUPPORTED = {"user": "user_statement", "tool": "tool_result", "assistant": "agent_inference"}


def source_ref_for(session_id: str, turn: int) -> str:
    """``session:<session_id><turn:n>``, the reference a record keeps to its evidence turn."""
    return f"session:{session_id}<turn:{turn}>"


def supported_kind(turn: Turn, quote: str) -> str:
    """The highest source kind ``quote`` in ``turn`` supports: the role's, except that material
    quoted inside a user turn supports only ``tool_result``."""
    supported = _SUPPORTED[turn.role]
    if supported == "user_statement" and not read_voice(turn.content, quote).own:
        return "tool_result"
    return supported


def locate_quote(
    turns: list[Turn], quote: str, claimed: str, turn_hint: int | None, *, min_chars: int, min_words: int
) -> EvidenceCheck:
    """Find the whole quote in one turn (the hinted one when given) and cap the claim by its role."""
    q = normalize_ws(quote)
    if len(q) < min_chars or len(q.split()) < min_words:
        return EvidenceCheck(
            False,
            None,
            None,
            "agent_inference",
            f"evidence too short: a quote needs at least {min_chars} characters and {min_words} words",
        )
    candidates = [t for t in turns if t.turn == turn_hint] if turn_hint is not None else turns
    hit = next((t for t in candidates if q in normalize_ws(t.content)), None)
    if hit is None:
        return EvidenceCheck(False, None, None, "agent_inference", NOTE_NOT_FOUND)
    supported = supported_kind(hit, q)
    if _RANK.get(claimed, 0) > _RANK[supported]:
        note = f"downgraded from {claimed}: quote is from a {hit.role} turn"
        if supported != _SUPPORTED[hit.role]:
            why = read_voice(hit.content, q).reason
            note = f"downgraded from {claimed}: quote is not the user's own words ({why})"
        return EvidenceCheck(True, hit.turn, hit.role, supported, note)  # type: ignore[arg-type]
    return EvidenceCheck(True, hit.turn, hit.role, claimed, None)  # type: ignore[arg-type]


def as_the_user(claim: str, names: Sequence[str]) -> str:
    """Replace the user's names in a claim with "the user" (longest name first, any case)."""
    for name in sorted({n.strip() for n in names if n and n.strip()}, key=len, reverse=True):
        claim = re.sub(rf"(?<!\w){re.escape(name)}(?!\w)", "the user", claim, flags=re.IGNORECASE)
    return claim[:1].upper() + claim[1:] if claim else claim


@dataclass(frozen=True)
class EvidenceOutcome:
    """What the ingestor stores: the final source kind and provenance, and why."""

    source_kind: str
    source_ref: str | None
    evidence: str | None  # the quote, kept only when it was found in the session
    note: str | None
    check: EvidenceCheck | None  # None when no evidence was supplied
    entail_score: float | None  # set when a direct claim was scored


async def assess_evidence(
    *,
    turns: list[Turn],
    session_id: str | None,
    content: str,
    quote: str | None,
    claimed: str,
    turn_hint: int | None,
    judge: EquivalenceJudge,
    config: Config,
    speaker_names: Sequence[str] = (),
) -> EvidenceOutcome:
    """Validate the quote, then score entailment for a claim that is still direct.

    A claim already downgraded by its turn's role is not scored again, so it carries one
    note. An ``agent_inference`` is never entailment-checked. ``speaker_names`` are the
    names the user goes by: in a user's own quote "I" is that person, so a claim that
    names them ("Aditya prefers ...") is scored as "The user prefers ...".
    """
    if quote is None or not quote.strip():
        return EvidenceOutcome("agent_inference", None, None, NOTE_NOT_PROVIDED, None, None)
    if session_id is None:
        check = EvidenceCheck(False, None, None, "agent_inference", NOTE_NOT_FOUND)
        return EvidenceOutcome("agent_inference", None, None, NOTE_NOT_FOUND, check, None)
    evidence_cfg = config.ingestion.evidence
    check = locate_quote(
        turns,
        quote,
        claimed,
        turn_hint,
        min_chars=evidence_cfg.min_characters,
        min_words=evidence_cfg.min_words,
    )
    if not check.found or check.turn is None:
        return EvidenceOutcome("agent_inference", None, None, check.note, check, None)
    ref = source_ref_for(session_id, check.turn)
    kept = normalize_ws(quote)
    if check.note is not None or check.source_kind == "agent_inference":
        return EvidenceOutcome(check.source_kind, ref, kept, check.note, check, None)
    hit = next(t for t in turns if t.turn == check.turn)
    # Only the user's own words say "I" for the user; a quoted mail's "I" is its writer.
    own = check.role == "user" and supported_kind(hit, kept) == "user_statement"
    hypothesis = as_the_user(content, speaker_names) if own else content
    prefetch = getattr(judge, "prefetch", None)
    if prefetch is not None:  # the claim's own vector rides along: one model call for the write
        await anyio.to_thread.run_sync(prefetch, [kept, hypothesis, content])
    score = float(await anyio.to_thread.run_sync(judge.entails, kept, hypothesis))
    if score < evidence_cfg.entail_floor:
        return EvidenceOutcome("agent_inference", ref, kept, NOTE_NOT_SUPPORTED, check, score)
    return EvidenceOutcome(check.source_kind, ref, kept, None, check, score)
