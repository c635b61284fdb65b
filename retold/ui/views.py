"""What each page shows, assembled from the store: plain data for the templates, no HTTP.

Every function takes a :class:`Viewer`. Without a principal it is the operator's view of
the whole store (the inspector is the store owner's local tool). Acting as a principal,
every listing is asked of the store with that principal's readable scopes (or, for sessions
and searches, its own ``agent/user``), so the SQL itself leaves out what it may not read;
ids inside event payloads and search logs that name records or entities outside those
scopes are masked (:func:`masker`). An id the viewer may not see raises
:class:`~retold.errors.NotFoundError`, exactly like one that does not exist.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from retold.errors import NotFoundError
from retold.models import STATUSES, Principal, Record, Scope, SessionKey
from retold.policy.grants import readable_scopes
from retold.policy.metrics import collect_metrics
from retold.retrieve.render import short_id
from retold.store import Store
from retold.store.inspect import Owner
from retold.ui import plots

__all__ = ["PAGE_SIZE", "Viewer", "masker"]

PAGE_SIZE = 50
HIDDEN = "[not readable]"
_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
_SHORT = re.compile(r"(?<![0-9a-f-])[0-9a-f]{12}(?![0-9a-f-])")
_SOURCE_REF = re.compile(r"^session:(.+)<turn:(\d+)>$")


@dataclass(frozen=True)
class Viewer:
    """Whose eyes a page is drawn for: the operator (``principal`` None) or one principal."""

    principal: Principal | None = None
    scopes: tuple[Scope, ...] | None = None

    @classmethod
    async def acting_as(cls, store: Store, principal: Principal | None) -> Viewer:
        if principal is None:
            return cls()
        return cls(principal, tuple(await readable_scopes(store, principal)))

    @property
    def owner(self) -> Owner | None:
        return None if self.principal is None else (self.principal.agent_id, self.principal.user_id)

    @property
    def as_param(self) -> str | None:
        return None if self.principal is None else f"{self.principal.agent_id}/{self.principal.user_id}"

    def may_read(self, scope: Scope) -> bool:
        return self.scopes is None or scope in self.scopes

    def owns(self, agent_id: str | None, user_id: str | None) -> bool:
        return self.owner is None or self.owner == (agent_id, user_id)


def _strings(value: Any) -> Iterable[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield str(key)
            yield from _strings(item)
    elif isinstance(value, list | tuple):
        for item in value:
            yield from _strings(item)


async def masker(store: Store, viewer: Viewer, *values: Any) -> Callable[[Any], Any]:
    """A function that masks, in JSON-like values, ids of records and entities the viewer cannot read.

    Which of the ids found are readable is asked of the store (one query each for records
    and entities); a 12-character short id is kept only as the tail of a readable id.
    """
    if viewer.scopes is None:
        return lambda value: value
    found = {m for text in (s for v in values for s in _strings(v)) for m in _UUID.findall(text)}
    allowed = await store.readable_record_ids(found, viewer.scopes)
    allowed |= await store.readable_entity_ids(found - allowed, viewer.scopes)
    tails = {short_id(i) for i in allowed}

    def text(value: str) -> str:
        value = _UUID.sub(lambda m: m.group(0) if m.group(0) in allowed else HIDDEN, value)
        return _SHORT.sub(lambda m: m.group(0) if m.group(0) in tails else HIDDEN, value)

    def mask(value: Any) -> Any:
        if isinstance(value, str):
            return text(value)
        if isinstance(value, dict):
            return {text(str(k)): mask(v) for k, v in value.items()}
        if isinstance(value, list | tuple):
            return [mask(v) for v in value]
        return value

    return mask


def _scopes(viewer: Viewer) -> list[Scope] | None:
    return None if viewer.scopes is None else list(viewer.scopes)


# --- home, scopes, records --------------------------------------------------------------------


async def home(store: Store, viewer: Viewer) -> dict[str, Any]:
    counts = await store.scope_counts(_scopes(viewer))
    if viewer.scopes is not None:  # a readable scope without records is still the principal's
        held = {scope for scope, _ in counts}
        counts += [(scope, {}) for scope in viewer.scopes if scope not in held]
    rows = [(scope, by_status, sum(by_status.values())) for scope, by_status in counts]
    recent = await store.recent_records(_scopes(viewer), limit=20)
    return {"scopes": rows, "statuses": STATUSES, "recent": recent}


async def scope_page(
    store: Store, viewer: Viewer, scope: Scope, status: str | None, page: int
) -> dict[str, Any]:
    if not viewer.may_read(scope):
        raise NotFoundError(f"no scope {scope}")
    counts = dict(await store.scope_counts([scope]))
    if not counts and viewer.scopes is None:
        raise NotFoundError(f"no records in scope {scope}")
    records = await store.recent_records(
        [scope], status=status, limit=PAGE_SIZE + 1, offset=(page - 1) * PAGE_SIZE
    )
    return {
        "scope": scope,
        "counts": counts.get(scope, {}),
        "statuses": STATUSES,
        "status": status,
        "records": records[:PAGE_SIZE],
        "page": page,
        "more": len(records) > PAGE_SIZE,
    }


async def _readable(store: Store, viewer: Viewer, record_ids: Iterable[str]) -> list[Record]:
    ids = list(record_ids)
    allowed = await store.readable_record_ids(ids, _scopes(viewer))
    return await store.get_records(i for i in ids if i in allowed)


def _marked(content: str, quote: str | None) -> list[tuple[str, bool]]:
    """The turn's text cut around the evidence quote: ``(text, is_quote)`` pieces."""
    if not quote:
        return [(content, False)]
    at = content.find(quote)
    if at < 0:
        at = content.lower().find(quote.lower())
    if at < 0:
        return [(content, False)]
    end = at + len(quote)
    return [(content[:at], False), (content[at:end], True), (content[end:], False)]


