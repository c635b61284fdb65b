"""The search pipeline of spec §10.1 as five async stages over one :class:`SearchRun`.

``prepare`` (rewrite, scopes, hard filter, index refresh) → ``generate`` (embed, dense,
lexical, entity) → ``rank`` (fuse, the passes beside the best, freshness:
retold.retrieve.ranking) → ``gate`` (gate, dedup) → ``rerank`` (optional) → ``respond``
(budget, explain, log). Each stage is a plain async function of the services it uses
(:class:`~retold.retrieve.search_run.SearchServices`) and the run, so it is testable without
a graph; ``retold.graph_nodes.search`` wires them into a compiled LangGraph graph. The hard
filter runs before any ranking and every later stage re-checks membership in ``eligible``,
so no channel can surface a record the caller may not read.
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import time
from datetime import timedelta
from typing import TYPE_CHECKING

import numpy as np

from retold.models import Candidate, Record, SearchResponse, SearchResult
from retold.policy.grants import readable_scopes
from retold.retrieve.budget import fill_budget
from retold.retrieve.dedup import collapse_duplicates
from retold.retrieve.entity_search import QueryEntities, alias_candidates, entity_search, selective_aliases
from retold.retrieve.explain import build_explanation
from retold.retrieve.gate import GateSubject, empty_reason, gate
from retold.retrieve.lexical import lexical_search
from retold.retrieve.passage_scores import ranked
from retold.retrieve.query_focus import without_mentions
from retold.retrieve.ranking import load_facts, passage_cosines, rank
from retold.retrieve.rewrite import rewrite_stage
from retold.retrieve.search_log import log_row
from retold.retrieve.search_run import (
    MAX_K,
    MAX_QUERIES,
    SEARCH_STAGES,
    SearchRun,
    SearchServices,
    run_floors,
    validate_request,
)
from retold.retrieve.time_window import eligible_within, interleave, query_windows, told_within

if TYPE_CHECKING:
    from datetime import datetime

    from retold.config import GateFloors

__all__ = [
    "MAX_K", "MAX_QUERIES", "SEARCH_STAGES", "SearchRun", "SearchServices", "gate_stage", "generate",
    "prepare", "rank", "rerank", "respond", "run_floors", "validate_request",
]  # fmt: skip


async def prepare(services: SearchServices, run: SearchRun) -> None:
    """Rewrite, readable scopes, the hard filter, and the index refresh."""
    cfg = services.config.retrieval
    run.started_at = now = services.clock.now()
    run.warm = bool(getattr(services.embedder, "is_loaded", False) and services.dense.is_loaded)
    t = run.t0
    run.queries, run.rewrite_status = await rewrite_stage(
        services.rewriter,
        run.request.queries,
        run.request.context,
        enabled=cfg.rewrite.enabled,
        max_context_chars=cfg.rewrite.max_context_chars,
        timeout_ms=cfg.rewrite.timeout_ms,
    )
    t = run.mark("rewrite", t)
    # The model call is the longest stage: it starts as soon as its text is known (before the
    # graph when nothing can rewrite the queries), and the scopes, the hard filter and the
    # index refresh run while it works.
    begin_embedding(services, run, run.queries)
    run.scopes = await readable_scopes(services.store, run.principal)
    if run.request.scopes is not None:  # an adapter narrowing the search; never widening it
        wanted = set(run.request.scopes)
        run.scopes = [s for s in run.scopes if s in wanted]
    t = run.mark("scopes", t)
    floors = run_floors(services.config, run)
    run.eligible = await services.store.eligible_ids(
        run.scopes,
        now=run.started_at,
        types=run.request.types,
        since=run.request.since,
        until=run.request.until,
        include_history=run.request.include_history,
        exclude_source_kinds=floors.exclude_source_kinds,
    )
    t = run.mark("filter", t)
    run.index_refresh = await services.dense.refresh()
    run.mark("index_refresh", t)
    # The dates the queries name: the dense channel's windows and words the lexical floors skip.
    run.windows = query_windows(run.queries, now, cfg.time_window_slack_days) if cfg.time_windows else []


# A syscall that returns at once, releasing the GIL on the way, so a thread just handed work
# takes it; not a sleep (langgraph dev's blocking-call check refuses even time.sleep(0)).
# Windows has no sched_yield: the worker then starts when the loop next waits.
_yield_gil = getattr(os, "sched_yield", lambda: None)


def begin_embedding(services: SearchServices, run: SearchRun, texts: list[str]) -> None:
    """Start embedding ``texts`` for the dense channel unless that is already under way."""
    if run.embedding is None or run.embedding[0] != texts:
        run.embedding = (list(texts), embed_queries(services, run, texts))


def embed_queries(services: SearchServices, run: SearchRun, texts: list[str]) -> asyncio.Future[np.ndarray]:
    """The query vectors, computed in a worker thread (the event loop runs the SQL meanwhile).

    A future nobody awaits (a search that ends early, a focused query replacing the written
    one) is let finish on its own thread; its outcome is read so it is never reported lost.

    The model is the longest stage, so it starts now: submitted to the loop's executor at
    once (an anyio task would first run when the loop next turns, after LangGraph's set-up of
    the run), and handed the GIL, which this thread would otherwise keep until it next waits.
    Together about 1.3 ms of every search (docs/benchmarks.md, 50K latency).
    """

    def embed() -> np.ndarray:
        t = time.perf_counter()
        qvecs = np.asarray(services.embedder.embed_queries(texts))
        run.mark("embed", t)
        return qvecs

    future = asyncio.get_running_loop().run_in_executor(None, embed)
    _yield_gil()
    future.add_done_callback(lambda done: done.cancelled() or done.exception())
    return future


async def generate(services: SearchServices, run: SearchRun) -> None:
    """Dense, lexical and entity candidates. Lexical and entity SQL run while the embedder works."""
    cfg = services.config.retrieval
    k = cfg.per_generator_k
    # The dense query leaves out names too broad to choose (query_focus), known once the entity
    # stage has resolved them. The query as written is embedded meanwhile, so a query naming no
    # such entity waits for nothing; one that does pays a second model call on the focused text.
    named: asyncio.Future[QueryEntities] = asyncio.get_running_loop().create_future()

    async def dense() -> None:
        begin_embedding(services, run, run.queries)
        assert run.embedding is not None
        written = run.embedding[1]
        try:
            entities = await asyncio.shield(named)
            run.dense_queries = [
                without_mentions(q, entities.unselective, cfg.max_alias_tokens) if cfg.focus_queries else q
                for q in run.queries
            ]
            if run.dense_queries == run.queries:
                qvecs = await written
            else:
                qvecs = await embed_queries(services, run, run.dense_queries)
        finally:
            if not written.done():  # its thread finishes on its own; nobody reads the result
                written.cancel()
        run.qvecs = qvecs
        t = time.perf_counter()
        # Best cosine per record over the queries, capped after the union (spec §10.1): the
        # in-process index (SQLite) or pgvector inside PostgreSQL (retold.index.dense).
        run.dense = [
            (rid, cos)
            for rid, cos in await services.dense.search(qvecs, run.eligible, k)
            if rid in run.eligible
        ]
        inside = run.in_windows = await in_time_windows(services, run)
        if inside:
            run.windowed = [
                (rid, cos) for rid, cos in await services.dense.search(qvecs, inside, k) if rid in inside
            ]
        run.mark("dense", t)

    async def lexical_and_entity() -> None:
        t = time.perf_counter()
        try:
            entities = await selective_aliases(
                services.store,
                alias_candidates(run.queries, run.request.entities, cfg.max_alias_tokens),
                run.principal,
                run.scopes,
                run.eligible,
                k=k,
                max_share=cfg.entity_max_share,
            )
        except BaseException:
            named.cancel()
            raise
        named.set_result(entities)
        run.broad_entities = sorted(entities.broad)
        if entities.named and cfg.subject_weight < 1.0:
            run.named = await services.store.entity_kinds(entities.named)
            run.own_entities = entities.own
        aliases = entities.selective
        alias_set = frozenset(aliases)
        run.lexical = await lexical_search(
            services.store,
            run.queries,
            run.eligible,
            k,
            entity_aliases=alias_set,
            scopes=run.scopes,
            common_term_min_records=cfg.common_term_min_records,
            common_term_share=cfg.common_term_share,
            common_term_scan_records=cfg.common_term_scan_records,
            common_word_share=cfg.gate.common_word_share,
            common_word_min_records=cfg.gate.common_word_min_records,
            rare_word_records=cfg.gate.rare_word_records,
            rare_word_min_records=cfg.gate.rare_word_min_records,
            chat=cfg.gate.chat_words,
            dated=[w.text for w in run.windows] if cfg.gate.date_words_uncounted else (),
            unselective=entities.unselective if cfg.focus_queries else frozenset(),
        )
        t = run.mark("lexical", t)
        run.entity = await entity_search(services.store, aliases, run.eligible, k)
        t = run.mark("entity", t)
        # Load these candidates while the embedder works; fuse then reads only the dense ones.
        ids = [h.record_id for h in run.lexical] + [h.record_id for h in run.entity]
        run.records = {r.id: r for r in await services.store.get_records(ids)}
        run.prefetch_ms = (time.perf_counter() - t) * 1000.0

    if not run.eligible:
        for stage in ("embed", "dense", "lexical", "entity"):
            run.timings[stage] = 0.0
        return
    await asyncio.gather(dense(), lexical_and_entity())
    t = time.perf_counter()
    others = [h.record_id for h in run.lexical] + [h.record_id for h in run.entity]
    dense = dict((*run.dense, *run.windowed))
    best = await passage_cosines(services, run, [*dense, *others])
    run.from_passage = {rid for rid, cos in best.items() if cos > dense.get(rid, -1.0)}
    run.dense = ranked(run.dense, best, k, admit=others)
    if run.windowed:
        windowed = ranked(run.windowed, best, k, admit=[rid for rid in others if rid in run.in_windows])
        run.dense = interleave(run.dense, windowed, k)
    run.timings["dense"] = round(run.timings["dense"] + (time.perf_counter() - t) * 1000.0, 3)
    # What ranking reads of the dense-only candidates (most fail the gate: not whole records).
    t = time.perf_counter()
    run.subjects = {rid: GateSubject(r.type, r.source_kind, r.event_at) for rid, r in run.records.items()}
    await load_facts(services, run, [rid for rid, _ in run.dense])
    run.prefetch_ms += (time.perf_counter() - t) * 1000.0


async def in_time_windows(services: SearchServices, run: SearchRun) -> set[str]:
    """The eligible records whose event time falls in a window the query names (time_window).

    Empty when the query names no date, or when the windows hold every eligible record (a
    preference that prefers everything changes nothing).
    """
    cfg = services.config.retrieval
    now = run.started_at or services.clock.now()
    if not run.windows:
        return set()
    floors = run_floors(services.config, run)
    inside = await eligible_within(
        services.store, [(w.start, w.end) for w in run.windows], scopes=run.scopes, eligible=run.eligible,
        request=run.request, now=now, exclude_source_kinds=floors.exclude_source_kinds,
        max_records=cfg.time_window_max_records,
    )  # fmt: skip
    if inside and len(inside) >= len(run.eligible):
        return set()
    return inside | await _told_later(services, run, floors, now, inside)


async def _told_later(
    services: SearchServices, run: SearchRun, floors: GateFloors, now: datetime, inside: set[str]
) -> set[str]:
    """The records stored up to ``time_window_report_days`` after a window that say they are
    about a time inside it ("last week I ..."): a past event is told at the next conversation."""
    cfg = services.config.retrieval
    lag = timedelta(days=cfg.time_window_report_days)
    later = [(w.end, min(w.end + lag, now)) for w in run.windows if w.end < now and lag]
    if not later:
        return set()
    ids = await eligible_within(
        services.store, later, scopes=run.scopes, eligible=run.eligible, request=run.request, now=now,
        exclude_source_kinds=floors.exclude_source_kinds, max_records=cfg.time_window_max_records,
    )  # fmt: skip
    ids -= inside
    if not ids:
        return set()
    facts = await services.store.record_facts(ids)
    return {rid for rid, f in facts.items() if f.event_at and told_within(f.snippet, f.event_at, run.windows)}


async def gate_stage(services: SearchServices, run: SearchRun) -> None:
    """The relevance gate, then duplicate collapse; the survivors are loaded whole."""
    cfg = services.config.retrieval
    t = time.perf_counter()
    floors = run_floors(services.config, run)
    if services.config.reranker.enabled and services.config.reranker.mode == "cross_encoder_only":
        # The cross-encoder is the only relevance decision: apply the source-kind policy alone.
        run.kept = [
            c
            for c in run.candidates
            if run.subjects[c.record_id].source_kind not in floors.exclude_source_kinds
        ]
        run.gated_out = [(c.record_id, "excluded: source kind") for c in run.candidates if c not in run.kept]
    else:
        run.kept, run.gated_out = gate(run.candidates, run.subjects, floors)
    t = run.mark("gate", t)
    cosine = await services.dense.cosine_lookup([c.record_id for c in run.kept])
    run.kept, run.deduped_out = collapse_duplicates(run.kept, cosine, cfg.dedup_cosine)
    t = run.mark("dedup", t)
    # The survivors go on to the reranker, the budget and the explanations: whole records now
    # (candidate loading, so its time is counted in `fuse`).
    survivors = [c.record_id for c in run.kept if c.record_id not in run.records]
    if survivors:
        run.records.update({r.id: r for r in await services.store.get_records(survivors)})
        run.kept = [c for c in run.kept if c.record_id in run.records]  # gone since: not served
        run.timings["fuse"] = round(run.timings["fuse"] + (time.perf_counter() - t) * 1000.0, 3)


def wants_rerank(services: SearchServices, run: SearchRun) -> bool:
    return bool(services.config.reranker.enabled and run.kept)


async def rerank(services: SearchServices, run: SearchRun) -> None:
    """The optional cross-encoder pass on copies of the shortlist (spec §10.7)."""
    from retold.index.reranker import RerankError, apply_rerank, rerank_with_timeout

    cfg = services.config.reranker
    t = time.perf_counter()
    shortlist = run.kept[: cfg.candidates]
    docs = [(c.record_id, run.records[c.record_id].content) for c in shortlist]
    outcome = await rerank_with_timeout(services.reranker, run.queries, docs, timeout_ms=cfg.timeout_ms)
    run.rerank_status = outcome.status
    if outcome.status == "applied":
        result = apply_rerank([c.record_id for c in shortlist], outcome.scores, cfg.floor)
        run.reranked = [list(row) for row in result.logged]
        run.reranked_out = [
            [c.record_id, "outside the reranker shortlist", None] for c in run.kept[cfg.candidates :]
        ]
        run.reranked_out += [list(row) for row in result.below_floor]
        by_id = {c.record_id: c for c in shortlist}
        scores = {row[0]: row for row in result.logged}
        run.kept = []
        for rid in result.kept:
            candidate = by_id[rid]
            candidate.rerank_score = scores[rid][3]
            candidate.rank_after_rerank = scores[rid][2]
            run.kept.append(candidate)
    else:
        run.rerank_error = outcome.error
        if cfg.on_failure == "fail":
            raise RerankError(f"reranker {outcome.status}: {outcome.error}")
        if cfg.mode == "cross_encoder_only":  # never serve the ungated pool
            floors = run_floors(services.config, run)
            run.kept, more = gate(run.kept, run.subjects, floors)
            run.gated_out += more
    run.mark("rerank", t)


async def respond(services: SearchServices, run: SearchRun) -> SearchResponse:
    """Budget fill with conflict pairs, explanations, the search_log row, the response."""
    cfg = services.config.retrieval
    t = time.perf_counter()
    run.timings.setdefault("rerank", 0.0)
    k = run.request.k or (cfg.trigger.auto_k if run.request.trigger == "auto" else cfg.default_k)
    conflicts = await _eligible_conflicts(services, run, [c.record_id for c in run.kept])
    partners = {o for others in conflicts.values() for o in others if o not in run.records}
    if partners:
        run.records.update({r.id: r for r in await services.store.get_records(partners)})
    by_id = {c.record_id: c for c in run.candidates}
    admitted, budget_out = fill_budget(
        run.kept,
        run.records,
        lambda r: _counterpart(services, r, conflicts.get(r.id, []), run, by_id),
        k=k,
        token_budget=cfg.token_budget,
    )
    t = run.mark("budget", t)
    dedup = {kept: (dropped, cos) for dropped, kept, cos in run.deduped_out}
    reranked = {row[0]: (row[1], row[2], row[3]) for row in run.reranked or []}
    rewritten = run.queries if run.rewrite_status == "applied" else None
    results = []
    missing = [a.candidate.record_id for a in admitted if a.candidate.record_id not in conflicts]
    if missing:  # counterparts admitted beside a provisional record
        conflicts.update(await _eligible_conflicts(services, run, missing))
    # A shared record may link an entity the caller cannot read (another user's person):
    # its id stays out of what this caller is shown.
    linked = {e for a in admitted for e in run.records[a.candidate.record_id].entity_ids}
    shown = await services.store.readable_entity_ids(linked, run.scopes) if linked else set()
    for admission in admitted:
        record = run.records[admission.candidate.record_id]
        if any(e not in shown for e in record.entity_ids):
            record = dataclasses.replace(record, entity_ids=[e for e in record.entity_ids if e in shown])
        partners_of = conflicts[record.id]
        explanation = build_explanation(
            admission,
            record,
            raw_queries=run.request.queries,
            rewritten=rewritten,
            rewrite_status=run.rewrite_status,
            dedup=dedup,
            reranked=reranked,  # type: ignore[arg-type]
            conflicts_with=partners_of,
            total=len(admitted),
        )
        results.append(SearchResult(record, admission.candidate.score, explanation))
    reason = None
    if not results:
        reason = _empty_reason(services, run, budget_out)
    t = run.mark("explain", t)
    # Skipped stages are present with 0.0, never missing; stage order first, any extra key kept.
    run.timings = {s: run.timings.get(s, 0.0) for s in SEARCH_STAGES} | run.timings
    logged_timings = {s: v for s, v in run.timings.items() if s != "log"}
    logged_timings["total"] = round((time.perf_counter() - run.t0) * 1000.0, 3)
    floors = run_floors(services.config, run)
    cfg_all, embedder = services.config, services.embedder
    row = log_row(cfg_all, embedder, run, floors, results, reason, budget_out, logged_timings)
    await services.store.insert_search_log(row)
    run.mark("log", t)
    run.timings["total"] = round((time.perf_counter() - run.t0) * 1000.0, 3)
    run.response = SearchResponse(
        search_id=run.search_id,
        raw_queries=list(run.request.queries),
        rewritten_queries=rewritten,
        rewrite_status=run.rewrite_status,  # type: ignore[arg-type]
        results=results,
        empty_reason=reason,
        timings_ms=dict(run.timings),
    )
    return run.response


async def _eligible_conflicts(
    services: SearchServices, run: SearchRun, record_ids: list[str]
) -> dict[str, list[str]]:
    found = await services.store.conflicts_of(record_ids)
    return {rid: [o for o in others if o in run.eligible] for rid, others in found.items()}


def _counterpart(
    services: SearchServices, record: Record, partners: list[str], run: SearchRun, by_id: dict[str, Candidate]
) -> Candidate | None:
    """The eligible conflict partner with authority over a provisional record, if any."""
    from retold.policy.lifecycle import has_authority

    best = None
    for partner_id in partners:
        partner = run.records.get(partner_id)
        if partner is None or not partner.is_active:
            continue
        stronger = partner.status == "confirmed" or has_authority(partner, record, services.config)
        if stronger and (best is None or has_authority(partner, best, services.config)):
            best = partner
    if best is None:
        return None
    existing = by_id.get(best.id)
    if existing is not None:
        return existing  # real generator evidence
    return Candidate(best.id, None, None, None, None, None, 0.0, 0, None, 0.0, None, None, None)


def _empty_reason(services: SearchServices, run: SearchRun, budget_out: list[str]) -> str:
    floors = run_floors(services.config, run)
    if run.kept and budget_out:
        return "every relevant record exceeded the token budget"
    if run.reranked is not None and not run.kept:
        return f"every shortlisted record fell below the reranker floor {services.config.reranker.floor}"
    return empty_reason(run.candidates, run.subjects, floors, len(run.eligible))
