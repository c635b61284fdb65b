"""Shared set-up for the extraction tests: a runtime on fakes with an extractor and a reviewer."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import retold
from retold.ingest.extraction.run import ExtractionResult
from retold.models import (
    CandidateRecord,
    EntityMention,
    ExtractionOutput,
    Principal,
    Record,
    Scope,
    SessionKey,
    SessionSummary,
)
from retold.testing import FakeClock, FakeEmbedder, FakeExtractor, FakeJudge, FakeReviewer

USER = Scope("user", "u1")
PRIVATE = Scope("agent", "planner/u1")
SUMMARY = SessionSummary(
    "The user asked for shorter answers. We agreed on a format.", ["use bullet lists"], []
)


def cand(content: str, evidence: str, turn: int, **fields: Any) -> CandidateRecord:
    """A semantic user-statement candidate about the user's answer style, unless overridden."""
    mentions = [m if isinstance(m, EntityMention) else EntityMention(*m) for m in fields.pop("entities", [])]
    return CandidateRecord(
        type=fields.pop("type", "semantic"),
        content=content,
        attribute=fields.pop("attribute", "answer_style"),
        source_kind=fields.pop("source_kind", "user_statement"),
        evidence=evidence,
        evidence_turn=turn,
        entity_mentions=mentions,
        **fields,
    )


@dataclass
class XWorld:
    rt: retold.Runtime
    clock: FakeClock
    judge: FakeJudge
    extractor: FakeExtractor
    reviewer: FakeReviewer
    p: Principal

    async def say(self, role: str, content: str) -> int:
        self.p = await self.rt.hooks.on_turn(self.p, role, content)
        return (await self.rt.store.turns(SessionKey.of(self.p)))[-1].turn

    def propose(self, *candidates: CandidateRecord, summary: SessionSummary | None = SUMMARY) -> None:
        self.extractor.output = ExtractionOutput(list(candidates), summary)

    async def end(self) -> None:
        """End the session without the hooks (nothing scheduled): tests run extraction themselves."""
        assert self.p.session_id is not None
        await self.rt.store.end_session(SessionKey.of(self.p), self.clock.now())

    async def extract(self, **kwargs: Any) -> ExtractionResult:
        assert self.p.session_id is not None
        return await self.rt.extract_session(self.p.session_id, **kwargs)

    async def records(self, scope: Scope = USER, *, all_statuses: bool = False) -> list[Record]:
        statuses = ("provisional", "confirmed", "superseded", "expired") if all_statuses else None
        if statuses:
            return await self.rt.store.records_in_scope(scope, statuses=statuses)
        return await self.rt.store.records_in_scope(scope)

    async def events(self, kind: str) -> list[dict[str, Any]]:
        return await self.rt.store.events(kind=kind)

    async def session(self) -> Any:
        return await self.rt.store.get_session(SessionKey.of(self.p))


async def make_xworld(
    path: Any,
    *,
    config: retold.Config | None = None,
    judge: FakeJudge | None = None,
    reviewer: Any = None,
    extractor: Any = None,
    grant_user: bool = True,
) -> XWorld:
    clock = FakeClock()
    judge = judge or FakeJudge()
    extractor = extractor or FakeExtractor()
    reviewer = reviewer or FakeReviewer()
    rt = await retold.open_runtime(
        path,
        config,
        embedder=FakeEmbedder(),
        judge=judge,
        clock=clock,
        extractor=extractor,
        reviewer=reviewer,
    )
    await rt.host.provision_user("u1", aliases=["Aditya"])
    if grant_user:
        await rt.host.grant("planner", USER, read=True, write=True)
    p = await rt.hooks.on_session_start(Principal("planner", "u1", "s1"))
    return XWorld(rt, clock, judge, extractor, reviewer, p)
