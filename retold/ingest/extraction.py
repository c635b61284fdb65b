"""Session extraction (spec §8.2) as plain async stages over one :class:`ExtractionRun`.

``claim`` → ``load_transcript`` → ``build_context`` → ``extract`` → ``validate`` →
``review`` → ``revalidate`` → ``write`` → ``finish``, with ``fail`` reachable from
every stage. :mod:`retold.graph_nodes.extraction` wires them into a compiled LangGraph
graph; each stage is testable without it.

The rules that make extraction safe:

* **One worker per session.** ``claim`` is an atomic conditional update; a live claim
  is never taken over, an expired unfinished one is (``extraction.reclaimed``), and an
  extracted session runs again only when forced (``extraction.rerun``).
* **Nothing untrusted reaches the reviewer or the store unchecked.** The envelope —
  evidence located in the named turn, destination scope, primary entity — is validated
  before the reviewer sees a candidate, and every accepted or revised candidate is
  validated again afterwards, with evidence entailment and temporal support. A revision
  may narrow content, attribute, temporal metadata and source kind, nothing else.
* **Fail closed, all or nothing.** Model calls (extractor, reviewer, judge, embedder)
  all happen before the one write transaction that holds every candidate, the summary,
  ``extracted_at`` and the ``extraction.run`` event. A timeout, an invalid model reply
  or a provider error anywhere writes ``extraction.failed`` and nothing else; the claim
  stays until it expires, so the session can be reclaimed.
"""

from __future__ import annotations

import copy
import dataclasses
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, Literal

import anyio
import anyio.to_thread

from retold.errors import InvalidArgumentError, NotFoundError, RetoldError, StoreError
from retold.hosted import SchemaMismatchError
from retold.ingest.batch import BatchError, write_batch
from retold.ingest.entities import principal_entity, resolve_entities
from retold.ingest.evidence import as_the_user, locate_quote
from retold.ingest.request import WriteRequest, WriteResult
from retold.ingest.temporal import unsupported_fields
from retold.models import (
    ENTITY_KINDS,
    RECORD_TYPES,
    CandidateRecord,
    Entity,
    EntityMention,
    ExtractionContext,
    ExtractionOutput,
    Principal,
    ReviewContext,
    ReviewDecision,
    Scope,
    SessionInfo,
    SessionSummary,
    Turn,
)
from retold.policy.grants import readable_scopes, writable_scopes
from retold.util import normalize_attribute, normalize_ws

if TYPE_CHECKING:
    from retold.runtime import Runtime
    from retold.store.extraction import SessionClaim

__all__ = [
    "EXTRACTION_ACTOR",
    "CandidateState",
    "ExtractionResult",
    "ExtractionRun",
    "build_context",
    "claim",
    "extract",
    "fail",
    "finish",
    "load_transcript",
    "revalidate",
    "review",
    "validate",
    "write",
]

logger = logging.getLogger(__name__)

EXTRACTION_ACTOR = "extractor"
_CLAIM_KINDS = ("user_statement", "tool_result", "agent_inference")
_RANK = {"agent_inference": 1, "tool_result": 2, "user_statement": 4}
_SUPPORTED_BY_ROLE = {"user": "user_statement", "tool": "tool_result", "assistant": "agent_inference"}
# What a reviewer may change; anything else in a revision is a forbidden change (§8.2 step 5).
_REVISABLE = frozenset(
    {"content", "attribute", "valid_from", "valid_until", "review_at", "source_kind", "confidence"}
)
_FIXED = tuple(f.name for f in dataclasses.fields(CandidateRecord) if f.name not in _REVISABLE)

Status = Literal["proposed", "valid", "accepted", "revised", "rejected", "written"]


