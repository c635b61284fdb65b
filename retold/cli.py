"""The ``retold`` command: argument parsing plus one library call per command.

Every command takes ``--store`` (default ``./memory.sqlite``), ``--config`` and
``--as`` (the operator recorded on audit events). Library errors become one line
on stderr and a non-zero exit, never a traceback.
"""

from __future__ import annotations

import asyncio
import functools
import json
import sys
from collections.abc import Awaitable, Callable
from dataclasses import asdict, is_dataclass
from datetime import datetime
from typing import Any, TypeVar

import click

from retold.errors import RetoldError
from retold.models import Principal, Scope, SearchRequest
from retold.retrieve.render import render_search
from retold.runtime import open_runtime

__all__ = ["cli", "main"]

T = TypeVar("T")

EXIT_ERROR = 1
EXIT_UNRESOLVED = 2


def _run(coro: Awaitable[T]) -> T:
    """The one place the CLI runs the event loop; retold errors become a clean exit."""
    try:
        return asyncio.run(coro)  # type: ignore[arg-type]
    except RetoldError as exc:
        raise click.ClickException(str(exc)) from exc


def common_options(func: Callable[..., Any]) -> Callable[..., Any]:
    """--store, --config and --as on every command (spec §16)."""

    @click.option(
        "--store",
        "store_path",
        default="./memory.sqlite",
        show_default=True,
        type=click.Path(dir_okay=False),
        help="The SQLite store file.",
    )
    @click.option(
        "--config",
        "config_path",
        default=None,
        type=click.Path(exists=True, dir_okay=False),
        help="YAML config file; the defaults apply without one.",
    )
    @click.option(
        "--as",
        "actor",
        default="admin",
        show_default=True,
        help="Operator identity recorded on audit events.",
    )
    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        return func(*args, **kwargs)

    return wrapper


def _open(store_path: str, config_path: str | None, **kwargs: Any) -> Any:
    return open_runtime(store_path, config_path, **kwargs)


def _jsonable(value: Any) -> Any:
    if is_dataclass(value) and not isinstance(value, type):
        return _jsonable(asdict(value))
    if isinstance(value, dict):
        return {k: _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    if isinstance(value, datetime):
        return value.isoformat()
    return value


def _echo_json(value: Any) -> None:
    click.echo(json.dumps(_jsonable(value), indent=2, ensure_ascii=False))


def _parse_scope(text: str) -> Scope:
    try:
        return Scope.parse(text)
    except RetoldError as exc:
        raise click.BadParameter(str(exc)) from exc


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="retold")
def cli() -> None:
    """retold: durable, scoped, evidence-backed memory for LLM agents, in one SQLite file.

    Example:

        retold grant planner user:u1 --read --write --store memory.sqlite
    """


@cli.command()
@common_options
@click.option("--expire-unmapped", is_flag=True, help="Retire every unmapped legacy row (status expired).")
@click.option("--allow-unmapped", is_flag=True, help="Acknowledge the unmapped legacy rows and carry on.")
def migrate(
    store_path: str, config_path: str | None, actor: str, expire_unmapped: bool, allow_unmapped: bool
) -> None:
    """Apply schema migrations and list legacy rows migration 2 could not map.

    Exits with status 2 while unmapped rows remain; --expire-unmapped retires them
    (one record.status event each) and --allow-unmapped acknowledges them.

    Example:

        retold migrate --store memory.sqlite --expire-unmapped --as ops
    """
    if expire_unmapped and allow_unmapped:
        raise click.UsageError("choose one of --expire-unmapped and --allow-unmapped")

    async def go() -> tuple[int, list[dict[str, Any]], int]:
        async with _open(store_path, config_path, allow_migration_issues=True) as rt:
            resolved = 0
            if expire_unmapped:
                resolved = await rt.store.resolve_migration_issues("expired", actor)
            elif allow_unmapped:
                resolved = await rt.store.resolve_migration_issues("acknowledged", actor)
            return await rt.store.schema_version(), await rt.store.migration_issues(), resolved

    version, issues, resolved = _run(go())
    click.echo(f"{store_path}: schema version {version}")
    if resolved:
        verb = "expired" if expire_unmapped else "acknowledged"
        click.echo(f"{verb} {resolved} unmapped legacy record(s)")
    if issues:
        click.echo(f"{len(issues)} legacy record(s) could not be mapped to a structured subject:")
        for issue in issues:
            click.echo(
                f"  {issue['record_id']}  {issue['status']} {issue['type']} "
                f"{issue['scope_kind']}:{issue['scope_id']}  subject={issue['subject']!r}  {issue['issue']}"
            )
        click.echo("Retire them with --expire-unmapped or acknowledge them with --allow-unmapped.", err=True)
        sys.exit(EXIT_UNRESOLVED)


