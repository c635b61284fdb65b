"""Activation after a write commits (spec §8.2, §11): the ambient/conditional decision, applied.

The rules live in :mod:`retold.policy.activation` (pure); this module reads what they need
from the store, records the decision with its event, opens review items for borderline
claims, and applies a person's decisions (``retold reviews resolve``, ``retold activation``)
after the same eligibility checks. Every path fails closed: a record is ``conditional``
unless a decision that passed every check says otherwise, and an error here never undoes
the write it follows (it appends ``record.activation_skipped`` instead).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Literal, Protocol, runtime_checkable

from retold.config.policy import ActivationConfig
from retold.errors import InvalidArgumentError, NotFoundError
from retold.ingest.write.voice import read_voice
from retold.models import Record
from retold.policy.activation import (
    EVIDENCE_REASONS,
    ActivationFacts,
    decide_activation,
    eligibility,
    read_claim,
)
from retold.store import Store
from retold.store.activation import ActivationRow, EvidenceTurn
from retold.util import Clock

if TYPE_CHECKING:
    from retold.ingest.write.request import WriteResult, Written
    from retold.ingest.write.revision import Reviser

__all__ = [
    "ActivationChange", "ActivationClassifier", "ActivationService", "Resolution", "ReviewOutcome",
    "owner_matches",
]  # fmt: skip

log = logging.getLogger(__name__)

Resolution = Literal["promote", "conditional", "reject"]
NOT_SEMANTIC = "conditional: only semantic records can be ambient"


@runtime_checkable
class ActivationClassifier(Protocol):
    """A model that proposes a category for a claim the rules could not place (never decides)."""

    def propose(self, content: str, evidence: str | None) -> str | None: ...


@dataclass(frozen=True)
class ActivationChange:
    """What ``retold activation`` did."""

    record_id: str
    previous: str
    activation: str
    changed: bool
    reason: str


@dataclass(frozen=True)
class ReviewOutcome:
    """What resolving one review item did."""

    review_id: str
    record_id: str
    resolution: str
    activation: str
    record_status: str


def owner_matches(record: Record, user_id: str) -> bool:
    """Whether ``user_id``'s own words may make ``record`` ambient where it is stored.

    A user scope or a private agent scope belongs to one user: only that user's turns count.
    A shared scope (project, org) takes the writer's own words, which the evidence is.
    """
    if record.scope.kind == "user":
        return record.scope.id == user_id
    if record.scope.is_private:
        return record.scope.id.rsplit("/", 1)[1] == user_id
    return True


class ActivationService:
    """Decides and records activation for one store; shared by every writer in the process."""

    def __init__(
        self,
        store: Store,
        config: ActivationConfig,
        clock: Clock,
        *,
        classifier: ActivationClassifier | None = None,
        reviser: Reviser | None = None,
    ) -> None:
        self._store = store
        self._config = config
        self._clock = clock
        self._classifier = classifier
        self._reviser = reviser

    # --- after a write ----------------------------------------------------------------------

    async def after_writes(
        self, results: Sequence[WriteResult], written: Sequence[Written | None], actor: str
    ) -> None:
        """Decide each landed write's activation and put it on its result; never raises."""
        for result, planned in zip(results, written, strict=True):
            await self.after_write(result, planned, actor)

    async def after_write(self, result: WriteResult, written: Written | None, actor: str) -> None:
        """One landed write: its result gets ``activation`` and ``activation_reason``.

        ``written`` is what the write path planned, when the caller has it: an episodic or
        procedural write then costs nothing, and a new record is decided without a read. A
        policy error leaves the write standing and appends ``record.activation_skipped``;
        the record stays conditional.
        """
        if not result.ok or result.record_id is None:
            return
        if written is not None and written.record.type != "semantic":
            result.activation, result.activation_reason = "conditional", NOT_SEMANTIC
            return
        try:
            if written is not None and written.record.id == result.record_id:  # a new record
                record = written.record
                verified = written.evidence_user is not None and owner_matches(record, written.evidence_user)
                facts = _facts(record, verified)
                decided = await self._apply(record, facts, None, actor)
            else:
                decided = await self.decide(result.record_id, actor)
            result.activation, result.activation_reason = decided
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # the write stands; the record stays conditional
            log.warning("activation policy failed for %s: %s", result.record_id, exc, exc_info=True)
            result.activation = "conditional"
            result.activation_reason = f"conditional: activation skipped ({type(exc).__name__})"
            try:
                await self._store.append_event(
                    "record.activation_skipped", actor, record_id=result.record_id,
                    payload={"error": type(exc).__name__, "message": str(exc)[:200]},
                )  # fmt: skip
            except Exception:
                log.exception("could not record activation_skipped for %s", result.record_id)

    async def decide(self, record_id: str, actor: str) -> tuple[str, str]:
        """Run the policy on one committed record; record a changed decision with its event.

        A person's decision (a resolved review, ``retold activation``) is kept: the policy
        never overrides it for the same record. Returns ``(activation, reason)``.
        """
        record = await self._store.get_record(record_id)
        if record is None:
            raise NotFoundError(f"no record {record_id!r}")
        if record.type != "semantic":
            return "conditional", NOT_SEMANTIC
        previous = (await self._store.activation_of([record.id])).get(record.id)
        if previous is not None and previous.decided_by != "policy":
            return previous.activation, previous.reason
        return await self._apply(record, await self._facts(record), previous, actor)

    async def _apply(
        self, record: Record, facts: ActivationFacts, previous: ActivationRow | None, actor: str
    ) -> tuple[str, str]:
        """Decide, and record the decision when it changes anything (a new record's conditional does not)."""
        proposed = await self._proposal(record)
        decision = decide_activation(facts, self._config, proposed_category=proposed)
        current = previous.activation if previous is not None else "conditional"
        if current == decision.activation and not decision.review:
            return decision.activation, previous.reason if previous is not None else decision.reason
        async with self._store.transaction():
            now = self._clock.now()
            if previous is None or current != decision.activation:
                await self._record_decision(
                    record, decision.activation, previous, category=decision.category,
                    reason=decision.reason, by="policy", actor=actor, at=now,
                )  # fmt: skip
            if decision.review:
                review_id = await self._store.open_activation_review(
                    record, category=decision.category, reason=decision.reason, at=now
                )
                if review_id is not None:
                    await self._store.append_event(
                        "activation.review_opened", actor, record_id=record.id,
                        payload={
                            "review_id": review_id, "category": decision.category, "reason": decision.reason,
                        },
                    )  # fmt: skip
        return decision.activation, decision.reason

    async def _facts(self, record: Record) -> ActivationFacts:
        """The policy's facts, the evidence read back from the store (sources and turns).

        The evidence counts as verified only in a user turn of its owner, and only where it is
        that user's own words in the turn as stored, checked again now (issue 45): a record
        written before the check existed, quoting a mail the user pasted, cannot be made
        ambient by the policy or a person's promotion.
        """
        owner = None
        if record.source_kind == "user_statement":
            for source in await self._store.user_evidence_turns(record.id):
                if _own_words(source):
                    owner = source.user_id
                    break
        return _facts(record, owner is not None and owner_matches(record, owner))

    async def _proposal(self, record: Record) -> str | None:
        """A model classifier's category for a claim the rules could not place (config ``model``)."""
        if self._config.classifier != "model" or self._classifier is None:
            return None
        if read_claim(record.content).category is not None:
            return None
        classifier = self._classifier
        try:
            proposed = await asyncio.to_thread(classifier.propose, record.content, record.evidence)
        except Exception as exc:
            log.warning("activation classifier failed for %s: %s", record.id, exc)
            return None
        return proposed if isinstance(proposed, str) else None

    # --- a person's decisions -----------------------------------------------------------------

    async def set_activation(
        self, record_id: str, activation: str, *, resolver: str, reason: str
    ) -> ActivationChange:
        """``retold activation``: promote or demote one record, promotion after the eligibility checks.

        Raises :class:`InvalidArgumentError` naming the failed check; nothing changes then.
        An open review item for the record is resolved by the same decision.
        """
        if activation not in ("ambient", "conditional"):
            raise InvalidArgumentError(f"activation must be ambient or conditional, not {activation!r}")
        _require_text("resolver", resolver)
        _require_text("reason", reason)
        record = await self._store.get_record(record_id)
        if record is None:
            raise NotFoundError(f"no record {record_id!r}")
        previous = (await self._store.activation_of([record.id])).get(record.id)
        category = await self._checked_category(record, previous.category if previous else None, activation)
        before = previous.activation if previous else "conditional"
        async with self._store.transaction():
            now = self._clock.now()
            await self._record_decision(
                record, activation, previous, category=category, reason=reason, by="operator",
                actor=resolver, at=now, resolver=resolver,
            )  # fmt: skip
            for item in await self._store.activation_reviews(record_id=record.id):
                resolution = "promote" if activation == "ambient" else "conditional"
                if await self._store.close_activation_review(
                    item.id, resolution=resolution, resolver=resolver, note=reason, at=now
                ):
                    await self._store.append_event(
                        "activation.review_resolved", resolver, record_id=record.id,
                        payload={"review_id": item.id, "resolution": resolution, "resolver": resolver,
                                 "via": "retold activation"},
                    )  # fmt: skip
        return ActivationChange(record.id, before, activation, before != activation, reason)

    async def recheck_ambient(self, *, actor: str) -> list[ActivationChange]:
        """Demote every ambient record whose evidence no longer passes the evidence checks.

        For records made ambient before the user's own words were told apart from material
        they quoted (issue 45): each ambient record's evidence is read again in its turn, and
        one that is not verified in its owner's own words becomes conditional, whoever made
        it ambient (a person's promotion relied on the same check). Other reasons a record
        would not be promoted today (a category no longer promotable) are not this sweep's
        business and leave it as it is. Returns what changed.
        """
        _require_text("actor", actor)
        changes: list[ActivationChange] = []
        for record_id in await self._store.ambient_record_ids():
            record = await self._store.get_record(record_id)
            if record is None or record.type != "semantic":
                continue
            try:
                why = eligibility(await self._facts(record), self._config)
            except Exception as exc:  # past the evidence checks: the claim reader failed, keep it
                log.warning("activation re-check could not read %s: %s", record.id, exc)
                continue
            if why not in EVIDENCE_REASONS:
                continue
            previous = (await self._store.activation_of([record.id])).get(record.id)
            reason = f"conditional: {why} (re-checked)"
            async with self._store.transaction():
                await self._record_decision(
                    record, "conditional", previous, category=previous.category if previous else None,
                    reason=reason, by="policy", actor=actor, at=self._clock.now(),
                )  # fmt: skip
            changes.append(ActivationChange(record.id, "ambient", "conditional", True, reason))
        return changes

    async def resolve_review(
        self, ref: str, resolution: str, *, resolver: str, note: str | None = None
    ) -> ReviewOutcome:
        """``retold reviews resolve``: promote, keep conditional, or reject (forget) the record.

        ``reject`` says the memory itself is wrong: the record is forgotten through the same
        path as ``memory_forget``. Promotion applies the eligibility checks first.
        """
        if resolution not in ("promote", "conditional", "reject"):
            raise InvalidArgumentError(f"--as must be promote, conditional or reject, not {resolution!r}")
        _require_text("resolver", resolver)
        items = await self._store.activation_review(ref)
        if not items:
            raise NotFoundError(f"no review item {ref!r}")
        if len(items) > 1:
            raise InvalidArgumentError(f"{ref!r} names {len(items)} review items; give the full id")
        item = items[0]
        if item.status != "open":
            raise InvalidArgumentError(
                f"review {item.id} was already resolved as {item.resolution} by {item.resolver}"
            )
        record = await self._store.get_record(item.record_id)
        if record is None:
            raise NotFoundError(f"review {item.id} names no record")
        activation = "ambient" if resolution == "promote" else "conditional"
        category = await self._checked_category(record, item.category, activation)
        if resolution == "reject" and record.is_active:
            if self._reviser is None:
                raise RuntimeError("this ActivationService cannot forget records (no reviser)")
            await self._reviser.forget(
                record.id, reason=f"rejected in activation review {item.id} by {resolver}", actor=resolver
            )
        async with self._store.transaction():
            now = self._clock.now()
            if not await self._store.close_activation_review(
                item.id, resolution=resolution, resolver=resolver, note=note, at=now
            ):
                raise InvalidArgumentError(f"review {item.id} was resolved by someone else meanwhile")
            previous = (await self._store.activation_of([record.id])).get(record.id)
            reason = note or f"review {resolution} by {resolver}"
            await self._record_decision(
                record, activation, previous, category=category, reason=reason, by="review",
                actor=resolver, at=now, resolver=resolver, review_id=item.id,
            )  # fmt: skip
            await self._store.append_event(
                "activation.review_resolved", resolver, record_id=record.id,
                payload={"review_id": item.id, "resolution": resolution, "resolver": resolver},
            )  # fmt: skip
        status = "deleted" if resolution == "reject" else record.status
        return ReviewOutcome(item.id, record.id, resolution, activation, status)

    async def _record_decision(
        self,
        record: Record,
        activation: str,
        previous: ActivationRow | None,
        *,
        category: str | None,
        reason: str,
        by: str,
        actor: str,
        at: datetime,
        **who: str,
    ) -> None:
        """The decision's row and its ``record.activation_decided`` event, in the caller's transaction."""
        await self._store.set_activation(
            record, activation, category=category, reason=reason, decided_by=by, actor=actor, at=at
        )
        await self._store.append_event(
            "record.activation_decided", actor, record_id=record.id,
            payload={
                "activation": activation, "previous": previous.activation if previous else None,
                "category": category, "reason": reason, "by": by, **who,
            },
        )  # fmt: skip

    async def _checked_category(self, record: Record, known: str | None, activation: str) -> str | None:
        """The category a promotion uses, after every eligibility check (raises when one fails).

        A failure of the policy itself (a text the claim reader cannot read) is a refusal
        naming it, not a traceback: a promotion fails closed with nothing changed, and a
        demotion, which is always safe, goes ahead with the category it already had.
        """
        try:
            category = known or read_claim(record.content).category
        except Exception as exc:
            if activation == "ambient":
                raise _policy_failed(record, exc) from exc
            log.warning("activation policy could not read %s: %s", record.id, exc, exc_info=True)
            category = known
        if activation != "ambient":
            return category
        facts = await self._facts(record)
        try:
            why = eligibility(facts, self._config)
        except Exception as exc:
            raise _policy_failed(record, exc) from exc
        if why is None and category not in self._config.promotable_categories:
            why = f"category {category or 'unknown'} is not promotable"
        if why is not None:
            raise InvalidArgumentError(f"record {record.id} cannot be ambient: {why}")
        return category


