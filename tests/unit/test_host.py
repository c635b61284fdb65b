"""MemoryHost (spec §6.1, §9.1): grants with audit events, and principal provisioning."""

from __future__ import annotations

import pytest

from retold.errors import AliasConflictError, InvalidArgumentError
from retold.host import MemoryHost
from retold.models import Grant, Scope
from retold.store import Store
from retold.testing import FakeClock
from retold.util import format_ts, normalize_alias

from .factories import MakeEntity

U1 = Scope("user", "u1")


@pytest.fixture
def host(store: Store, clock: FakeClock) -> MemoryHost:
    return MemoryHost(store, clock)


async def row_counts(store: Store) -> dict[str, int]:
    tables = ("grants", "events", "entities", "entity_aliases")
    return {t: int(await store.db.fetchval(f"SELECT count(*) FROM {t}")) for t in tables}


# --------------------------------------------------------------------------- grant and revoke


async def test_grant_then_revoke_append_grant_changed_events(
    store: Store, host: MemoryHost, clock: FakeClock
) -> None:
    granted = await host.grant("planner", U1, read=True, write=False, actor="ops")
    assert granted == Grant("planner", U1, can_read=True, can_write=False)
    await host.grant("planner", U1, read=True, write=True)
    assert await host.grants("planner") == [Grant("planner", U1, True, True)]
    assert await host.revoke("planner", U1) is True
    assert await store.grants_for("planner") == []

    events = await store.events(kind="grant.changed")
    assert [e["actor"] for e in events] == ["ops", "admin", "admin"]
    assert [(e["payload"]["before"], e["payload"]["after"]) for e in events] == [
        (None, {"read": True, "write": False}),
        ({"read": True, "write": False}, {"read": True, "write": True}),
        ({"read": True, "write": True}, None),
    ]
    assert {(e["payload"]["agent_id"], e["payload"]["scope"]) for e in events} == {("planner", "user:u1")}
    assert events[0]["at"] == format_ts(clock.now())


async def test_revoke_of_a_missing_grant_returns_false_and_writes_nothing(
    store: Store, host: MemoryHost
) -> None:
    assert await host.revoke("planner", U1) is False
    assert await row_counts(store) == {"grants": 0, "events": 0, "entities": 0, "entity_aliases": 0}


@pytest.mark.parametrize(
    ("agent_id", "scope", "read", "write"),
    [
        ("plan/ner", Scope("org", "acme"), True, False),
        ("", Scope("org", "acme"), True, False),
        ("planner", Scope("user", "u/1"), True, True),
        ("planner", Scope("agent", "coder/u1"), True, False),
        ("planner", Scope("org", "acme"), False, False),
    ],
    ids=["agent-with-slash", "empty-agent", "user-with-slash", "private-scope", "nothing-granted"],
)
async def test_grant_refusals_write_nothing(
    store: Store, host: MemoryHost, agent_id: str, scope: Scope, read: bool, write: bool
) -> None:
    with pytest.raises(InvalidArgumentError):
        await host.grant(agent_id, scope, read=read, write=write)
    assert await row_counts(store) == {"grants": 0, "events": 0, "entities": 0, "entity_aliases": 0}


# --------------------------------------------------------------------------- provision_user


async def test_provision_user_creates_one_confirmed_principal_entity(store: Store, host: MemoryHost) -> None:
    entity = await host.provision_user("u1", aliases=["Aditya", "Adi"])
    assert entity.kind == "person"
    assert entity.status == "confirmed"
    assert entity.scope == U1
    assert entity.aliases == [normalize_alias("u1"), "aditya", "adi"]
    assert await store.get_entity(entity.id) == entity
    assert [e.id for e in await store.entities_in_scope(U1)] == [entity.id]

    provisioned = await store.events(kind="principal.provisioned")
    assert len(provisioned) == 1
    assert provisioned[0]["entity_id"] == entity.id
    assert provisioned[0]["payload"]["created"] is True
    assert provisioned[0]["payload"]["aliases_added"] == ["u1", "aditya", "adi"]


