"""Issue 15's reproductions of ownership bugs, each through the public API (items 2, 4, 5, 6).

* a session id another user chose never joins their chain, transcript or evidence;
* a user's private alias never reaches a project record's index text;
* erasing one user keeps a record another user's own evidence supports;
* erasure leaves no entity name, search-log text or cached word of the erased subject.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from retold.models import Principal, Scope, SessionKey

from .test_lexical_tenancy import cached_words
from .test_operations import table_rows
from .writepath import World, make_world

PROJECT = Scope("project", "p1")


async def project_world(path: Path) -> tuple[World, Principal, Principal]:
    """u1 and u2 in project p1, both with personal memory; the planner may write the project."""
    world = await make_world(path)
    rt = world.rt
    await rt.host.provision_user("u2", aliases=["Beatrix"])
    await rt.host.grant("planner", Scope("user", "u2"), read=True, write=True)
    await rt.host.grant("planner", PROJECT, read=True, write=True)
    u1 = await rt.hooks.on_session_start(Principal("planner", "u1", "s1", project_id="p1"))
    u2 = await rt.hooks.on_session_start(Principal("planner", "u2", "s2", project_id="p1"))
    return world, u1, u2


async def all_text(world: World, *, but: tuple[str, ...] = ()) -> str:
    rows = await table_rows(world.rt.store)
    return json.dumps({k: v for k, v in rows.items() if k not in but}, default=str).lower()


@pytest.fixture
async def team(tmp_path: Path) -> Any:
    world, u1, u2 = await project_world(tmp_path / "memory.sqlite")
    try:
        yield world, u1, u2
    finally:
        await world.rt.close()


# --- item 2: sessions belong to their owner ---------------------------------------------------------


async def test_a_session_id_another_user_chose_first_does_not_capture_their_turns(team: Any) -> None:
    """V starts "t1~7" before U starts "t1": U's turns stay in U's own "t1", never in V's session."""
    world, _, _ = team
    rt = world.rt
    v = await rt.hooks.on_turn(Principal("planner", "u2", "t1~7"), "user", "hello there")
    u = await rt.hooks.on_turn(Principal("planner", "u1", "t1"), "user", "My locker code is 4471.")
    u = await rt.hooks.on_turn(u, "assistant", "Noted.")
    assert u.session_id == "t1" and v.session_id == "t1~7"
    assert [t.content for t in await rt.store.turns(SessionKey.of(u))] == [
        "My locker code is 4471.",
        "Noted.",
    ]
    assert [t.content for t in await rt.store.turns(SessionKey.of(v))] == ["hello there"]
    # V cannot pass U's words off as a user statement: they are not in V's transcript.
    result = await rt.tools.call(v, "memory_write", {
        "type": "semantic", "content": "Beatrix's locker code is 4471.", "attribute": "locker_code",
        "source_kind": "user_statement", "evidence": "My locker code is 4471",
    })  # fmt: skip
    assert result["ok"], result
    record = await rt.store.require_record(result["record_id"])
    assert (record.source_kind, record.status, record.evidence) == ("agent_inference", "provisional", None)
    sources = await rt.store.sources_of(record.id)
    assert [(s.user_id, s.session_id, s.evidence) for s in sources] == [("u2", "t1~7", None)]


async def test_idle_splits_and_session_end_stay_inside_the_owners_chain(team: Any) -> None:
    world, _, _ = team
    rt = world.rt
    await rt.hooks.on_turn(Principal("planner", "u2", "t1~2"), "user", "v in t1~2")
    u = await rt.hooks.on_turn(Principal("planner", "u1", "t1"), "user", "u in t1")
    world.clock.advance(minutes=45)
    u = await rt.hooks.on_turn(u, "user", "u after the idle gap")
    assert u.session_id == "t1~2"  # u1's own continuation, a different session from u2's "t1~2"
    assert [t.content for t in await rt.store.turns(SessionKey.of(u))] == ["u after the idle gap"]
    assert [t.content for t in await rt.store.turns(SessionKey("planner", "u2", "t1~2"))] == ["v in t1~2"]
    assert await rt.hooks.on_session_end(u) is True
    v_session = await rt.store.get_session(SessionKey("planner", "u2", "t1~2"))
    assert v_session is not None and v_session.ended_at is None


# --- item 4: aliases carry a scope ------------------------------------------------------------------


