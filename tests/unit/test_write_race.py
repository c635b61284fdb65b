"""Two processes deciding the same fact at once: the second decision is made again, not duplicated.

A write decides (dedup, supersession) before its transaction and commits after; another
process may commit the same fact in between. Found by the 4-process test on PostgreSQL
(three live copies of one shared sentence): the optimistic check inside the transaction
only covered decisions that name a target record, not "create". Two runtimes on one store
stand in for the two processes.
"""

from __future__ import annotations

from pathlib import Path

import pytest

import retold
from retold.ingest.write.request import RETRY, Refused, WriteRequest
from retold.models import Scope
from retold.testing import FakeEmbedder, FakeJudge
from retold.util import Timer

from .writepath import World

USER = Scope("user", "u1")


def fact(content: str) -> WriteRequest:
    return WriteRequest(
        type="semantic", content=content, scope=USER, source_kind="system", attribute="office", trusted=True
    )


async def test_a_create_decided_before_another_process_wrote_the_same_fact_is_decided_again(
    world: World, store_path: Path | str
) -> None:
    other = await retold.open_runtime(
        store_path, embedder=FakeEmbedder(), judge=FakeJudge(), clock=world.clock
    )
    try:
        plan = await world.rt.ingestor.plan(world.p, fact("The team office is in Lisbon."), Timer())
        assert plan.decision.action == "create"
        theirs = await other.ingestor.write(world.p, fact("The team office is in Lisbon."))
        assert theirs.ok and theirs.outcome == "created"
        with pytest.raises(Refused) as refused:
            await world.rt.ingestor.persister.commit(plan, "planner", Timer())
        assert refused.value.result.error == RETRY
        again = await world.rt.ingestor.write(world.p, fact("The team office is in Lisbon."))
        assert again.ok and again.record_id == theirs.record_id  # reinforced, not duplicated
        live = [r for r in await world.rt.store.records_in_scope(USER) if r.attribute == "office"]
        assert [r.id for r in live] == [theirs.record_id]
    finally:
        await other.close()


async def test_a_new_value_decided_before_another_process_wrote_one_keeps_one_live_value(
    world: World, store_path: Path | str
) -> None:
    other = await retold.open_runtime(
        store_path, embedder=FakeEmbedder(), judge=FakeJudge(), clock=world.clock
    )
    try:
        plan = await world.rt.ingestor.plan(world.p, fact("The team office is in Porto."), Timer())
        await other.ingestor.write(world.p, fact("The team office moved to Lisbon."))
        with pytest.raises(Refused):
            await world.rt.ingestor.persister.commit(plan, "planner", Timer())
        result = await world.rt.ingestor.write(world.p, fact("The team office is in Porto."))
        assert result.ok
        live = [r for r in await world.rt.store.records_in_scope(USER) if r.attribute == "office"]
        assert len(live) == 1 or result.outcome.startswith("conflict"), [(r.content, r.status) for r in live]
    finally:
        await other.close()
