"""Activation by hand and the figures an operator watches (issue 21).

``retold reviews`` lists and resolves the borderline activation decisions the policy queued
for a person, and checks the queue's backlog from a scheduler; ``retold activation`` promotes
or demotes one record; ``retold metrics`` reports what searches, writes and activation did
over a window. Every change goes through :class:`~retold.ingest.activation.ActivationService`
(``rt.activation``), so a person's promotion passes the same eligibility checks as the
policy's, and leaves the same events.
"""

from __future__ import annotations

import asyncio
import re
from datetime import UTC, datetime, timedelta
from typing import Any

import click

from retold.cli.common import (
    CommandFailed,
    common_options,
    echo_json,
    json_option,
    jsonable,
    reported_errors,
    store_options,
)
from retold.errors import InvalidArgumentError, NotFoundError
from retold.models import Record
from retold.policy.metrics import Metrics, collect_metrics, current_backlog
from retold.runtime import Runtime, open_runtime
from retold.store.activation import ReviewItem
from retold.util import format_ts

__all__ = ["EXIT_BREACHED", "activation", "metrics", "reviews"]

EXIT_BREACHED = 3
_RESOLUTIONS = ("promote", "conditional", "reject")
_RELATIVE = re.compile(r"^(\d+(?:\.\d+)?)\s*([mhdw])$")
_UNITS = {"m": "minutes", "h": "hours", "d": "days", "w": "weeks"}


def _run(as_json: bool, coro: Any) -> Any:
    """Run a short command's library call; under --json a refusal is one object too."""
    with reported_errors(as_json):
        return asyncio.run(coro)


def _ts(value: datetime | None) -> str:
    return "-" if value is None else format_ts(value)[:19].replace("T", " ")


def _quoted(text: str | None, limit: int = 200) -> str:
    if text is None:
        return "-"
    flat = " ".join(text.split())
    return repr(flat if len(flat) <= limit else flat[: limit - 1] + "…")


# --- retold reviews -----------------------------------------------------------------------------


@click.group()
def reviews() -> None:
    """The activation review queue: borderline profile decisions waiting for a person.

    Example:

        retold reviews list --store memory.sqlite
    """


@reviews.command("list")
@click.option("--all", "show_all", is_flag=True, help="Include resolved items (default: open ones only).")
@click.option(
    "--limit", default=100, show_default=True, type=click.IntRange(min=1), help="At most this many."
)
@json_option
@common_options
def reviews_list(
    show_all: bool, limit: int, as_json: bool, store_path: str, config_path: str | None, actor: str
) -> None:
    """List review items, oldest first, each with its record's content, evidence and status.

    An open item whose record is no longer active (forgotten, superseded, expired) is
    listed as stale: it is not part of the backlog. --json prints one object.

    Example:

        retold reviews list --store memory.sqlite --all
    """

    async def go() -> list[tuple[ReviewItem, Record | None]]:
        async with open_runtime(store_path, config_path, allow_embedding_mismatch=True) as rt:
            items = await rt.store.activation_reviews(status=None if show_all else "open", limit=limit)
            records = {r.id: r for r in await rt.store.get_records(i.record_id for i in items)}
            return [(item, records.get(item.record_id)) for item in items]

    listed = _run(as_json, go())
    if as_json:
        echo_json({"ok": True, "count": len(listed), "reviews": [_review_json(i, r) for i, r in listed]})
        return
    for item, record in listed:
        state = "open" if item.status == "open" else f"resolved as {item.resolution}"
        if _stale(item, record):
            state += f" (stale: record {record.status if record else 'missing'})"
        click.echo(
            f"{item.id[-12:]}  {state}  record {item.record_id} in {item.scope}"
            f"  category {item.category or '-'}  opened {_ts(item.created_at)}"
        )
        click.echo(f"    reason: {item.reason}")
        click.echo(f"    content: {_quoted(record.content if record else None)}")
        click.echo(f"    evidence: {_quoted(record.evidence if record else None)}")
        if item.status != "open":
            note = f": {item.note}" if item.note else ""
            click.echo(f"    resolved by {item.resolver} at {_ts(item.resolved_at)}{note}")
    opened = sum(1 for item, _ in listed if item.status == "open")
    summary = f"{len(listed)} review item(s), {opened} open" if show_all else f"{opened} open review item(s)"
    click.echo(summary + (f" (the first {limit}; raise --limit for more)" if len(listed) == limit else ""))


