"""Candidate validation (spec §8.2 steps 4-6): validate the envelope, review, revalidate.

These stages decide which extractor candidates may be written, and they are where
untrusted model output is checked: the envelope (evidence located in the named turn,
destination scope, primary entity) before the reviewer sees a candidate, and the whole
candidate again, with evidence entailment and temporal support, after it. A revision may
narrow content, attribute, temporal metadata and source kind, nothing else. They read
the store but never write it; :mod:`retold.ingest.extraction.stages` writes what survives.
"""

from __future__ import annotations

import copy
import dataclasses
from datetime import datetime
from typing import Any

import anyio
import anyio.to_thread

from retold.errors import InvalidArgumentError, NotFoundError
from retold.ingest.extraction.run import (
    CandidateState,
    ExtractionRun,
    ExtractionServices,
    StageFailure,
    model_call,
    model_identity,
    stage,
)
from retold.ingest.write.entities import principal_entity, resolve_entities
from retold.ingest.write.evidence import as_the_user, locate_quote
from retold.ingest.write.temporal import unsupported_fields
from retold.models import (
    ENTITY_KINDS,
    RECORD_TYPES,
    CandidateRecord,
    Entity,
    EntityMention,
    ReviewContext,
    ReviewDecision,
)
from retold.policy.grants import writable_scopes
from retold.util import normalize_attribute, normalize_ws

__all__ = ["revalidate", "review", "validate"]

_CLAIM_KINDS = ("user_statement", "tool_result", "agent_inference")
_RANK = {"agent_inference": 1, "tool_result": 2, "user_statement": 4}
# What a reviewer may change; anything else in a revision is a forbidden change (§8.2 step 5).
_REVISABLE = frozenset(
    {"content", "attribute", "valid_from", "valid_until", "review_at", "source_kind", "confidence"}
)
_FIXED = tuple(f.name for f in dataclasses.fields(CandidateRecord) if f.name not in _REVISABLE)


# --- validation ----------------------------------------------------------------------------------


def _field_problem(c: CandidateRecord) -> str | None:
    """Why a candidate is malformed, or None."""
    if c.type not in RECORD_TYPES:
        return f"type must be one of {', '.join(RECORD_TYPES)}"
    if not isinstance(c.content, str) or not c.content.strip():
        return "content must be non-blank text"
    if c.source_kind not in _CLAIM_KINDS:
        return f"source_kind must be one of {', '.join(_CLAIM_KINDS)}"
    if not isinstance(c.evidence_turn, int) or isinstance(c.evidence_turn, bool):
        return "evidence_turn must be a turn number"
    if c.attribute is not None and not isinstance(c.attribute, str):
        return "attribute must be text or null"
    if not isinstance(c.entity_mentions, list) or not all(
        isinstance(m, EntityMention)
        and m.kind in ENTITY_KINDS
        and m.role in ("about", "mentions")
        and isinstance(m.text, str)
        for m in c.entity_mentions
    ):
        return "entity_mentions must be EntityMention values with a known kind and role"
    for name in ("event_at", "valid_from", "valid_until", "review_at"):
        value = getattr(c, name)
        if value is not None and (not isinstance(value, datetime) or value.tzinfo is None):
            return f"{name} must be a timezone-aware datetime or null"
    if not isinstance(c.confidence, int | float) or not 0.0 <= float(c.confidence) <= 1.0:
        return "confidence must be a number in [0, 1]"
    return None


def _entity_key(entity: Entity, exists: bool) -> Any:
    return (
        entity.id
        if exists
        else ("new", entity.kind, entity.aliases[0] if entity.aliases else "", entity.scope)
    )


async def _envelope(
    services: ExtractionServices, run: ExtractionRun, state: CandidateState, *, code: str | None
) -> bool:
    """Check fields, evidence, subject and entities; reject (with ``code`` if given) and return False.

    ``code`` replaces the reason for a revised candidate: any failure after a revision is
    the revision's fault (``invalid_review_revision``).
    """
    assert run.destination is not None and run.principal is not None
    c = state.candidate
    cfg = services.config.ingestion

    def reject(reason: str, **detail: Any) -> bool:
        if code is not None:
            detail = {"problem": reason, **detail}
            reason = code
        state.reject(reason, **detail)
        return False

    problem = _field_problem(c)
    if problem is not None:
        return reject("invalid_candidate", message=problem)
    if not isinstance(c.evidence, str) or not c.evidence.strip():
        return reject("evidence_not_provided")
    check = locate_quote(
        run.turns,
        c.evidence,
        c.source_kind,
        c.evidence_turn,
        min_chars=cfg.evidence.min_characters,
        min_words=cfg.evidence.min_words,
    )
    if not check.found or check.turn is None:
        reason = (
            "evidence_too_short"
            if (check.note or "").startswith("evidence too short")
            else "evidence_not_found"
        )
        return reject(reason, evidence_turn=c.evidence_turn)
    state.turn = next(t for t in run.turns if t.turn == check.turn)
    if check.source_kind != c.source_kind:  # the same downgrade an explicit write gets
        state.notes.append(check.note or f"downgraded from {c.source_kind}")
        state.downgraded = True
        state.candidate = c = dataclasses.replace(c, source_kind=check.source_kind)

    about = [m for m in c.entity_mentions if m.role == "about"]
    in_user_scope = run.destination == run.principal.user_scope
    if c.type in ("semantic", "procedural"):
        if not c.attribute or not normalize_attribute(c.attribute) or normalize_attribute(c.attribute) == "-":
            return reject(
                "invalid_subject", message="attribute required for semantic and procedural memories"
            )
        if not about and not in_user_scope:
            return reject("invalid_subject", message="about entity required outside the user scope")

    try:
        resolutions = await resolve_entities(
            services.store,
            c.entity_mentions,
            scope=run.destination,
            readable=run.readable,
            clock=services.clock,
        )
    except NotFoundError as exc:
        return reject("entity_not_found", message=str(exc))
    except InvalidArgumentError as exc:
        return reject("invalid_candidate", message=str(exc))
    ambiguous_about = [r for r in resolutions if r.outcome == "ambiguous" and r.mention.role == "about"]
    if ambiguous_about:
        return reject(
            "entity_ambiguous",
            alias=ambiguous_about[0].mention.text,
            candidates=ambiguous_about[0].candidates,
        )
    primary = next((r.entity for r in resolutions if r.mention.role == "about" and r.entity), None)
    if primary is None:
        person, candidates = await principal_entity(services.store, run.principal, clock=services.clock)
        if candidates:
            return reject("entity_ambiguous", alias=run.principal.user_id, candidates=candidates)
        primary = person
    assert primary is not None
    key = _entity_key(primary, await services.store.get_entity(primary.id) is not None)
    if state.primary_key is not None and key != state.primary_key:
        return reject(
            "invalid_review_revision" if code else "entity_changed", message="primary entity changed"
        )
    state.primary_key = key
    state.primary_entity_id = primary.id
    return True


