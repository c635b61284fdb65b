"""RetoldStore beside LangGraph's InMemoryStore over the same packaged embedder (issue 47, item 2).

A LangGraph user moving from InMemoryStore keeps what they rely on: a saved value never
expires unless a ttl says so, a prefix such as ``("memories",)`` searches every namespace
under it, ``score`` is the cosine InMemoryStore reports, and a value too long to index is
refused with the limit named. With the gate off the right fact is first at least as often;
with it on, an unrelated question finds nothing.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from langchain_core.embeddings import Embeddings
from langgraph.store.memory import InMemoryStore

import retold
from retold import Scope
from retold.adapters.langgraph_store import RetoldStore, StoreRefusedError
from retold.tools import limits

sys.path.insert(0, str(Path(__file__).parent))
from test_small_store_ranking import FACTS, UNRELATED

pytestmark = pytest.mark.integration
NS = ("memories", "u1")


class SameModel(Embeddings):
    """retold's embedder as LangChain embeddings, so InMemoryStore scores with the same model."""

    def __init__(self, embedder: object) -> None:
        self.embedder = embedder

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return self.embedder.embed_documents(texts).tolist()  # type: ignore[attr-defined]

    def embed_query(self, text: str) -> list[float]:
        return self.embedder.embed_queries([text])[0].tolist()  # type: ignore[attr-defined]


@pytest.fixture
async def stores(
    tmp_path: Path,
) -> AsyncIterator[tuple[retold.Runtime, RetoldStore, RetoldStore, InMemoryStore]]:
    async with retold.open_runtime(tmp_path / "memory.sqlite") as rt:
        await rt.warm()
        await rt.host.provision_user("u1")
        await rt.host.grant("a", Scope("user", "u1"), read=True, write=True)
        gated = RetoldStore(rt, agent_id="a", default_user_id="u1")
        ungated = RetoldStore(rt, agent_id="a", default_user_id="u1", gate=False)
        known = InMemoryStore(index={"dims": 384, "embed": SameModel(rt.embedder), "fields": ["content"]})
        for i, (fact, _, _) in enumerate(FACTS):
            await gated.aput(NS, f"k{i}", {"content": fact})
            await known.aput(NS, f"k{i}", {"content": fact})
        yield rt, gated, ungated, known


async def test_a_saved_value_never_expires_without_a_ttl(stores) -> None:  # type: ignore[no-untyped-def]
    rt, store, _, _ = stores
    for i in range(len(FACTS)):
        row = await rt.store.store_item_row('["memories","u1"]', f"k{i}")
        assert row is not None and row.record_id is not None
        record = await rt.store.get_record(row.record_id)
        assert record is not None and record.expires_at is None, record
    await store.aput(NS, "short", {"content": "Keeps a sourdough starter named Clint."}, ttl=60)
    row = await rt.store.store_item_row('["memories","u1"]', "short")
    record = await rt.store.get_record(row.record_id)  # type: ignore[union-attr]
    assert record is not None and record.expires_at is not None


async def test_prefix_search_and_listing_reach_every_namespace_under_it(stores) -> None:  # type: ignore[no-untyped-def]
    _, store, _, known = stores
    await store.aput(("memories", "u1", "prefs"), "tone", {"content": "Likes terse replies without emoji."})
    await known.aput(("memories", "u1", "prefs"), "tone", {"content": "Likes terse replies without emoji."})
    for prefix in (("memories",), ()):
        ours = {(tuple(i.namespace), i.key) for i in await store.asearch(prefix, limit=100)}
        theirs = {(tuple(i.namespace), i.key) for i in await known.asearch(prefix, limit=100)}
        assert ours == theirs, prefix
    found = await store.asearch(("memories",), query="how chatty should replies be")
    assert found and found[0].key == "tone"
    assert await store.asearch(("elsewhere",), query="anything") == []


async def test_score_is_the_cosine_inmemorystore_reports(stores) -> None:  # type: ignore[no-untyped-def]
    _, _, ungated, known = stores
    for _, _, question in FACTS:
        ours = {i.key: i.score for i in await ungated.asearch(NS, query=question, limit=20)}
        theirs = {i.key: i.score for i in await known.asearch(NS, query=question, limit=20)}
        assert ours, question
        for key, score in ours.items():
            assert 0.0 <= score <= 1.0
            assert score == pytest.approx(max(0.0, theirs[key]), abs=1e-4), (question, key)


async def test_the_right_fact_is_first_as_often_and_unrelated_questions_find_nothing(stores) -> None:  # type: ignore[no-untyped-def]
    _, gated, ungated, known = stores
    ours = theirs = 0
    for i, (_, _, question) in enumerate(FACTS):
        hits = await ungated.asearch(NS, query=question)
        ours += bool(hits) and hits[0].key == f"k{i}"
        best = await known.asearch(NS, query=question)
        theirs += bool(best) and best[0].key == f"k{i}"
    assert ours >= theirs, (ours, theirs)
    for question in UNRELATED:
        assert await gated.asearch(NS, query=question) == [], question


async def test_a_value_too_long_to_index_is_refused_with_the_limit_named(stores) -> None:  # type: ignore[no-untyped-def]
    rt, store, _, _ = stores
    before = await rt.store.store_item_row('["memories","u1"]', "long")
    with pytest.raises(StoreRefusedError) as refused:
        await store.aput(NS, "long", {"content": "word " * 400})
    assert f"{limits.MAX_CONTENT_CHARS:,}" in refused.value.message and "index=False" in refused.value.message
    assert before is None and await rt.store.store_item_row('["memories","u1"]', "long") is None
    await store.aput(NS, "long", {"content": "word " * 400}, index=False)  # kept, unsearched
    assert (await store.aget(NS, "long")) is not None


def test_a_blind_set_of_saved_facts_is_found_by_paraphrase_and_unrelated_questions_find_nothing(
    tmp_path: Path,
) -> None:
    """benchmarks/store_paraphrase.py on the blind labelled set (six personas, questions that
    share no content word with their fact): stores of one fact and of ten, through the store.

    InMemoryStore returns its nearest item for every question, so it is "first" 100 % and 92.5 %
    of the time and answers every unrelated question too. retold's gate measured 75.8 % and
    68.3 % first with 0.7 % and 6.7 % of unrelated questions answered; on this embedder no
    cosine floor reaches InMemoryStore's rate without answering a third of the unrelated
    questions (docs/decisions.md, "A handful of facts still has a standout").
    """
    out = tmp_path / "paraphrase.json"
    proc = subprocess.run(
        [sys.executable, str(Path(__file__).parents[2] / "benchmarks" / "store_paraphrase.py"),
         "--sizes", "1,10", "--json", str(out)],
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    sizes = json.loads(out.read_text())["sizes"]
    one, ten = sizes["1"], sizes["10"]
    assert one["questions"] == ten["questions"] == 120 and (one["unrelated"], ten["unrelated"]) == (600, 60)
    assert one["retold_first"] >= 0.75 and one["unrelated_answered"] <= 0.02, one
    assert ten["retold_first"] >= 0.65 and ten["unrelated_answered"] <= 0.07, ten
    assert ten["inmemory_first"] < 1.0  # the nearest item is not always the right one
