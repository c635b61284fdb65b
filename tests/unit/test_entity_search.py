"""Entity alias scanning, batched resolution and record lookup (spec §10.2, §17.3, §17.4)."""

from __future__ import annotations

from datetime import timedelta

from retold.models import Scope
from retold.retrieve.entity_search import (
    EntityHit,
    alias_candidates,
    broad_entities,
    entity_search,
    resolve_query_aliases,
)
from retold.store import Store

from .factories import MakeEntity, MakeRecord
from .writepath import USER, World

SECRET = Scope("project", "secret")


def test_candidates_are_ngrams_without_stopword_unigrams() -> None:
    got = alias_candidates(["What does Aditya Kumar's team use?"], None, 3)
    assert "aditya" in got and "aditya kumar" in got and "aditya kumar team" in got
    assert "kumar's" not in " ".join(got) and "what" not in got and "does" not in got
    assert "what does aditya" in got  # multi-word n-grams may start with a stopword


def test_candidates_fold_apostrophes_and_possessives() -> None:
    assert alias_candidates(["Aditya\u2019s plan"], None, 1) == ["aditya", "plan"]


def test_candidates_keep_a_capitalised_stopword_inside_a_sentence() -> None:
    assert "will" in alias_candidates(["where does Will work"], None, 1)
    assert "will" not in alias_candidates(["what will happen"], None, 1)


def test_candidates_include_hints_whole_and_deduplicate() -> None:
    got = alias_candidates(["atlas atlas"], ["Project  Atlas", "atlas", "  "], 2)
    assert got == ["atlas", "atlas atlas", "project atlas"]


def test_candidates_are_bounded_for_a_long_query() -> None:
    query = " ".join(f"word{i}" for i in range(300))
    got = alias_candidates([query], None, 4)
    assert len(got) <= 300 * 4 and len(got) == len(set(got))


async def test_long_query_resolves_without_sqlite_error(world: World) -> None:
    query = " ".join(["Aditya"] + [f"token{i}" for i in range(299)])
    candidates = alias_candidates([query], None, 4)
    resolved = await resolve_query_aliases(world.rt.store, candidates, [USER])
    assert list(resolved) == ["aditya"]


async def test_possessive_resolves_the_provisioned_user(world: World) -> None:
    candidates = alias_candidates(["What does Aditya's team use?"], None, 4)
    resolved = await resolve_query_aliases(world.rt.store, candidates, [USER])
    (entity,) = await world.rt.store.entities_by_alias("aditya", scopes=[USER])
    assert resolved == {"aditya": [entity.id]}


async def test_aliases_resolve_only_within_the_given_scopes(store: Store, make_entity: MakeEntity) -> None:
    hidden = make_entity("Priya", scope=SECRET)
    visible = make_entity("Atlas", kind="project")
    await store.insert_entity(hidden)
    await store.insert_entity(visible)
    assert await resolve_query_aliases(store, ["priya", "atlas"], [USER]) == {"atlas": [visible.id]}
    assert await resolve_query_aliases(store, ["priya", "atlas"], [SECRET]) == {"priya": [hidden.id]}
    assert await resolve_query_aliases(store, ["priya"], []) == {}


async def test_merged_entity_resolves_to_its_survivor(store: Store, make_entity: MakeEntity) -> None:
    survivor = make_entity("Robert", aliases=["robert"])
    middle = make_entity("Rob", aliases=["rob"], status="merged", merged_into=survivor.id)
    old = make_entity("Bobby", aliases=["bobby"], status="merged", merged_into=middle.id)
    for entity in (survivor, middle, old):
        await store.insert_entity(entity)
    resolved = await resolve_query_aliases(store, ["bobby", "rob", "robert"], [USER])
    assert resolved == {"bobby": [survivor.id], "rob": [survivor.id], "robert": [survivor.id]}


async def test_deleted_entities_and_survivors_outside_scope_do_not_resolve(
    store: Store, make_entity: MakeEntity
) -> None:
    gone = make_entity("Ghost", status="deleted")
    elsewhere = make_entity("Secret Survivor", scope=SECRET)
    moved = make_entity("Moved", status="merged", merged_into=elsewhere.id)
    for entity in (gone, elsewhere, moved):
        await store.insert_entity(entity)
    assert await resolve_query_aliases(store, ["ghost", "moved"], [USER]) == {}


async def test_typographic_apostrophe_alias_matches_a_folded_candidate(
    store: Store, make_entity: MakeEntity
) -> None:
    entity = make_entity("O\u2019Brien", aliases=["o\u2019brien"])
    await store.insert_entity(entity)
    candidates = alias_candidates(["Ask O\u2019Brien"], None, 2)
    assert await resolve_query_aliases(store, candidates, [USER]) == {"o'brien": [entity.id]}


