"""Entity resolution and merges (spec §9, §17.3 "Entities")."""

from __future__ import annotations

from retold.ingest.write.entities import merge_entities
from retold.models import Entity, EntityMention, Scope
from retold.util import new_id

from .writepath import USER, World


async def _entity(world: World, name: str, scope: Scope, kind: str = "person") -> Entity:
    entity = Entity(new_id(), kind, name, scope, "confirmed", None, [name.lower()], world.clock.now())  # type: ignore[arg-type]
    await world.rt.store.insert_entity(entity)
    return entity


async def test_alias_lookup_resolves_only_within_readable_scopes(world: World) -> None:
    hidden = await _entity(world, "Priya", Scope("project", "secret"))
    result = await world.write(
        "Priya owns the billing repo.", attribute="owner", entities=[("person", "Priya", "about")]
    )
    record = await world.record(result.record_id)
    assert record.subject_entity_id != hidden.id
    created = await world.rt.store.require_entity(record.subject_entity_id or "")
    assert (created.scope, created.status, created.aliases) == (USER, "provisional", ["priya"])
    assert created.id in {e["entity_id"] for e in await world.events("entity.created")}


async def test_unknown_alias_creates_one_provisional_entity_in_the_writers_scope(world: World) -> None:
    mentions = [("project", "Atlas", "about"), ("project", "atlas", "mentions")]
    result = await world.write("Atlas ships in May.", attribute="ship_date", entities=mentions)
    record = await world.record(result.record_id)
    projects = await world.rt.store.entities_in_scope(USER, kind="project")
    assert [p.canonical for p in projects] == ["Atlas"] and record.entity_ids == [projects[0].id]


async def test_ambiguous_about_alias_writes_nothing_and_logs_the_candidates(world: World) -> None:
    team = Scope("project", "p1")
    await world.rt.host.grant("planner", team, read=True)
    a = await _entity(world, "Sam", USER)
    b = await _entity(world, "Sam", team)
    before = await world.rt.store.records_version()
    result = await world.write("Sam prefers tabs.", attribute="indent", entities=[("person", "Sam", "about")])
    assert (result.ok, result.error) == (False, "entity_ambiguous")
    assert {c["entity_id"] for c in result.candidates} == {a.id, b.id}
    assert {c["scope"] for c in result.candidates} == {"user:u1", "project:p1"}
    assert await world.rt.store.records_version() == before
    (event,) = await world.events("ambiguous_alias")
    assert set(event["payload"]["candidates"]) == {a.id, b.id}


async def test_ambiguous_mention_is_dropped_and_the_write_succeeds(world: World) -> None:
    team = Scope("project", "p1")
    await world.rt.host.grant("planner", team, read=True)
    await _entity(world, "Sam", USER)
    await _entity(world, "Sam", team)
    result = await world.write(
        "Aditya pairs with Sam on Fridays.", attribute="pairing", entities=[("person", "Sam", "mentions")]
    )
    assert result.ok and "ambiguous_mention" in (result.note or "")
    record = await world.record(result.record_id)
    assert len(record.entity_ids) == 1  # only the principal entity
    assert len(await world.events("ambiguous_alias")) == 1


async def test_explicit_entity_id_skips_aliases_but_must_be_readable(world: World) -> None:
    hidden = await _entity(world, "Priya", Scope("project", "secret"))
    refused = await world.write(
        "Priya owns billing.",
        attribute="owner",
        entities=[EntityMention("person", "whoever", "about", entity_id=hidden.id)],
    )
    missing = await world.write(
        "Priya owns billing.",
        attribute="owner",
        entities=[EntityMention("person", "whoever", "about", entity_id="nope")],
    )
    assert (refused.error, missing.error) == ("not_found", "not_found")
    assert refused.message.replace(hidden.id, "X") == missing.message.replace("nope", "X")  # type: ignore[union-attr]
    mine = await _entity(world, "Lee", USER)
    ok = await world.write(
        "Lee owns billing.",
        attribute="owner",
        entities=[EntityMention("person", "a name nobody uses", "about", entity_id=mine.id)],
    )
    assert (await world.record(ok.record_id)).subject_entity_id == mine.id


async def test_provisioned_display_name_resolves_to_the_principal_entity(world: World) -> None:
    person = (await world.rt.store.entities_in_scope(USER, kind="person"))[0]
    result = await world.write(
        "Aditya prefers tea.", attribute="drink", entities=[("person", "aditya", "about")]
    )
    assert (await world.record(result.record_id)).subject_entity_id == person.id


async def test_two_person_entities_with_the_principal_alias_are_ambiguous_not_an_exception(
    world: World,
) -> None:
    await _entity(world, "u1", USER)  # a second person carrying normalize_alias("u1")
    result = await world.write("Aditya prefers tea.", attribute="drink")
    assert (result.ok, result.error) == (False, "entity_ambiguous")
    assert len(result.candidates) == 2


async def test_merge_repoints_links_unions_aliases_and_rewrites_subjects_and_fts(world: World) -> None:
    store = world.rt.store
    bob = await _entity(world, "Bob", USER)
    robert = await _entity(world, "Robert", USER)
    about_bob = await world.write("Bob likes jazz.", attribute="music", entities=[("person", "Bob", "about")])
    about_robert = await world.write(
        "Robert runs marathons.", attribute="sport", entities=[("person", "Robert", "about")]
    )
    merged = await merge_entities(store, bob.id, robert.id, actor="admin", reason="same person")
    assert set(merged.aliases) == {"bob", "robert"}
    assert (await store.require_entity(bob.id)).status == "merged"
    moved = await world.record(about_bob.record_id)
    assert moved.subject_entity_id == robert.id and moved.subject == f"{robert.id}/music"
    assert moved.entity_ids == [robert.id]
    for record_id in (about_bob.record_id, about_robert.record_id):
        fts = await store.fts_row(record_id or "")
        assert fts is not None and "bob" in fts["aliases"] and "robert" in fts["aliases"]
    assert (await store.fts_row(about_bob.record_id or ""))["subject"] == f"{robert.id}/music"  # type: ignore[index]
    # Lookups follow the merge to the survivor.
    assert [e.id for e in await store.entities_by_alias("bob", scopes=[USER])] == [robert.id]
    (event,) = await world.events("entity.merged")
    assert event["payload"]["merged_into"] == robert.id


async def test_merge_refuses_different_kinds(world: World) -> None:
    import pytest

    from retold.errors import InvalidArgumentError

    person = await _entity(world, "Atlas", USER)
    project = await _entity(world, "Atlas Project", USER, kind="project")
    with pytest.raises(InvalidArgumentError, match="kinds must match"):
        await merge_entities(world.rt.store, person.id, project.id, actor="admin")
