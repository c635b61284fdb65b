"""One session-extraction run (spec §8.2): its state, its fail-closed stages and its result.

The store-facing stages in :mod:`retold.ingest.extraction.stages` and the candidate checks in
:mod:`retold.ingest.extraction.candidates` advance the same :class:`ExtractionRun`, fail
it the same way and report through the same :class:`ExtractionResult`. That shared core
lives here so that neither stage module has to import the other.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

import anyio
import anyio.to_thread

from retold.errors import RetoldError, StoreError
from retold.hosted import SchemaMismatchError
from retold.ingest.write.request import WriteResult
from retold.models import (
    CandidateRecord,
    ExtractionContext,
    ExtractionOutput,
    Principal,
    Scope,
    SessionInfo,
    SessionKey,
    Turn,
)

if TYPE_CHECKING:
    from retold.config import Config
    from retold.ingest.write.ingestor import Ingestor
    from retold.store import Store
    from retold.store.extraction import SessionClaim
    from retold.util import Clock

__all__ = [
    "EXTRACTION_ACTOR",
    "STAGE_NAMES",
    "CandidateState",
    "ExtractionResult",
    "ExtractionRun",
    "ExtractionServices",
    "Stage",
    "StageFailure",
    "model_call",
    "model_identity",
    "reporting_stages",
    "run_result",
    "shares_the_result",
    "stage",
]

# One logger for all of session extraction, whichever module a stage lives in.
logger = logging.getLogger("retold.ingest.extraction.stages")

EXTRACTION_ACTOR = "extractor"

Status = Literal["proposed", "valid", "accepted", "revised", "rejected", "written"]
Outcome = Literal["extracted", "skipped", "failed"]


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
    status: Outcome
    reason: str | None = None
    agent_id: str | None = None  # the session's owner: its id alone is not unique
    user_id: str | None = None
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

    key: SessionKey
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

    @property
    def session_id(self) -> str:
        return self.key.session_id

    def add_time(self, stage: str, since: float) -> None:
        self.timings[stage] = round(self.timings.get(stage, 0.0) + (time.perf_counter() - since) * 1000.0, 3)


@dataclass(frozen=True, slots=True)
class ExtractionServices:
    """What the extraction stages use, and nothing else: the runtime builds one per run."""

    config: Config
    store: Store
    clock: Clock
    ingestor: Ingestor  # the write path every candidate goes through
    judge: Any  # the equivalence judge the candidate checks ask
    extractor: Any
    reviewer: Any


Stage = Callable[[ExtractionServices, ExtractionRun], Awaitable[None]]
"""A stage as the graph calls it: it advances the run in place and reports failure on it."""

STAGE_NAMES = (
    "claim", "load_transcript", "build_context", "extract", "validate", "review", "revalidate", "write",
)  # fmt: skip
"""The stages in the order a run goes through them. The extraction graph pairs each with its
function (:data:`retold.graph_nodes.extraction.STAGES`, which checks it follows this order)."""

# Stages whose time the extraction.run event reports under the spec's name (§8.2).
_TIMING = {
    "load_transcript": "transcript_prep",
    "build_context": "transcript_prep",
    "extract": "extractor_model",
    "review": "candidate_review",
    "validate": "validation",
    "revalidate": "validation",
}
_INVALID = {"extractor": "invalid_extractor_output", "reviewer": "invalid_review"}

# Told the name of each stage that finishes without failing, inside reporting_stages.
_stage_done: ContextVar[Callable[[str], None] | None] = ContextVar("retold_stage_done", default=None)


@contextmanager
def reporting_stages(progress: Callable[[int, int], None]) -> Iterator[None]:
    """``progress(stages done, stages in all)`` for the extraction runs inside the block.

    For callers of ``rt.extract_session``, which builds its run itself. The stages are
    :data:`STAGE_NAMES` (the graph's), counted as each one finishes without failing; a
    skipped or failed run stops short of the total.
    """
    names = list(STAGE_NAMES)
    token = _stage_done.set(lambda name: progress(names.index(name) + 1, len(names)))
    try:
        progress(0, len(names))
        yield
    finally:
        _stage_done.reset(token)


def model_identity(model: Any) -> dict[str, str]:
    """Name, model and prompt version, so events say which model decided, whatever object it is."""
    return {
        "name": str(getattr(model, "name", None) or type(model).__name__),
        "model": str(getattr(model, "model", None) or "unknown"),
        "prompt_version": str(getattr(model, "prompt_version", None) or "unversioned"),
    }


def stage(name: str) -> Callable[[Stage], Stage]:
    """Time a stage and turn any exception into a fail-closed :class:`StageFailure`."""

    def wrap(fn: Stage) -> Stage:
        async def run_stage(services: ExtractionServices, run: ExtractionRun) -> None:
            t = time.perf_counter()
            try:
                await fn(services, run)
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
            done = _stage_done.get()
            if done is not None and not run.failed:
                done(name)

        run_stage.__name__ = fn.__name__
        run_stage.__doc__ = fn.__doc__
        return run_stage

    return wrap


async def model_call(fn: Callable[..., Any], *args: Any, timeout_ms: int, code: str) -> Any:
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


# --- the result ----------------------------------------------------------------------------------


def _bucket(outcome: str | None) -> str:
    if outcome is None:
        return "rejected"
    return outcome.split(":", 1)[0]


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


def run_result(run: ExtractionRun, status: Outcome) -> ExtractionResult:
    """The run as its caller and its event see it: counts, rejection reasons, per-candidate reports."""
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
        agent_id=run.key.agent_id,
        user_id=run.key.user_id,
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


def shares_the_result(result: ExtractionResult | None, *, force: bool) -> bool:
    """Whether a call that waited on an in-flight run of the same session returns that run's result.

    The run in flight holds the session's claim, so running again beside it could only answer
    ``claimed_by_other``. The waiting call takes the result, unless the run ended without one
    (cancelled, or an error escaped it: the caller then runs itself and the claim decides) or
    the caller forces a re-run and the run it waited on found the session already extracted.
    """
    if result is None:
        return False
    return not (force and result.status == "skipped" and result.reason == "already_extracted")
