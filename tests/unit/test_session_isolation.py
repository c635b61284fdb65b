"""Property: whatever session ids two principals choose, one's words never reach the other.

Two principals (different users, or the same user through different agents) pick
adversarial session ids — prefixes of each other, idle-split look-alikes (``t1~7``),
``%``, ``_``, ``~``, unicode, very long ones — and interleave turns, idle gaps, session
ends and ``memory_write`` calls that quote either principal's words. Every turn carries a
marker unique to its speaker. Afterwards no marker of one principal is in a transcript,
an evidence quote or a source credited to the other, and every record whose evidence
quotes a principal's words is supported by that principal alone.
"""

from __future__ import annotations

import asyncio
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import retold
from retold.models import MAX_ID_CHARS, Principal, Scope, SessionKey
from retold.testing import FakeClock, FakeEmbedder, FakeJudge

from .slow import examples

PRINCIPALS = (Principal("planner", "u1"), Principal("planner", "u2"), Principal("helper", "u1"))

_ID_ALPHABET = st.sampled_from([*"t1~%_-. é中ßΩ", "~7", "~2", "~02", "~²"])
session_ids = st.one_of(
    st.sampled_from(["t1", "t1~7", "t1~2", "t", "t1%", "t_1", "t1~", "~", "~2", "t1~2~3", "T1"]),
    st.lists(_ID_ALPHABET, min_size=1, max_size=12).map("".join),
    st.integers(min_value=1, max_value=MAX_ID_CHARS - 2).map(lambda n: ("t1" + "~" * n)[:MAX_ID_CHARS]),
).filter(lambda s: bool(s.strip()))

step = st.one_of(
    st.tuples(st.just("turn"), st.integers(0, 1), st.sampled_from(["user", "tool", "assistant"])),
    st.tuples(st.just("idle"), st.integers(0, 1), st.just("")),
    st.tuples(st.just("end"), st.integers(0, 1), st.just("")),
    st.tuples(st.just("write"), st.integers(0, 1), st.sampled_from(["own", "other"])),
)


def marker(who: int, n: int) -> str:
    return f"mk{who}x{n}zq"


async def scenario(path: Path, pair: tuple[Principal, Principal], ids: tuple[str, str], steps: list) -> None:  # type: ignore[type-arg]
    clock = FakeClock()
    async with retold.open_runtime(path, embedder=FakeEmbedder(64), judge=FakeJudge(), clock=clock) as rt:
        for p in pair:
            await rt.host.grant(p.agent_id, Scope("user", p.user_id), read=True, write=True)
        current = [Principal(p.agent_id, p.user_id, sid) for p, sid in zip(pair, ids, strict=True)]
        said: list[list[str]] = [[], []]
        for n, (kind, who, arg) in enumerate(steps):
            p = current[who]
            if kind == "turn":
                said[who].append(marker(who, n))
                current[who] = await rt.hooks.on_turn(p, arg, f"the word is {marker(who, n)} today")
            elif kind == "idle":
                clock.advance(minutes=45)
            elif kind == "end":
                await rt.hooks.on_session_end(await rt.hooks.on_session_start(p))
            else:
                source = said[who if arg == "own" else 1 - who]
                quote = f"the word is {source[-1]}" if source else "the word is nothing"
                result = await rt.tools.call(p, "memory_write", {
                    "type": "episodic", "content": f"A note {n} about {quote}.",
                    "source_kind": "user_statement", "evidence": quote,
                })  # fmt: skip
                assert result["ok"], result

        owners = [{(q.agent_id, q.user_id)} for q in pair]
        for who in (0, 1):
            theirs = set(said[1 - who])
            for session in await rt.store.sessions_for_user(pair[who].user_id):
                if (session.agent_id, session.user_id) not in owners[who]:
                    continue
                for turn in await rt.store.turns(session.key):
                    assert not any(m in turn.content for m in theirs), (session.key, turn.content)
            for source in await rt.store.sources_from_user(pair[who].user_id):
                if source.agent_id != pair[who].agent_id:
                    continue
                assert not any(m in (source.evidence or "") for m in theirs), source
        for p_index, p in enumerate(pair):
            for record in await rt.store.records_in_scope(Scope("user", p.user_id)):
                if record.evidence is None:
                    continue
                speakers = {i for i in (0, 1) if any(m in record.evidence for m in said[i])}
                for source in await rt.store.sources_of(record.id):
                    owner = next(i for i, q in enumerate(pair) if (q.agent_id, q.user_id) ==
                                 (source.agent_id, source.user_id))  # fmt: skip
                    if source.evidence is not None:
                        assert speakers <= {owner}, (p_index, record.evidence, source)
        # Each principal's own chain still works after everything: a turn lands in its own session.
        for who, p in enumerate(current):
            p = await rt.hooks.on_turn(p, "user", f"final {marker(who, 999)}")
            turns = await rt.store.turns(SessionKey.of(p))
            assert turns[-1].content == f"final {marker(who, 999)}"


@settings(max_examples=examples(25), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    pair=st.sampled_from([(PRINCIPALS[0], PRINCIPALS[1]), (PRINCIPALS[0], PRINCIPALS[2])]),
    ids=st.tuples(session_ids, session_ids),
    steps=st.lists(step, min_size=1, max_size=14),
)
def test_no_session_id_lets_one_principal_reach_anothers_words(pair, ids, steps) -> None:  # type: ignore[no-untyped-def]
    with tempfile.TemporaryDirectory() as tmp:
        asyncio.run(scenario(Path(tmp) / "m.sqlite", pair, ids, steps))
