"""The synthetic store the search benchmarks build, and the warm-search measurement they share.

``build_store`` fills a runtime with ``n`` Zipf-like sentences about one provisioned user
(``bench``, alias Robin) in one transaction, as ``retold copy`` writes; ``measure`` times warm
searches through the graph and the same stages called without it. Used by
:mod:`search_latency`, :mod:`backend_compare` (SQLite against PostgreSQL) and
:mod:`graph_state`; it imports none of them.
"""

from __future__ import annotations

import asyncio
import random
import time
from pathlib import Path
from typing import Any

import numpy as np

import retold
from retold.ingest.write.request import WriteRequest
from retold.models import Principal, Scope, SearchRequest
from retold.retrieve import retriever
from retold.testing import FakeEmbedder, record_for_tests

__all__ = ["USER", "VOCAB_SIZE", "build_store", "measure", "queries_for", "sentence", "vocabulary"]

USER = Scope("user", "bench")
VOCAB_SIZE = 3000


def vocabulary(rng: random.Random) -> list[str]:
    syllables = ["ka", "lo", "mi", "ne", "ru", "sa", "ti", "vo", "de", "pa", "zu", "ri", "mo", "le", "ga"]
    words: set[str] = set()
    while len(words) < VOCAB_SIZE:
        words.add("".join(rng.choice(syllables) for _ in range(rng.randint(2, 4))))
    return sorted(words)


def sentence(rng: random.Random, vocab: list[str]) -> str:
    # Zipf-like word choice, so some terms are common and most are rare, as in real text.
    n = rng.randint(8, 20)
    return (
        " ".join(vocab[min(int(rng.paretovariate(1.1)) - 1, len(vocab) - 1)] for _ in range(n)).capitalize()
        + "."
    )


async def build_store(
    path: Path | str, n: int, embedder: Any, rng: random.Random
) -> tuple[retold.Runtime, list[str]]:
    rt = await retold.open_runtime(path, embedder=embedder)
    person = await rt.host.provision_user("bench", aliases=["Robin"])
    await rt.host.grant("bench-agent", USER, read=True, write=True)
    vocab = vocabulary(rng)
    now = rt.clock.now()
    batch = 5000
    # One transaction for the whole load, as `retold copy` writes: PostgreSQL then tokenizes and
    # builds its HNSW index once, over every row, instead of growing it batch by batch.
    async with rt.store.transaction():
        await _fill(rt, n, batch, embedder, rng, vocab, person.id, now)
    return rt, vocab


async def _fill(
    rt: retold.Runtime, n: int, batch: int, embedder: Any, rng: random.Random, vocab: list[str],
    person_id: str, now: Any,
) -> None:  # fmt: skip
    for start in range(0, n, batch):
        texts = [sentence(rng, vocab) for _ in range(min(batch, n - start))]
        if isinstance(embedder, FakeEmbedder):
            vectors = np.stack([embedder._vector(t) for t in texts])  # no per-call delay while filling
        else:
            vectors = await asyncio.to_thread(embedder.embed_documents, texts)
        records = []
        for i, text in enumerate(texts):
            kind = "episodic" if (start + i) % 3 else "semantic"
            attribute = "-" if kind == "episodic" else f"fact_{start + i}"
            records.append(
                record_for_tests(
                    now,
                    type=kind,
                    content=text,
                    subject=f"{person_id}/{attribute}",
                    subject_entity_id=person_id,
                    attribute=attribute,
                    scope=USER,
                    creator_agent_id="bench",
                )
            )
        await rt.store.bulk_insert(
            records,
            vectors,
            model=embedder.name,
            version=embedder.version,
            links=[[(person_id, "about")]] * len(records),
        )


def queries_for(rng: random.Random, vocab: list[str]) -> list[str]:
    pick = lambda: " ".join(vocab[min(int(rng.paretovariate(1.1)) - 1, len(vocab) - 1)] for _ in range(4))  # noqa: E731
    return [pick(), pick()]


async def measure(
    rt: retold.Runtime, vocab: list[str], searches: int, rng: random.Random, *, write_before: bool = False
) -> dict[str, Any]:
    """Warm search timings; ``write_before``: one write (not timed) before each search."""
    principal = await rt.hooks.on_session_start(Principal("bench-agent", "bench", "bench-session"))
    cold_start = time.perf_counter()
    first = await rt.search(principal, SearchRequest(queries=queries_for(rng, vocab)))
    cold = {"total": (time.perf_counter() - cold_start) * 1000.0, **first.timings_ms}
    samples = []
    for _ in range(searches):
        await _write_one(rt, principal, rng, vocab, write_before)
        t0 = time.perf_counter()
        response = await rt.search(principal, SearchRequest(queries=queries_for(rng, vocab)))
        timings = {**response.timings_ms, "wall": (time.perf_counter() - t0) * 1000.0}
        await _write_one(rt, principal, rng, vocab, write_before)
        t0 = time.perf_counter()
        await _without_graph(rt, principal, SearchRequest(queries=queries_for(rng, vocab)))
        timings["direct"] = (time.perf_counter() - t0) * 1000.0
        samples.append(timings)
    return {"cold": cold, "samples": samples, "returned_avg": 0}


async def _write_one(
    rt: retold.Runtime, principal: Principal, rng: random.Random, vocab: list[str], write: bool
) -> None:
    if write:
        request = WriteRequest(
            type="episodic", content=sentence(rng, vocab), scope=USER, source_kind="agent_inference"
        )
        written = await rt.ingestor.write(principal, request)
        assert written.ok, written


async def _without_graph(rt: retold.Runtime, principal: Principal, request: SearchRequest) -> None:
    """One search through the search graph's stage functions in order, as ``rt.search`` runs
    them through LangGraph (retold.graph_nodes.search): the baseline "graph" is measured against."""
    services = rt.search_services()
    run = retriever.SearchRun(principal=principal, request=retriever.validate_request(request))
    if not rt.config.retrieval.rewrite.enabled:
        retriever.begin_embedding(services, run, run.request.queries)
    await retriever.prepare(services, run)
    await retriever.generate(services, run)
    await retriever.rank(services, run)
    await retriever.gate_stage(services, run)
    if retriever.wants_rerank(services, run):
        await retriever.rerank(services, run)
    await retriever.respond(services, run)