class StageFailure(RetoldError):
    """A stage failed closed; ``code`` is what ``extraction.failed`` records."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


@dataclass
class CandidateState:
    """One proposed candidate on its way through validation, review and the write."""

    index: int
    proposed: CandidateRecord
    candidate: CandidateRecord  # the proposal after downgrades and an accepted revision
    status: Status = "proposed"
    reason: str | None = None
    detail: dict[str, Any] = field(default_factory=dict)
    primary_entity_id: str | None = None
    primary_key: Any = None  # the entity's id, or (kind, alias, scope) for one still to be created
    turn: Turn | None = None
    downgraded: bool = False  # the quoted turn's role capped the claimed source kind
    notes: list[str] = field(default_factory=list)
    review: dict[str, Any] | None = None
    outcome: str | None = None
    record_id: str | None = None

    def reject(self, reason: str, **detail: Any) -> None:
        self.status = "rejected"
        self.reason = reason
        self.detail.update(detail)


@dataclass
class ExtractionResult:
    """What one extraction run did; ``status`` is extracted, skipped or failed."""

    session_id: str
    status: Literal["extracted", "skipped", "failed"]
    reason: str | None = None
    rerun: bool = False
    reclaimed: bool = False
    counts: dict[str, int] = field(default_factory=dict)
    rejection_reasons: dict[str, int] = field(default_factory=dict)
    candidates: list[dict[str, Any]] = field(default_factory=list)
    summary: dict[str, Any] | None = None
    timings_ms: dict[str, Any] = field(default_factory=dict)
    event_id: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclass
class ExtractionRun:
    """Everything one extraction computes; the graph's stages advance it in place."""

    session_id: str
    force: bool = False
    actor: str = EXTRACTION_ACTOR
    t0: float = field(default_factory=time.perf_counter)
    claim: SessionClaim | None = None
    session: SessionInfo | None = None
    principal: Principal | None = None
    turns: list[Turn] = field(default_factory=list)
    summary_only: bool = False
    readable: list[Scope] = field(default_factory=list)
    destination: Scope | None = None
    context: ExtractionContext | None = None
    output: ExtractionOutput | None = None
    ignored_candidates: int = 0
    over_cap: int = 0
    candidates: list[CandidateState] = field(default_factory=list)
    summary_result: WriteResult | None = None
    summary_truncated: bool = False
    timings: dict[str, Any] = field(default_factory=dict)
    skipped: str | None = None
    failure: StageFailure | None = None
    failed_stage: str | None = None
    result: ExtractionResult | None = None

    @property
    def failed(self) -> bool:
        return self.failure is not None

    def add_time(self, stage: str, since: float) -> None:
        self.timings[stage] = round(self.timings.get(stage, 0.0) + (time.perf_counter() - since) * 1000.0, 3)


def _identity(model: Any) -> dict[str, str]:
    return {
        "name": str(getattr(model, "name", None) or type(model).__name__),
        "model": str(getattr(model, "model", None) or "unknown"),
        "prompt_version": str(getattr(model, "prompt_version", None) or "unversioned"),
    }


