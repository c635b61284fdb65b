"""The write path with the real packaged embedder and the default judge on a real SQLite file."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import numpy as np
import pytest

import retold
from retold.errors import EmbeddingMismatchError
from retold.ingest.write.ingestor import WriteRequest
from retold.models import Principal, Scope
from retold.testing import FakeEmbedder

pytestmark = pytest.mark.integration

USER = Scope("user", "u1")


@pytest.fixture(scope="module")
def embedder():  # type: ignore[no-untyped-def]
    from retold.config import Config
    from retold.index.embedding_backend import build_embedder

    model = build_embedder(Config().embedding)
    model.warm()
    return model


@pytest.fixture
async def rt(tmp_path: Path, embedder) -> AsyncIterator[retold.Runtime]:  # type: ignore[no-untyped-def]
    async with retold.open_runtime(tmp_path / "m.sqlite", embedder=embedder) as runtime:
        await runtime.host.provision_user("u1", aliases=["Aditya"])
        await runtime.host.grant("planner", USER, read=True, write=True)
        yield runtime


async def _write(rt: retold.Runtime, p: Principal, said: str, content: str, attribute: str) -> tuple:  # type: ignore[type-arg]
    p = await rt.hooks.on_turn(p, "user", said)
    request = WriteRequest(
        type="semantic",
        content=content,
        scope=USER,
        source_kind="user_statement",
        attribute=attribute,
        evidence=said,
    )
    return p, await rt.ingestor.write(p, request)


async def test_write_and_cosine_round_trip(rt: retold.Runtime) -> None:
    p = await rt.hooks.on_session_start(Principal("planner", "u1", "s1"))
    p, result = await _write(
        rt,
        p,
        "I prefer concise answers, please keep them short",
        "Aditya prefers concise answers.",
        "answer_style",
    )
    assert (result.outcome, result.status) == ("created", "confirmed"), result
    model, version, stored = await rt.store.get_embedding(result.record_id or "")  # type: ignore[misc]
    assert (model, version, stored.shape) == ("sentence-transformers/all-MiniLM-L6-v2", "1", (384,))
    query = rt.embedder.embed_queries(["how long should answers be?"])[0]
    assert float(np.dot(query, stored)) > 0.2
    hits = rt.index.search(query, {result.record_id}, 5)
    assert hits and hits[0][0] == result.record_id


async def test_opposing_preferences_supersede_rather_than_merge(rt: retold.Runtime) -> None:
    p = await rt.hooks.on_session_start(Principal("planner", "u1", "s1"))
    p, first = await _write(
        rt,
        p,
        "I prefer concise answers, please keep them short",
        "Aditya prefers concise answers.",
        "answer_style",
    )
    rt.clock  # noqa: B018 - the system clock moves on by itself between writes
    p, second = await _write(
        rt,
        p,
        "Actually I now prefer detailed answers with examples",
        "Aditya prefers detailed answers.",
        "answer_style",
    )
    assert second.outcome == f"superseded:{first.record_id}", second
    (event,) = await rt.store.events(kind="record.created", record_id=second.record_id)
    (verdict,) = event["payload"]["verdicts"]
    assert verdict["verdict"] == "contradicts" and verdict["reason"]
    assert event["payload"]["judge"]["judge"] == "conservative"


async def test_repeating_the_same_statement_is_not_a_second_record(rt: retold.Runtime) -> None:
    p = await rt.hooks.on_session_start(Principal("planner", "u1", "s1"))
    said = "I prefer concise answers, please keep them short"
    p, first = await _write(rt, p, said, "Aditya prefers concise answers.", "answer_style")
    request = WriteRequest(
        type="semantic",
        content="Aditya prefers concise answers.",
        scope=USER,
        source_kind="user_statement",
        attribute="answer_style",
        evidence=said,
    )
    again = await rt.ingestor.write(p, request)
    assert (again.outcome, again.record_id) == ("already_reinforced", first.record_id)


async def test_a_store_written_by_another_embedder_refuses_to_open(tmp_path: Path) -> None:
    path = tmp_path / "m.sqlite"
    async with retold.open_runtime(path, embedder=FakeEmbedder()) as rt:
        await rt.host.grant("planner", USER, read=True, write=True)
        p = await rt.hooks.on_session_start(Principal("planner", "u1", "s1"))
        await rt.ingestor.write(p, WriteRequest(type="episodic", content="We shipped v1.", scope=USER))
    with pytest.raises(EmbeddingMismatchError, match="retold reembed"):
        await retold.open_runtime(path, embedder=FakeEmbedder(dims=128))
    async with retold.open_runtime(path, embedder=FakeEmbedder(dims=128), allow_embedding_mismatch=True):
        pass