async def test_a_users_private_alias_does_not_reach_other_project_members(team: Any) -> None:
    world, u1, u2 = team
    rt = world.rt
    await rt.host.provision_user("u1", aliases=["Zanzibarra"])
    u1 = await rt.hooks.on_turn(u1, "user", "I will ship the billing fix on Friday.")
    written = await rt.tools.call(u1, "memory_write", {
        "type": "semantic", "content": "Aditya will ship the billing fix on Friday.",
        "attribute": "billing_fix_owner", "write_target": "current_project",
        "entities": [{"kind": "person", "name": "Aditya", "role": "about"}],
    })  # fmt: skip
    assert written["ok"], written
    fts = await rt.store.fts_row(written["record_id"])
    assert fts is not None and "zanzibarra" not in fts["aliases"] and "aditya" not in fts["aliases"]
    found = await rt.tools.call(u2, "memory_search", {"queries": ["Zanzibarra"]})
    assert found["ok"] and found["results"] == [], found
    log = await rt.store.search_log(found["search_id"])
    assert log is not None and json.loads(log["lexical"]) == [] and json.loads(log["entity"]) == []
    # The record itself is shared: u2 finds it by what it says.
    shared = await rt.tools.call(u2, "memory_search", {"queries": ["billing fix Friday"]})
    assert written["record_id"] in [r["record_id"] for r in shared["results"]]
    # memory_get shows u2 no entity it cannot read (u1's person entity lives in user:u1).
    got = await rt.tools.call(u2, "memory_get", {"ids": [written["record_id"]]})
    assert got["ok"] and got["records"][0]["entities"] == []
    assert "zanzibarra" not in json.dumps(got).lower()


# --- item 5: reinforcement keeps every source ---------------------------------------------------


async def test_erasing_the_user_who_reinforced_keeps_the_record_the_other_user_supports(team: Any) -> None:
    world, u1, u2 = team
    rt = world.rt
    u2 = await rt.hooks.on_turn(u2, "tool", "deploy_window: Tuesday 14:00 UTC")
    first = await rt.tools.call(u2, "memory_write", {
        "type": "semantic", "content": "The deploy window is Tuesday 14:00 UTC.",
        "attribute": "deploy_window", "write_target": "current_project", "source_kind": "tool_result",
        "evidence": "deploy_window: Tuesday 14:00 UTC",
        "entities": [{"kind": "project", "name": "Billing", "role": "about"}],
    })  # fmt: skip
    assert first["ok"] and first["outcome"] == "created", first
    u1 = await rt.hooks.on_turn(u1, "user", "Right, our deploy window is Tuesday 14:00 UTC, glimmerfox.")
    second = await rt.tools.call(u1, "memory_write", {
        "type": "semantic", "content": "The deploy window is Tuesday 14:00 UTC.",
        "attribute": "deploy_window", "write_target": "current_project", "source_kind": "user_statement",
        "evidence": "our deploy window is Tuesday 14:00 UTC, glimmerfox",
        "entities": [{"kind": "project", "name": "Billing", "role": "about"}],
    })  # fmt: skip
    assert second["outcome"] == "reinforced" and second["record_id"] == first["record_id"], second
    record_id = first["record_id"]
    upgraded = await rt.store.require_record(record_id)
    assert upgraded.source_kind == "user_statement"  # u1's statement outranks the tool result (§6.4)
    assert {s.user_id for s in await rt.store.sources_of(record_id)} == {"u1", "u2"}

    report = await rt.ops.erase(user="u1", reason="account closed")

    assert record_id not in report.records and report.resupported == [record_id]
    kept = await rt.store.require_record(record_id)
    assert (kept.status, kept.source_kind, kept.evidence) == (
        "confirmed", "tool_result", "deploy_window: Tuesday 14:00 UTC"
    )  # fmt: skip
    assert kept.source_ref is not None and kept.source_ref.startswith("session:s2<turn:")
    assert [s.user_id for s in await rt.store.sources_of(record_id)] == ["u2"]
    assert "glimmerfox" not in await all_text(world)
    found = await rt.tools.call(u2, "memory_search", {"queries": ["deploy window Tuesday"]})
    assert record_id in [r["record_id"] for r in found["results"]]
    assert (await rt.ops.check()).clean


