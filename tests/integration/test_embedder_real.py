"""The packaged all-MiniLM-L6-v2 embedder, loaded for real and offline, end to end with the index."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from retold.config import EmbeddingConfig
from retold.index.embedder import (
    PACKAGED_SHA256,
    SentenceTransformerEmbedder,
    embed_documents,
    embed_queries,
    packaged_model_path,
)
from retold.index.embedding_backend import build_embedder
from retold.index.vector import VectorIndex
from retold.models import Record, Scope
from retold.store import Store
from retold.util import new_id

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def embedder() -> Iterator[SentenceTransformerEmbedder]:
    """The default config's embedder (the ONNX backend where it serves), loaded once."""
    previous = os.environ.get("HF_HUB_OFFLINE")
    os.environ["HF_HUB_OFFLINE"] = "1"  # nothing may reach a model hub
    try:
        built = build_embedder(EmbeddingConfig())
        built.warm()
        yield built
    finally:
        if previous is None:
            os.environ.pop("HF_HUB_OFFLINE", None)
        else:
            os.environ["HF_HUB_OFFLINE"] = previous


def test_the_packaged_weights_are_the_pinned_file() -> None:
    path = packaged_model_path()
    assert hashlib.sha256((path / "model.safetensors").read_bytes()).hexdigest() == PACKAGED_SHA256


def test_the_default_model_loads_offline_with_384_normalised_dims(
    embedder: SentenceTransformerEmbedder,
) -> None:
    assert embedder.is_loaded
    assert (embedder.name, embedder.dims) == ("sentence-transformers/all-MiniLM-L6-v2", 384)
    vectors = embedder.embed_documents(["prefers concise answers", "the deploy failed on friday"])
    assert vectors.shape == (2, 384) and vectors.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, rtol=1e-5)
    query = embedder.embed_queries(["prefers concise answers"])
    np.testing.assert_allclose(query[0], vectors[0], atol=1e-5)  # same text, same vector either way


def test_paraphrases_score_above_unrelated_text(embedder: SentenceTransformerEmbedder) -> None:
    anchor, paraphrase, unrelated = embedder.embed_documents(
        ["prefers concise answers", "likes short replies", "the deploy failed on friday"]
    )
    assert float(anchor @ paraphrase) > float(anchor @ unrelated) + 0.2


def test_long_inputs_are_truncated_before_the_model_sees_them(embedder: SentenceTransformerEmbedder) -> None:
    short = SentenceTransformerEmbedder(embedder.name, "1", 384, device="cpu", max_chars=30)
    head = "prefers concise answers always"  # 30 characters
    assert len(head) == 30
    same = short.embed_documents([head + " and a long tail about something else entirely", head])
    np.testing.assert_allclose(same[0], same[1], atol=1e-6)


async def test_a_written_vector_round_trips_through_the_store_into_search(
    embedder: SentenceTransformerEmbedder, tmp_path: Path
) -> None:
    texts = ["Aditya prefers concise answers", "The deploy failed on Friday"]
    documents = await embed_documents(embedder, texts)
    store = await Store.open(tmp_path / "memory.sqlite")
    try:
        ids = []
        for text, vector in zip(texts, documents, strict=True):
            record = _record(text, store)
            await store.insert_record(record)
            await store.put_embedding(record.id, embedder.name, embedder.version, vector)
            ids.append(record.id)
        index = VectorIndex(embedder.name, embedder.version, embedder.dims)
        await index.load(store)
    finally:
        await store.close()
    [qvec] = await embed_queries(embedder, ["how short should replies be?"])
    hits = index.search(qvec, set(ids), k=2)
    assert [record_id for record_id, _ in hits] == ids
    assert hits[0][1] > hits[1][1]
    assert index.cosine(ids[0], ids[1]) == pytest.approx(float(documents[0] @ documents[1]), abs=1e-5)


def _record(text: str, store: Store) -> Record:
    now = store.clock.now()
    return Record(
        id=new_id(), type="semantic", version=1, content=text, subject="-", subject_entity_id=None,
        attribute=None, scope=Scope("user", "u1"), source_kind="user_statement", source_ref=None,
        creator_agent_id="planner", evidence=None, created_at=now, event_at=now, expires_at=None,
        valid_from=None, valid_until=None, review_at=None, review_flagged_at=None, confidence=0.9,
        status="confirmed", supersedes_id=None, reinforcements=0, last_reinforced_at=None, tags=[],
        entity_ids=[],
    )  # fmt: skip
