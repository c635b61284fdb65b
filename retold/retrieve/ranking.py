"""The rank stage (spec §10.1): fusion, the passes beside the best, fusion again, freshness.

The generators' lists are fused once (retold.retrieve.fusion). The best of that fusion
anchor the same-day context pass and the neighbours (retold.retrieve.context), whose records
join a second fusion; the best of that one anchor the replies to a question like the
searcher's (retold.retrieve.replies) and, for a query that asks when, the answers that tell
a time (retold.retrieve.time_answers), which join a third. Every list is kept to the
search's eligible set, so no pass can surface a record the caller may not read. Freshness
then orders what survives.
"""

from __future__ import annotations

import time
from datetime import datetime

from retold.models import Candidate
from retold.retrieve.context import (
    AnchorDays,
    Beside,
    anchor_days,
    read_anchor_days,
    read_beside,
    same_day_hits,
)
from retold.retrieve.freshness import apply_freshness
from retold.retrieve.fusion import fuse, logged_flags
from retold.retrieve.gate import GateSubject
from retold.retrieve.passage_scores import lift
from retold.retrieve.query_kind import asks
from retold.retrieve.replies import holds_question, reply_list
from retold.retrieve.search_run import SearchRun, SearchServices, run_floors
from retold.retrieve.subjects import about_someone_else
from retold.retrieve.time_answers import asks_when, tells_time, time_answers
from retold.store.store import FACT_SNIPPET_CHARS

__all__ = ["load_facts", "passage_cosines", "rank"]


async def passage_cosines(
    services: SearchServices, run: SearchRun, record_ids: list[str]
) -> dict[str, float]:
    """The best passage cosine of each of these records that has passages (retold.index.passages)."""
    if run.qvecs is None or not record_ids or not services.config.embedding.passage_chars:
        return {}
    return await services.dense.passage_cosines(run.qvecs, record_ids)


async def load_facts(services: SearchServices, run: SearchRun, record_ids: list[str]) -> None:
    """Gate subjects and short texts for candidates not loaded yet."""
    missing = [rid for rid in record_ids if rid not in run.subjects]
    for rid, facts in (await services.store.record_facts(missing)).items():
        run.subjects[rid] = GateSubject(facts.type, facts.source_kind, facts.event_at)
        run.snippets[rid] = facts.snippet


async def _fuse(services: SearchServices, run: SearchRun) -> list[Candidate]:
    """Fuse the generators' lists (and any context pass), keep the eligible, load their facts."""
    cfg = services.config.retrieval
    await _read_subjects(services, run)
    fused = fuse(
        run.dense,
        [(h.record_id, h.bm25, h.match) for h in run.lexical],
        [(h.record_id, h.entity_id) for h in run.entity],
        cfg.rrf_k,
        context=run.context,
        context_weight=cfg.context_weight,
        neighbours=run.neighbours,
        neighbour_weight=cfg.neighbour_weight,
        other_subject=run.other_subject,
        subject_weight=cfg.subject_weight,
        time_answers=run.time_answers,
        time_answer_weight=cfg.time_answer_weight,
        replies=run.replies,
        reply_weight=cfg.reply_weight,
        similarity_weight=cfg.similarity_weight,
        best=run.best,
    )
    # Hard isolation invariant: nothing outside the eligible set goes any further.
    fused = [c for c in fused if c.record_id in run.eligible]
    for c in fused:
        c.in_window = c.record_id in run.in_windows
        c.from_passage = c.record_id in run.from_passage
    run.fused_log = [[c.record_id, c.fused_rank, round(c.rrf_score, 6), *logged_flags(c)] for c in fused]
    # Loaded during generate, but for the context pass's hits.
    await load_facts(services, run, [c.record_id for c in fused])
    return [c for c in fused if c.record_id in run.subjects]


async def _read_subjects(services: SearchServices, run: SearchRun) -> None:
    """Which of the lists' records not read yet are about someone else than the query names."""
    if not run.named:
        return
    listed = [rid for rid, _ in (*run.dense, *run.context, *run.neighbours)]
    listed += [h.record_id for h in (*run.lexical, *run.entity)]
    ids = list(dict.fromkeys(rid for rid in listed if rid not in run.about_read))
    if ids:
        run.about_read.update(ids)
        about = await services.store.about_entities(ids)
        run.other_subject |= about_someone_else(about, run.named, run.own_entities)