def _stale(item: ReviewItem, record: Record | None) -> bool:
    """An open item whose record ended (forgotten, superseded, expired): not part of the backlog."""
    return item.status == "open" and not (record is not None and record.is_active)


def _review_json(item: ReviewItem, record: Record | None) -> dict[str, Any]:
    return {
        **jsonable(item),
        "scope": str(item.scope),
        "short_id": item.id[-12:],
        "stale": _stale(item, record),
        "record": None if record is None else {
            "id": record.id, "type": record.type, "status": record.status, "content": record.content,
            "evidence": record.evidence, "source_kind": record.source_kind,
        },
    }  # fmt: skip


@reviews.command("resolve")
@click.argument("review_id")
@click.option(
    "--as", "resolution", required=True, type=click.Choice(_RESOLUTIONS),
    help="promote: make the record ambient (after the eligibility checks); conditional: keep it "
    "searchable only; reject: the memory is wrong, forget the record.",
)  # fmt: skip
@click.option("--resolver", required=True, help="Who decided; recorded on the events.")
@click.option("--note", default=None, help="Why; kept on the item and as the decision's reason.")
@json_option
@store_options
def reviews_resolve(
    review_id: str,
    resolution: str,
    resolver: str,
    note: str | None,
    as_json: bool,
    store_path: str,
    config_path: str | None,
) -> None:
    """Resolve the open review item REVIEW_ID (its full id or the 12-character short id).

    Here --as names the resolution; the operator recorded on the events is --resolver.
    Promotion applies the same eligibility checks as the policy (the user's own verified
    words, a promotable category) and refuses, changing nothing, when one fails. Appends
    record.activation_decided and activation.review_resolved. An item already resolved
    is refused (exit 1).

    Example:

        retold reviews resolve 7f3a9c1e2b4d --as promote --resolver ops --note "standing preference"
    """

    async def go() -> Any:
        async with open_runtime(store_path, config_path) as rt:
            return await rt.activation.resolve_review(review_id, resolution, resolver=resolver, note=note)

    outcome = _run(as_json, go())
    if as_json:
        echo_json({"ok": True, **jsonable(outcome)})
        return
    done = {
        "promote": f"record {outcome.record_id} is now ambient",
        "conditional": f"record {outcome.record_id} stays conditional",
        "reject": f"record {outcome.record_id} was forgotten",
    }[outcome.resolution]
    click.echo(
        f"resolved review {outcome.review_id} as {outcome.resolution}: {done} ({outcome.record_status})"
    )