async def _sources(store: Store, viewer: Viewer, record: Record) -> list[dict[str, Any]]:
    """Each supporting source; its transcript turn (with the quote marked) where the viewer owns it."""
    out = []
    for source in await store.sources_of(record.id):
        item: dict[str, Any] = {"source": source, "owned": viewer.owns(source.agent_id, source.user_id)}
        match = _SOURCE_REF.match(source.source_ref or "")
        if item["owned"] and match and source.user_id and source.session_id == match.group(1):
            key = SessionKey(source.agent_id, source.user_id, source.session_id)
            number = int(match.group(2))
            turns = await store.turns_between(key, number - 1, number + 1)
            item["key"] = key
            item["turns"] = [
                (t, _marked(t.content, source.evidence) if t.turn == number else None) for t in turns
            ]
        out.append(item)
    return out


async def record_page(store: Store, viewer: Viewer, record_id: str) -> dict[str, Any]:
    if not await store.readable_record_ids([record_id], _scopes(viewer)):
        raise NotFoundError(f"no record {record_id!r}")
    record = await store.require_record(record_id)
    older = await _readable(store, viewer, await store.supersession_chain(record_id))
    newer = await _readable(store, viewer, await store.superseded_by(record_id))
    rows = await store.conflict_rows(record_id)
    partners = await store.readable_record_ids(
        {o for r in rows for o in r[:2]} - {record_id}, _scopes(viewer)
    )
    conflicts = []
    for a, b, at in rows:
        mine = a == record_id
        other = b if mine else a
        if other in partners:
            conflicts.append(
                {"direction": "this → other" if mine else "other → this", "other": other, "noted_at": at}
            )
    facts = await store.record_facts(partners)
    links = await store.record_links(record_id)
    linked = [e for e, _ in links]
    shown = set(linked) if viewer.scopes is None else await store.readable_entity_ids(linked, viewer.scopes)
    entities = {e.id: e for e in [await store.get_entity(i) for i in shown] if e is not None}
    events = await store.audit_events(None, record_id=record_id, limit=100)
    mask = await masker(store, viewer, [e["payload"] for e in events])
    return {
        "record": record,
        "older": older,
        "newer": newer,
        "conflicts": conflicts,
        "facts": facts,
        "entity_links": [(entities[e], role) for e, role in links if e in entities],
        "sources": await _sources(store, viewer, record),
        "events": [{**e, "payload": mask(e["payload"])} for e in events],
        "activation": (await store.activation_of([record_id])).get(record_id),
    }