@stage("validate")
async def validate(services: ExtractionServices, run: ExtractionRun) -> None:
    """The immutable envelope, before the reviewer sees anything (§8.2 step 4)."""
    for state in run.candidates:
        if await _envelope(services, run, state, code=None):
            state.status = "valid"


# --- review --------------------------------------------------------------------------------------


def _forbidden_changes(before: CandidateRecord, after: CandidateRecord) -> list[str]:
    """Fields a revision changed that it may not: anything but narrowing (§8.2 step 5)."""
    changed = [name for name in _FIXED if getattr(before, name) != getattr(after, name)]
    if _RANK.get(after.source_kind, 99) > _RANK.get(before.source_kind, 0):
        changed.append("source_kind")
    if isinstance(after.confidence, int | float) and after.confidence > before.confidence:
        changed.append("confidence")
    return changed


@stage("review")
async def review(services: ExtractionServices, run: ExtractionRun) -> None:
    """Each survivor, alone with its evidence window and same-entity live records in the destination."""
    assert run.destination is not None
    reviewer = services.reviewer
    who = model_identity(reviewer)
    cfg = services.config.ingestion
    for state in run.candidates:
        if state.status != "valid":
            continue
        c = state.candidate
        window = [t for t in run.turns if abs(t.turn - c.evidence_turn) <= 1]
        live = []
        if state.primary_entity_id and isinstance(state.primary_key, str):
            live = await services.store.live_records_about(
                run.destination, state.primary_entity_id, cfg.max_entity_attributes
            )
        context = ReviewContext(
            transcript_window=window,
            destination_scope=run.destination,
            primary_entity_id=state.primary_entity_id or "",
            live_records=live,
            prompt_version=who["prompt_version"],
        )
        decision = await model_call(
            reviewer.review, copy.deepcopy(c), context, timeout_ms=cfg.review_timeout_ms, code="reviewer"
        )
        if not _valid_decision(decision):
            raise StageFailure(
                "invalid_review", f"the reviewer returned an invalid decision for candidate {state.index}"
            )
        state.review = {"action": decision.action, "reason": decision.reason, **who}
        if decision.action == "accept":
            state.status = "accepted"
        elif decision.action == "reject":
            state.reject("review_rejected", review_reason=decision.reason)
        else:
            assert decision.candidate is not None
            revised = copy.deepcopy(decision.candidate)
            forbidden = _forbidden_changes(c, revised)
            if forbidden:
                state.reject("invalid_review_revision", fields=forbidden)
                continue
            state.detail["revised_fields"] = [
                name for name in sorted(_REVISABLE) if getattr(c, name) != getattr(revised, name)
            ]
            state.candidate = revised
            state.status = "revised"


def _valid_decision(decision: object) -> bool:
    if not isinstance(decision, ReviewDecision) or decision.action not in ("accept", "reject", "revise"):
        return False
    if not isinstance(decision.reason, str):
        return False
    return decision.action != "revise" or isinstance(decision.candidate, CandidateRecord)


@stage("revalidate")
async def revalidate(services: ExtractionServices, run: ExtractionRun) -> None:
    """Evidence, entailment, temporal support, scope and entity again, after review (§8.2 step 6)."""
    assert run.principal is not None and run.destination is not None
    writable = await writable_scopes(services.store, run.principal)
    floor = services.config.ingestion.evidence.entail_floor
    person, _ = await principal_entity(services.store, run.principal, clock=services.clock)
    names = [run.principal.user_id, *(person.aliases if person is not None else [])]
    for state in run.candidates:
        if state.status not in ("accepted", "revised"):
            continue
        revised = state.status == "revised"
        code = "invalid_review_revision" if revised else None
        if not await _envelope(services, run, state, code=code):
            continue
        c, turn = state.candidate, state.turn
        assert turn is not None
        if run.destination not in writable:
            state.reject("scope_not_writable", scope=str(run.destination))
            continue
        if revised:  # a revision may only narrow: the quote must still support what it says
            hypothesis = as_the_user(c.content, names) if turn.role == "user" else c.content
            score = float(
                await anyio.to_thread.run_sync(services.judge.entails, normalize_ws(c.evidence), hypothesis)
            )
            if score < floor:
                problem = "revised content is not supported by the evidence"
                state.reject("invalid_review_revision", problem=problem, entail_score=round(score, 4))
                continue
        missing = unsupported_fields(
            c.evidence, turn.at, valid_from=c.valid_from, valid_until=c.valid_until, review_at=c.review_at
        )
        if missing:
            state.reject(code or "unsupported_temporal", fields=missing)