@reviews.command("backlog")
@click.option(
    "--max-open", type=click.IntRange(min=0), default=None, help="Breached above this many open items."
)
@click.option(
    "--max-age-days", type=click.FloatRange(min=0), default=None,
    help="Breached when the oldest open item is older than this.",
)  # fmt: skip
@json_option
@common_options
def reviews_backlog(
    max_open: int | None,
    max_age_days: float | None,
    as_json: bool,
    store_path: str,
    config_path: str | None,
    actor: str,
) -> None:
    """Check the review backlog: exit 0 within the limits, 3 when one is breached.

    The backlog is the open items whose record is still active. Prints the figures either
    way: how many are open, when the oldest was opened and its age in days (and the open
    items left stale by their record's end, which do not count). Run it from a scheduler.

    Example:

        retold reviews backlog --max-open 20 --max-age-days 7 --store memory.sqlite
    """

    async def go() -> Any:
        async with open_runtime(store_path, config_path, allow_embedding_mismatch=True) as rt:
            return await current_backlog(rt.store, rt.clock.now())

    backlog = _run(as_json, go())
    breaches = []
    if max_open is not None and backlog.open > max_open:
        breaches.append(f"{backlog.open} open item(s), more than --max-open {max_open}")
    if max_age_days is not None and (backlog.oldest_age_days or 0.0) > max_age_days:
        breaches.append(
            f"the oldest is {backlog.oldest_age_days:.1f} days old, more than --max-age-days {max_age_days:g}"
        )
    failure = None
    if breaches:
        failure = CommandFailed(
            "review backlog breached: " + "; ".join(breaches),
            code="backlog_breached",
            exit_code=EXIT_BREACHED,
        )
    figures = {
        **jsonable(backlog),
        "max_open": max_open,
        "max_age_days": max_age_days,
        "breached": bool(breaches),
    }
    if as_json:
        error = {} if failure is None else {"error": failure.code, "message": failure.message}
        echo_json({"ok": failure is None, **figures, **error})
        if failure is not None:
            raise SystemExit(failure.exit_code)
        return
    oldest = ""
    if backlog.oldest is not None:
        oldest = f", the oldest opened {_ts(backlog.oldest)} ({backlog.oldest_age_days:.1f} days ago)"
    stale = f"; {backlog.open_stale} stale item(s) not counted" if backlog.open_stale else ""
    click.echo(f"review backlog: {backlog.open} open item(s){oldest}{stale}")
    if failure is not None:
        raise failure


# --- retold activation --------------------------------------------------------------------------


async def _record_id(rt: Runtime, ref: str) -> str:
    """The record ``ref`` names (full or short id), anywhere in the store."""
    found = await rt.store.record_ids_named(ref.strip())
    if not found:
        raise NotFoundError(f"no record {ref!r}")
    if len(found) > 1:
        raise InvalidArgumentError(
            f"{ref!r} names {len(found)} records ({', '.join(found)}); give the full id"
        )
    return found[0]


@click.command()
@click.argument("record_id")
@click.argument("target", metavar="ambient|conditional", type=click.Choice(("ambient", "conditional")))
@click.option(
    "--resolver", "--as", "resolver", required=True,
    help="Who decided (the operator recorded on the event; --as is the same option).",
)  # fmt: skip
@click.option("--reason", required=True, help="Why; recorded as the decision's reason.")
@json_option
@store_options
def activation(
    record_id: str,
    target: str,
    resolver: str,
    reason: str,
    as_json: bool,
    store_path: str,
    config_path: str | None,
) -> None:
    """Make RECORD_ID (full or short id) ambient (in the profile) or conditional (search only).

    Promotion applies the policy's eligibility checks (an active semantic record, the
    user's own verified words as evidence, a promotable category) and refuses, changing
    nothing, naming the check that failed. The decision is kept: later writes of the
    same fact do not undo it. Appends record.activation_decided (by operator) and resolves
    the record's open review item, if any.

    Example:

        retold activation 7f3a9c1e2b4d conditional --resolver ops --reason "only for the Q3 report"
    """

    async def go() -> Any:
        async with open_runtime(store_path, config_path) as rt:
            full = await _record_id(rt, record_id)
            return await rt.activation.set_activation(full, target, resolver=resolver, reason=reason)

    change = _run(as_json, go())
    if as_json:
        echo_json({"ok": True, **jsonable(change)})
        return
    if change.changed:
        click.echo(
            f"record {change.record_id} is now {change.activation} (was {change.previous}): {change.reason}"
        )
    else:
        click.echo(f"record {change.record_id} stays {change.activation}; decision recorded: {change.reason}")


# --- retold metrics ------------------------------------------------------------------------------


class _When(click.ParamType):
    """An ISO 8601 date or time (naive means UTC), or a span ago: ``30m``, ``12h``, ``7d``, ``2w``."""

    name = "time"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> datetime:
        if isinstance(value, datetime):
            return value
        text = str(value).strip()
        relative = _RELATIVE.match(text)
        if relative:
            span = timedelta(**{_UNITS[relative.group(2)]: float(relative.group(1))})
            return datetime.now(UTC) - span
        try:
            parsed = datetime.fromisoformat(text.replace("Z", "+00:00"))
        except ValueError:
            self.fail(
                f"{text!r} is neither an ISO 8601 time nor a span such as 7d, 12h, 30m or 2w", param, ctx
            )
        return parsed.replace(tzinfo=UTC) if parsed.tzinfo is None else parsed.astimezone(UTC)


