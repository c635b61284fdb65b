"""Shared set-up for the write-path tests: a runtime on fakes, a provisioned user, a session."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import retold
from retold.ingest.write.ingestor import WriteRequest, WriteResult
from retold.models import EntityMention, Principal, Record, Scope, SessionKey
from retold.testing import FakeClock, FakeEmbedder, FakeJudge

USER = Scope("user", "u1")


@dataclass
class World:
    rt: retold.Runtime
    judge: FakeJudge
    clock: FakeClock
    p: Principal

    async def say(self, role: str, content: str) -> int:
        """Append a turn to the principal's session and return its number."""
        self.p = await self.rt.hooks.on_turn(self.p, role, content)
        turns = await self.rt.store.turns(SessionKey.of(self.p))
        return turns[-1].turn

    async def write(self, content: str, **fields: Any) -> WriteResult:
        entities = [
            e if isinstance(e, EntityMention) else EntityMention(*e) for e in fields.pop("entities", [])
        ]
        request = WriteRequest(
            type=fields.pop("type", "semantic"),
            content=content,
            scope=fields.pop("scope", USER),
            source_kind=fields.pop("source_kind", "user_statement"),
            attribute=fields.pop("attribute", "answer_style"),
            entities=entities,
            **fields,
        )
        return await self.rt.ingestor.write(self.p, request)

    async def record(self, record_id: str | None) -> Record:
        assert record_id is not None
        return await self.rt.store.require_record(record_id)

    async def events(self, kind: str | None = None, record_id: str | None = None) -> list[dict[str, Any]]:
        return await self.rt.store.events(kind=kind, record_id=record_id)


async def make_world(
    path: Any, judge: FakeJudge | None = None, config: retold.Config | None = None, **models: Any
) -> World:
    """``models`` go to open_runtime (``rewriter=``, ``extractor=``...): hosted ones need no key then."""
    clock = FakeClock()
    judge = judge or FakeJudge()
    rt = await retold.open_runtime(path, config, embedder=FakeEmbedder(), judge=judge, clock=clock, **models)
    await rt.host.provision_user("u1", aliases=["Aditya"])
    await rt.host.grant("planner", USER, read=True, write=True)
    p = await rt.hooks.on_session_start(Principal("planner", "u1", "s1"))
    return World(rt, judge, clock, p)