async def test_resolution_is_one_batched_lookup(store: Store, make_entity: MakeEntity) -> None:
    await store.insert_entity(make_entity("Atlas", kind="project"))
    statements: list[str] = []
    store.db.tracer = lambda sql, params: statements.append(sql)
    await resolve_query_aliases(
        store, alias_candidates(["is atlas on track for the launch"], None, 4), [USER]
    )
    lookups = [s for s in statements if "entity_aliases" in s]
    assert len(lookups) == 1 and " IN (?" not in lookups[0]


async def test_entity_search_about_first_then_recent_and_eligible_only(
    store: Store, make_record: MakeRecord, make_entity: MakeEntity
) -> None:
    atlas = make_entity("Atlas", kind="project")
    await store.insert_entity(atlas)
    now = make_record().event_at

    async def linked(content: str, role: str, age_days: int) -> str:
        record = make_record(content=content, event_at=now - timedelta(days=age_days))
        await store.insert_record(record, links=[(atlas.id, role)])
        return record.id

    old_about = await linked("Atlas ships in May", "about", 10)
    new_mention = await linked("Met the Atlas team", "mentions", 0)
    new_about = await linked("Atlas moved to Postgres", "about", 1)
    hidden = await linked("Atlas budget is secret", "about", 0)
    eligible = {old_about, new_mention, new_about}
    hits = await entity_search(store, {"atlas": [atlas.id]}, eligible, 10)
    assert hits == [
        EntityHit(new_about, 1, atlas.id, "about"),
        EntityHit(old_about, 2, atlas.id, "about"),
        EntityHit(new_mention, 3, atlas.id, "mentions"),
    ]
    assert hidden not in {h.record_id for h in hits}
    assert [h.record_id for h in await entity_search(store, {"atlas": [atlas.id]}, eligible, 1)] == [
        new_about
    ]


async def test_one_hit_per_record_under_its_about_entity(
    store: Store, make_record: MakeRecord, make_entity: MakeEntity
) -> None:
    atlas = make_entity("Atlas", kind="project")
    priya = make_entity("Priya")
    for entity in (atlas, priya):
        await store.insert_entity(entity)
    record = make_record(content="Priya leads Atlas")
    await store.insert_record(record, links=[(priya.id, "mentions"), (atlas.id, "about")])
    hits = await entity_search(store, {"priya": [priya.id], "atlas": [atlas.id]}, {record.id}, 5)
    assert hits == [EntityHit(record.id, 1, atlas.id, "about")]


async def test_ineligible_records_cannot_take_the_slots(
    store: Store, make_record: MakeRecord, make_entity: MakeEntity
) -> None:
    atlas = make_entity("Atlas", kind="project")
    await store.insert_entity(atlas)
    for _ in range(20):
        await store.insert_record(make_record(content="Atlas note"), links=[(atlas.id, "about")])
    mention = make_record(content="Atlas came up", event_at=make_record().event_at - timedelta(days=30))
    await store.insert_record(mention, links=[(atlas.id, "mentions")])
    hits = await entity_search(store, {"atlas": [atlas.id]}, {mention.id}, 3)
    assert [h.record_id for h in hits] == [mention.id]


async def test_nothing_matched_returns_nothing(store: Store) -> None:
    assert await entity_search(store, {}, {"r1"}, 5) == []
    assert await entity_search(store, {"atlas": ["e1"]}, set(), 5) == []
    assert await resolve_query_aliases(store, [], [USER]) == {}


async def test_end_to_end_query_to_records(world: World) -> None:
    result = await world.write(
        "He prefers short answers", attribute="answer_style", entities=[("person", "Aditya", "about")]
    )
    assert result.ok, result
    store = world.rt.store
    resolved = await resolve_query_aliases(
        store, alias_candidates(["how should I answer Aditya?"], None, 4), [USER]
    )
    hits = await entity_search(store, resolved, {result.record_id or ""}, 5)
    assert [h.record_id for h in hits] == [result.record_id]


def test_an_entity_is_broad_only_above_both_k_and_the_share() -> None:
    counts = {"few": 30, "share": 100, "broad": 101}
    assert broad_entities(counts, eligible=1000, k=30, max_share=0.1) == {"broad"}
    # A small store: every entity with at most k records selects, whatever its share.
    assert broad_entities({"all": 20}, eligible=20, k=30, max_share=0.1) == set()
    assert broad_entities(counts, eligible=1000, k=30, max_share=1.0) == set()


async def test_link_counts_count_eligible_records_only(
    store: Store, make_record: MakeRecord, make_entity: MakeEntity
) -> None:
    atlas, priya = make_entity("Atlas", kind="project"), make_entity("Priya")
    for entity in (atlas, priya):
        await store.insert_entity(entity)
    ids = []
    for i in range(5):
        record = make_record(content=f"Atlas note {i}")
        links = [(atlas.id, "about")] + ([(priya.id, "mentions")] if i == 0 else [])
        await store.insert_record(record, links=links)
        ids.append(record.id)
    counts = await store.entity_link_counts([atlas.id, priya.id, "e-none"], set(ids[:3]))
    assert counts == {atlas.id: 3, priya.id: 1}