async def test_provision_user_again_adds_aliases_to_the_same_entity(store: Store, host: MemoryHost) -> None:
    first = await host.provision_user("u1", aliases=["Aditya"])
    second = await host.provision_user("u1", aliases=["Aditya", "Ādi  Kumar"])
    assert second.id == first.id
    assert second.aliases == ["u1", "aditya", "adi kumar"]
    assert len(await store.entities_in_scope(U1)) == 1

    provisioned = await store.events(kind="principal.provisioned")
    assert len(provisioned) == 2
    assert provisioned[1]["payload"]["created"] is False
    assert provisioned[1]["payload"]["aliases_added"] == ["adi kumar"]
    assert len(await store.events(kind="entity.created")) == 1


async def test_provision_user_refuses_an_alias_of_another_person(
    store: Store, host: MemoryHost, make_entity: MakeEntity
) -> None:
    await host.provision_user("u1", aliases=["Aditya"])
    priya = make_entity("Priya")
    await store.insert_entity(priya)
    before = await row_counts(store)
    with pytest.raises(AliasConflictError, match="priya"):
        await host.provision_user("u1", aliases=["Adi", "Priya"])
    assert await row_counts(store) == before
    assert "adi" not in (await store.require_entity((await store.entities_in_scope(U1))[0].id)).aliases


async def test_provision_user_conflict_on_first_call_creates_no_entity(
    store: Store, host: MemoryHost, make_entity: MakeEntity
) -> None:
    other = make_entity("Aditya")
    await store.insert_entity(other)
    before = await row_counts(store)
    with pytest.raises(AliasConflictError):
        await host.provision_user("u1", aliases=["Aditya"])
    assert await row_counts(store) == before
    assert [e.id for e in await store.entities_in_scope(U1)] == [other.id]


async def test_provision_user_ignores_namesakes_in_other_scopes_and_kinds(
    store: Store, host: MemoryHost, make_entity: MakeEntity
) -> None:
    await store.insert_entity(make_entity("Aditya", scope=Scope("user", "u2")))
    await store.insert_entity(make_entity("Aditya", kind="project"))
    entity = await host.provision_user("u1", aliases=["Aditya"])
    assert entity.aliases == ["u1", "aditya"]


@pytest.mark.parametrize(
    ("user_id", "aliases"),
    [("u/1", ["Aditya"]), ("", []), ("u1", "Aditya"), ("u1", ["  "]), ("u1", [3])],
    ids=["slash", "empty", "bare-string", "blank-alias", "not-a-string"],
)
async def test_provision_user_refuses_bad_input_and_writes_nothing(
    store: Store, host: MemoryHost, user_id: str, aliases: object
) -> None:
    with pytest.raises(InvalidArgumentError):
        await host.provision_user(user_id, aliases=aliases)  # type: ignore[arg-type]
    assert await row_counts(store) == {"grants": 0, "events": 0, "entities": 0, "entity_aliases": 0}


async def test_revoke_removes_a_direct_store_grant_on_a_private_scope(store: Store, host: MemoryHost) -> None:
    private = Scope("agent", "planner/u1")
    await store.set_grant(Grant("coder", private, can_read=True, can_write=False))
    assert await host.revoke("coder", private) is True
    assert await store.grants_for("coder") == []
    (event,) = await store.events(kind="grant.changed")
    assert event["payload"]["scope"] == "agent:planner/u1"
    assert event["payload"]["after"] is None


async def test_revoke_refuses_a_bad_agent_id(store: Store, host: MemoryHost) -> None:
    with pytest.raises(InvalidArgumentError):
        await host.revoke("plan/ner", U1)
    with pytest.raises(InvalidArgumentError):
        await host.revoke("planner", "user:u1")  # type: ignore[arg-type]
