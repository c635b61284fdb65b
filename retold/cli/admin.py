"""Store administration: schema migration, access grants, and reading records back out.

None of these touch vectors or transcripts, so they open the store as a host would (an
embedding mismatch still refuses), except that migrate accepts unmapped legacy rows:
listing and resolving them is its job.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import click

from retold.cli.common import (
    CommandFailed,
    common_options,
    echo_json,
    json_option,
    jsonable,
    operation,
    parse_scope,
    reported_errors,
    resolve_record,
    run_async,
)
from retold.config import load_config
from retold.runtime import open_runtime, store_location
from retold.store import Store

__all__ = ["dump", "get", "grant", "migrate", "revoke"]

EXIT_UNRESOLVED = 2


@click.command()
@common_options(missing="create")
@click.option("--expire-unmapped", is_flag=True, help="Retire every unmapped legacy row (status expired).")
@click.option("--allow-unmapped", is_flag=True, help="Acknowledge the unmapped legacy rows and carry on.")
@json_option
def migrate(
    store_path: str,
    config_path: str | None,
    actor: str,
    expire_unmapped: bool,
    allow_unmapped: bool,
    as_json: bool,
) -> None:
    """Apply schema migrations and list legacy rows migration 2 could not map.

    Exits with status 2 while unmapped rows remain; --expire-unmapped retires them
    (one record.status event each) and --allow-unmapped acknowledges them.

    Example:

        retold migrate --store memory.sqlite --expire-unmapped --as ops
    """
    resolution = "expired" if expire_unmapped else "acknowledged" if allow_unmapped else None
    with operation("migrating", as_json) as op:
        if expire_unmapped and allow_unmapped:
            raise click.UsageError("choose one of --expire-unmapped and --allow-unmapped")

        async def go() -> tuple[int, list[dict[str, Any]], int]:
            config = load_config(config_path)
            # Opening migrates; this first open does it with the bar counting the migrations.
            opened = await Store.open(
                store_location(store_path, config), allow_migration_issues=True,
                migration_progress=op.progress,
            )  # fmt: skip
            await opened.close()
            async with open_runtime(store_path, config, allow_migration_issues=True) as rt:
                resolved = 0
                if resolution is not None:
                    resolved = await rt.store.resolve_migration_issues(resolution, actor)
                return await rt.store.schema_version(), await rt.store.migration_issues(), resolved

        version, issues, resolved = op.run(go())
        parts = [f"{store_path}: schema version {version}"]
        if resolved:
            parts.append(f"{resolution} {resolved} unmapped legacy record(s)")
        if issues:
            parts.append(f"{len(issues)} legacy record(s) could not be mapped to a structured subject")
        op.finish(
            {
                "store": store_path,
                "schema_version": version,
                "resolution": resolution,
                "resolved": resolved,
                "unmapped": issues,
            },
            "; ".join(parts),
            details=(
                f"  {issue['record_id']}  {issue['status']} {issue['type']} "
                f"{issue['scope_kind']}:{issue['scope_id']}  subject={issue['subject']!r}  {issue['issue']}"
                for issue in issues
            ),
            failure=CommandFailed(
                f"{len(issues)} legacy record(s) remain unmapped; retire them with --expire-unmapped or "
                "acknowledge them with --allow-unmapped",
                code="unmapped_records",
                exit_code=EXIT_UNRESOLVED,
            )
            if issues
            else None,
        )


@click.command()
@click.argument("agent_id")
@click.argument("scope")
@click.option("--read/--no-read", default=True, show_default=True, help="Allow retrieval from the scope.")
@click.option("--write/--no-write", default=False, show_default=True, help="Allow writes to the scope.")
@json_option
@common_options(missing="flag")
def grant(
    agent_id: str,
    scope: str,
    read: bool,
    write: bool,
    as_json: bool,
    store_path: str,
    config_path: str | None,
    actor: str,
) -> None:
    """Create or update AGENT_ID's grant on a shared SCOPE (kind:id).

    A missing --store file is refused unless --create is given (a first grant on a new store).
    --json prints the grant as one object: agent_id, scope, can_read, can_write, actor.

    Example:

        retold grant planner user:u1 --read --write
    """
    target = parse_scope(scope)

    async def go() -> Any:
        async with open_runtime(store_path, config_path) as rt:
            return await rt.host.grant(agent_id, target, read=read, write=write, actor=actor)

    with reported_errors(as_json):
        result = asyncio.run(go())
    if as_json:
        echo_json(
            {"ok": True, "agent_id": result.agent_id, "scope": str(result.scope),
             "can_read": result.can_read, "can_write": result.can_write, "actor": actor}
        )  # fmt: skip
        return
    access = "+".join(a for a, on in (("read", result.can_read), ("write", result.can_write)) if on)
    click.echo(f"granted {agent_id} {access} on {target}")


@click.command()
@click.argument("agent_id")
@click.argument("scope")
@common_options
def revoke(agent_id: str, scope: str, store_path: str, config_path: str | None, actor: str) -> None:
    """Remove AGENT_ID's grant on SCOPE (kind:id); exits 1 when there was none.

    Example:

        retold revoke planner user:u1
    """
    target = parse_scope(scope)

    async def go() -> bool:
        async with open_runtime(store_path, config_path) as rt:
            return await rt.host.revoke(agent_id, target, actor=actor)

    if not run_async(go()):
        raise click.ClickException(f"{agent_id} has no grant on {target}; nothing to revoke")
    click.echo(f"revoked {agent_id} on {target}")


@click.command()
@click.option("--scope", "scope", required=True, help="The scope to print, as kind:id (user:u1).")
@click.option("--all-statuses", is_flag=True, help="Include superseded, expired and deleted records.")
@common_options
def dump(scope: str, all_statuses: bool, store_path: str, config_path: str | None, actor: str) -> None:
    """Print the active records of one scope, one JSON object per line.

    Example:

        retold dump --scope user:u1
    """
    target = parse_scope(scope)

    async def go() -> list[Any]:
        async with open_runtime(store_path, config_path) as rt:
            return await rt.ops.dump_scope(target, all_statuses=all_statuses)

    for record in run_async(go()):
        click.echo(json.dumps(jsonable(record), ensure_ascii=False))


@click.command()
@click.argument("record_id")
@json_option
@common_options
def get(record_id: str, as_json: bool, store_path: str, config_path: str | None, actor: str) -> None:
    """Print one record with its lineage, conflicts, entity links and audit events.

    RECORD_ID is the full id or the 12-character short id that search results, the demo,
    the UI and the memory tools print (resolved as the tools resolve it, across the whole
    store). An unknown id, or a short id that names several records, exits 1 and changes
    nothing; --json prints that refusal as one object ("not_found", or "ambiguous_id" with
    the full ids in "matches") and the record as {"ok": true, ...}.

    Example:

        retold get 0190c3a4-5b6e-7c8d-9e0f-123456789abc

        retold get 5b6e7c8d9e0f
    """

    async def go() -> dict[str, Any]:
        async with open_runtime(store_path, config_path) as rt:
            return await rt.ops.record_report(await resolve_record(rt.store, record_id))

    with reported_errors(as_json):
        report = asyncio.run(go())
    echo_json({"ok": True, **report} if as_json else report)
