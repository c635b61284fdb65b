"""LoCoMo with a hosted model (issue 18): the rewriter's query expansion and extracted facts.

``locomo_retrieval.py --hosted PROVIDER:MODEL`` runs the same harness, on the same records and
the same scoring, with the two features that need a hosted model turned on:

* **Query rewriting** (``retrieval.rewrite``): every search's question is rewritten by the
  model before it is searched. A LoCoMo question is the whole turn, so the rewriter sees no
  context. The hybrid rankings are the rewritten queries'; BM25 and dense stay the question's
  own, so the table shows what rewriting adds. The rewrite timeout is raised to
  :data:`REWRITE_TIMEOUT_MS`: this measures what the model's queries find, not its latency.
* **Session extraction** (``ingestion.extraction_enabled``, with review): after the turns are
  written, each LoCoMo session is replayed as a retold session of the conversation's user,
  every turn role ``user`` (two people talk; neither is an assistant) as ``"<speaker>: <text>"``
  at the session's date, and ended, which runs extraction. An extracted record stands for
  the turn its evidence quotes (its ``source_ref``, ``session:<id><turn:n>``), so a fact
  covers that turn's gold evidence as the turn's own record does. A session summary stands
  for no turn: it would otherwise cover a whole session's evidence at once.

The model is named as ``provider:model`` with a provider of :data:`retold.hosted.API_KEY_ENV`.
Without that provider's key the run is skipped with a message naming the variable, and the
offline figures are untouched: nothing in ``make bench`` or the test suite needs a key.
"""

from __future__ import annotations

import os
import re
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from itertools import groupby
from typing import Any

import retold
from retold.hosted import API_KEY_ENV
from retold.models import Principal, SessionKey

__all__ = [
    "REWRITE_TIMEOUT_MS",
    "ReplayClock",
    "hosted_overrides",
    "parse_hosted",
    "replay_sessions",
    "skip_reason",
]

REWRITE_TIMEOUT_MS = 30_000
_TURN_REF = re.compile(r"^session:(?P<session>.+)<turn:(?P<turn>\d+)>$")


def parse_hosted(spec: str) -> tuple[str, str]:
    """``provider:model`` split and checked; ValueError naming the problem otherwise."""
    provider, sep, model = spec.partition(":")
    if not sep or not model.strip():
        raise ValueError(f"--hosted wants PROVIDER:MODEL, e.g. anthropic:claude-haiku-4-5; got {spec!r}")
    if provider not in API_KEY_ENV:
        raise ValueError(f"--hosted: unknown provider {provider!r}; use one of {', '.join(API_KEY_ENV)}")
    return provider, model.strip()


def skip_reason(provider: str) -> str | None:
    """Why a hosted run cannot run here (the provider's key is not set), else None."""
    variable = API_KEY_ENV[provider]
    if os.environ.get(variable, "").strip():
        return None
    return f"LoCoMo hosted run skipped: {provider} needs {variable} set (nothing was measured)"


def hosted_overrides(provider: str, model: str, first_session: datetime) -> dict[str, Any]:
    """The config a hosted run adds: rewriting, extraction and review, all on the one model.

    The questions are asked today, years after LoCoMo's sessions, so provisional facts and
    session summaries are kept alive from ``first_session`` to today: a live memory asked
    within a record's lifetime finds it, and that is what this measures.
    """
    lifetime = (datetime.now(UTC) - first_session).days + 2
    return {
        "ingestion.provisional_ttl_days": max(lifetime, 30),
        "ingestion.summary_ttl_days": max(lifetime, 180),
        "retrieval.rewrite.enabled": True,
        "retrieval.rewrite.provider": provider,
        "retrieval.rewrite.model": model,
        "retrieval.rewrite.timeout_ms": REWRITE_TIMEOUT_MS,
        "ingestion.extraction_enabled": True,
        "ingestion.extraction_provider": provider,
        "ingestion.extraction_model": model,
        "ingestion.review_provider": provider,
        "ingestion.review_model": model,
    }


class ReplayClock:
    """The real clock, except while a replayed session holds it at that session's date.

    Extraction reads the clock for the turns' times and the records' event times; a session
    from 2023 replayed today must read 2023, and the searches afterwards read today again.
    """

    def __init__(self) -> None:
        self._pinned: datetime | None = None

    def now(self) -> datetime:
        return self._pinned or datetime.now(UTC)

    @contextmanager
    def at(self, when: datetime) -> Iterator[None]:
        self._pinned = when
        try:
            yield
        finally:
            self._pinned = None


async def replay_sessions(
    rt: retold.Runtime, clock: ReplayClock, ingested: Any, agent: str, advance: Callable[[], Any]
) -> Counter[str]:
    """Replay one conversation's sessions, extract each, and map the extracted records to turns.

    ``ingested`` is a ``locomo_data.Ingested``; its ``absorbed`` map (record id -> the dia_ids
    it stands for) gains every extracted record with its evidence turn's dia_id, which is
    what scoring reads; a fact the ingestor merged into an existing record makes that record
    stand for the fact's turn too. Returns counts: sessions, sessions whose extraction failed
    closed, records written, and those that stand for no turn (summaries).
    """
    conv = ingested.conversation
    counts: Counter[str] = Counter()
    for number, group in groupby(conv.turns, key=lambda t: t.session):
        turns = list(group)
        with clock.at(turns[0].at):
            principal = Principal(agent, conv.sample_id, f"s{number}")
            principal = await rt.hooks.on_session_start(principal)
            for turn in turns:
                principal = await rt.hooks.on_turn(principal, "user", turn.content)
            key = SessionKey.of(principal)
            transcript = await rt.store.turns(key)
            await rt.hooks.on_session_end(principal)  # schedules the extraction
            await rt.join_background()  # inside the session's date: extraction reads the clock
        dia_of = {t.turn: turn.dia_id for t, turn in zip(transcript, turns, strict=True)}
        counts["sessions"] += 1
        session = await rt.store.get_session(key)
        if session is None or session.extracted_at is None:  # failed closed: the log says why
            counts["not_extracted"] += 1
        # What the session supplied, as the store keeps it: a new record, or an earlier one a
        # fact reinforced, each with the turn its evidence quotes (a summary quotes none).
        for source in await rt.store.sources_from_sessions([key]):
            ref = _TURN_REF.match(source.source_ref or "")
            dia = dia_of.get(int(ref["turn"])) if ref else None
            if source.record_id not in ingested.absorbed:
                counts["records"] += 1
                if dia is None:
                    counts["standing_for_no_turn"] += 1
            stands = ingested.absorbed.setdefault(source.record_id, [])
            if dia is not None and dia not in stands:
                stands.append(dia)
        advance()
    return counts