# --- entities, sessions, audit ----------------------------------------------------------------


async def entities_page(store: Store, viewer: Viewer, kind: str | None, page: int) -> dict[str, Any]:
    found = await store.list_entities(
        _scopes(viewer), kind=kind, limit=PAGE_SIZE + 1, offset=(page - 1) * PAGE_SIZE
    )
    shown = found[:PAGE_SIZE]
    ids = [e.id for e in shown]
    return {
        "entities": shown,
        "aliases": await store.entity_aliases(ids, _scopes(viewer)),
        "merged_from": await store.merged_into_these(ids, _scopes(viewer)),
        "kind": kind,
        "page": page,
        "more": len(found) > PAGE_SIZE,
    }


async def entity_page(store: Store, viewer: Viewer, entity_id: str) -> dict[str, Any]:
    entity = await store.readable_entity(entity_id, _scopes(viewer))
    if entity is None:
        raise NotFoundError(f"no entity {entity_id!r}")
    survivor = None
    if entity.merged_into:
        survivor = await store.readable_entity(entity.merged_into, _scopes(viewer))
    events = await store.audit_events(None, entity_id=entity_id, limit=100)
    mask = await masker(store, viewer, [e["payload"] for e in events])
    return {
        "entity": entity,
        "aliases": (await store.entity_aliases([entity_id], _scopes(viewer))).get(entity_id, []),
        "survivor": survivor,
        "merged_from": (await store.merged_into_these([entity_id], _scopes(viewer))).get(entity_id, []),
        "records": await store.get_records(await store.entity_record_ids(entity_id, _scopes(viewer), 100)),
        "events": [{**e, "payload": mask(e["payload"])} for e in events],
    }


async def sessions_page(store: Store, viewer: Viewer, page: int) -> dict[str, Any]:
    found = await store.list_sessions(viewer.owner, limit=PAGE_SIZE + 1, offset=(page - 1) * PAGE_SIZE)
    return {"sessions": found[:PAGE_SIZE], "page": page, "more": len(found) > PAGE_SIZE}


TURNS_PER_PAGE = 200


async def session_page(store: Store, viewer: Viewer, key: SessionKey, page: int) -> dict[str, Any]:
    session = await store.get_session(key) if viewer.owns(key.agent_id, key.user_id) else None
    if session is None:
        raise NotFoundError(f"no session {str(key)!r}")
    first = (page - 1) * TURNS_PER_PAGE + 1
    turns = await store.turns_between(key, first, first + TURNS_PER_PAGE)
    return {
        "session": session,
        "key": key,
        "turns": turns[:TURNS_PER_PAGE],
        "page": page,
        "more": len(turns) > TURNS_PER_PAGE,
        "records": await store.records_from_session(key, _scopes(viewer)),
    }


async def audit_page(
    store: Store, viewer: Viewer, kind: str | None, actor: str | None, page: int
) -> dict[str, Any]:
    events = await store.audit_events(
        _scopes(viewer), kind=kind, actor=actor, limit=PAGE_SIZE + 1, offset=(page - 1) * PAGE_SIZE
    )
    mask = await masker(store, viewer, [e["payload"] for e in events[:PAGE_SIZE]])
    return {
        "events": [{**e, "payload": mask(e["payload"])} for e in events[:PAGE_SIZE]],
        "kinds": await store.event_kinds(),
        "kind": kind,
        "actor": actor,
        "page": page,
        "more": len(events) > PAGE_SIZE,
    }


# --- searches and plots -----------------------------------------------------------------------