@cli.command()
@click.argument("agent_id")
@click.argument("scope")
@click.option("--read/--no-read", default=True, show_default=True, help="Allow retrieval from the scope.")
@click.option("--write/--no-write", default=False, show_default=True, help="Allow writes to the scope.")
@common_options
def grant(
    agent_id: str, scope: str, read: bool, write: bool, store_path: str, config_path: str | None, actor: str
) -> None:
    """Create or update AGENT_ID's grant on a shared SCOPE (kind:id).

    Example:

        retold grant planner user:u1 --read --write
    """
    target = _parse_scope(scope)

    async def go() -> Any:
        async with _open(store_path, config_path) as rt:
            return await rt.host.grant(agent_id, target, read=read, write=write, actor=actor)

    result = _run(go())
    access = "+".join(a for a, on in (("read", result.can_read), ("write", result.can_write)) if on)
    click.echo(f"granted {agent_id} {access} on {target}")


@cli.command()
@click.argument("agent_id")
@click.argument("scope")
@common_options
def revoke(agent_id: str, scope: str, store_path: str, config_path: str | None, actor: str) -> None:
    """Remove AGENT_ID's grant on SCOPE (kind:id); exits 1 when there was none.

    Example:

        retold revoke planner user:u1
    """
    target = _parse_scope(scope)

    async def go() -> bool:
        async with _open(store_path, config_path) as rt:
            return await rt.host.revoke(agent_id, target, actor=actor)

    if not _run(go()):
        raise click.ClickException(f"{agent_id} has no grant on {target}; nothing to revoke")
    click.echo(f"revoked {agent_id} on {target}")


@cli.command()
@click.option("--scope", "scope", required=True, help="The scope to print, as kind:id (user:u1).")
@click.option("--all-statuses", is_flag=True, help="Include superseded, expired and deleted records.")
@common_options
def dump(scope: str, all_statuses: bool, store_path: str, config_path: str | None, actor: str) -> None:
    """Print the active records of one scope, one JSON object per line.

    Example:

        retold dump --scope user:u1
    """
    target = _parse_scope(scope)

    async def go() -> list[Any]:
        async with _open(store_path, config_path) as rt:
            return await rt.ops.dump_scope(target, all_statuses=all_statuses)

    for record in _run(go()):
        click.echo(json.dumps(_jsonable(record), ensure_ascii=False))


@cli.command()
@click.argument("queries", nargs=-1)
@click.option("--agent", "agent_id", help="The agent searching (required unless --replay).")
@click.option("--user", "user_id", help="The user the agent works for (required unless --replay).")
@click.option("--session", "session_id", default=None, help="Session id recorded in the log.")
@click.option("--project", "project_id", default=None, help="The principal's current project.")
@click.option("--type", "types", multiple=True, type=click.Choice(["semantic", "episodic", "procedural"]))
@click.option("--k", "k", type=int, default=None, help="Results to return (default retrieval.default_k).")
@click.option("--history", is_flag=True, help="Include superseded and expired records.")
@click.option("--replay", "replay_id", default=None, help="Re-decide a logged search's gate with --config.")
@common_options
def search(
    queries: tuple[str, ...],
    agent_id: str | None,
    user_id: str | None,
    session_id: str | None,
    project_id: str | None,
    types: tuple[str, ...],
    k: int | None,
    history: bool,
    replay_id: str | None,
    store_path: str,
    config_path: str | None,
    actor: str,
) -> None:
    """Run one search as AGENT for USER and print the result and its search_log row.

    With --replay SEARCH_ID, re-decide that logged search's gate under the floors of
    --config, from the logged candidate scores alone, and print the decision.

    Example:

        retold search --agent planner --user u1 "answer style" "preferred tone"

        retold search --replay 0190c3a4-5b6e-7c8d-9e0f-123456789abc --config stricter.yaml
    """
    if replay_id is not None:

        async def replay() -> Any:
            from retold.retrieve.replay import replay_gate

            async with _open(store_path, config_path) as rt:
                return await replay_gate(rt.store, replay_id, rt.config)

        _echo_json(_run(replay()))
        return
    if not agent_id or not user_id or not queries:
        raise click.UsageError("a search needs --agent, --user and at least one query (or --replay ID)")
    try:
        principal = Principal(
            agent_id=agent_id, user_id=user_id, session_id=session_id, project_id=project_id
        )
    except RetoldError as exc:
        raise click.BadParameter(str(exc)) from exc
    request = SearchRequest(queries=list(queries), types=list(types) or None, k=k, include_history=history)

    async def go() -> tuple[str, Any]:
        async with _open(store_path, config_path) as rt:
            response = await rt.search(principal, request)
            return render_search(response), await rt.store.search_log(response.search_id)

    rendered, row = _run(go())
    click.echo(rendered)
    click.echo("\nsearch_log:")
    _echo_json({key: _maybe_json(value) for key, value in (row or {}).items()})


