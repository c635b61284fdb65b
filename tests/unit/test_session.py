"""Session buffer and hooks (spec §12): numbering, tool turns, idle split, idempotent end."""

from __future__ import annotations

import pytest

from retold.errors import InvalidArgumentError
from retold.ingest.write.session import base_session_id, split_session_id
from retold.models import MAX_ID_CHARS, Principal, SessionInfo, SessionKey

from .writepath import World


async def test_turns_are_numbered_in_arrival_order_and_tool_turns_keep_result_text(world: World) -> None:
    for role, text in (("user", "hi"), ("assistant", "calling tool"), ("tool", "result: 42 rows")):
        await world.say(role, text)
    turns = await world.rt.store.turns(SessionKey("planner", "u1", "s1"))
    assert [(t.turn, t.role, t.content) for t in turns] == [
        (1, "user", "hi"), (2, "assistant", "calling tool"), (3, "tool", "result: 42 rows"),
    ]  # fmt: skip


async def test_idle_gap_splits_the_session_with_an_event_and_schedules_the_old_one(world: World) -> None:
    ended: list[SessionInfo] = []

    async def record_end(session: SessionInfo) -> None:
        ended.append(session)

    world.rt.hooks.on_end = record_end
    await world.say("user", "first segment")
    world.clock.advance(minutes=31)
    await world.say("user", "after lunch")
    assert world.p.session_id == "s1~2"
    assert [s.id for s in ended] == ["s1"]
    (event,) = await world.events("session.split")
    assert event["payload"] == {
        "from": "s1",
        "to": "s1~2",
        "reason": "idle",
        "agent_id": "planner",
        "user_id": "u1",
    }
    assert [t.content for t in await world.rt.store.turns(SessionKey("planner", "u1", "s1~2"))] == [
        "after lunch"
    ]
    world.clock.advance(minutes=31)
    await world.say("user", "evening")
    assert world.p.session_id == "s1~3"


async def test_a_caller_that_keeps_the_old_id_does_not_fork_the_chain(world: World) -> None:
    await world.say("user", "one")
    world.clock.advance(minutes=45)
    stale = Principal("planner", "u1", "s1")
    kept = await world.rt.hooks.on_turn(stale, "user", "two")
    again = await world.rt.hooks.on_turn(stale, "user", "three")
    assert kept.session_id == again.session_id == "s1~2"
    assert [t.content for t in await world.rt.store.turns(SessionKey("planner", "u1", "s1~2"))] == [
        "two",
        "three",
    ]


async def test_ending_twice_is_a_no_op_and_schedules_once(world: World) -> None:
    calls: list[str] = []

    async def record_end(session: SessionInfo) -> None:
        calls.append(session.id)

    world.rt.hooks.on_end = record_end
    await world.say("user", "hello")
    assert await world.rt.hooks.on_session_end(world.p) is True
    assert await world.rt.hooks.on_session_end(world.p) is False
    assert calls == ["s1"]
    session = await world.rt.store.get_session(SessionKey("planner", "u1", "s1"))
    assert session is not None and session.ended_at is not None


async def test_a_turn_after_an_explicit_end_continues_in_a_new_segment(world: World) -> None:
    await world.say("user", "hello")
    await world.rt.hooks.on_session_end(world.p)
    await world.say("user", "one more thing")
    assert world.p.session_id == "s1~2"
    (event,) = await world.events("session.split")
    assert event["payload"]["reason"] == "ended"


async def test_a_session_id_names_one_session_per_principal(world: World) -> None:
    """Another user's "s1" is a session of its own, not a way into u1's transcript."""
    await world.say("user", "mine")
    other = await world.rt.hooks.on_turn(Principal("planner", "u2", "s1"), "user", "theirs")
    assert other.session_id == "s1"
    assert [t.content for t in await world.rt.store.turns(SessionKey.of(world.p))] == ["mine"]
    assert [t.content for t in await world.rt.store.turns(SessionKey.of(other))] == ["theirs"]
    with pytest.raises(InvalidArgumentError, match="role"):
        await world.rt.hooks.on_turn(world.p, "system", "hi")
    with pytest.raises(InvalidArgumentError, match="session_id"):
        await world.rt.hooks.on_session_start(Principal("planner", "u1"))


def test_split_ids() -> None:
    assert split_session_id("s1") == "s1~2" and split_session_id("s1~2") == "s1~3"
    assert base_session_id("s1~9") == "s1" and base_session_id("a~b") == "a~b"
    # Found by the 10,000-example session property: a blank base is no base.
    assert base_session_id(" ~7") == " ~7" and split_session_id(" ~7") == " ~7~2"


async def test_a_session_id_with_a_blank_base_keeps_its_turns_and_splits(world: World) -> None:
    p = await world.rt.hooks.on_turn(Principal("planner", "u1", " ~7"), "user", "first")
    world.clock.advance(minutes=45)
    p = await world.rt.hooks.on_turn(p, "user", "after the gap")
    assert p.session_id == " ~7~2"
    assert [t.content for t in await world.rt.store.turns(SessionKey.of(p))] == ["after the gap"]


async def test_a_longest_session_id_still_splits_and_a_longer_new_one_is_refused(world: World) -> None:
    longest = Principal("planner", "u1", "t" * MAX_ID_CHARS)
    p = await world.rt.hooks.on_turn(longest, "user", "first")
    world.clock.advance(minutes=45)
    p = await world.rt.hooks.on_turn(p, "user", "after the gap")
    assert p.session_id == "t" * MAX_ID_CHARS + "~2"  # a continuation may grow past the limit
    assert [t.content for t in await world.rt.store.turns(SessionKey.of(p))] == ["after the gap"]
    with pytest.raises(InvalidArgumentError, match="at most 512"):
        await world.rt.hooks.on_turn(Principal("planner", "u1", "t" * (MAX_ID_CHARS + 1)), "user", "x")
