"""Fuzzing the session hooks: hostile text and ids never raise past a structured refusal.

Turns arrive from frameworks and end users: lone surrogates, NUL and other control
characters, very long text, text that is not a string, roles that are not roles. A
turn is always kept (made storable) or refused with :class:`InvalidArgumentError` that
changes nothing; a principal with an unusable id is refused when it is built. Every kept
turn reads back as valid UTF-8 text, and the session keeps working afterwards.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from retold.errors import InvalidArgumentError
from retold.ingest.write.session import MAX_TURN_CHARS
from retold.models import Principal, SessionKey

from .slow import examples
from .test_operations import table_rows
from .writepath import World, make_world

hostile_text = st.one_of(
    st.text(),
    st.text(alphabet=st.characters(blacklist_categories=())),  # surrogates and controls included
    st.sampled_from(["\ud800", "a\udfffb", "\x00", "nul\x00inside", "\x1b[31m", "\u2028", "\ufeff"]),
    st.integers(0, 4).map(lambda n: "x" * (MAX_TURN_CHARS + n)),
)
roles = st.one_of(
    st.sampled_from(["user", "assistant", "tool"]), st.text(max_size=5), st.none(), st.integers()
)
contents = st.one_of(hostile_text, st.none(), st.integers(), st.lists(st.text(), max_size=2))


class Harness:
    def __init__(self, path: Path) -> None:
        self.loop = asyncio.new_event_loop()
        self.world: World = self.loop.run_until_complete(make_world(path))

    def close(self) -> None:
        self.loop.run_until_complete(self.world.rt.close())
        self.loop.close()


@pytest.fixture(scope="module")
def harness(tmp_path_factory: pytest.TempPathFactory) -> Any:
    h = Harness(tmp_path_factory.mktemp("hooks") / "m.sqlite")
    yield h
    h.close()


@settings(max_examples=examples(150), deadline=None, suppress_health_check=list(HealthCheck))
@given(role=roles, content=contents)
def test_a_turn_is_kept_storable_or_refused_without_a_trace(
    harness: Harness, role: Any, content: Any
) -> None:
    rt = harness.world.rt

    async def attempt() -> None:
        p = harness.world.p
        before = await table_rows(rt.store)
        try:
            p = await rt.hooks.on_turn(p, role, content)
        except InvalidArgumentError as refused:
            str(refused).encode("utf-8")  # the message itself is safe to print or send
            assert await table_rows(rt.store) == before
            return
        harness.world.p = p
        last = (await rt.store.turns(SessionKey.of(p)))[-1]
        last.content.encode("utf-8")
        assert len(last.content) <= MAX_TURN_CHARS and "\x00" not in last.content
        assert last.role == role and isinstance(content, str)

    harness.loop.run_until_complete(attempt())


@settings(max_examples=examples(100), deadline=None)
@given(
    ids=st.tuples(st.text(max_size=600), st.text(max_size=600), st.one_of(st.none(), st.text(max_size=600)))
)
def test_a_principal_with_an_unusable_id_is_refused_when_built(ids: tuple[str, str, str | None]) -> None:
    try:
        principal = Principal(*ids)
    except InvalidArgumentError as refused:
        str(refused).encode("utf-8")
        return
    for value in (principal.agent_id, principal.user_id, principal.session_id or "x"):
        value.encode("utf-8")
        assert value.isprintable() or not any(ord(c) < 32 for c in value)


async def test_the_issue_reproductions_through_the_hooks(world: World) -> None:
    """A lone surrogate in a turn is kept as U+FFFD; the session goes on and evidence still matches."""
    world.p = await world.rt.hooks.on_turn(world.p, "user", "I prefer green tea\ud800, not coffee.")
    (turn,) = await world.rt.store.turns(SessionKey.of(world.p))
    assert turn.content == "I prefer green tea\ufffd, not coffee."
    result = await world.rt.tools.call(world.p, "memory_write", {
        "type": "semantic", "content": "Aditya prefers tea.", "attribute": "drink",
        "source_kind": "user_statement", "evidence": "I prefer green tea",
    })  # fmt: skip
    assert result["ok"] and result["status"] == "confirmed", result
    with pytest.raises(InvalidArgumentError, match="unpaired surrogate"):
        Principal("planner", "u1", "s\ud800")
