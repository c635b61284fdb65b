"""Several candidates written as one unit through the ingestor (spec §8.2 "atomicity").

Session extraction writes every candidate, the session summary and ``extracted_at`` in
one transaction, so a failure during the write phase leaves the store as it was, and
no hosted call happens while the write lock is held. :func:`write_batch` does that
with the ingestor's own rules instead of a copy of them:

1. **Plan** every request with :meth:`Ingestor.plan` — validation, evidence, entities,
   embedding, the judge: all model work — before any transaction opens. An
   :class:`~retold.ingest.write.overlay.Overlay` carries what the earlier plans will have
   done (records created, records retired, entities planned), so a later candidate about
   the same fact is decided against the earlier one exactly as it would be after it committed.
2. **Commit** the plans in order inside one transaction (each a savepoint), then run the
   caller's ``finish`` inside the same transaction, and update the in-memory vector
   index only after the commit.

If another writer changed a record a plan depended on, the whole batch rolls back and
is planned once more, as :meth:`Ingestor.write` does for one record.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from contextlib import AsyncExitStack
from typing import TYPE_CHECKING

from retold.ingest.write.overlay import Overlay
from retold.ingest.write.request import (
    RETRY,
    Plan,
    Refused,
    WriteRequest,
    WriteResult,
    stage_timings,
    written_by,
)
from retold.ingest.write.sources import source_user
from retold.models import Principal
from retold.util import Timer

if TYPE_CHECKING:
    from retold.ingest.write.ingestor import Ingestor
    from retold.store import Store

__all__ = ["BatchError", "Overlay", "write_batch"]

Finish = Callable[[list[WriteResult]], Awaitable[None]]


class BatchError(Exception):
    """The batch could not commit (a concurrent change twice); nothing was written."""

    def __init__(self, result: WriteResult) -> None:
        super().__init__(result.message)
        self.result = result


async def write_batch(
    ingestor: Ingestor,
    store: Store,
    principal: Principal,
    requests: Sequence[WriteRequest],
    *,
    actor: str,
    finish: Finish | None = None,
) -> tuple[list[WriteResult], list[Timer]]:
    """Plan every request, then commit them and ``finish`` in one transaction.

    Returns one result per request (a refused request keeps its structured error and
    writes nothing) and the per-request timers. An exception from ``finish`` or the
    store rolls everything back and propagates; a second concurrent change raises
    :class:`BatchError`.
    """
    scopes = sorted({r.scope for r in requests}, key=str)
    for attempt in (1, 2):
        timers = [Timer() for _ in requests]
        planned: list[Plan | Refused] = []
        try:
            async with AsyncExitStack() as locks:
                for scope in scopes:  # a fixed order: two batches never wait on each other
                    await locks.enter_async_context(ingestor.scope_lock(scope))
                overlay = Overlay()
                for request, timer in zip(requests, timers, strict=True):
                    try:
                        plan = await ingestor.plan(principal, request, timer, overlay=overlay)
                    except Refused as refused:
                        planned.append(refused)
                        continue
                    overlay.add(plan)
                    planned.append(plan)
                results, deferred = await _commit(ingestor, store, planned, timers, actor, finish)
        except Refused as refused:
            if refused.result.error == RETRY and attempt == 1:
                continue  # another writer changed what a plan depended on: plan everything again
            raise BatchError(refused.result) from refused
        for update in deferred:
            update()
        for item, request in zip(planned, requests, strict=True):
            ambiguous = item.ambiguous
            if ambiguous:
                user = source_user(principal, trusted=request.trusted)
                await ingestor.persister.log_ambiguity(ambiguous, actor, request, user)
        if ingestor.activation is not None:  # after the commit, as for a single write (spec §8.2)
            user = source_user(principal, trusted=False)
            written = [
                None if isinstance(item, Refused) else written_by(item, request, user)
                for item, request in zip(planned, requests, strict=True)
            ]
            await ingestor.activation.after_writes(results, written, actor)
        return results, timers
    raise AssertionError("unreachable")  # pragma: no cover


async def _commit(
    ingestor: Ingestor,
    store: Store,
    planned: list[Plan | Refused],
    timers: list[Timer],
    actor: str,
    finish: Finish | None,
) -> tuple[list[WriteResult], list[Callable[[], None]]]:
    deferred: list[Callable[[], None]] = []
    results: list[WriteResult] = []
    async with store.transaction():
        for item, timer in zip(planned, timers, strict=True):
            if isinstance(item, Refused):
                result = item.result
            else:
                result = await ingestor.persister.commit(item, actor, timer, deferred=deferred)
            result.timings_ms = stage_timings(timer.timings_ms)
            result.timings_ms["total"] = round(timer.total(), 3)
            results.append(result)
        if finish is not None:
            await finish(results)
    return results, deferred