def metrics_lines(report: Metrics) -> list[str]:
    """The text form of a report, one figure group per line (the latency table last)."""
    s, w, a, r = report.searches, report.writes, report.activation, report.reviews
    start = _ts(report.since) if report.since else "the beginning"
    window = f"{start} to {_ts(report.until) if report.until else 'now'}"
    lines = [f"window: {window} (now {_ts(report.now)})"]
    if s.count:
        tokens = f"{s.mean_tokens:g}" if s.mean_tokens is not None else "unknown"
        triggers = ", ".join(f"{k} {v}" for k, v in s.by_trigger.items())
        lines.append(
            f"searches: {s.count} ({triggers}); {s.empty} empty ({s.empty_rate:.1%}); "
            f"mean {s.mean_results:g} result(s) and {tokens} token(s) returned"
            + (f" (tokens known for {s.tokens_known})" if s.tokens_known != s.count else "")
        )
    else:
        lines.append("searches: 0")
    outcomes = ", ".join(f"{k} {v}" for k, v in w.by_outcome.items())
    lines.append(f"writes: {w.total}" + (f" ({outcomes})" if outcomes else ""))
    parts = [
        f"{act} {a.by_activation[act]} (" + ", ".join(f"{d} {n}" for d, n in by.items()) + ")"
        for act, by in a.by_activation_and_decider.items()
    ]
    lines.append(
        f"activation decisions: {a.decisions}"
        + (f" ({'; '.join(parts)})" if parts else "")
        + f", {a.skipped} skipped"
    )
    resolved = ", ".join(f"{k} {v}" for k, v in r.by_resolution.items())
    b = r.backlog
    oldest = f", the oldest {b.oldest_age_days:.1f} days old" if b.oldest_age_days is not None else ""
    lines.append(
        f"reviews: {r.opened} opened, {r.resolved} resolved" + (f" ({resolved})" if resolved else "")
        + f"; backlog now {b.open} open{oldest}"
    )  # fmt: skip
    if s.latency_ms:
        width = max(len(stage) for stage in s.latency_ms)
        lines.append(f"latency (ms)  {'stage':<{width}}  {'p50':>9}  {'p95':>9}  {'max':>9}")
        for stage, fig in s.latency_ms.items():
            lines.append(f"              {stage:<{width}}  {fig.p50:>9.2f}  {fig.p95:>9.2f}  {fig.max:>9.2f}")
    return lines


@click.command()
@click.option("--since", type=_When(), default=None, help="From this time (ISO 8601, or 7d, 12h... ago).")
@click.option("--until", type=_When(), default=None, help="Up to this time, excluded (default: now).")
@json_option
@common_options
def metrics(
    since: datetime | None,
    until: datetime | None,
    as_json: bool,
    store_path: str,
    config_path: str | None,
    actor: str,
) -> None:
    """Report searches, writes, activation decisions and the review backlog over a window.

    Searches (count, empty rate, mean results and tokens returned, per-stage latency p50/p95)
    come from search_log; writes by outcome and activation decisions from the events; the
    backlog is as of now. Nothing is logged for it: the figures are read from what the
    store already keeps. --json prints one object.

    Example:

        retold metrics --since 7d --store memory.sqlite
    """
    if since is not None and until is not None and since >= until:
        raise click.BadParameter("must be before --until", param_hint="--since")

    async def go() -> Metrics:
        async with open_runtime(store_path, config_path, allow_embedding_mismatch=True) as rt:
            return await collect_metrics(rt.store, now=rt.clock.now(), since=since, until=until)

    report = _run(as_json, go())
    if as_json:
        echo_json({"ok": True, **jsonable(report)})
        return
    for line in metrics_lines(report):
        click.echo(line)