def _maybe_json(value: Any) -> Any:
    if isinstance(value, str) and value[:1] in "[{":
        try:
            return json.loads(value)
        except ValueError:
            return value
    return value


@cli.command()
@click.argument("record_id")
@common_options
def get(record_id: str, store_path: str, config_path: str | None, actor: str) -> None:
    """Print one record with its lineage, conflicts, entity links and audit events.

    Example:

        retold get 0190c3a4-5b6e-7c8d-9e0f-123456789abc
    """

    async def go() -> dict[str, Any]:
        async with _open(store_path, config_path) as rt:
            return await rt.ops.record_report(record_id)

    _echo_json(_run(go()))


# --- maintenance (spec §16): expire, retain, erase, reembed, snapshot, check ------------------------

EXIT_FINDINGS = 3


@cli.command()
@common_options
def expire(store_path: str, config_path: str | None, actor: str) -> None:
    """Mark every active record past its expiry as expired, one record.status event each.

    Provisional records and session summaries alike. Running it again changes nothing.

    Example:

        retold expire --store memory.sqlite --as cron
    """

    async def go() -> list[str]:
        async with _open(store_path, config_path, allow_embedding_mismatch=True) as rt:
            return await rt.ops.expire(actor=actor)

    expired = _run(go())
    click.echo(f"expired {len(expired)} record(s)")
    for record_id in expired:
        click.echo(f"  {record_id}")


@cli.command()
@common_options
def retain(store_path: str, config_path: str | None, actor: str) -> None:
    """Blank the transcripts of extracted sessions that ended over sessions.retain_days ago.

    Turn rows stay (so source references still resolve); a session never extracted is
    never blanked. One session.retained event per session.

    Example:

        retold retain --store memory.sqlite --config retold.yaml
    """

    async def go() -> Any:
        async with _open(store_path, config_path, allow_embedding_mismatch=True) as rt:
            return await rt.ops.retain(actor=actor)

    report = _run(go())
    click.echo(f"blanked {report.turns} turn(s) in {len(report.sessions)} session(s)")
    for session_id in report.sessions:
        click.echo(f"  {session_id}")


@cli.command()
@click.option("--record", "record_id", default=None, help="Erase one record's content.")
@click.option("--session", "session_id", default=None, help="Erase one session's transcript.")
@click.option("--user", "user_id", default=None, help="Erase everything a user's text reached.")
@click.option("--reason", required=True, help="Why; recorded on the erasure event.")
@click.option("--yes", is_flag=True, help="Really erase. Without it, print what would be erased.")
@common_options
def erase(
    record_id: str | None,
    session_id: str | None,
    user_id: str | None,
    reason: str,
    yes: bool,
    store_path: str,
    config_path: str | None,
    actor: str,
) -> None:
    """Irreversibly erase durable content: one record, one session, or one user.

    Ids, kinds and timestamps remain; the text goes from every table, the search logs
    and the event payloads, and the file is compacted so no freed page keeps it. Without
    --yes nothing changes: the command prints what it would erase.

    Example:

        retold erase --user u1 --reason "deletion request 1432" --as dpo --yes
    """
    targets = [t for t in (record_id, session_id, user_id) if t is not None]
    if len(targets) != 1:
        raise click.UsageError("give exactly one of --record, --session and --user")

    async def go() -> Any:
        async with _open(store_path, config_path, allow_embedding_mismatch=True) as rt:
            return await rt.ops.erase(
                record=record_id,
                session=session_id,
                user=user_id,
                reason=reason,
                actor=actor,
                dry_run=not yes,
            )

    report = _run(go())
    click.echo(report.summary())
    if not report.applied:
        for kind, ids in (
            ("record", report.records),
            ("evidence of record", report.evidence_cleared),
            ("session", report.sessions),
            ("entity", report.entities),
        ):
            for item in ids:
                click.echo(f"  {kind} {item}")
        click.echo("Nothing was changed. Rerun with --yes to erase.", err=True)
    elif report.compacted is False:
        raise click.ClickException(
            "the content is erased, but another connection kept the WAL file from being emptied, so old "
            "pages may remain in it; stop the other hosts and run the same command again"
        )


