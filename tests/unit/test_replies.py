"""The reply to a question like the searcher's joins fusion (retold.retrieve.replies)."""

from __future__ import annotations

import json
from typing import Any

import pytest

import retold
from retold.ingest.write.request import WriteRequest
from retold.models import Principal, SearchRequest
from retold.retrieve.explain import summary_line
from retold.retrieve.fusion import fuse, logged_flags, read_flags
from retold.retrieve.gate import STANDOUT_MIN_MATCHES, dense_reference
from retold.retrieve.replay import replay_gate
from retold.retrieve.replies import SCAN_CHARS, holds_question, reply_list

from .writepath import make_world


@pytest.mark.parametrize(
    ("text", "asks"),
    [
        ("Awww! How long have you had them?", True),
        ("Where did you go? Tell me everything!", True),
        ('She asked "why not?" and left.', True),
        ("I wonder where it is.", False),
        ("See https://example.com/?q=dogs for more", False),
        ("x" * SCAN_CHARS + " Where was it?", False),  # only the head is read
    ],
)
def test_a_candidate_that_holds_a_question(text: str, asks: bool) -> None:
    assert holds_question(text) is asks


def test_replies_keep_their_askers_order_each_once() -> None:
    assert reply_list(["a", "b", "c", "d"], {"c": "r1", "a": "r2", "d": "r1"}) == ["r2", "r1"]
    assert reply_list(["a"], {}) == []


def test_fusion_lifts_the_replies_at_their_weight() -> None:
    dense = [("q", 0.9), ("x", 0.8), ("r", 0.1)]
    lifted = {c.record_id: c for c in fuse(dense, [], [], 10, replies=["r"], reply_weight=0.5)}
    assert lifted["r"].rrf_score == pytest.approx(1 / 13 + 0.5 / 11)
    assert lifted["q"].rrf_score == pytest.approx(1 / 11)


# --- in a real store -----------------------------------------------------------------------------

CHAT = [  # one conversation, in order, one day
    "Pepper is such a cute puppy name",
    "How long have you had Pepper?",
    "Oh, for six years now!",
    "Where does Pepper like to run?",
    "The dunes by the lighthouse.",
    "When did you buy Pepper's collar?",
    "It is the red one with stars.",
]
ASKED = {
    "How long have I had Pepper?": 2,  # a when-question: the reply tells a time
    "Where does Pepper like to run?": 4,
}


async def _conversation(
    store_location: Any, name: str, depth: int, **retrieval: Any
) -> tuple[Any, Any, list[str], str]:
    config = retold.Config().override({
        "retrieval.reply_depth": depth, "retrieval.neighbour_anchors": 0, "retrieval.context_k": 0,
        "retrieval.per_generator_k": 3, "retrieval.time_answer_depth": 3,
        **{f"retrieval.{key}": value for key, value in retrieval.items()},
    })  # fmt: skip
    world = await make_world(store_location(name), config=config)
    rt, p = world.rt, world.p
    await rt.host.provision_user("u2")
    other = await rt.hooks.on_session_start(Principal("planner", "u2", "s2"))
    ids: list[str] = []
    theirs = ""
    for i, content in enumerate(CHAT):
        written = await rt.host.ingest(p, WriteRequest(
            type="episodic", content=content, scope=p.user_scope, source_kind="user_statement", trusted=True,
        ))  # fmt: skip
        assert written.ok, written
        ids.append(written.record_id)
        world.clock.advance(minutes=1)
        if i == 1:  # another user's turn, written just after a question: never its reply
            their = await rt.host.ingest(other, WriteRequest(
                type="episodic", content="Since 2019, best decision.", scope=other.user_scope,
                source_kind="user_statement", trusted=True,
            ))  # fmt: skip
            assert their.ok, their
            theirs = their.record_id
            world.clock.advance(minutes=1)
    return rt, p, ids, theirs


async def _fused(rt: Any, p: Any, query: str) -> tuple[dict[str, list[Any]], Any]:
    response = await rt.search(p, SearchRequest(queries=[query], gate=False))
    log = await rt.store.search_log(response.search_id)
    assert log is not None
    return {row[0]: row for row in json.loads(log["fused"])}, log


