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


def main() -> None:
    """Console-script entry point."""
    cli(prog_name="retold")