async def _days_of(services: SearchServices, run: SearchRun, record_ids: list[str]) -> AnchorDays | None:
    """The eligible records of these candidates' event days (retold.retrieve.context), the read
    the context pass, the neighbours and the replies share.

    Days that include a set this search found too busy are too busy again (more days only
    add records), so they are not read twice; a read that succeeds is kept for the replies.
    """
    days = anchor_days(run.subjects[rid].event_at for rid in record_ids)
    wanted = frozenset(start for start, _ in days)
    if any(crowded <= wanted for crowded in run.crowded_days):
        return None
    found = await read_anchor_days(
        services.store, days, scopes=run.scopes, eligible=run.eligible, request=run.request,
        now=run.started_at or services.clock.now(),
        exclude_source_kinds=run_floors(services.config, run).exclude_source_kinds,
        max_records=services.config.retrieval.context_max_records,
    )  # fmt: skip
    if found is None:
        run.crowded_days.append(wanted)
    else:
        run.days_read = (wanted, found)
    return found


async def _beside(services: SearchServices, run: SearchRun, record_ids: list[str]) -> Beside:
    """The records just before and after these candidates, one lookup each: on a day too busy
    to read whole, what the neighbours and the replies need (retold.retrieve.context)."""
    return await read_beside(
        services.store, record_ids, scopes=run.scopes, eligible=run.eligible, request=run.request,
        now=run.started_at or services.clock.now(),
        exclude_source_kinds=run_floors(services.config, run).exclude_source_kinds,
    )  # fmt: skip


async def _beside_the_best(services: SearchServices, run: SearchRun, fused: list[Candidate]) -> bool:
    """The same-day context pass and the neighbours of the first fusion's best candidates
    (retold.retrieve.context), over one read of their days; True when either found something."""
    cfg = services.config.retrieval
    assert run.qvecs is not None
    context = fused[: cfg.context_anchors] if cfg.context_k else []
    near = fused[: cfg.neighbour_anchors]
    anchors = context if len(context) > len(near) else near
    if not anchors:
        return False
    days: AnchorDays | Beside | None = await _days_of(services, run, [c.record_id for c in anchors])
    if days is None:  # a day too busy to read (a bulk import): no context pass, the neighbours still
        if not near:
            return False
        days, context = await _beside(services, run, [c.record_id for c in near]), []
    if context and isinstance(days, AnchorDays):
        inside = days.on(anchor_days(run.subjects[c.record_id].event_at for c in context))
        skip = {c.record_id for c in context}
        run.context = await same_day_hits(services.dense, run.qvecs, inside, skip=skip, k=cfg.context_k)
    ids = days.neighbours([c.record_id for c in near])
    if ids:  # their real cosines, so the gate and the log treat them as dense hits
        cosine = dict(await services.dense.search(run.qvecs, set(ids), len(ids)))
        run.neighbours = [(rid, cosine[rid]) for rid in ids if rid in cosine]
    best = await passage_cosines(services, run, [rid for rid, _ in (*run.context, *run.neighbours)])
    if best:  # scored as the channels' candidates were; the order of each list stays its own
        found = dict((*run.context, *run.neighbours))
        run.from_passage |= {rid for rid, cos in best.items() if cos > found[rid]}
        run.context = sorted(lift(run.context, best), key=lambda hit: -hit[1])
        run.neighbours = lift(run.neighbours, best)
    return bool(run.context or run.neighbours)


async def _telling_time(services: SearchServices, run: SearchRun, fused: list[Candidate]) -> bool:
    """For a query that asks when, the best candidates whose text tells a time
    (retold.retrieve.time_answers); True when there are any."""
    cfg = services.config.retrieval
    depth = cfg.time_answer_depth
    if not depth or not asks_when(run.queries):
        return False
    best = [c.record_id for c in fused[:depth]]
    missing = [rid for rid in best if rid not in run.records]
    if missing:  # kept: the survivors among them are served without another read
        run.records.update({r.id: r for r in await services.store.get_records(missing)})
    texts = {rid: run.records[rid].content for rid in (*best, *run.reply_of.values()) if rid in run.records}
    run.time_answers = time_answers(best, texts, depth, cfg.time_answer_max_share, replies=run.reply_of)
    return bool(run.time_answers)