@cli.command()
@click.option("--model", required=True, help="The embedding model (must match embedding.model in --config).")
@click.option("--version", "model_version", required=True, help="The embedding version (embedding.version).")
@click.option(
    "--batch-size", default=None, type=click.IntRange(min=1), help="Default: embedding.reembed_batch_size."
)
@common_options
def reembed(
    model: str,
    model_version: str,
    batch_size: int | None,
    store_path: str,
    config_path: str | None,
    actor: str,
) -> None:
    """Re-embed every record that has text and swap all vectors at once (one store.reembedded event).

    Refuses when the latest logged search ran under another embedding with the dense
    floors the configuration still carries: recalibrate the floors for the new model first.

    Example:

        retold reembed --model BAAI/bge-m3 --version 1 --config bge-m3.yaml
    """
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    # The bar starts with the first batch, so a refusal prints one error line and nothing else.
    columns = (TextColumn("re-embedding"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    bar = Progress(*columns, console=Console(stderr=True))
    task: Any = None

    def progress(done: int, total: int) -> None:
        nonlocal task
        if task is None:
            bar.start()
            task = bar.add_task("reembed", total=total)
        bar.update(task, completed=done, total=total)

    async def go() -> Any:
        async with _open(store_path, config_path, allow_embedding_mismatch=True) as rt:
            return await rt.ops.reembed(
                model, model_version, actor=actor, batch_size=batch_size, progress=progress
            )

    try:
        report = _run(go())
    finally:
        if task is not None:
            bar.stop()
    click.echo(
        f"re-embedded {report.records} record(s) with {report.model} version {report.version} "
        f"({report.dims} dims) in {report.batches} batch(es)"
    )


@cli.command()
@click.option("--repair", is_flag=True, help="Rebuild what is derivable: FTS rows, vectors, the version.")
@common_options
def check(repair: bool, store_path: str, config_path: str | None, actor: str) -> None:
    """Check the store's integrity beyond SQLite's own; exit 0 when clean, 3 with findings.

    Every active record has one FTS row and one vector of the configured model; no
    orphan links; conflicts recorded both ways; records_version consistent with the rows;
    supersession chains acyclic. --repair rebuilds FTS rows and vectors, reports what it
    changed, and checks again.

    Example:

        retold check --store memory.sqlite --repair
    """

    async def go() -> Any:
        async with _open(store_path, config_path, allow_embedding_mismatch=True) as rt:
            return await rt.ops.check(repair=repair, actor=actor)

    report = _run(go())
    for line in report.repaired:
        click.echo(f"repaired: {line}")
    for finding in report.findings:
        click.echo(str(finding))
    if not report.clean:
        click.echo(f"{len(report.findings)} finding(s) in {store_path}", err=True)
        sys.exit(EXIT_FINDINGS)
    click.echo(f"{store_path}: clean")


@cli.group()
def snapshot() -> None:
    """Save a consistent copy of the store, or replace the store with one.

    Example:

        retold snapshot save fixtures/before.sqlite --store memory.sqlite
    """


@snapshot.command("save")
@click.argument("path", type=click.Path(dir_okay=False))
@common_options
def snapshot_save(path: str, store_path: str, config_path: str | None, actor: str) -> None:
    """Copy the whole store (every table) to a new file PATH through SQLite's online backup API.

    Safe while hosts are writing; refuses to overwrite an existing file.

    Example:

        retold snapshot save fixtures/before.sqlite --store memory.sqlite
    """

    async def go() -> Any:
        async with _open(store_path, config_path, allow_embedding_mismatch=True) as rt:
            return await rt.ops.save_snapshot(path)

    info = _run(go())
    click.echo(f"saved {info.path}: schema version {info.schema_version}, {info.records} record(s)")


@snapshot.command("load")
@click.argument("path", type=click.Path(dir_okay=False))
@click.option("--yes", is_flag=True, help="Really replace the store. Without it, only validate PATH.")
@common_options
def snapshot_load(path: str, yes: bool, store_path: str, config_path: str | None, actor: str) -> None:
    """Replace the store's contents with the snapshot at PATH; needs --yes and a stopped host.

    The snapshot's schema version is validated first; the load refuses while any other
    connection holds the store.

    Example:

        retold snapshot load fixtures/before.sqlite --store memory.sqlite --yes
    """
    from retold.operations import load_snapshot

    info = _run(load_snapshot(store_path, path, dry_run=not yes))
    described = f"{info.path} (schema version {info.schema_version}, {info.records} record(s))"
    if not yes:
        click.echo(f"would replace {store_path} with {described}")
        click.echo("Nothing was changed. Stop every host using the store and rerun with --yes.", err=True)
        return
    click.echo(f"loaded {described} into {store_path}")


@cli.command()
@click.option(
    "--store",
    "store_path",
    default=None,
    type=click.Path(dir_okay=False),
    help="Keep the demo store here (a new file); a temporary one is used otherwise.",
)
def demo(store_path: str | None) -> None:
    """Run the quickstart story offline: tools, evidence, supersession, search, forget."""
    from retold.quickstart import main as quickstart

    quickstart([store_path] if store_path else [])


_SKIPPED = {
    "not_ended": "session {id} has not ended yet; end it (on_session_end) before extracting it",
    "already_extracted": "session {id} was already extracted; pass --force to run it again",
    "claimed_by_other": "another worker is extracting session {id} (its claim lasts "
    "ingestion.extraction_claim_timeout_minutes); try again later",
}


@cli.command()
@click.argument("session_id")
@click.option("--force", is_flag=True, help="Run again on a session that was already extracted.")
@common_options
def extract(session_id: str, force: bool, store_path: str, config_path: str | None, actor: str) -> None:
    """Extract SESSION_ID now: candidates through review, one session summary, one extraction.run.

    Needs an extractor (ingestion.extraction_enabled and the provider's API key). Prints
    the run as JSON. Exits 1 when the session was skipped (not ended, already extracted
    without --force, claimed by another worker) or the run failed closed (nothing
    written; the claim expires after ingestion.extraction_claim_timeout_minutes). A
    forced re-run over unchanged output reports already_reinforced and changes nothing.

    Example:

        retold extract s1 --config retold.yaml
    """

    async def go() -> Any:
        async with _open(store_path, config_path) as rt:
            return await rt.extract_session(session_id, force=force, actor=actor)

    result = _run(go())
    _echo_json(result.as_dict())
    if result.status == "skipped":
        template = _SKIPPED.get(result.reason or "", "session {id} was skipped: " + str(result.reason))
        raise click.ClickException(template.format(id=session_id))
    if result.status == "failed":
        raise click.ClickException(
            f"extraction of {session_id} failed closed ({result.reason}); nothing was written. "
            "See its extraction.failed event; run it again after the claim expires."
        )


@cli.command("review-due")
@common_options
def review_due_command(store_path: str, config_path: str | None, actor: str) -> None:
    """Flag one bounded batch of records whose review_at has arrived.

    At most ingestion.temporal_review_batch_size records; each gets review_flagged_at and
    one record.review_due event in the same transaction, and nothing else about it
    changes. Safe to run from several processes at once: a record is flagged once.

    Example:

        retold review-due --store memory.sqlite --as cron
    """
    from retold.ingest.temporal import review_due

    async def go() -> Any:
        async with _open(store_path, config_path, allow_embedding_mismatch=True) as rt:
            return await review_due(rt.store, rt.config, rt.clock, operator=actor)

    flagged = _run(go())
    click.echo(f"flagged {len(flagged)} record(s) for review")
    for item in flagged:
        review_at = item.review_at.isoformat() if item.review_at else "-"
        click.echo(f"  {item.record_id}  review_at {review_at}")


def main() -> None:
    """Console-script entry point."""
    cli(prog_name="retold")