async def test_a_record_only_the_erased_user_supported_is_erased(team: Any) -> None:
    world, u1, _ = team
    rt = world.rt
    u1 = await rt.hooks.on_turn(u1, "user", "The staging password rotates weekly, periwinkle.")
    written = await rt.tools.call(u1, "memory_write", {
        "type": "semantic", "content": "The staging password rotates weekly (periwinkle).",
        "attribute": "password_rotation", "write_target": "current_project", "source_kind": "user_statement",
        "evidence": "The staging password rotates weekly, periwinkle",
        "entities": [{"kind": "project", "name": "Billing", "role": "about"}],
    })  # fmt: skip
    report = await rt.ops.erase(user="u1", reason="account closed")
    assert written["record_id"] in report.records and report.resupported == []
    assert "periwinkle" not in await all_text(world)


# --- item 6: no residue ---------------------------------------------------------------------------


async def test_erasing_a_user_removes_the_entities_and_alias_events_only_their_words_introduced(
    team: Any,
) -> None:
    world, u1, u2 = team
    rt = world.rt
    u1 = await rt.hooks.on_turn(u1, "user", "We signed with Quixotica Holdings yesterday.")
    written = await rt.tools.call(u1, "memory_write", {
        "type": "episodic", "content": "The team signed a contract with Quixotica Holdings.",
        "write_target": "current_project", "source_kind": "user_statement",
        "evidence": "We signed with Quixotica Holdings yesterday",
        "entities": [{"kind": "org", "name": "Quixotica Holdings", "role": "about"}],
    })  # fmt: skip
    assert written["ok"], written
    # u2's own project entity stays: nothing of u1 introduced it.
    u2 = await rt.hooks.on_turn(u2, "user", "Vermilionsoft is our other vendor.")
    theirs = await rt.tools.call(u2, "memory_write", {
        "type": "episodic", "content": "Vermilionsoft is another vendor of the team.",
        "write_target": "current_project", "source_kind": "user_statement",
        "evidence": "Vermilionsoft is our other vendor",
        "entities": [{"kind": "org", "name": "Vermilionsoft", "role": "about"}],
    })  # fmt: skip
    assert theirs["ok"], theirs

    report = await rt.ops.erase(user="u1", reason="account closed")

    assert written["record_id"] in report.records
    text = await all_text(world)
    assert "quixotica" not in text
    assert "vermilionsoft" in text
    assert (await rt.ops.check()).clean


async def test_erasing_a_record_scrubs_the_searches_that_matched_it(team: Any) -> None:
    world, u1, _ = team
    rt = world.rt
    u1 = await rt.hooks.on_turn(u1, "user", "I keep marmaladequartz jars in the pantry.")
    written = await rt.tools.call(u1, "memory_write", {
        "type": "semantic", "content": "Aditya keeps marmaladequartz jars in the pantry.",
        "attribute": "pantry", "source_kind": "user_statement",
        "evidence": "I keep marmaladequartz jars in the pantry",
    })  # fmt: skip
    found = await rt.tools.call(u1, "memory_search", {"queries": ["marmaladequartz jars"]})
    assert [r["record_id"] for r in found["results"]] == [written["record_id"]]
    log = await rt.store.search_log(found["search_id"])
    assert log is not None and "marmaladequartz" in log["lexical"]

    await rt.ops.erase(record=written["record_id"], reason="asked to forget")

    log = await rt.store.search_log(found["search_id"])
    assert log is not None and log["request"] == "{}" and log["lexical"] == "[]"
    # The turn is the session's, not the record's: erasing the record leaves the transcript.
    assert "marmaladequartz" not in await all_text(world, but=("session_turns",))


async def test_an_erased_records_words_leave_the_in_process_lexical_statistics(team: Any) -> None:
    world, u1, _ = team
    rt = world.rt
    u1 = await rt.hooks.on_turn(u1, "user", "The codename is obsidianwren.")
    written = await rt.tools.call(u1, "memory_write", {
        "type": "semantic", "content": "The project codename is obsidianwren.", "attribute": "codename",
        "source_kind": "user_statement", "evidence": "The codename is obsidianwren",
    })  # fmt: skip
    await rt.tools.call(u1, "memory_search", {"queries": ["obsidianwren"]})
    assert "obsidianwren" in cached_words(rt.store)  # the positive control: the search cached it
    await rt.ops.erase(record=written["record_id"], reason="asked to forget")
    assert not any("obsidianwren" in word for word in cached_words(rt.store))
    again = await rt.tools.call(u1, "memory_search", {"queries": ["obsidianwren"]})
    assert again["results"] == []
