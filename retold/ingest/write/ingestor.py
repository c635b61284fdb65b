"""The write path (spec §8.1 steps 3–9, §6.3, §6.4): one candidate in, one audited outcome out.

Every writer — the memory_write tool, session extraction, the host's trusted APIs
and bulk import — goes through :meth:`Ingestor.write`, so evidence, entities,
duplicates, contradictions and lifecycle follow one set of rules. Model calls
(embedding, judge) run in worker threads before the write transaction opens; the
transaction then writes the record, its embedding, FTS row, entity links, conflicts
and events as one unit, and the in-memory vector index is updated after it commits.

One job: the write path's decision for one candidate; it is long because each step of spec
§8.1 (validation, evidence, entities, embedding, dedup and supersession, the retry after a
concurrent write) is a step of that one decision, shared by single and batched writes.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Awaitable, Callable
from datetime import datetime
from typing import TYPE_CHECKING, Any

import anyio
import numpy as np

from retold.config import Config
from retold.errors import InvalidArgumentError, NotFoundError
from retold.index.passages import split_passages
from retold.ingest.equivalence.judge import decide
from retold.ingest.write.entities import principal_entity, resolve_entities
from retold.ingest.write.evidence import EvidenceOutcome, assess_evidence
from retold.ingest.write.persist import Persister
from retold.ingest.write.request import (
    RETRY,
    WRITE_STAGES,
    Plan,
    Refused,
    Revision,
    WriteRequest,
    WriteResult,
    Written,
    fail,
    stage_timings,
    written_by,
)
from retold.ingest.write.sources import source_for, source_user
from retold.ingest.write.supersession import Decision, Judged, decide_current_fact, scan_window
from retold.models import (
    RECORD_TYPES,
    SOURCE_KINDS,
    Entity,
    EntityMention,
    EquivalenceJudge,
    Principal,
    Record,
    Resolution,
    Scope,
    SessionKey,
)
from retold.policy import lifecycle
from retold.policy.grants import readable_scopes, writable_scopes
from retold.store import Store
from retold.util import Clock, Timer, new_id, normalize_attribute, normalize_ws

if TYPE_CHECKING:
    from retold.ingest.activation import ActivationService
    from retold.ingest.write.overlay import Overlay

__all__ = ["Ingestor", "WriteRequest", "WriteResult"]

STAGES = WRITE_STAGES  # the write path's stages, defined once in retold.ingest.write.request


WRITE_ATTEMPTS = 4
"""Decisions made again when another process wrote the same fact meanwhile (then ``retry``)."""


class Ingestor:
    """Runs the write path for one store; shared by every writer in the process."""

    def __init__(
        self,
        store: Store,
        config: Config,
        clock: Clock,
        *,
        embedder: Any,
        judge: EquivalenceJudge,
        index: Any,
        dense: Any = None,
        activation: ActivationService | None = None,
    ) -> None:
        from retold.index.dense import InProcessDense

        self._store = store
        self._config = config
        self._clock = clock
        self._embedder = embedder
        self._judge = judge
        self._index = index
        # Where the duplicate checks find nearby records and judged vectors (retold.index.dense).
        self._dense = dense or InProcessDense(index, store, config.embedding.incremental_reload_max)
        self._persist = Persister(
            store,
            config,
            embedder=embedder,
            judge=judge,
            index=index,
            keeps_vectors=self._dense.keeps_vectors,
        )
        # Decide-then-write must not interleave for one scope, or two copies of one fact
        # could both decide "create". Other scopes proceed in parallel.
        self._locks: dict[Scope, asyncio.Lock] = {}
        # Decides each landed semantic write's activation after its commit (spec §11).
        self.activation = activation

    async def write(
        self, principal: Principal, request: WriteRequest, *, actor: str | None = None
    ) -> WriteResult:
        """Validate, decide and persist one candidate; never raises on bad input."""
        return await self._run(
            request.scope, request, actor or principal.agent_id,
            lambda timer: self._plan(principal, request, timer),
            source_user(principal, trusted=request.trusted),
        )  # fmt: skip

    async def revise(
        self, principal: Principal, target: Record, revision: Revision, *, actor: str | None = None
    ) -> WriteResult:
        """Supersede an active record with new content (memory_revise ``supersede``, spec §11).

        The revision goes through the evidence path of a write, must hold authority over the
        record it replaces (§6.3: an unevidenced inference cannot displace a user statement),
        and inherits its subject, attribute, tags and entity links with their roles.
        """
        request = WriteRequest(
            type=target.type, content=revision.content, scope=target.scope,
            source_kind=revision.source_kind, evidence=revision.evidence,
            evidence_turn=revision.evidence_turn, tags=list(target.tags),
        )  # fmt: skip
        return await self._run(
            target.scope, request, actor or principal.agent_id,
            lambda timer: self._plan_revision(principal, target.id, request, revision.reason, timer),
            principal.user_id,
        )  # fmt: skip

    async def _run(
        self,
        scope: Scope,
        request: WriteRequest,
        actor: str,
        planner: Callable[[Timer], Awaitable[Plan]],
        user_id: str | None,
    ) -> WriteResult:
        timer = Timer()
        ambiguous: list[Resolution] = []
        written: Written | None = None
        lock = self.scope_lock(scope)
        for attempt in range(1, WRITE_ATTEMPTS + 1):
            try:
                async with lock:
                    plan = await planner(timer)
                    ambiguous = plan.ambiguous
                    result = await self._persist.commit(plan, actor, timer)
                    written = written_by(plan, request, user_id)
                break
            except Refused as refused:
                result = refused.result
                ambiguous = refused.ambiguous or ambiguous
                # Another process changed the record we decided against: decide once more.
                if result.error != RETRY or attempt == WRITE_ATTEMPTS:
                    break
        await self._persist.log_ambiguity(ambiguous, actor, request, user_id)
        if self.activation is not None:
            with timer("activation"):
                await self.activation.after_write(result, written, actor)
        result.timings_ms = stage_timings(timer.timings_ms)
        result.timings_ms["total"] = round(timer.total(), 3)
        return result

    # --- before the transaction ---------------------------------------------------------------

    async def plan(
        self, principal: Principal, request: WriteRequest, timer: Timer, *, overlay: Overlay | None = None
    ) -> Plan:
        """Validate and decide one candidate without writing (raises :class:`Refused`).

        The first half of a write: every model call (embedding, judge) happens here, so a
        caller can plan several candidates and commit them in one transaction afterwards
        (:mod:`retold.ingest.write.batch`). ``overlay`` carries the effects of earlier plans of
        the same batch, so a later candidate is decided against them too.
        """
        return await self._plan(principal, request, timer, overlay=overlay)

    def scope_lock(self, scope: Scope) -> asyncio.Lock:
        """The lock that keeps decide-then-write for ``scope`` from interleaving in this process."""
        return self._locks.setdefault(scope, asyncio.Lock())

    @property
    def persister(self) -> Persister:
        return self._persist

    async def _plan(
        self, principal: Principal, request: WriteRequest, timer: Timer, *, overlay: Overlay | None = None
    ) -> Plan:
        content = request.content.strip() if isinstance(request.content, str) else ""
        if not content:
            raise fail("invalid_input", "content must be non-blank text")
        if request.type not in RECORD_TYPES:
            raise fail("invalid_input", f"type must be one of {', '.join(RECORD_TYPES)}")
        malformed = _malformed(request)
        if malformed:
            raise fail("invalid_input", malformed)
        now = self._clock.now()
        notes: list[str] = []

        with timer("permission"):
            if request.trusted:  # the host writes into the scope it names and resolves names there
                readable = list(dict.fromkeys([request.scope, principal.user_scope]))
            else:
                readable = await readable_scopes(self._store, principal)
            if not request.trusted and request.scope not in await writable_scopes(self._store, principal):
                raise fail("scope_not_writable", f"this session cannot write to {request.scope}")

        with timer("evidence"):
            evidence = await self._evidence(principal, request, content)
            if evidence.note:
                notes.append(evidence.note)

        with timer("entities"):
            links, primary, ambiguous = await self._entities(principal, request, readable, notes)
            if overlay is not None:  # one new name planned by two candidates becomes one entity
                links, primary = await overlay.share_entities(self._store, links, primary)

        attribute = self._attribute(request)
        kind = evidence.source_kind
        record = Record(
            id=new_id(),
            type=request.type,
            version=1,
            content=content,
            subject=f"{primary.id if primary else '-'}/{attribute}",
            subject_entity_id=primary.id if primary else None,
            attribute=attribute,
            scope=request.scope,
            source_kind=kind,  # type: ignore[arg-type]
            source_ref=evidence.source_ref,
            creator_agent_id=principal.agent_id,
            evidence=evidence.evidence,
            created_at=now,
            event_at=request.event_at or now,
            expires_at=lifecycle.initial_expiry(kind, now, self._config),
            valid_from=request.valid_from,
            valid_until=request.valid_until,
            review_at=request.review_at,
            review_flagged_at=None,
            confidence=lifecycle.initial_confidence(kind),
            status=lifecycle.initial_status(kind),  # type: ignore[arg-type]
            supersedes_id=None,
            reinforcements=0,
            last_reinforced_at=None,
            tags=[t for t in dict.fromkeys(request.tags) if isinstance(t, str) and t.strip()],
            entity_ids=[e.id for e, _ in links],
        )

        source = source_for(record, principal, trusted=request.trusted)
        with timer("embed"):
            vector, passages = await self._embed(content)

        # A batch's later candidates are decided against its earlier ones through the overlay.
        seen = None if overlay is not None else await self._store.records_version()
        decision, judged, truncated = await self._decide(record, vector, timer, overlay, origin=source.origin)
        return Plan(record, vector, evidence, request.source_kind, links, decision, judged, truncated,
                     notes, ambiguous, source=source, seen_version=seen, passages=passages)  # fmt: skip

    async def _plan_revision(
        self, principal: Principal, target_id: str, request: WriteRequest, reason: str, timer: Timer
    ) -> Plan:
        content = request.content.strip() if isinstance(request.content, str) else ""
        if not content:
            raise fail("invalid_input", "content must be non-blank text")
        target = await self._store.get_record(target_id)  # re-read: it may have changed meanwhile
        if target is None or not target.is_active:
            status = target.status if target else "gone"
            raise fail("invalid_input", f"record {target_id} is {status}: history cannot be revised")
        with timer("permission"):
            if target.scope not in await writable_scopes(self._store, principal):
                raise fail("scope_not_writable", f"this session cannot write to {target.scope}")
        notes: list[str] = []
        with timer("evidence"):
            evidence = await self._evidence(principal, request, content)
            if evidence.note:
                notes.append(evidence.note)
        now = self._clock.now()
        kind = evidence.source_kind
        with timer("entities"):
            links: list[tuple[Entity, str]] = []
            for entity_id, role in await self._store.record_links(target.id):
                entity = await self._store.follow_merges(entity_id)
                if entity is not None and entity.id not in {e.id for e, _ in links}:
                    links.append((entity, role))
        links.sort(key=lambda pair: (pair[1] != "about", pair[0].id != target.subject_entity_id))
        record = dataclasses.replace(
            target,
            id=new_id(),
            version=target.version + 1,
            content=content,
            source_kind=kind,  # type: ignore[arg-type]
            source_ref=evidence.source_ref,
            creator_agent_id=principal.agent_id,
            evidence=evidence.evidence,
            created_at=now,
            event_at=now,
            expires_at=lifecycle.initial_expiry(kind, now, self._config),
            review_flagged_at=None,
            confidence=lifecycle.initial_confidence(kind),
            status=lifecycle.initial_status(kind),  # type: ignore[arg-type]
            supersedes_id=target.id,
            reinforcements=0,
            last_reinforced_at=None,
            tags=list(target.tags),
            entity_ids=[e.id for e, _ in links],
            index_version=0,
        )
        if not lifecycle.has_authority(record, target, self._config):
            raise fail(
                "invalid_input",
                f"a revision with source_kind {kind} cannot replace a {target.source_kind} record "
                "(spec §6.3 authority); "
                "quote the user's words from this session as evidence, or leave the record as it is",
            )
        with timer("embed"):
            vector, passages = await self._embed(content)
        decision = Decision("supersede", target, "manual_revision", reason=reason)
        return Plan(record, vector, evidence, request.source_kind, links, decision, [], False, notes, [],
                    revision_reason=reason, source=source_for(record, principal, trusted=False),
                    passages=passages)  # fmt: skip

    async def _embed(self, content: str) -> tuple[np.ndarray, np.ndarray | None]:
        """The claim's vector, and a long claim's passage vectors (retold.index.passages; None
        for a short one), in one model call; from the judge's batch when it embeds with the
        same model.

        The evidence check has usually embedded the claim already (spec §8.1: a write's
        budget is one embedding), so the index's vector is then a cache hit, not a model call.
        """
        texts = [content, *split_passages(content, self._config.embedding.passage_chars)]
        judge = self._judge
        if getattr(judge, "embedder", None) is self._embedder and hasattr(judge, "vectors"):
            vectors = await anyio.to_thread.run_sync(judge.vectors, texts)
        else:
            vectors = await anyio.to_thread.run_sync(self._embedder.embed_documents, texts)
        rows = np.asarray(vectors, dtype=np.float32).reshape(len(texts), -1)
        return rows[0], (rows[1:] if len(texts) > 1 else None)

    async def _evidence(self, principal: Principal, request: WriteRequest, content: str) -> EvidenceOutcome:
        if request.trusted:
            if request.source_kind not in SOURCE_KINDS:
                raise fail("invalid_source_kind", f"source_kind must be one of {', '.join(SOURCE_KINDS)}")
            if request.source_kind == "session_summary" and not request.source_ref:
                raise fail("invalid_input", "a session_summary write needs its session's source_ref")
            quote = normalize_ws(request.evidence) if request.evidence else None
            return EvidenceOutcome(request.source_kind, request.source_ref, quote, None, None, None)
        if request.source_kind not in ("user_statement", "tool_result", "agent_inference"):
            raise fail(
                "invalid_source_kind",
                f"source_kind {request.source_kind!r} is reserved for the host and the extractor",
            )
        # Only the principal's own session: another principal's "s1" is not this one's transcript.
        turns = await self._store.turns(SessionKey.of(principal)) if principal.session_id else []
        person, _ = await principal_entity(self._store, principal, clock=self._clock)
        names = [principal.user_id, *(person.aliases if person is not None else [])]
        return await assess_evidence(
            turns=turns,
            session_id=principal.session_id,
            content=content,
            quote=request.evidence,
            claimed=request.source_kind,
            turn_hint=request.evidence_turn,
            judge=self._judge,
            config=self._config,
            speaker_names=names,
        )

    async def _entities(
        self, principal: Principal, request: WriteRequest, readable: list[Scope], notes: list[str]
    ) -> tuple[list[tuple[Entity, str]], Entity | None, list[Resolution]]:
        try:
            resolutions = await resolve_entities(
                self._store, request.entities, scope=request.scope, readable=readable, clock=self._clock
            )
        except NotFoundError as exc:
            raise fail("not_found", str(exc)) from exc
        except InvalidArgumentError as exc:
            raise fail("invalid_input", str(exc)) from exc
        ambiguous = [r for r in resolutions if r.outcome == "ambiguous"]
        about_ambiguous = [r for r in ambiguous if r.mention.role == "about"]
        if about_ambiguous:
            result = WriteResult(
                ok=False,
                error="entity_ambiguous",
                message=f"{about_ambiguous[0].mention.text!r} names more than one entity; retry with one "
                "entity_id from candidates or ask the user which one is meant",
                candidates=await self._candidates(about_ambiguous[0].candidates),
            )
            raise Refused(result, ambiguous)
        for res in ambiguous:
            notes.append(f"ambiguous_mention: {res.mention.text!r} was not linked")
        links: list[tuple[Entity, str]] = []
        for res in resolutions:
            if res.entity is not None and res.entity.id not in {e.id for e, _ in links}:
                links.append((res.entity, res.mention.role))
        abouts = [e for e, role in links if role == "about"]
        primary = abouts[0] if abouts else None
        if primary is None:
            primary = await self._principal_primary(principal, request)
            if primary is not None and primary.id not in {e.id for e, _ in links}:
                links.insert(0, (primary, "about"))
        # The primary entity's link comes first: the first about link is the primary (§9).
        links.sort(key=lambda pair: (pair[1] != "about", pair[0].id != (primary.id if primary else None)))
        return links, primary, ambiguous

    async def _principal_primary(self, principal: Principal, request: WriteRequest) -> Entity | None:
        """A subject-less write resolves to the principal's person entity (spec §8.1 step 5, §9.1)."""
        in_user_scope = request.scope == principal.user_scope
        if request.type in ("semantic", "procedural") and not in_user_scope:
            raise fail("invalid_subject", "about entity required")
        entity, candidates = await principal_entity(self._store, principal, clock=self._clock)
        if candidates:
            raise fail(
                "entity_ambiguous",
                f"more than one person entity carries user {principal.user_id!r}; merge them first",
                candidates=await self._candidates(candidates),
            )
        assert entity is not None
        exists = await self._store.get_entity(entity.id) is not None
        if not exists and not in_user_scope:
            # An episodic record outside the user scope may not create the person entity there.
            return None
        return entity

    def _attribute(self, request: WriteRequest) -> str:
        if request.type == "episodic":
            slug = normalize_attribute(request.attribute) if request.attribute else "-"
            return slug or "-"
        if request.attribute is None or not request.attribute.strip():
            raise fail("invalid_subject", "attribute required for semantic and procedural memories")
        slug = normalize_attribute(request.attribute)
        if not slug or slug == "-":
            raise fail("invalid_subject", "attribute normalizes to nothing")
        return slug

    async def _candidates(self, entity_ids: list[str]) -> list[dict[str, Any]]:
        out = []
        for entity_id in entity_ids:
            entity = await self._store.get_entity(entity_id)
            if entity is not None:
                out.append(
                    {"entity_id": entity.id, "kind": entity.kind, "canonical": entity.canonical,
                     "scope": str(entity.scope)}
                )  # fmt: skip
        return out

    async def _decide(
        self, record: Record, vector: np.ndarray, timer: Timer, overlay: Overlay | None = None, *, origin: str
    ) -> tuple[Decision, list[Judged], bool]:
        cfg = self._config.ingestion
        judged: list[Judged] = []
        truncated = False
        retired = overlay.retired if overlay is not None else set()

        if record.source_kind == "session_summary":
            return await self._summary_decision(record, overlay, origin), judged, truncated

        # Identical content from the same evidence is the same claim, judge or no judge; the
        # same evidence means the same owned source, not just the same session id and turn.
        if record.source_ref is not None:
            same_ref = await self._store.live_records_with_origin(record.scope, origin)
            if overlay is not None:
                same_ref = [r for r in same_ref if r.id not in retired] + overlay.with_origin(origin)
            for existing in same_ref:
                if (existing.scope == record.scope and existing.type == record.type
                        and normalize_ws(existing.content) == record.content):  # fmt: skip
                    return Decision("reinforce", existing, "identical", verdict="same"), judged, truncated

        # The judged cosines below read the index, so it catches up first with every committed
        # write: another process's, or one of ours whose in-process update a cancellation
        # during its COMMIT skipped. Unrefreshed, such a record would be judged at cosine 0.
        with timer("dedup_search"):
            await self._dense.catch_up()
        scanned: list[Record] = []
        if record.type in ("semantic", "procedural") and record.subject_entity_id is not None:
            with timer("dedup_search"):
                window, same_attribute, truncated = await self._store.subject_scan(
                    record.scope, record.type, record.subject_entity_id, record.attribute or "",
                    cfg.max_entity_attributes,
                )  # fmt: skip
                if overlay is not None:
                    planned = overlay.about(record.scope, record.type, record.subject_entity_id)
                    window = [r for r in window if r.id not in retired] + planned
                    same_attribute = [r for r in same_attribute if r.id not in retired] + [
                        r for r in planned if r.attribute == record.attribute
                    ]
                scanned = scan_window(window, same_attribute, self._config)
            judged = await self._judge_all(record, vector, scanned, timer, overlay)
            with timer("supersession"):
                decision = decide_current_fact(record, judged, self._config)
            if decision is not None:
                return decision, judged, truncated

        with timer("dedup_search"):
            seen = {r.id for r in scanned}
            # Records about the same entity were judged in the attribute scan above.
            about = record.subject_entity_id if record.type != "episodic" else None
            hits = await self._dense.nearby(
                vector,
                record.scope,
                record.type,
                now=self._clock.now(),
                exclude=seen | retired,
                about=about,
                k=10,
            )
            nearby_ids = [rid for rid, cos in hits if cos >= cfg.dedup_candidate_cosine]
            nearby = await self._store.get_records(nearby_ids)
            if overlay is not None:
                nearby += overlay.nearby(record.scope, record.type, vector, cfg.dedup_candidate_cosine, seen)
        near_judged = await self._judge_all(record, vector, nearby, timer, overlay)
        judged += near_judged
        for item in sorted(near_judged, key=lambda j: -j.cosine):
            if item.verdict == "same":
                return (
                    Decision("reinforce", item.record, "nearby", verdict="same", reason=item.reason),
                    judged,
                    truncated,
                )
        return Decision("create"), judged, truncated

    async def _summary_decision(self, record: Record, overlay: Overlay | None, origin: str) -> Decision:
        """A session summary only ever meets an earlier summary of its own session (spec §6.2).

        Its source (``session:<id>`` of its owner) is its idempotency key: identical text
        reinforces (a re-run reports ``already_reinforced``), different text supersedes so the
        history remains, and no judge or nearby search is consulted.
        """
        assert record.source_ref is not None
        retired = overlay.retired if overlay is not None else set()
        live = [r for r in await self._store.live_session_summaries(origin) if r.id not in retired]
        if overlay is not None:
            live += [r for r in overlay.with_origin(origin) if r.source_kind == "session_summary"]
        if not live:
            return Decision("create")
        current = live[-1]
        if normalize_ws(current.content) == normalize_ws(record.content):
            return Decision("reinforce", current, "identical", verdict="same")
        return Decision("supersede", current, "session_summary", reason="the session was summarised again")

    async def _judge_all(
        self, record: Record, vector: np.ndarray, others: list[Record], timer: Timer,
        overlay: Overlay | None = None,
    ) -> list[Judged]:  # fmt: skip
        if not others:
            return []
        cosines = []
        stored = await self._dense.vectors([o.id for o in others])
        for other in others:
            other_vec = stored.get(other.id)
            if other_vec is None and overlay is not None:
                other_vec = overlay.vector_for(other.id)
            cosines.append(float(np.dot(vector, other_vec)) if other_vec is not None else 0.0)

        def run() -> list[tuple[str, str | None]]:
            prefetch = getattr(self._judge, "prefetch", None)
            if prefetch is not None:  # every text to compare in one model call, not one per pair
                prefetch([record.content, *(o.content for o in others)])
            out = []
            for other in others:
                verdict = decide(self._judge, other.content, record.content)
                out.append((verdict.verdict, verdict.reason))
            return out

        with timer("judge"):
            verdicts = await anyio.to_thread.run_sync(run)
        return [Judged(o, v, r, c) for o, (v, r), c in zip(others, verdicts, cosines, strict=True)]

    # --- the transaction -----------------------------------------------------------------------


_TEXT_FIELDS = ("attribute", "evidence", "source_ref")
_TIME_FIELDS = ("event_at", "valid_from", "valid_until", "review_at")


def _malformed(request: WriteRequest) -> str | None:
    """What is wrong with a request's field types (hosts build requests by hand), or None."""
    if not isinstance(request.scope, Scope):
        return "scope must be a retold.Scope"
    for name in _TEXT_FIELDS:
        if not isinstance(getattr(request, name), str | None):
            return f"{name} must be text or None"
    for name in _TIME_FIELDS:
        if not isinstance(getattr(request, name), datetime | None):
            return f"{name} must be a datetime or None"
    turn = request.evidence_turn
    if turn is not None and (isinstance(turn, bool) or not isinstance(turn, int)):
        return "evidence_turn must be an integer or None"
    if not isinstance(request.entities, list | tuple) or not all(
        isinstance(e, EntityMention) for e in request.entities
    ):
        return "entities must be a list of retold.EntityMention"
    if not isinstance(request.tags, list | tuple):
        return "tags must be a list of text"
    return None
