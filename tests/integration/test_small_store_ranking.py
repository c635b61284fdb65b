"""A user's first store: a few short facts written in one session, searched by paraphrase
with the packaged embedder (issue 46).

Every record shares one day and sits beside every other, so the passes that read beside the
best matches (same-day context, neighbours, replies) find everything; they must not lift a
fact above the one the channels found. With the gate off, retold puts the right fact first
at least as often as an exact cosine scan over the same model does (what LangGraph's
InMemoryStore or Chroma return), whichever way the facts were written.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import numpy as np
import pytest

import retold
from retold import Principal, Scope
from retold.models import SearchRequest

pytestmark = pytest.mark.integration

FACTS = [
    ("Has a beagle named Biscuit.", "pet", "does the user own a dog"),
    ("Is vegetarian and avoids fish.", "diet", "what food restrictions does the user have"),
    ("Prefers window seats on long flights.", "seat", "where does the user like to sit on a plane"),
    ("Works as a nurse at the city hospital.", "job", "what is the user's occupation"),
    ("Is allergic to penicillin.", "allergy", "which medication must the user not take"),
    ("Plays the cello in a community orchestra.", "music", "does the user play an instrument"),
    ("Lives in Lisbon with two roommates.", "home", "where does the user live"),
    ("Is training for a half marathon in April.", "sport", "what race is the user preparing for"),
]


@pytest.fixture
async def runtime(tmp_path: Path) -> AsyncIterator[retold.Runtime]:
    async with retold.open_runtime(tmp_path / "memory.sqlite") as rt:
        await rt.warm()
        await rt.host.provision_user("u1")
        await rt.host.grant("a", Scope("user", "u1"), read=True, write=True)
        yield rt


def dense_firsts(rt: retold.Runtime) -> int:
    """How many questions an exact cosine scan over the same model answers with the right fact first."""
    docs = rt.embedder.embed_documents([fact for fact, _, _ in FACTS])
    queries = rt.embedder.embed_queries([question for _, _, question in FACTS])
    return int(sum(int(np.argmax(docs @ q)) == i for i, q in enumerate(queries)))


@pytest.mark.parametrize("kind", ["semantic", "episodic"])
async def test_the_right_fact_is_first_as_often_as_an_exact_scan_finds_it(
    runtime: retold.Runtime, kind: str
) -> None:
    rt = runtime
    p = await rt.hooks.on_session_start(Principal(agent_id="a", user_id="u1", session_id="s1"))
    ids: dict[str, str] = {}
    for fact, attribute, _ in FACTS:
        payload = {"type": kind, "content": fact} | ({"attribute": attribute} if kind == "semantic" else {})
        result = await rt.tools.call(p, "memory_write", payload)
        assert result["ok"], result
        ids[result["record_id"]] = fact
    firsts = 0
    for fact, _, question in FACTS:
        response = await rt.search(p, SearchRequest(queries=[question], gate=False))
        top = [ids.get(r.record.id) for r in response.results]
        firsts += bool(top) and top[0] == fact
    assert firsts >= dense_firsts(rt), firsts


UNRELATED = [
    "what is the password of the staging database", "who won the world cup in 1998",
    "how do I configure nginx as a reverse proxy", "what is the capital of Australia",
    "explain the difference between TCP and UDP", "when is the quarterly tax deadline",
    "what did the board decide about the merger", "recommend a good sci-fi novel",
]  # fmt: skip


@pytest.mark.parametrize("kind", ["semantic", "episodic"])
async def test_with_the_gate_on_a_paraphrase_finds_its_fact_and_an_unrelated_question_nothing(
    runtime: retold.Runtime, kind: str
) -> None:
    """The gate's standout rule reads a handful of matches too (gate.STANDOUT_MIN_MATCHES): a
    paraphrase under the type's dense floor that clearly stands out of the others is found."""
    rt = runtime
    p = await rt.hooks.on_session_start(Principal(agent_id="a", user_id="u1", session_id="s1"))
    ids: dict[str, str] = {}
    for fact, attribute, _ in FACTS:
        payload = {"type": kind, "content": fact} | ({"attribute": attribute} if kind == "semantic" else {})
        ids[(await rt.tools.call(p, "memory_write", payload))["record_id"]] = fact
    firsts = 0
    for fact, _, question in FACTS:
        results = (await rt.search(p, SearchRequest(queries=[question]))).results
        firsts += bool(results) and ids.get(results[0].record.id) == fact
        for r in results:  # a companion clears a real floor, not cosine 0.03 for sharing a day
            dense = r.explanation.dense
            if r.explanation.gate.startswith("companion"):
                assert dense is not None and dense.score >= 0.1, r.explanation.gate
    assert firsts >= 6, firsts  # at ten matches the rule was off: 5 and 1 of 8
    for question in UNRELATED:
        assert not (await rt.search(p, SearchRequest(queries=[question]))).results, question