def _stage(name: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Time a stage and turn any exception into a fail-closed :class:`StageFailure`."""

    def wrap(fn: Callable[..., Any]) -> Callable[..., Any]:
        async def run_stage(rt: Runtime, run: ExtractionRun) -> None:
            t = time.perf_counter()
            try:
                await fn(rt, run)
            except StageFailure as failure:
                run.failure, run.failed_stage = failure, name
            except Exception as exc:  # fail closed: log the kind of error, never transcript content
                logger.warning("extraction of %s failed in %s: %s", run.session_id, name, type(exc).__name__)
                code = "store_error" if isinstance(exc, StoreError) else f"{name}_error"
                message = (
                    f"{type(exc).__name__}: {exc}" if isinstance(exc, RetoldError) else type(exc).__name__
                )
                run.failure = StageFailure(code, message)
                run.failed_stage = name
            finally:
                run.add_time(_TIMING.get(name, name), t)

        run_stage.__name__ = fn.__name__
        run_stage.__doc__ = fn.__doc__
        return run_stage

    return wrap


_INVALID = {"extractor": "invalid_extractor_output", "reviewer": "invalid_review"}
_TIMING = {
    "load_transcript": "transcript_prep",
    "build_context": "transcript_prep",
    "extract": "extractor_model",
    "review": "candidate_review",
    "validate": "validation",
    "revalidate": "validation",
}


async def _model_call(fn: Callable[..., Any], *args: Any, timeout_ms: int, code: str) -> Any:
    """Run a blocking model call in a worker thread under a deadline; failures fail closed."""
    try:
        with anyio.fail_after(timeout_ms / 1000.0):
            return await anyio.to_thread.run_sync(fn, *args, abandon_on_cancel=True)
    except TimeoutError as exc:
        raise StageFailure(f"{code}_timeout", f"the {code} did not answer within {timeout_ms} ms") from exc
    except StageFailure:
        raise
    except SchemaMismatchError as exc:  # an invalid structured response, not a guess to repair
        raise StageFailure(_INVALID[code], str(exc)) from exc
    except Exception as exc:
        detail = f"{type(exc).__name__}: {exc}" if isinstance(exc, RetoldError) else type(exc).__name__
        raise StageFailure(f"{code}_error", detail) from exc


# --- claim and context ---------------------------------------------------------------------------


@_stage("claim")
async def claim(rt: Runtime, run: ExtractionRun) -> None:
    """Atomically claim the ended session; a live or finished claim means skip."""
    now = rt.clock.now()
    stale = now - timedelta(minutes=rt.config.ingestion.extraction_claim_timeout_minutes)
    async with rt.store.transaction():
        outcome = await rt.store.claim_session(run.session_id, now=now, stale_before=stale, force=run.force)
        run.claim = outcome
        if outcome.status != "claimed":
            run.skipped = outcome.status
            return
        if outcome.reclaimed:
            await rt.store.append_event(
                "extraction.reclaimed",
                run.actor,
                payload={
                    "session_id": run.session_id,
                    "previous_claim": outcome.previous_claim,
                    "claim_timeout_minutes": rt.config.ingestion.extraction_claim_timeout_minutes,
                },
            )
        if outcome.rerun:
            await rt.store.append_event(
                "extraction.rerun",
                run.actor,
                payload={"session_id": run.session_id, "extracted_at": outcome.extracted_at, "forced": True},
            )


@_stage("load_transcript")
async def load_transcript(rt: Runtime, run: ExtractionRun) -> None:
    """The session and its turns; fewer than two turns means a summary and no candidates."""
    session = await rt.store.get_session(run.session_id)
    if session is None:
        raise StageFailure("session_missing", f"session {run.session_id!r} disappeared after it was claimed")
    run.session = session
    run.principal = Principal(session.agent_id, session.user_id, session.id, session.project_id)
    run.turns = await rt.store.turns(session.id)
    run.summary_only = len(run.turns) < 2


@_stage("build_context")
async def build_context(rt: Runtime, run: ExtractionRun) -> None:
    """Destination scope, bounded readable aliases, active writable subjects and the prompt version."""
    assert run.principal is not None
    cfg = rt.config.ingestion
    principal = run.principal
    run.readable = await readable_scopes(rt.store, principal)
    writable = await writable_scopes(rt.store, principal)
    # The user's scope when the agent may write it, else the private agent:<agent>/<user> (§8.2).
    run.destination = principal.user_scope if principal.user_scope in writable else principal.private_scope
    run.context = ExtractionContext(
        principal=principal,
        known_entities=await rt.store.readable_entity_names(
            run.readable, cfg.extraction_context_max_entities
        ),
        existing_subjects=await rt.store.active_subjects(writable, cfg.extraction_context_max_subjects),
        prompt_version=_identity(rt.extractor)["prompt_version"],
    )


@_stage("extract")
async def extract(rt: Runtime, run: ExtractionRun) -> None:
    """One extractor call in a worker thread under ``extraction_timeout_ms``; its output is checked."""
    assert run.context is not None
    if not run.turns:  # nothing was said: nothing to summarise or extract
        run.output = ExtractionOutput([], None)
        return
    output = await _model_call(
        rt.extractor.extract,
        list(run.turns),
        run.context,
        timeout_ms=rt.config.ingestion.extraction_timeout_ms,
        code="extractor",
    )
    if not isinstance(output, ExtractionOutput) or not isinstance(output.candidates, list):
        raise StageFailure("invalid_extractor_output", f"the extractor returned {type(output).__name__}")
    if output.summary is not None and not _valid_summary(output.summary):
        raise StageFailure("invalid_extractor_output", "the extractor's summary is malformed")
    run.output = output
    if run.summary_only:
        run.ignored_candidates = len(output.candidates)
        return
    cap = rt.config.ingestion.extraction_max_candidates
    run.over_cap = max(0, len(output.candidates) - cap)
    for index, item in enumerate(output.candidates[:cap]):
        if not isinstance(item, CandidateRecord):
            raise StageFailure("invalid_extractor_output", f"candidate {index} is {type(item).__name__}")
        mine = copy.deepcopy(item)  # the extractor keeps no handle on what we validate
        run.candidates.append(CandidateState(index, copy.deepcopy(item), mine))


def _valid_summary(summary: object) -> bool:
    return (
        isinstance(summary, SessionSummary)
        and isinstance(summary.content, str)
        and isinstance(summary.decisions, list)
        and all(isinstance(d, str) for d in summary.decisions)
        and isinstance(summary.entity_mentions, list)
        and all(isinstance(m, EntityMention) for m in summary.entity_mentions)
    )


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


async def _envelope(rt: Runtime, run: ExtractionRun, state: CandidateState, *, code: str | None) -> bool:
    """Check fields, evidence, subject and entities; reject (with ``code`` if given) and return False.

    ``code`` replaces the reason for a revised candidate: any failure after a revision is
    the revision's fault (``invalid_review_revision``).
    """
    assert run.destination is not None and run.principal is not None
    c = state.candidate
    cfg = rt.config.ingestion

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
            rt.store, c.entity_mentions, scope=run.destination, readable=run.readable, clock=rt.clock
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
        person, candidates = await principal_entity(rt.store, run.principal, clock=rt.clock)
        if candidates:
            return reject("entity_ambiguous", alias=run.principal.user_id, candidates=candidates)
        primary = person
    assert primary is not None
    key = _entity_key(primary, await rt.store.get_entity(primary.id) is not None)
    if state.primary_key is not None and key != state.primary_key:
        return reject(
            "invalid_review_revision" if code else "entity_changed", message="primary entity changed"
        )
    state.primary_key = key
    state.primary_entity_id = primary.id
    return True


@_stage("validate")
async def validate(rt: Runtime, run: ExtractionRun) -> None:
    """The immutable envelope, before the reviewer sees anything (§8.2 step 4)."""
    for state in run.candidates:
        if await _envelope(rt, run, state, code=None):
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


@_stage("review")
async def review(rt: Runtime, run: ExtractionRun) -> None:
    """Each survivor, alone with its evidence window and same-entity live records in the destination."""
    assert run.destination is not None
    reviewer = rt.reviewer
    who = _identity(reviewer)
    cfg = rt.config.ingestion
    for state in run.candidates:
        if state.status != "valid":
            continue
        c = state.candidate
        window = [t for t in run.turns if abs(t.turn - c.evidence_turn) <= 1]
        live = []
        if state.primary_entity_id and isinstance(state.primary_key, str):
            live = await rt.store.live_records_about(
                run.destination, state.primary_entity_id, cfg.max_entity_attributes
            )
        context = ReviewContext(
            transcript_window=window,
            destination_scope=run.destination,
            primary_entity_id=state.primary_entity_id or "",
            live_records=live,
            prompt_version=who["prompt_version"],
        )
        decision = await _model_call(
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


@_stage("revalidate")
async def revalidate(rt: Runtime, run: ExtractionRun) -> None:
    """Evidence, entailment, temporal support, scope and entity again, after review (§8.2 step 6)."""
    assert run.principal is not None and run.destination is not None
    writable = await writable_scopes(rt.store, run.principal)
    floor = rt.config.ingestion.evidence.entail_floor
    person, _ = await principal_entity(rt.store, run.principal, clock=rt.clock)
    names = [run.principal.user_id, *(person.aliases if person is not None else [])]
    for state in run.candidates:
        if state.status not in ("accepted", "revised"):
            continue
        revised = state.status == "revised"
        code = "invalid_review_revision" if revised else None
        if not await _envelope(rt, run, state, code=code):
            continue
        c, turn = state.candidate, state.turn
        assert turn is not None
        if run.destination not in writable:
            state.reject("scope_not_writable", scope=str(run.destination))
            continue
        if revised:  # a revision may only narrow: the quote must still support what it says
            hypothesis = as_the_user(c.content, names) if turn.role == "user" else c.content
            score = float(
                await anyio.to_thread.run_sync(rt.judge.entails, normalize_ws(c.evidence), hypothesis)
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


# --- write and finish ----------------------------------------------------------------------------


def _summary_text(summary: SessionSummary, cap: int) -> tuple[str, bool]:
    """The summary and its decisions line, within ``summary_max_chars``; True when it was cut."""
    body = normalize_ws(summary.content)
    decisions = "; ".join(normalize_ws(d) for d in summary.decisions if d and d.strip())
    line = f"Decisions: {decisions}" if decisions else ""
    truncated = False
    if line and len(line) > cap // 2:
        line, truncated = line[: cap // 2 - 1].rstrip() + "…", True
    room = cap - (len(line) + 1 if line else 0)
    if len(body) > room:
        body, truncated = body[: max(0, room - 1)].rstrip() + "…", True
    return (f"{body}\n{line}" if line and body else body or line), truncated


def _requests(rt: Runtime, run: ExtractionRun) -> tuple[list[CandidateState], list[WriteRequest]]:
    assert run.destination is not None and run.session is not None
    writing = [s for s in run.candidates if s.status in ("accepted", "revised")]
    requests = [
        WriteRequest(
            type=s.candidate.type,
            content=s.candidate.content,
            scope=run.destination,
            source_kind=_claimed_kind(s),
            attribute=s.candidate.attribute,
            evidence=s.candidate.evidence,
            evidence_turn=s.candidate.evidence_turn,
            entities=list(s.candidate.entity_mentions),
            event_at=s.candidate.event_at,
            valid_from=s.candidate.valid_from,
            valid_until=s.candidate.valid_until,
            review_at=s.candidate.review_at,
        )
        for s in writing
    ]
    summary = run.output.summary if run.output is not None else None
    if summary is not None and summary.content.strip():
        text, run.summary_truncated = _summary_text(summary, rt.config.ingestion.summary_max_chars)
        requests.append(
            WriteRequest(
                type="episodic",
                content=text,
                scope=run.destination,
                source_kind="session_summary",
                attribute="-",
                entities=[dataclasses.replace(m, role="mentions") for m in summary.entity_mentions],
                event_at=run.session.ended_at,
                source_ref=f"session:{run.session.id}",
                trusted=True,
            )
        )
    return writing, requests


def _claimed_kind(state: CandidateState) -> str:
    """The kind to hand the ingestor: the original claim when only the turn's role lowered it.

    The ingestor then applies the same downgrade itself, so the record's event keeps the
    claimed kind and the downgrade note exactly as for an explicit write.
    """
    assert state.turn is not None
    if state.downgraded and state.candidate.source_kind == _SUPPORTED_BY_ROLE[state.turn.role]:
        return state.proposed.source_kind
    return state.candidate.source_kind


def _bucket(outcome: str | None) -> str:
    if outcome is None:
        return "rejected"
    return outcome.split(":", 1)[0]


@_stage("write")
async def write(rt: Runtime, run: ExtractionRun) -> None:
    """Plan everything (model calls), then one transaction: candidates, summary, extracted_at, event."""
    assert run.principal is not None and run.claim is not None and run.claim.claimed_at is not None
    writing, requests = _requests(rt, run)
    has_summary = len(requests) > len(writing)
    t_write = time.perf_counter()

    async def finish_in_transaction(results: list[WriteResult]) -> None:
        for state, result in zip(writing, results, strict=False):
            if result.ok:
                state.status, state.outcome, state.record_id = "written", result.outcome, result.record_id
            else:
                state.reject(result.error or "write_refused", message=result.message)
                if result.candidates:
                    state.detail["candidates"] = [c.get("entity_id") for c in result.candidates]
        if has_summary:
            run.summary_result = results[-1]
            if not results[-1].ok:
                raise StageFailure("summary_refused", f"the session summary was refused: {results[-1].error}")
        if not await rt.store.finish_session_extraction(
            run.session_id,
            claimed_at=run.claim.claimed_at,
            now=rt.clock.now(),  # type: ignore[union-attr]
        ):
            raise StageFailure("claim_lost", "another worker took over this session's expired claim")
        _collect_write_timings(run, results, has_summary)
        deciding = ("embed", "dedup_search", "judge", "supersession")
        run.timings["dedup_and_contradiction"] = round(
            sum(r.timings_ms.get(s, 0.0) for r in results for s in deciding), 3
        )
        run.timings["total"] = round((time.perf_counter() - run.t0) * 1000.0, 3)
        run.result = _result(run, "extracted")
        run.result.event_id = await rt.store.append_event(
            "extraction.run", run.actor, payload=_run_payload(rt, run, run.result)
        )

    try:
        await write_batch(
            rt.ingestor, rt.store, run.principal, requests, actor=run.actor, finish=finish_in_transaction
        )
    except BatchError as exc:
        for state in writing:
            state.status, state.outcome, state.record_id = "accepted", None, None
        raise StageFailure(
            "concurrent_change", "records this run depended on kept changing; retry later"
        ) from exc
    except BaseException:
        for state in writing:  # rolled back: nothing was written
            if state.status == "written":
                state.status, state.outcome, state.record_id = "accepted", None, None
        run.result = None
        raise
    run.timings["write"] = round((time.perf_counter() - t_write) * 1000.0, 3)


def _collect_write_timings(run: ExtractionRun, results: list[WriteResult], has_summary: bool) -> None:
    per = [round(sum(r.timings_ms.get(s, 0.0) for s in ("persistence", "event_log")), 3) for r in results]
    run.timings["writes"] = per[:-1] if has_summary else per
    run.timings["summary_write"] = per[-1] if has_summary else 0.0


def _counts(run: ExtractionRun) -> tuple[dict[str, int], dict[str, int]]:
    states = run.candidates
    outcomes = [_bucket(s.outcome) for s in states if s.status == "written"]
    reasons: dict[str, int] = {}
    for s in states:
        if s.status == "rejected" and s.reason:
            reasons[s.reason] = reasons.get(s.reason, 0) + 1
    actions = [s.review["action"] for s in states if s.review]
    counts = {
        "proposed": len(states) + run.over_cap,
        "considered": len(states),
        "over_cap": run.over_cap,
        "ignored_summary_only": run.ignored_candidates,
        "review_accepted": actions.count("accept"),
        "review_revised": actions.count("revise"),
        "review_rejected": actions.count("reject"),
        "written": sum(o in ("created", "superseded", "superseded_on_arrival", "conflict") for o in outcomes),
        "created": outcomes.count("created"),
        "reinforced": outcomes.count("reinforced"),
        "already_reinforced": outcomes.count("already_reinforced"),
        "superseded": outcomes.count("superseded"),
        "superseded_on_arrival": outcomes.count("superseded_on_arrival"),
        "conflicting": outcomes.count("conflict"),
        "rejected": sum(s.status == "rejected" for s in states),
    }
    return counts, reasons


def _candidate_report(state: CandidateState) -> dict[str, Any]:
    report: dict[str, Any] = {
        "index": state.index,
        "type": state.candidate.type,
        "status": state.status,
        "outcome": state.outcome,
        "record_id": state.record_id,
        "evidence_turn": state.proposed.evidence_turn
        if isinstance(state.proposed.evidence_turn, int)
        else None,
    }
    if state.reason:
        report["reason"] = state.reason
    if state.detail:
        report["detail"] = state.detail
    if state.review:
        report["review"] = state.review
    if state.notes:
        report["notes"] = state.notes
    if state.status == "rejected":  # kept so evaluation can measure extractor and reviewer precision
        report["content"] = state.proposed.content
        if state.candidate is not state.proposed and state.candidate.content != state.proposed.content:
            report["revised_content"] = state.candidate.content
    return report


def _result(run: ExtractionRun, status: Literal["extracted", "skipped", "failed"]) -> ExtractionResult:
    counts, reasons = _counts(run)
    summary = None
    if run.summary_result is not None:
        summary = {
            "outcome": run.summary_result.outcome,
            "record_id": run.summary_result.record_id,
            "truncated": run.summary_truncated,
        }
    claim_ = run.claim
    return ExtractionResult(
        session_id=run.session_id,
        status=status,
        reason=run.skipped if status == "skipped" else (run.failure.code if run.failure else None),
        rerun=bool(claim_ and claim_.rerun),
        reclaimed=bool(claim_ and claim_.reclaimed),
        counts=counts,
        rejection_reasons=reasons,
        candidates=[_candidate_report(s) for s in run.candidates],
        summary=summary,
        timings_ms=dict(run.timings),
    )


def _run_payload(rt: Runtime, run: ExtractionRun, result: ExtractionResult) -> dict[str, Any]:
    return {
        "session_id": run.session_id,
        "rerun": result.rerun,
        "reclaimed": result.reclaimed,
        "destination_scope": str(run.destination),
        "turns": len(run.turns),
        "summary_only": run.summary_only,
        "extractor": _identity(rt.extractor),
        "reviewer": _identity(rt.reviewer),
        "counts": result.counts,
        "rejection_reasons": result.rejection_reasons,
        "candidates": result.candidates,
        "summary": result.summary,
        "timings_ms": result.timings_ms,
        "timings_pending": ["transaction", "index_update"],
    }


async def finish(rt: Runtime, run: ExtractionRun) -> None:
    """The run's result: extracted (its event is already committed with the writes) or skipped."""
    if run.result is None:
        run.timings["total"] = round((time.perf_counter() - run.t0) * 1000.0, 3)
        run.result = _result(run, "skipped" if run.skipped else "extracted")
        return
    run.result.timings_ms = {**run.timings, "total": round((time.perf_counter() - run.t0) * 1000.0, 3)}


async def fail(rt: Runtime, run: ExtractionRun) -> None:
    """Fail closed: one ``extraction.failed`` event, no candidate or transcript content, claim kept."""
    assert run.failure is not None
    run.timings["total"] = round((time.perf_counter() - run.t0) * 1000.0, 3)
    result = _result(run, "failed")
    for report in result.candidates:  # a failed run records counts and reasons, never content
        report.pop("content", None)
        report.pop("revised_content", None)
    claimed_at = run.claim.claimed_at if run.claim else None
    timeout = rt.config.ingestion.extraction_claim_timeout_minutes
    payload = {
        "session_id": run.session_id,
        "stage": run.failed_stage,
        "error": run.failure.code,
        "message": str(run.failure),
        "rerun": result.rerun,
        "extractor": _identity(rt.extractor),
        "reviewer": _identity(rt.reviewer),
        "counts": result.counts,
        "claimed_at": claimed_at,
        "reclaimable_after": claimed_at + timedelta(minutes=timeout) if claimed_at else None,
        "timings_ms": result.timings_ms,
    }
    try:
        result.event_id = await rt.store.append_event("extraction.failed", run.actor, payload=payload)
    except Exception as exc:  # the store itself is the problem: the log line is all that is left
        logger.error(
            "extraction of %s failed (%s) and its event could not be written: %s",
            run.session_id,
            run.failure.code,
            type(exc).__name__,
        )
    run.result = result
