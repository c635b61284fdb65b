"""Property: the ambient profile holds exactly what its principal may read, a project's only inside it.

Random records in every kind of scope (users, projects, an org, shared and private agent
scopes), every status, some past their expiry or validity, marked ambient straight in the
store (so the property covers rows the policy would never write), random grants straight in
the store, and a random principal with or without a project: ``rt.profile(p)`` shows every
live ambient record in a scope ``p`` reads, and none other; a project's only while
``p.project_id`` is that project.
"""

from __future__ import annotations

import asyncio
import tempfile
from datetime import timedelta
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import retold
from retold.config import Config
from retold.models import Grant, Principal, Scope
from retold.policy.grants import scope_admits_principal
from retold.retrieve.render import short_id
from retold.testing import FakeClock, FakeEmbedder, FakeJudge

from .factories import build_record
from .slow import examples

AGENTS = ["a1", "a2"]
USERS = ["u1", "u2", "u3"]
PROJECTS = ["p1", "p2", "p1/sub"]
LIVE = ("provisional", "confirmed")


def _scopes() -> st.SearchStrategy[Scope]:
    return st.one_of(
        st.builds(Scope, st.just("user"), st.sampled_from(USERS)),
        st.builds(Scope, st.just("project"), st.sampled_from(PROJECTS)),
        st.builds(Scope, st.just("org"), st.just("acme")),
        st.builds(Scope, st.just("agent"), st.sampled_from(AGENTS)),
        st.builds(lambda a, u: Scope("agent", f"{a}/{u}"), st.sampled_from(AGENTS), st.sampled_from(USERS)),
    )


def _mostly(common: object, *rare: object) -> st.SearchStrategy[object]:
    """``common`` three times in four: most records are ambient, live and semantic, so most
    examples have a profile to check, and every way out of it still comes up."""
    return st.one_of(st.just(common), st.just(common), st.just(common), st.sampled_from(rare))


record_specs = st.lists(
    st.tuples(
        _scopes(),
        _mostly("confirmed", "provisional", "superseded", "expired", "deleted"),
        _mostly("ambient", "conditional", None),  # None: no activation row at all
        _mostly("live", "expired", "invalid"),  # past expires_at / past valid_until
        _mostly("semantic", "episodic"),
        _mostly(True, False),  # the principal's agent is granted read on the record's scope
    ),
    min_size=1,
    max_size=12,
)
grant_specs = st.lists(st.tuples(st.sampled_from(AGENTS), _scopes(), _mostly(True, False)), max_size=10)


async def scenario(
    path: Path, records: list[Any], grants: list[Any], agent: str, user: str, project: str | None
) -> None:
    clock = FakeClock()
    config = Config().override({"activation.profile_max_tokens": 100_000})  # the budget leaves nothing out
    async with retold.open_runtime(
        path, config, embedder=FakeEmbedder(64), judge=FakeJudge(), clock=clock
    ) as rt:
        store = rt.store
        held: dict[tuple[str, Scope], bool] = {}  # the last grant row per (agent, scope) is the one held
        extra = [(agent, spec[0], True) for spec in records if spec[5]]
        for g_agent, scope, read in [*grants, *extra]:
            await store.set_grant(Grant(g_agent, scope, read, True))  # direct-store rows, bypassing the host
            held[(g_agent, scope)] = read
        eligible: dict[str, Scope] = {}  # live ambient semantic records, whatever their scope
        written: list[str] = []
        for i, (scope, status, activation, when, kind, _) in enumerate(records):
            now = clock.now()
            record = build_record(
                now,
                content=f"Prefers answers in language number {i}",
                scope=scope,
                status=status,
                type=kind,
                expires_at=now - timedelta(days=1) if when == "expired" else now + timedelta(days=5),
                valid_until=now - timedelta(hours=1) if when == "invalid" else None,
            )
            await store.insert_record(record)
            written.append(record.id)
            if activation is not None:
                await store.set_activation(
                    record, activation, category="communication", reason="t", decided_by="operator",
                    actor="t", at=now,
                )  # fmt: skip
            if activation == "ambient" and kind == "semantic" and status in LIVE and when == "live":
                eligible[record.id] = scope

        async def check(p: Principal) -> str:
            readable = {p.private_scope} | {
                scope
                for (a, scope), read in held.items()
                if a == agent and read and scope_admits_principal(scope, p)
            }
            expected = {
                rid for rid, scope in eligible.items()
                if scope in readable and (scope.kind != "project" or scope.id == p.project_id)
            }  # fmt: skip
            profile = await rt.profile(p)
            shown = {rid for rid in written if f"[{short_id(rid)}]" in profile}
            assert shown == expected, (p, shown - expected, expected - shown)
            assert (profile == "") == (not expected)
            assert await rt.profile(p) == profile  # byte-identical while nothing changes
            return profile

        await check(Principal(agent, user, None, project))
        if project is not None:  # the same caller outside the project: none of any project's records
            await check(Principal(agent, user, None, None))


@settings(max_examples=examples(30), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    records=record_specs,
    grants=grant_specs,
    agent=st.sampled_from(AGENTS),
    user=st.sampled_from(USERS),
    project=st.one_of(st.none(), st.sampled_from(PROJECTS)),
)
def test_the_profile_never_shows_an_unreadable_or_ineligible_record(
    records: list[Any], grants: list[Any], agent: str, user: str, project: str | None
) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        asyncio.run(scenario(Path(tmp) / "m.sqlite", records, grants, agent, user, project))