UNANSWERED = [
    "When did I buy the collar?",  # asked when: its reply tells no time, so it is no answer
    "I love the dunes by the lighthouse.",  # a plain statement asks nothing
]


async def _scores(rt: Any, p: Any, ids: list[str], query: str) -> dict[int, float]:
    fused, _ = await _fused(rt, p, query)
    return {i: fused[rid][2] for i, rid in enumerate(ids) if rid in fused}


async def test_the_reply_to_a_question_like_the_searchers_joins_fusion(store_location: Any) -> None:
    rt, p, ids, _ = await _conversation(store_location, "no-replies.sqlite", 0)
    try:
        for query, answer in ASKED.items():
            fused, _ = await _fused(rt, p, query)
            assert ids[answer] not in fused  # it shares no word with the question
        before = {query: await _scores(rt, p, ids, query) for query in UNANSWERED}
    finally:
        await rt.close()
    rt, p, ids, theirs = await _conversation(store_location, "replies.sqlite", 3)
    try:
        for query, answer in ASKED.items():
            fused, log = await _fused(rt, p, query)
            assert ids[answer] in fused and theirs not in fused
            assert ids[answer] in {row[0] for row in json.loads(log["dense"])}  # with its real cosine
            gated = await rt.search(p, SearchRequest(queries=[query]))
            replayed = await replay_gate(rt.store, gated.search_id, rt.config)
            assert replayed.kept[: len(gated.results)] == [r.record.id for r in gated.results]
        fused, _ = await _fused(rt, p, "How long have I had Pepper?")
        assert read_flags(fused[ids[2]]).tells_time
        for query in UNANSWERED:
            assert await _scores(rt, p, ids, query) == before[query]
    finally:
        await rt.close()


@pytest.mark.parametrize("busy", [300, 2], ids=["day-read", "day-too-busy"])
async def test_a_search_reads_its_anchors_days_once_for_the_neighbours_and_the_replies(
    store_location: Any, busy: int
) -> None:
    # The neighbours' anchors and the askers share one day: the replies reuse the neighbours'
    # read of it, or (a day too busy to read whole) do not try it again.
    rt, p, ids, theirs = await _conversation(
        store_location, "once.sqlite", 3, neighbour_anchors=2, context_max_records=busy
    )
    try:
        reads: list[int] = []
        read_days = rt.store.eligible_sequence_upto

        async def counted(*args: Any, **kwargs: Any) -> Any:
            found = await read_days(*args, **kwargs)
            reads.append(-1 if found is None else len(found))
            return found

        rt.store.eligible_sequence_upto = counted
        for query, answer in ASKED.items():
            reads.clear()
            fused, _ = await _fused(rt, p, query)
            assert ids[answer] in fused and theirs not in fused
            assert reads == ([len(CHAT)] if busy > len(CHAT) else [-1])
    finally:
        await rt.close()


def test_replies_are_flagged_logged_and_never_lower_the_bar_a_standout_clears() -> None:
    dense = [("q", 0.9), *((f"m{i}", 0.5) for i in range(STANDOUT_MIN_MATCHES)), ("r", 0.05)]
    fused = {c.record_id: c for c in fuse(dense, [], [], 10, replies=["r"], reply_weight=0.5)}
    reply = fused["r"]
    assert reply.is_reply and not fused["m0"].is_reply
    assert read_flags([reply.record_id, reply.fused_rank, reply.rrf_score, *logged_flags(reply)]).is_reply
    assert "the reply to a question like the query" in summary_line(reply, None)
    # The best stands out from the channel's own matches, not from a reply's low cosine.
    assert dense_reference(list(fused.values())).mean == pytest.approx(0.5)  # type: ignore[union-attr]
    n = STANDOUT_MIN_MATCHES
    assert dense_reference(fuse(dense, [], [], 10)).mean == pytest.approx(  # type: ignore[union-attr]
        (0.5 * n + 0.05) / (n + 1)
    )