def _pass_rate(row: dict[str, Any]) -> tuple[int, int]:
    fused = row["fused"] if isinstance(row["fused"], list) else []
    gated = row["gated_out"] if isinstance(row["gated_out"], list) else []
    return len(fused), len(fused) - len(gated)


async def searches_page(store: Store, viewer: Viewer, page: int) -> dict[str, Any]:
    rows = await store.list_search_logs(viewer.owner, limit=PAGE_SIZE + 1, offset=(page - 1) * PAGE_SIZE)
    for row in rows:
        row["candidates"], row["passed"] = _pass_rate(row)
    return {"searches": rows[:PAGE_SIZE], "page": page, "more": len(rows) > PAGE_SIZE}


PLOT_SEARCHES = 60
PLOT_DAYS = 60
STATUS_COLORS = {
    "provisional": "#e6b400", "confirmed": "#59a14f", "superseded": "#8a8ad6", "expired": "#9a9a9a",
    "deleted": "#e15759",
}  # fmt: skip


async def plots_page(store: Store, viewer: Viewer) -> dict[str, Any]:
    rows = list(reversed(await store.list_search_logs(viewer.owner, limit=PLOT_SEARCHES)))
    timings = [
        (str(r["at"])[11:19], r["timings_ms"] if isinstance(r["timings_ms"], dict) else {}) for r in rows
    ]
    stages = [s for s in dict.fromkeys(k for _, t in timings for k in t) if s != "total"]
    stages = [s for s in stages if any(float(t.get(s) or 0) > 0 for _, t in timings)]
    latency = [(label, {s: float(t.get(s) or 0) for s in stages}) for label, t in timings]
    rates = []
    for row in rows:
        total, passed = _pass_rate(row)
        if total:
            hover = f"{str(row['at'])[:19]}: {passed} of {total} candidates passed the gate"
            rates.append((str(row["at"])[11:19], passed / total, hover))
    since = store.clock.now() - timedelta(days=PLOT_DAYS)
    by_day: dict[str, dict[str, float]] = {}
    for day, status, n in await store.records_by_day(_scopes(viewer), since):
        by_day.setdefault(day[5:], {})[status] = float(n)
    return {
        "latency": plots.stacked_columns(
            latency, stages, title=f"Per-stage latency of the last {len(rows)} searches", unit="ms"
        ),
        "statuses": plots.stacked_columns(
            list(by_day.items()), STATUSES, colors=STATUS_COLORS,
            title=f"Records created per day (last {PLOT_DAYS} days), by current status", unit="records",
        ),
        "gate": plots.rate_columns(rates, title="Gate pass rate: fused candidates that passed, per search"),
    }  # fmt: skip


METRICS_DAYS = 7


async def metrics_page(store: Store, viewer: Viewer, days: int) -> dict[str, Any]:
    """``retold metrics`` for the last ``days`` days, drawn; the operator's view only.

    The figures count every tenant's searches, writes and review items: acting as a
    principal, the page says so and reads nothing (a count is still another user's data).
    """
    if viewer.principal is not None:
        return {"operator_only": True, "days": days}
    now = store.clock.now()
    report = await collect_metrics(store, now=now, since=now - timedelta(days=days))
    latency = [
        (stage, {"p50": fig.p50, "p95 above p50": max(0.0, fig.p95 - fig.p50)})
        for stage, fig in report.searches.latency_ms.items()
        if stage != "total" and fig.p95 > 0
    ]
    decisions = [
        (f"{activation} · {decider}", float(n))
        for activation, by in report.activation.by_activation_and_decider.items()
        for decider, n in by.items()
    ]
    return {
        "operator_only": False,
        "days": days,
        "report": report,
        "latency": plots.stacked_columns(
            latency, ["p50", "p95 above p50"], title=f"Search latency by stage, last {days} day(s)", unit="ms"
        ),
        "writes": plots.hbars(
            [(k, float(v)) for k, v in report.writes.by_outcome.items()], title="Writes by outcome", unit=""
        ),
        "decisions": plots.hbars(decisions, title="Activation decisions (activation · who decided)", unit=""),
    }