def _policy_failed(record: Record, exc: Exception) -> InvalidArgumentError:
    """The refusal for a promotion the policy could not decide: content-free, naming the failure."""
    log.warning("activation policy failed for %s: %s", record.id, exc, exc_info=True)
    return InvalidArgumentError(
        f"record {record.id} cannot be ambient: the activation policy could not read it "
        f"({type(exc).__name__}); nothing changed"
    )


def _own_words(source: EvidenceTurn) -> bool:
    """Whether a source's evidence is its user's own words in its turn (issue 45).

    A retained transcript keeps the turn row but blanks its text: the evidence is then judged
    on its own (its quotation marks, headers and lead-ins), the most that is left to read;
    the record got its ``user_statement`` from the write path's check of the whole turn.
    """
    evidence = source.evidence
    if not evidence or not evidence.strip():
        return False
    if not source.content.strip():
        return read_voice(evidence, evidence).own
    return read_voice(source.content, evidence).own


def _facts(record: Record, evidence_verified: bool) -> ActivationFacts:
    return ActivationFacts(
        type=record.type, status=record.status, content=record.content, evidence=record.evidence,
        source_kind=record.source_kind, evidence_verified=evidence_verified,
        valid_until=record.valid_until, expires_at=record.expires_at,
    )  # fmt: skip


def _require_text(name: str, value: object) -> None:
    if not isinstance(value, str) or not value.strip():
        raise InvalidArgumentError(f"{name} must be a non-empty string")
