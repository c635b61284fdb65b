"""Long records are also embedded in passages; a search scores them by their best one (issue 18)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import retold
from retold.index.passages import best_passage_cosines, split_passages
from retold.ingest.write.request import WriteRequest
from retold.models import SearchRequest
from retold.retrieve.fusion import read_flags
from retold.retrieve.passage_scores import lift, ranked
from retold.retrieve.replay import replay_gate
from retold.testing import FakeClock, FakeEmbedder, FakeJudge

from .writepath import make_world

LONG = (
    "I spent most of the weekend repainting the spare bedroom a pale green colour. "
    "My neighbour lent me his ladder and we argued about football for an hour. "
    "On Sunday morning I went to the early service at the cathedral with my aunt. "
    "Afterwards we had pancakes at the diner on Fifth Street and talked about her garden. "
    "In the evening I sorted my tax papers and finally found the missing receipts."
)


# --- splitting ------------------------------------------------------------------------------------


def test_a_text_that_fits_one_passage_has_none_and_zero_turns_them_off() -> None:
    assert split_passages("One short sentence.", 300) == []
    assert split_passages(LONG, 0) == []
    assert split_passages(LONG, len(LONG)) == []


def test_passages_pack_whole_sentences_in_order_up_to_the_limit() -> None:
    passages = split_passages(LONG, 170)
    assert len(passages) >= 2 and all(len(p) <= 170 for p in passages)
    assert " ".join(passages) == LONG  # nothing lost, nothing reordered, sentences whole
    assert passages[0].startswith("I spent") and passages[0].endswith(".")


def test_a_short_piece_joins_its_shorter_neighbour_instead_of_standing_alone() -> None:
    opening = "We drove up to the lake on Saturday and rented a small boat for the whole afternoon."
    middle = "The water was calm, so we rowed all the way across to the old lighthouse and back."
    text = f"{opening} {middle} Thanks, Mel!"
    assert split_passages(text, 90) == [opening, f"{middle} Thanks, Mel!"]
    # In the middle it joins the shorter side; a record left as one passage has none.
    assert split_passages(f"{opening} Wow! {middle}", 86) == [opening, f"Wow! {middle}"]
    assert split_passages(f"{opening} Ok.", 85) == []


def test_an_overlong_sentence_is_cut_between_words_and_an_overlong_word_where_it_must() -> None:
    sentence = " ".join(["word"] * 40)  # 199 characters, no full stop
    passages = split_passages(sentence, 50)
    assert all(len(p) <= 50 for p in passages) and " ".join(passages) == sentence
    token = "x" * 120
    assert split_passages(token, 50) == ["x" * 50, "x" * 50, "x" * 20]
    lines = "first line with some words\nsecond line with other words"
    assert split_passages(lines, 30) == ["first line with some words", "second line with other words"]


# --- scoring ---------------------------------------------------------------------------------------


def _unit(*values: float) -> np.ndarray:
    v = np.asarray(values, dtype=np.float32)
    return v / np.linalg.norm(v)


def test_a_record_scores_its_best_passage_and_the_dense_list_reranks_on_it() -> None:
    query = _unit(1, 0, 0)[None, :]
    blobs = {"long": [_unit(0, 1, 0).tobytes(), _unit(1, 1, 0).tobytes()], "empty": []}
    best = best_passage_cosines(blobs, query, 3)
    assert best == {"long": pytest.approx(0.707107)}
    dense = [("short", 0.9), ("long", 0.2), ("other", 0.5)]
    assert lift(dense, best) == [("short", 0.9), ("long", best["long"]), ("other", 0.5)]
    assert [r for r, _ in ranked(dense, best, k=10)] == ["short", "long", "other"]
    # A record the other channels found joins the list when it has passages; k still bounds it.
    best["lexical"] = 0.95
    assert [r for r, _ in ranked(dense, best, k=2, admit=["lexical", "nowhere"])] == ["lexical", "short"]
    # A passage never lowers a record's score.
    assert lift([("long", 0.8)], best) == [("long", 0.8)]


# --- in a store --------------------------------------------------------------------------------------


async def _count(store: Any) -> int:
    return int(await store.db.fetchval("SELECT count(*) FROM passage_vectors"))


async def test_a_long_record_answers_on_its_best_passage_and_the_replay_agrees(store_location: Any) -> None:
    # With the whole record's cosine under the floor and a passage's over it, only passages answer.
    embedder = FakeEmbedder()
    query = "cathedral early service"
    whole = float(embedder.embed_queries([query])[0] @ embedder.embed_documents([LONG])[0])
    passage = max(
        float(embedder.embed_queries([query])[0] @ v)
        for v in embedder.embed_documents(split_passages(LONG, 170))
    )
    assert passage > whole + 0.1
    floor = round((whole + passage) / 2, 2)
    config = retold.Config().override({
        "embedding.passage_chars": 170, "retrieval.gate.dense_floor.episodic": floor,
        "retrieval.gate.lexical_min_matched_terms": 50, "retrieval.gate.standout_floor": 1.0,
        "retrieval.gate.companion_floor": 1.0,
    })  # fmt: skip
    world = await make_world(store_location("passages.sqlite"), config=config)
    rt, p = world.rt, world.p
    try:
        written = await rt.host.ingest(p, WriteRequest(
            type="episodic", content=LONG, scope=p.user_scope, source_kind="user_statement", trusted=True,
        ))  # fmt: skip
        assert written.ok, written
        short = await rt.host.ingest(p, WriteRequest(
            type="episodic", content="Watered the garden.", scope=p.user_scope, source_kind="user_statement",
            trusted=True,
        ))  # fmt: skip
        assert short.ok, short
        stored = await rt.store.passage_vectors_for(
            [written.record_id, short.record_id], embedder.name, embedder.version, embedder.dims
        )
        assert list(stored) == [written.record_id] and len(stored[written.record_id]) >= 2
        response = await rt.search(p, SearchRequest(queries=[query], k=5))
        assert [r.record.id for r in response.results] == [written.record_id]
        # A best passage is held gate.passage_margin higher; the reason states the raised floor
        # against the cosine the log holds.
        margin = rt.config.retrieval.gate.passage_margin
        assert 0 < margin < passage - floor
        reason = f"dense {passage:.2f} >= {floor + margin:.2f} (episodic; best passage)"
        assert response.results[0].explanation.gate == reason
        log = await rt.store.search_log(response.search_id)
        assert log is not None
        assert json.loads(log["dense"])[0][:3] == [written.record_id, 1, pytest.approx(passage, abs=1e-4)]
        flags = {row[0]: read_flags(row) for row in json.loads(log["fused"])}
        assert flags[written.record_id].from_passage and not flags[short.record_id].from_passage
        replayed = await replay_gate(rt.store, response.search_id, rt.config)
        assert replayed.kept == [written.record_id]
        higher = await replay_gate(rt.store, response.search_id, rt.config.override(
            {"retrieval.gate.dense_floor.episodic": round(passage + 0.05, 2)}
        ))  # fmt: skip
        assert higher.empty_reason is not None and "(episodic; best passage)" in higher.empty_reason
        # The same floor with a margin the passage does not clear: nothing answers, and the reason
        # names the raised floor.
        held = await replay_gate(rt.store, response.search_id, rt.config.override(
            {"retrieval.gate.passage_margin": round(passage - floor + 0.02, 2)}
        ))  # fmt: skip
        assert held.kept == [] and held.empty_reason is not None
        raised = f"best dense {passage:.2f} < {passage + 0.02:.2f} (episodic; best passage)"
        assert raised in held.empty_reason
        # Erasing the record erases its passages' vectors too.
        await rt.ops.erase(record=written.record_id, reason="asked", actor="ops")
        assert await _count(rt.store) == 0
    finally:
        await rt.close()


async def test_reembed_rebuilds_the_passages_with_the_new_model(tmp_path: Path) -> None:
    path = tmp_path / "reembed.sqlite"
    config = retold.Config().override({"embedding.passage_chars": 170})
    world = await make_world(path, config=config)
    written = await world.rt.host.ingest(world.p, WriteRequest(
        type="episodic", content=LONG, scope=world.p.user_scope, source_kind="user_statement", trusted=True,
    ))  # fmt: skip
    assert written.ok
    await world.rt.close()
    async with retold.open_runtime(
        path, config, embedder=FakeEmbedder(version="2"), judge=FakeJudge(), clock=FakeClock(),
        allow_embedding_mismatch=True,
    ) as rt:  # fmt: skip
        assert await rt.store.passage_vectors_for([written.record_id], "fake-embedder", "2", 256) == {}
        await rt.ops.reembed("fake-embedder", "2")
        again = await rt.store.passage_vectors_for([written.record_id], "fake-embedder", "2", 256)
        assert len(again[written.record_id]) == len(split_passages(LONG, 170))
        assert await _count(rt.store) == len(split_passages(LONG, 170))  # version 1's are gone


@settings(max_examples=300, deadline=None)
@given(text=st.text(max_size=2000), max_chars=st.integers(min_value=0, max_value=400))
def test_any_text_splits_into_bounded_passages_that_keep_its_characters_in_order(
    text: str, max_chars: int
) -> None:
    passages = split_passages(text, max_chars)
    if max_chars == 0 or len(text.strip()) <= max_chars:
        assert passages == []
        return
    assert passages == [] or len(passages) >= 2
    # A piece under a third of the limit joins a neighbour: one from each side at most.
    assert all(0 < len(p) <= max_chars + 2 * (max_chars // 3) + 2 for p in passages)
    assert all(len(p) >= max_chars // 3 for p in passages)
    if passages:
        # Nothing lost or reordered; only a word longer than a passage is cut in pieces.
        assert "".join("".join(passages).split()) == "".join(text.split())


async def test_a_store_of_short_records_reads_no_passages_per_search(tmp_path: Path) -> None:
    world = await make_world(tmp_path / "short.sqlite")
    rt, p = world.rt, world.p
    try:
        asked: list[int] = []
        has_passages = rt.store.has_passages

        async def counted() -> bool:
            asked.append(1)
            return await has_passages()

        rt.store.has_passages = counted  # type: ignore[method-assign]
        for n in range(3):
            await rt.host.ingest(p, WriteRequest(
                type="episodic", content=f"Watered the garden, note {n}.", scope=p.user_scope,
                source_kind="user_statement", trusted=True,
            ))  # fmt: skip
        for _ in range(3):
            await rt.search(p, SearchRequest(queries=["garden"]))
        assert len(asked) == 1  # asked once for the store's version, not once per search
        written = await rt.host.ingest(p, WriteRequest(
            type="episodic", content=LONG, scope=p.user_scope, source_kind="user_statement", trusted=True,
        ))  # fmt: skip
        assert written.ok
        response = await rt.search(p, SearchRequest(queries=["cathedral early service"], gate=False))
        assert len(asked) == 2 and written.record_id in {r.record.id for r in response.results}
    finally:
        await rt.close()
