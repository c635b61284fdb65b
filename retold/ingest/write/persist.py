"""Writing a decided outcome (spec §8.1 step 8): one transaction, then the index update.

The record, its embedding, FTS row, entity links, conflicts, status changes and audit
events commit as one unit; the in-memory vector index learns about the committed
versions afterwards, so a rolled-back write never reaches it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import anyio
import numpy as np

from retold.config import Config
from retold.ingest.equivalence.judge import judge_identity
from retold.ingest.write.entities import materialize
from retold.ingest.write.request import (
    RETRY,
    WRITE_STAGES,
    WRITE_STAGES_PENDING,
    Plan,
    WriteRequest,
    WriteResult,
    fail,
    stage_timings,
)
from retold.ingest.write.supersession import Decision
from retold.models import EquivalenceJudge, Record, RecordSource, Resolution
from retold.policy import lifecycle
from retold.store import Store
from retold.util import Timer

__all__ = ["Persister"]


def _source(plan: Plan) -> RecordSource:
    if plan.source is None:
        raise AssertionError("a plan reaches the persister with its source (Ingestor.plan sets it)")
    return plan.source


_PENDING = list(WRITE_STAGES_PENDING)
_DONE = tuple(s for s in WRITE_STAGES if s not in WRITE_STAGES_PENDING)  # known when the event is written
_REINFORCE_FIELDS = (
    "reinforcements", "last_reinforced_at", "confidence", "status", "expires_at",
    "source_kind", "source_ref", "evidence",
)  # fmt: skip


class Persister:
    """Commits plans for the ingestor; holds nothing but its collaborators."""

    def __init__(
        self, store: Store, config: Config, *, embedder: Any, judge: EquivalenceJudge, index: Any,
        keeps_vectors: bool = True,
    ) -> None:  # fmt: skip
        self._store = store
        self._config = config
        self._embedder = embedder
        self._judge = judge
        self._index = index
        self._keeps_vectors = keeps_vectors  # False where the store searches its own vectors

    async def commit(
        self, plan: Plan, actor: str, timer: Timer, *, deferred: list[Callable[[], None]] | None = None
    ) -> WriteResult:
        """Write one plan in a transaction (a savepoint inside a caller's), then update the index.

        With ``deferred`` the index update is appended there instead, for a caller whose
        outer transaction has not committed yet (a batch must not index rolled-back rows).
        """
        decision = plan.decision
        record = plan.record
        now = record.created_at
        touched: list[tuple[str, int]] = []
        base_payload = self._payload(plan)

        if decision.action == "reinforce":
            assert decision.target is not None
            return await self.reinforce(plan, decision.target, actor, timer, base_payload, deferred=deferred)

        if decision.action == "supersede":
            record.supersedes_id = decision.target.id if decision.target else None
            if decision.target is not None:  # spec §3: the revision number along the lineage
                record.version = decision.target.version + 1
            outcome = f"superseded:{decision.target.id}"  # type: ignore[union-attr]
        elif decision.action == "superseded_on_arrival":
            record.status = "superseded"
            outcome = f"superseded_on_arrival:{decision.target.id}"  # type: ignore[union-attr]
        elif decision.action == "conflict":
            record.status = "provisional"
            record.expires_at = now + timedelta(days=self._config.ingestion.provisional_ttl_days)
            outcome = f"conflict:{decision.target.id}"  # type: ignore[union-attr]
        else:
            outcome = "created"
        if decision.adopt_attribute:
            record.attribute = decision.adopt_attribute
            record.subject = f"{record.subject_entity_id or '-'}/{decision.adopt_attribute}"

        t_tx = anyio.current_time()
        async with self._store.transaction():
            with timer("persistence"):
                links = []
                for planned, role in plan.links:
                    # A name this write introduces is the writer's words: erasure finds it by these.
                    entity = dataclasses.replace(
                        planned, origin_user=_source(plan).user_id, origin_record=record.id
                    )
                    stored = await materialize(self._store, entity, actor=actor)
                    if stored.id != entity.id and record.subject_entity_id == entity.id:
                        # Another writer created the same name meanwhile: key the fact to that one.
                        record.subject_entity_id = stored.id
                        record.subject = f"{stored.id}/{record.attribute}"
                    links.append((stored.id, role))
                if await self._target_changed(decision):
                    raise fail(RETRY, "a record this write depends on changed meanwhile; retry")
                if plan.seen_version is not None and await self._store.rival_written(
                    record, plan.seen_version
                ):
                    raise fail(RETRY, "another writer recorded the same fact meanwhile; retry")
                # Retire first: one live session summary per source_ref is a unique index (§6.2).
                superseded = []
                if decision.action == "supersede":
                    superseded = [decision.target.id, *decision.also_superseded]  # type: ignore[union-attr]
                    for old_id in superseded:
                        touched.append((old_id, await self._store.set_status(old_id, "superseded")))
                source = dataclasses.replace(_source(plan), record_id=record.id, content=record.content)
                vector = (self._embedder.name, self._embedder.version, plan.vector)
                touched.append((record.id, await self._store.insert_record(
                    record, links=links, source=source, embedding=vector, passages=plan.passages,
                )))  # fmt: skip
                if decision.action == "conflict":
                    await self._store.add_conflict(record.id, decision.target.id, now)  # type: ignore[union-attr]
            with timer("event_log"):
                payload = {
                    **base_payload,
                    "outcome": outcome,
                    "status": record.status,
                    "timings_ms": stage_timings(timer.timings_ms, _DONE),
                    "timings_pending": _PENDING,
                }  # fmt: skip
                if decision.action == "superseded_on_arrival":
                    payload["superseded_on_arrival_by"] = decision.target.id  # type: ignore[union-attr]
                await self._store.append_event("record.created", actor, record_id=record.id, payload=payload)
                for old_id in superseded:
                    await self._store.append_event(
                        "record.superseded", actor, record_id=old_id,
                        payload={"superseded_by": record.id, "also": old_id != decision.target.id,  # type: ignore[union-attr]
                                 "verdict": decision.verdict, "reason": decision.reason,
                                 "manual_revision": plan.revision_reason is not None,
                                 "judge": judge_identity(self._judge)},
                    )  # fmt: skip
        timer.timings_ms["transaction"] = max(0.0, (anyio.current_time() - t_tx) * 1000.0 - sum(
            timer.timings_ms.get(s, 0.0) for s in ("persistence", "event_log")))  # fmt: skip
        self._after_commit(timer, deferred, lambda: self._index_update(touched, plan.vector, record.id))
        return WriteResult(ok=True, outcome=outcome, record_id=record.id, status=record.status,
                           note="; ".join(plan.notes) or None, notes=plan.notes)  # fmt: skip

    async def reinforce(
        self,
        plan: Plan,
        target: Record,
        actor: str,
        timer: Timer,
        base_payload: dict[str, Any],
        *,
        deferred: list[Callable[[], None]] | None = None,
    ) -> WriteResult:
        incoming = plan.record
        t_tx = anyio.current_time()
        touched: list[tuple[str, int]] = []
        async with self._store.transaction():
            with timer("persistence"):
                current = await self._store.get_record(target.id)
                if current is None or not current.is_active:
                    raise fail(RETRY, "the record this write reinforces changed meanwhile; retry")
                # Independence is per owned source: another user's "session:s1<turn:3>" counts.
                source = _source(plan)
                counted = incoming.source_ref is not None and (
                    source.origin not in await self._store.counted_origins(current.id)
                )
                outcome = "reinforced" if counted else "already_reinforced"
                status = current.status
                # Every supporter is kept (spec §6.4 keeps only the strongest on the record
                # itself): erasing one user must not take away another's evidence.
                await self._store.add_source(
                    dataclasses.replace(source, record_id=current.id, counted=counted)
                )
                if counted:
                    updated = lifecycle.reinforce(
                        current, incoming.created_at, self._config, source_kind=incoming.source_kind,
                        source_ref=incoming.source_ref, evidence=incoming.evidence,
                    )  # fmt: skip
                    changes = {
                        k: getattr(updated, k)
                        for k in _REINFORCE_FIELDS
                        if getattr(updated, k) != getattr(current, k)
                    }  # fmt: skip
                    if "source_ref" in changes or "source_kind" in changes:
                        changes["source_origin"] = source.origin
                    touched.append((current.id, await self._store.update_record(current.id, **changes)))
                    status = updated.status
            with timer("event_log"):
                payload = {
                    **base_payload,
                    "outcome": outcome,
                    "counted": counted,
                    "source_ref": incoming.source_ref,
                    "evidence": incoming.evidence,
                    "source_kind": incoming.source_kind,
                    "status": status,
                    "timings_ms": stage_timings(timer.timings_ms, _DONE),
                    "timings_pending": _PENDING,
                }
                await self._store.append_event(
                    "record.reinforced", actor, record_id=current.id, payload=payload
                )
        timer.timings_ms["transaction"] = max(0.0, (anyio.current_time() - t_tx) * 1000.0 - sum(
            timer.timings_ms.get(s, 0.0) for s in ("persistence", "event_log")))  # fmt: skip
        self._after_commit(timer, deferred, lambda: self._index_update(touched, None, None))
        return WriteResult(ok=True, outcome=outcome, record_id=current.id, status=status,
                           note="; ".join(plan.notes) or None, notes=plan.notes)  # fmt: skip

    @staticmethod
    def _after_commit(
        timer: Timer, deferred: list[Callable[[], None]] | None, update: Callable[[], None]
    ) -> None:
        if deferred is not None:
            deferred.append(update)
            return
        with timer("index_update"):
            update()

    async def _target_changed(self, decision: Decision) -> bool:
        """Optimistic check inside the transaction: the record we decided against is still active."""
        if decision.target is None or decision.action == "create":
            return False
        current = await self._store.get_record(decision.target.id)
        return current is None or not current.is_active

    def _index_update(
        self, touched: list[tuple[str, int]], vector: np.ndarray | None, new_id_: str | None
    ) -> None:
        if not self._keeps_vectors:
            return
        for record_id, version in touched:
            vec = vector if record_id == new_id_ else self._index.vector_for(record_id)
            if vec is not None:
                self._index.upsert(record_id, vec, version)

    def _payload(self, plan: Plan) -> dict[str, Any]:
        record = plan.record
        source = _source(plan)
        payload: dict[str, Any] = {
            # Whose words these are: erasing a user or session finds its events by these.
            "agent_id": source.agent_id,
            "user_id": source.user_id,
            "session_id": source.session_id,
            "type": record.type,
            "scope": str(record.scope),
            "subject": record.subject,
            "claimed_source_kind": plan.claimed,
            "source_kind": record.source_kind,
            "source_ref": record.source_ref,
            "note": "; ".join(plan.notes) or None,
            "rule": plan.decision.rule,
            "judge": judge_identity(self._judge),
            "verdicts": [
                {
                    "record_id": j.record.id,
                    "verdict": j.verdict,
                    "reason": j.reason,
                    "cosine": round(j.cosine, 4),
                }
                for j in plan.judged
            ],
        }
        if plan.revision_reason is not None:
            payload["manual_revision"] = True
            payload["reason"] = plan.revision_reason
        if plan.evidence.entail_score is not None:
            payload["entail_score"] = round(plan.evidence.entail_score, 4)
        if plan.truncated:
            payload["attribute_scan_truncated"] = True
        if plan.decision.also_superseded:
            payload["also_superseded"] = list(plan.decision.also_superseded)
        if plan.decision.attribute_aliased_from:
            payload["attribute_aliased_from"] = plan.decision.attribute_aliased_from
        if plan.ambiguous:
            payload["ambiguous_mention"] = [r.mention.text for r in plan.ambiguous]
        return payload

    async def log_ambiguity(
        self, ambiguous: list[Resolution], actor: str, request: WriteRequest, user_id: str | None = None
    ) -> None:
        """ambiguous_alias events, appended after the write committed or was refused (spec §9).

        ``user_id`` is whose words the alias was (erasing that user scrubs the event).
        """
        for res in ambiguous:
            await self._store.append_event(
                "ambiguous_alias", actor,
                payload={"alias": res.mention.text, "kind": res.mention.kind, "role": res.mention.role,
                         "candidates": res.candidates, "scope": str(request.scope), "user_id": user_id},
            )  # fmt: skip
