"""Session extraction (spec §8.2) as plain async stages over one :class:`ExtractionRun`.

``claim`` → ``load_transcript`` → ``build_context`` → ``extract`` → ``validate`` →
``review`` → ``revalidate`` → ``write`` → ``finish``, with ``fail`` reachable from
every stage. :mod:`retold.graph_nodes.extraction` wires them into a compiled LangGraph
graph; each stage is testable without it. This module holds the stages that talk to the
store and the extractor and re-exports the rest, so it stays the one place to import
them from: the candidate checks (``validate``, ``review``, ``revalidate``) live in
:mod:`retold.ingest.extraction.candidates`, the run's state and result in
:mod:`retold.ingest.extraction.run`.

The rules that make extraction safe:

* **One worker per session.** ``claim`` is an atomic conditional update; a live claim
  is never taken over, an expired unfinished one is (``extraction.reclaimed``), and an
  extracted session runs again only when forced (``extraction.rerun``).
* **Nothing untrusted reaches the reviewer or the store unchecked.** See
  :mod:`retold.ingest.extraction.candidates`.
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
from datetime import timedelta
from typing import Any

from retold.ingest.extraction.candidates import revalidate, review, validate
from retold.ingest.extraction.run import (
    CandidateState,
    ExtractionResult,
    ExtractionRun,
    ExtractionServices,
    StageFailure,
    model_call,
    model_identity,
    run_result,
    stage,
)
from retold.ingest.write.batch import BatchError, write_batch
from retold.ingest.write.evidence import supported_kind
from retold.ingest.write.request import WriteRequest, WriteResult
from retold.models import (
    CandidateRecord,
    EntityMention,
    ExtractionContext,
    ExtractionOutput,
    Principal,
    SessionSummary,
)
from retold.policy.grants import readable_scopes, writable_scopes
from retold.util import normalize_ws

__all__ = [
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


# --- claim and context ---------------------------------------------------------------------------


@stage("claim")
async def claim(services: ExtractionServices, run: ExtractionRun) -> None:
    """Atomically claim the ended session; a live or finished claim means skip."""
    now = services.clock.now()
    stale = now - timedelta(minutes=services.config.ingestion.extraction_claim_timeout_minutes)
    async with services.store.transaction():
        outcome = await services.store.claim_session(run.key, now=now, stale_before=stale, force=run.force)
        run.claim = outcome
        if outcome.status != "claimed":
            run.skipped = outcome.status
            return
        if outcome.reclaimed:
            await services.store.append_event(
                "extraction.reclaimed",
                run.actor,
                payload={
                    **_owner(run),
                    "previous_claim": outcome.previous_claim,
                    "claim_timeout_minutes": services.config.ingestion.extraction_claim_timeout_minutes,
                },
            )
        if outcome.rerun:
            await services.store.append_event(
                "extraction.rerun",
                run.actor,
                payload={**_owner(run), "extracted_at": outcome.extracted_at, "forced": True},
            )


@stage("load_transcript")
async def load_transcript(services: ExtractionServices, run: ExtractionRun) -> None:
    """The session and its turns; fewer than two turns means a summary and no candidates."""
    session = await services.store.get_session(run.key)
    if session is None:
        raise StageFailure("session_missing", f"session {str(run.key)!r} disappeared after it was claimed")
    run.session = session
    run.principal = Principal(session.agent_id, session.user_id, session.id, session.project_id)
    run.turns = await services.store.turns(session.key)
    run.summary_only = len(run.turns) < 2


@stage("build_context")
async def build_context(services: ExtractionServices, run: ExtractionRun) -> None:
    """Destination scope, bounded readable aliases, active writable subjects and the prompt version."""
    assert run.principal is not None
    cfg = services.config.ingestion
    principal = run.principal
    run.readable = await readable_scopes(services.store, principal)
    writable = await writable_scopes(services.store, principal)
    # The user's scope when the agent may write it, else the private agent:<agent>/<user> (§8.2).
    run.destination = principal.user_scope if principal.user_scope in writable else principal.private_scope
    run.context = ExtractionContext(
        principal=principal,
        known_entities=await services.store.readable_entity_names(
            run.readable, cfg.extraction_context_max_entities
        ),
        existing_subjects=await services.store.active_subjects(writable, cfg.extraction_context_max_subjects),
        prompt_version=model_identity(services.extractor)["prompt_version"],
    )


@stage("extract")
async def extract(services: ExtractionServices, run: ExtractionRun) -> None:
    """One extractor call in a worker thread under ``extraction_timeout_ms``; its output is checked."""
    assert run.context is not None
    if not run.turns:  # nothing was said: nothing to summarise or extract
        run.output = ExtractionOutput([], None)
        return
    output = await model_call(
        services.extractor.extract,
        list(run.turns),
        run.context,
        timeout_ms=services.config.ingestion.extraction_timeout_ms,
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
    cap = services.config.ingestion.extraction_max_candidates
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


def _requests(
    services: ExtractionServices, run: ExtractionRun
) -> tuple[list[CandidateState], list[WriteRequest]]:
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
        text, run.summary_truncated = _summary_text(summary, services.config.ingestion.summary_max_chars)
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
    """The kind to hand the ingestor: the original claim when only evidence validation lowered it.

    Validation lowers a claim to what its quote supports: the turn's role, or ``tool_result``
    for material quoted inside a user turn (:func:`~retold.ingest.write.evidence.supported_kind`).

    The ingestor then applies the same downgrade itself, so the record's event keeps the
    claimed kind and the downgrade note exactly as for an explicit write.
    """
    assert state.turn is not None
    supported = supported_kind(state.turn, state.candidate.evidence or "")
    if state.downgraded and state.candidate.source_kind == supported:
        return state.proposed.source_kind
    return state.candidate.source_kind


@stage("write")
async def write(services: ExtractionServices, run: ExtractionRun) -> None:
    """Plan everything (model calls), then one transaction: candidates, summary, extracted_at, event."""
    assert run.principal is not None and run.claim is not None and run.claim.claimed_at is not None
    writing, requests = _requests(services, run)
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
        if not await services.store.finish_session_extraction(
            run.key,
            claimed_at=run.claim.claimed_at,
            now=services.clock.now(),  # type: ignore[union-attr]
        ):
            raise StageFailure("claim_lost", "another worker took over this session's expired claim")
        _collect_write_timings(run, results, has_summary)
        deciding = ("embed", "dedup_search", "judge", "supersession")
        run.timings["dedup_and_contradiction"] = round(
            sum(r.timings_ms.get(s, 0.0) for r in results for s in deciding), 3
        )
        run.timings["total"] = round((time.perf_counter() - run.t0) * 1000.0, 3)
        run.result = run_result(run, "extracted")
        run.result.event_id = await services.store.append_event(
            "extraction.run", run.actor, payload=_run_payload(services, run, run.result)
        )

    try:
        await write_batch(
            services.ingestor,
            services.store,
            run.principal,
            requests,
            actor=run.actor,
            finish=finish_in_transaction,
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


def _owner(run: ExtractionRun) -> dict[str, str]:
    """The session as its events name it: erasing a user or a session finds them by these."""
    return {"session_id": run.key.session_id, "agent_id": run.key.agent_id, "user_id": run.key.user_id}


def _run_payload(
    services: ExtractionServices, run: ExtractionRun, result: ExtractionResult
) -> dict[str, Any]:
    return {
        **_owner(run),
        "rerun": result.rerun,
        "reclaimed": result.reclaimed,
        "destination_scope": str(run.destination),
        "turns": len(run.turns),
        "summary_only": run.summary_only,
        "extractor": model_identity(services.extractor),
        "reviewer": model_identity(services.reviewer),
        "counts": result.counts,
        "rejection_reasons": result.rejection_reasons,
        "candidates": result.candidates,
        "summary": result.summary,
        "timings_ms": result.timings_ms,
        "timings_pending": ["transaction", "index_update"],
    }


async def finish(services: ExtractionServices, run: ExtractionRun) -> None:
    """The run's result: extracted (its event is already committed with the writes) or skipped."""
    if run.result is None:
        run.timings["total"] = round((time.perf_counter() - run.t0) * 1000.0, 3)
        run.result = run_result(run, "skipped" if run.skipped else "extracted")
        return
    run.result.timings_ms = {**run.timings, "total": round((time.perf_counter() - run.t0) * 1000.0, 3)}


