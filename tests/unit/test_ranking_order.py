"""Properties of the whole rank stage on generated stores (issue 46): the passes beside the
best matches (same-day context, neighbours, replies) never outrank the match the channels
put first (the answers that tell a time, judged by their words, count as a channel).

Stores of one day (every record beside every other: a user's first few facts) and of many,
short and long records, semantic and episodic, records that ask and records that tell a
time; searched with the gate off. Checked on the rank stage's own output (the logged fused
list, before freshness sinks old episodes by design) and on the response where freshness
has nothing to sink (semantic records).
"""

from __future__ import annotations

import asyncio
import json
import tempfile
from datetime import timedelta
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import retold
from retold.models import Grant, Principal, Scope, SearchRequest
from retold.retrieve.fusion import read_flags
from retold.testing import FakeClock, FakeEmbedder, FakeJudge

from .factories import build_record
from .slow import examples

WORDS = [
    "beagle", "dog", "biscuit", "vegetarian", "fish", "window", "seat", "flight", "nurse",
    "hospital", "cello", "orchestra", "lisbon", "marathon", "april", "penicillin", "allergic",
    "yesterday", "week", "ago", "when", "did", "you", "how", "long",
]  # fmt: skip
USER = Scope("user", "u1")

records = st.lists(
    st.tuples(
        st.lists(st.sampled_from(WORDS), min_size=2, max_size=40),  # short facts and long turns
        st.sampled_from(["semantic", "episodic"]),
        st.booleans(),  # asks a question (ends with "?"): the replies pass reads it
    ),
    min_size=2,
    max_size=14,
)


async def scenario(path: Path, specs: list, days: int, query: list[str], asks: bool) -> None:  # type: ignore[type-arg]
    clock = FakeClock()
    async with retold.open_runtime(path, embedder=FakeEmbedder(64), judge=FakeJudge(), clock=clock) as rt:
        store = rt.store
        await store.set_grant(Grant("a1", USER, True, True))
        start = clock.now() - timedelta(days=days)
        for i, (words, kind, question) in enumerate(specs):
            at = start + timedelta(days=i % days if days > 1 else 0, seconds=i)
            content = " ".join(words) + ("?" if question else ".")
            record = build_record(clock.now(), content=content, type=kind, event_at=at)
            await store.insert_record(record)
            vector = rt.embedder.embed_documents([content])[0]
            await store.put_embedding(record.id, "fake-embedder", "1", vector)
        text = " ".join(query) + ("?" if asks else "")
        response = await rt.search(Principal("a1", "u1", "s"), SearchRequest(queries=[text], gate=False))
        row = await store.search_log(response.search_id)
        assert row is not None
        channels = [[hit[0] for hit in json.loads(row[name])] for name in ("dense", "lexical", "entity")]
        firsts = {ranking[0] for ranking in channels if ranking}
        if len(firsts) != 1:  # the channels disagree on the best match: nothing to hold
            return
        (best,) = firsts
        rows = json.loads(row["fused"])
        telling = [item[0] for item in rows if read_flags(item).tells_time]
        if telling and best not in telling:  # the answers that tell a time rank as a channel does
            return
        fused = [item[0] for item in rows]
        assert fused[0] == best, (fused[:4], channels)
        returned = [r.record.id for r in response.results]
        if all(kind == "semantic" for _, kind, _ in specs):
            assert returned[0] == best, (returned[:4], channels)


@settings(max_examples=examples(40), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    specs=records,
    days=st.sampled_from([1, 1, 3, 7]),
    query=st.lists(st.sampled_from(WORDS), min_size=1, max_size=5),
    asks=st.booleans(),
)
def test_a_record_first_in_every_channel_that_found_anything_is_first(specs, days, query, asks) -> None:  # type: ignore[no-untyped-def]
    with tempfile.TemporaryDirectory() as tmp:
        asyncio.run(scenario(Path(tmp) / "m.sqlite", specs, days, query, asks))
