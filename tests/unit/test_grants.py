"""Scope access (spec §6.1) and the "Grants" bullets of spec §17.2 that do not need the write path."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from retold.errors import InvalidArgumentError
from retold.host import MemoryHost
from retold.models import Grant, Principal, Scope
from retold.policy.grants import readable_scopes, scope_admits_principal, scopes_from_grants, writable_scopes
from retold.store import Store
from retold.testing import FakeClock

U1 = Scope("user", "u1")
PLANNER_U1 = Principal(agent_id="planner", user_id="u1", session_id="s1")
PLANNER_U2 = Principal(agent_id="planner", user_id="u2", session_id="s2")


@pytest.fixture
def host(store: Store, clock: FakeClock) -> MemoryHost:
    return MemoryHost(store, clock)


async def test_agent_reads_and_writes_its_private_scope_without_a_grant(store: Store) -> None:
    assert await store.grants_for("planner") == []
    assert await readable_scopes(store, PLANNER_U1) == [Scope("agent", "planner/u1")]
    assert await writable_scopes(store, PLANNER_U1) == [Scope("agent", "planner/u1")]
    assert await readable_scopes(store, PLANNER_U2) == [Scope("agent", "planner/u2")]


async def test_user_scope_grant_is_not_honored_for_another_user(store: Store, host: MemoryHost) -> None:
    await host.grant("planner", U1, read=True, write=True)
    assert U1 in await readable_scopes(store, PLANNER_U1)
    assert U1 in await writable_scopes(store, PLANNER_U1)
    assert U1 not in await readable_scopes(store, PLANNER_U2)
    assert U1 not in await writable_scopes(store, PLANNER_U2)
    assert await readable_scopes(store, PLANNER_U2) == [PLANNER_U2.private_scope]


async def test_user_scope_is_not_writable_without_a_read_write_grant(store: Store, host: MemoryHost) -> None:
    # Only the scope list is checked here; the write path's scope_not_writable outcome (and that it
    # changes nothing) is tested with memory_write.
    assert U1 not in await writable_scopes(store, PLANNER_U1)
    await host.grant("planner", U1, read=True, write=False)
    assert U1 in await readable_scopes(store, PLANNER_U1)
    assert U1 not in await writable_scopes(store, PLANNER_U1)
    await host.grant("planner", U1, read=True, write=True)
    assert U1 in await writable_scopes(store, PLANNER_U1)


async def test_plain_agent_scope_needs_a_grant_and_is_then_cross_user_readable(
    store: Store, host: MemoryHost
) -> None:
    shared = Scope("agent", "planner")
    assert shared not in await readable_scopes(store, PLANNER_U1)
    assert shared not in await readable_scopes(store, PLANNER_U2)

    await host.grant("planner", shared, read=True)
    assert shared in await readable_scopes(store, PLANNER_U1)
    assert shared in await readable_scopes(store, PLANNER_U2)
    assert shared not in await writable_scopes(store, PLANNER_U1)
    assert shared not in await readable_scopes(store, Principal(agent_id="coder", user_id="u1"))


async def test_direct_store_grant_on_a_private_scope_counts_only_for_its_user(
    store: Store, host: MemoryHost
) -> None:
    private = Scope("agent", "planner/u1")
    await store.set_grant(Grant(agent_id="coder", scope=private, can_read=True, can_write=True))
    coder_u1 = Principal(agent_id="coder", user_id="u1")
    coder_u2 = Principal(agent_id="coder", user_id="u2")
    assert private in await readable_scopes(store, coder_u1)
    assert private in await writable_scopes(store, coder_u1)
    assert private not in await readable_scopes(store, coder_u2)
    assert private not in await writable_scopes(store, coder_u2)


async def test_host_refuses_to_grant_a_private_scope(store: Store, host: MemoryHost) -> None:
    with pytest.raises(InvalidArgumentError, match="private"):
        await host.grant("coder", Scope("agent", "planner/u1"), read=True)
    assert await store.grants_for("coder") == []
    assert await store.events() == []


def test_principal_rejects_slashes_and_empty_ids() -> None:
    for agent_id, user_id in (("a/b", "u1"), ("planner", "u/1"), ("", "u1"), ("planner", ""), ("  ", "u1")):
        with pytest.raises(InvalidArgumentError):
            Principal(agent_id=agent_id, user_id=user_id)
    with pytest.raises(ValueError):
        Principal(agent_id="a", user_id="b/c")
    assert Principal(agent_id="a", user_id="b").private_scope == Scope("agent", "a/b")


async def test_project_grant_does_not_imply_the_user_scope(store: Store, host: MemoryHost) -> None:
    project = Scope("project", "p1")
    await host.grant("planner", project, read=True, write=True)
    assert await readable_scopes(store, PLANNER_U1) == [PLANNER_U1.private_scope, project]
    assert await writable_scopes(store, PLANNER_U1) == [PLANNER_U1.private_scope, project]


async def test_grants_of_other_agents_are_ignored(store: Store, host: MemoryHost) -> None:
    await host.grant("coder", Scope("org", "acme"), read=True, write=True)
    assert await readable_scopes(store, PLANNER_U1) == [PLANNER_U1.private_scope]


def test_scope_admits_principal_belts() -> None:
    assert scope_admits_principal(U1, PLANNER_U1)
    assert not scope_admits_principal(U1, PLANNER_U2)
    assert scope_admits_principal(Scope("agent", "other/u1"), PLANNER_U1)
    assert not scope_admits_principal(Scope("agent", "planner/u2"), PLANNER_U1)
    assert scope_admits_principal(Scope("project", "p1"), PLANNER_U2)


# --------------------------------------------------------------------------- the safety-belt property

IDS = st.sampled_from(["a", "b", "c"])


@st.composite
def scopes(draw: st.DrawFn) -> Scope:
    kind = draw(st.sampled_from(["user", "agent", "agent/private", "project", "org"]))
    if kind == "agent/private":  # only a direct-store (or legacy) grant can name one
        return Scope("agent", f"{draw(IDS)}/{draw(IDS)}")
    return Scope(kind, draw(IDS))  # type: ignore[arg-type]


GRANTS = st.lists(
    st.builds(Grant, agent_id=IDS, scope=scopes(), can_read=st.booleans(), can_write=st.booleans())
)
PRINCIPALS = st.builds(Principal, agent_id=IDS, user_id=IDS)


def _admissible(scope: Scope, principal: Principal) -> bool:
    if scope.kind == "user":
        return scope.id == principal.user_id
    if scope.kind == "agent" and "/" in scope.id:
        return scope.id.split("/")[1] == principal.user_id
    return True


@settings(max_examples=300, deadline=None)
@given(principal=PRINCIPALS, grants=GRANTS, write=st.booleans())
def test_resolved_scopes_are_private_or_admissibly_granted(
    principal: Principal, grants: list[Grant], write: bool
) -> None:
    resolved = scopes_from_grants(principal, grants, write=write)
    assert resolved[0] == principal.private_scope
    assert len(resolved) == len(set(resolved))
    granted = {
        g.scope for g in grants if g.agent_id == principal.agent_id and (g.can_write if write else g.can_read)
    }
    for scope in resolved[1:]:
        assert scope in granted
        assert not (scope.kind == "user" and scope.id != principal.user_id)
        assert not (scope.is_private and scope.id.split("/")[1] != principal.user_id)
    # and nothing admissible is dropped
    assert {s for s in granted if _admissible(s, principal)} <= set(resolved)


async def test_store_backed_example_of_the_safety_belts(store: Store) -> None:
    rows = [
        Grant("planner", Scope("user", "u1"), True, True),
        Grant("planner", Scope("user", "u2"), True, True),
        Grant("planner", Scope("agent", "planner/u2"), True, False),
        Grant("planner", Scope("agent", "coder/u1"), True, False),
        Grant("planner", Scope("agent", "planner"), True, False),
        Grant("planner", Scope("project", "p1"), False, True),
        Grant("planner", Scope("org", "acme"), True, False),
        Grant("coder", Scope("org", "other"), True, True),
    ]
    for row in rows:
        await store.set_grant(row)
    readable = await readable_scopes(store, PLANNER_U1)
    assert set(readable) == {
        PLANNER_U1.private_scope,
        Scope("user", "u1"),
        Scope("agent", "coder/u1"),
        Scope("agent", "planner"),
        Scope("org", "acme"),
    }
    assert readable == scopes_from_grants(PLANNER_U1, await store.grants_for("planner"), write=False)
    writable = await writable_scopes(store, PLANNER_U1)
    assert set(writable) == {PLANNER_U1.private_scope, Scope("user", "u1"), Scope("project", "p1")}
    assert set(await readable_scopes(store, PLANNER_U2)) == {
        PLANNER_U2.private_scope,
        Scope("user", "u2"),
        Scope("agent", "planner"),
        Scope("org", "acme"),
    }