async def fail(services: ExtractionServices, run: ExtractionRun) -> None:
    """Fail closed: one ``extraction.failed`` event, no candidate or transcript content, claim kept."""
    assert run.failure is not None
    run.timings["total"] = round((time.perf_counter() - run.t0) * 1000.0, 3)
    result = run_result(run, "failed")
    for report in result.candidates:  # a failed run records counts and reasons, never content
        report.pop("content", None)
        report.pop("revised_content", None)
    claimed_at = run.claim.claimed_at if run.claim else None
    timeout = services.config.ingestion.extraction_claim_timeout_minutes
    payload = {
        **_owner(run),
        "stage": run.failed_stage,
        "error": run.failure.code,
        "message": str(run.failure),
        "rerun": result.rerun,
        "extractor": model_identity(services.extractor),
        "reviewer": model_identity(services.reviewer),
        "counts": result.counts,
        "claimed_at": claimed_at,
        "reclaimable_after": claimed_at + timedelta(minutes=timeout) if claimed_at else None,
        "timings_ms": result.timings_ms,
    }
    try:
        result.event_id = await services.store.append_event("extraction.failed", run.actor, payload=payload)
    except Exception as exc:  # the store itself is the problem: the log line is all that is left
        logger.error(
            "extraction of %s failed (%s) and its event could not be written: %s",
            run.session_id,
            run.failure.code,
            type(exc).__name__,
        )
    run.result = result