async def _the_replies(services: SearchServices, run: SearchRun, fused: list[Candidate]) -> bool:
    """For a query that asks, the replies to the best candidates that hold a question
    (retold.retrieve.replies); True when there are any."""
    cfg = services.config.retrieval
    if not cfg.reply_depth or run.qvecs is None or not asks(run.queries):
        return False
    best = [c.record_id for c in fused[: cfg.reply_depth]]
    # A whole text is read only where the snippet was cut short before showing a question.
    cut = [rid for rid in best if rid not in run.records and _cut_short(run.snippets.get(rid, ""))]
    if cut:
        run.records.update({r.id: r for r in await services.store.get_records(cut)})
    text = {rid: run.records[rid].content for rid in best if rid in run.records}
    askers = [rid for rid in best if holds_question(text.get(rid) or run.snippets.get(rid, ""))]
    reply_of = await _replies(services, run, askers) if askers else {}
    if asks_when(run.queries):  # asked when, a reply that tells no time is no answer
        reply_of = {asker: rid for asker, rid in reply_of.items() if tells_time(run.records[rid].content)}
    run.reply_of = await _as_dense_hits(services, run, reply_of)
    run.replies = reply_list(askers, run.reply_of)
    return bool(run.replies)


def _cut_short(snippet: str) -> bool:
    return len(snippet) >= FACT_SNIPPET_CHARS and not holds_question(snippet)


async def _replies(services: SearchServices, run: SearchRun, askers: list[str]) -> dict[str, str]:
    """The record just after each asker in its scope and day, loaded. An asker on a day this
    search has read whole takes it from that read; the others' days are read (or, too busy
    to read, looked up beside each asker), giving the same record either way."""
    read_days, days = run.days_read or (frozenset(), None)
    on_read = [rid for rid in askers if days is not None and _day(run, rid) in read_days]
    found = days.replies(on_read) if days is not None and on_read else {}
    rest = [rid for rid in askers if rid not in on_read]
    if rest:
        more = await _days_of(services, run, rest) or await _beside(services, run, rest)
        found |= more.replies(rest)
    replies = {rid: found[rid] for rid in askers if rid in found}
    missing = [rid for rid in replies.values() if rid not in run.records]
    if missing:
        run.records.update({r.id: r for r in await services.store.get_records(missing)})
    return {asker: rid for asker, rid in replies.items() if rid in run.records}


def _day(run: SearchRun, record_id: str) -> datetime | None:
    """The start of the record's UTC event day, as :func:`anchor_days` gives it."""
    days = anchor_days([run.subjects[record_id].event_at])
    return days[0][0] if days else None


async def _as_dense_hits(services: SearchServices, run: SearchRun, replies: dict[str, str]) -> dict[str, str]:
    """The replies carried as neighbours with their real cosine, so that fusion, the gate and the
    log treat them as the dense hits they are."""
    assert run.qvecs is not None
    listed = {rid for rid, _ in (*run.dense, *run.context, *run.neighbours)}
    unlisted = list(dict.fromkeys(rid for rid in replies.values() if rid not in listed))
    if unlisted:
        cosine = dict(await services.dense.search(run.qvecs, set(unlisted), len(unlisted)))
        run.neighbours = [*run.neighbours, *((rid, cosine[rid]) for rid in unlisted if rid in cosine)]
        listed.update(cosine)
    return {asker: rid for asker, rid in replies.items() if rid in listed}


async def rank(services: SearchServices, run: SearchRun) -> None:
    """Fuse, enforce the isolation invariant, then freshness."""
    cfg = services.config.retrieval
    t = time.perf_counter()
    fused = await _fuse(services, run)
    run.best = [c.record_id for c in fused[: max(cfg.context_anchors, cfg.neighbour_anchors, 1)]]
    if run.qvecs is not None and fused and await _beside_the_best(services, run, fused):
        fused = await _fuse(services, run)  # again, with the context and neighbour lists
    if fused:
        replied = await _the_replies(services, run, fused)
        if await _telling_time(services, run, fused) or replied:
            fused = await _fuse(services, run)  # and with the replies and the answers that tell a time
    t = run.mark("fuse", t)
    run.timings["fuse"] = round(run.timings["fuse"] + run.prefetch_ms, 3)  # loads done during generate
    skip = run.request.since is not None or run.request.until is not None
    run.candidates = apply_freshness(
        fused, run.subjects, run.started_at or services.clock.now(), cfg.freshness, skip=skip
    )
    run.mark("freshness", t)
