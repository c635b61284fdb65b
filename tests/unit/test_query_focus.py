"""Names that cannot tell records apart leave the dense query and the full-text query (query_focus)."""

from __future__ import annotations

import json
from typing import Any

import pytest

import retold
from retold.retrieve.query_focus import without_mentions

from .writepath import World, make_world


@pytest.mark.parametrize(
    ("query", "aliases", "expected"),
    [
        ("What state did Nate visit?", {"nate"}, "What state did visit?"),
        ("What is Nate's favourite food?", {"nate"}, "What is favourite food?"),
        ("What is Nate’s favourite food?", {"nate"}, "What is favourite food?"),
        ("where did NATE and jo go hiking", {"nate", "jo"}, "where did and go hiking"),
        ("what did Aditya Kumar cook", {"aditya kumar"}, "what did cook"),
        ("what did Aditya cook", {"aditya kumar"}, "what did Aditya cook"),  # only whole aliases
        ("Who is Nate?", {"nate"}, "Who is Nate?"),  # nothing but stopwords would be left
        ("Nate", {"nate"}, "Nate"),
        ("What did Natalie say?", {"nate"}, "What did Natalie say?"),
        ("What state did Nate visit?", set(), "What state did Nate visit?"),
    ],
)
def test_mentions_are_removed_whole_never_to_nothing(query: str, aliases: set[str], expected: str) -> None:
    assert without_mentions(query, aliases, max_alias_tokens=4) == expected


async def _episode(world: World, content: str, name: str) -> dict[str, Any]:
    entity = {"kind": "person", "name": name, "role": "about"}
    return await world.rt.tools.call(
        world.p, "memory_write", {"type": "episodic", "content": content, "entities": [entity]}
    )


async def _bob_world(path: Any, *, focus: bool) -> World:
    config = retold.Config().override({"retrieval.focus_queries": focus})
    world = await make_world(path, config=config)
    for i in range(40):
        await _episode(world, f"Bob called again, call number {i}, nothing new.", "Bob")
    await _episode(world, "Bob asked us to hire a second designer for the mobile app.", "Bob")
    return world


async def test_a_broad_name_leaves_the_dense_and_full_text_queries(store_location: Any) -> None:
    world = await _bob_world(store_location("focus.sqlite"), focus=True)
    try:
        rt, p = world.rt, world.p
        found = await rt.tools.call(p, "memory_search", {"queries": ["Did Bob want a designer hired?"]})
        log = await rt.store.search_log(found["search_id"])
        assert log is not None
        request = json.loads(log["request"])
        assert request["dense_queries"] == ["Did want a designer hired?"]
        assert json.loads(log["config_flags"])["focus_queries"] is True
        # Records that share only "Bob" with the query are not lexical candidates any more.
        lexical = json.loads(log["lexical"])
        assert lexical and all({t[0] for t in row[3]} - {"bob"} for row in lexical)
        assert found["results"] and "designer" in found["results"][0]["content"]
    finally:
        await world.rt.close()


async def test_with_focus_off_the_name_is_searched_as_written(store_location: Any) -> None:
    world = await _bob_world(store_location("unfocused.sqlite"), focus=False)
    try:
        rt, p = world.rt, world.p
        found = await rt.tools.call(p, "memory_search", {"queries": ["Did Bob want a designer hired?"]})
        log = await rt.store.search_log(found["search_id"])
        assert log is not None
        assert json.loads(log["request"])["dense_queries"] is None
        lexical = json.loads(log["lexical"])
        assert any({t[0] for t in row[3]} == {"bob"} for row in lexical)
    finally:
        await world.rt.close()


async def test_the_searchers_own_name_leaves_the_dense_query(world: World) -> None:
    rt, p = world.rt, world.p
    await rt.tools.call(p, "memory_write", {
        "type": "semantic", "content": "Aditya supports Arsenal.", "attribute": "football_club",
        "source_kind": "user_statement", "evidence": "I support Arsenal",
    })  # fmt: skip
    found = await rt.tools.call(p, "memory_search", {"queries": ["Aditya's favourite football club"]})
    log = await rt.store.search_log(found["search_id"])
    assert log is not None
    assert json.loads(log["request"])["dense_queries"] == ["favourite football club"]


async def test_a_name_known_only_in_another_users_scope_stays_in_the_query(world: World) -> None:
    """What the dense channel embeds never depends on entities the searcher cannot read."""
    rt, p = world.rt, world.p
    await rt.host.provision_user("u2", aliases=["Carol"])
    await _episode(world, "Met the plumber about the boiler on Sunday.", "Dave")
    found = await rt.tools.call(p, "memory_search", {"queries": ["What does Carol cook on Sundays?"]})
    log = await rt.store.search_log(found["search_id"])
    assert log is not None
    assert json.loads(log["request"])["dense_queries"] is None
