"""Maintenance commands of spec §16: expire, retain, erase, reembed, check, snapshot.

They run against stores whose vectors may be from another embedding (that is what
reembed and check exist to fix), so each opens the store with the mismatch allowed.
"""

from __future__ import annotations

import asyncio
import sys
from typing import Any

import click

from retold.cli.common import (
    CommandFailed,
    common_options,
    echo_json,
    json_option,
    jsonable,
    operation,
    refuse_missing_store,
    reported_errors,
)
from retold.errors import StoreError
from retold.runtime import open_runtime
from retold.store.postgres import is_postgres_url
from retold.store.postgres.database import redact_url

__all__ = ["check", "erase", "expire", "reembed", "retain", "snapshot"]

EXIT_FINDINGS = 3


@click.command()
@json_option
@common_options
def expire(as_json: bool, store_path: str, config_path: str | None, actor: str) -> None:
    """Mark every active record past its expiry as expired, one record.status event each.

    Provisional records and session summaries alike. Running it again changes nothing.
    Prints the ids, then one summary line (--json: one object).

    Example:

        retold expire --store memory.sqlite --as cron
    """
    with operation("expiring", as_json) as op:

        async def go() -> list[str]:
            async with open_runtime(store_path, config_path, allow_embedding_mismatch=True) as rt:
                return await rt.ops.expire(actor=actor, progress=op.progress)

        expired = op.run(go())
        op.finish(
            {"expired": expired},
            f"expired {len(expired)} record(s)",
            details=(f"  {record_id}" for record_id in expired),
        )


@click.command()
@json_option
@common_options
def retain(as_json: bool, store_path: str, config_path: str | None, actor: str) -> None:
    """Blank the transcripts of extracted sessions that ended over sessions.retain_days ago.

    Turn rows stay (so source references still resolve); a session never extracted is
    never blanked. One session.retained event per session.

    Example:

        retold retain --store memory.sqlite --config retold.yaml
    """
    with operation("retaining", as_json) as op:

        async def go() -> Any:
            async with open_runtime(store_path, config_path, allow_embedding_mismatch=True) as rt:
                return await rt.ops.retain(actor=actor, progress=op.progress)

        report = op.run(go())
        op.finish(
            report,
            f"blanked {report.turns} turn(s) across {len(report.sessions)} session(s)",
            details=(f"  {session_id}" for session_id in report.sessions),
        )


@click.command()
@click.option("--record", "record_id", default=None, help="Erase one record's content.")
@click.option(
    "--session",
    "session_id",
    default=None,
    help="Erase one session's transcript (its id, or agent/user/session when several principals use it).",
)
@click.option("--user", "user_id", default=None, help="Erase everything a user's text reached.")
@click.option("--reason", required=True, help="Why; recorded on the erasure event.")
@click.option("--yes", is_flag=True, help="Really erase. Without it, print what would be erased.")
@json_option
@common_options
def erase(
    record_id: str | None,
    session_id: str | None,
    user_id: str | None,
    reason: str,
    yes: bool,
    as_json: bool,
    store_path: str,
    config_path: str | None,
    actor: str,
) -> None:
    """Irreversibly erase durable content: one record, one session, or one user.

    Ids, kinds and timestamps remain; the text goes from every table, the search logs
    and the event payloads, and the file is compacted so no freed page keeps it. Without
    --yes nothing changes: the command prints what it would erase, then the summary.

    Example:

        retold erase --user u1 --reason "deletion request 1432" --as dpo --yes
    """
    with operation("erasing" if yes else "planning the erasure", as_json) as op:
        if len([t for t in (record_id, session_id, user_id) if t is not None]) != 1:
            raise click.UsageError("give exactly one of --record, --session and --user")

        async def go() -> Any:
            async with open_runtime(store_path, config_path, allow_embedding_mismatch=True) as rt:
                return await rt.ops.erase(
                    record=record_id,
                    session=session_id,
                    user=user_id,
                    reason=reason,
                    actor=actor,
                    dry_run=not yes,
                    progress=op.progress,
                )

        report = op.run(go())
        if not report.applied:
            planned = (
                ("record", report.records),
                ("evidence of record", report.evidence_cleared),
                ("session", report.sessions),
                ("entity", report.entities),
            )
            details = [f"  {kind} {item}" for kind, ids in planned for item in ids]
            op.finish(
                report,
                report.summary(),
                details=details,
                note="Nothing was changed. Rerun with --yes to erase.",
            )
            return
        unswept = CommandFailed(
            "the content is erased, but another connection kept the WAL file from being emptied, so old "
            "pages may remain in it; stop the other hosts and run the same command again",
            code="not_compacted",
        )
        op.finish(report, report.summary(), failure=unswept if report.compacted is False else None)


@click.command()
@click.option("--model", required=True, help="The embedding model (must match embedding.model in --config).")
@click.option("--version", "model_version", required=True, help="The embedding version (embedding.version).")
@click.option(
    "--batch-size", default=None, type=click.IntRange(min=1), help="Default: embedding.reembed_batch_size."
)
@json_option
@common_options
def reembed(
    model: str,
    model_version: str,
    batch_size: int | None,
    as_json: bool,
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
    with operation("re-embedding", as_json) as op:

        async def go() -> Any:
            async with open_runtime(store_path, config_path, allow_embedding_mismatch=True) as rt:
                return await rt.ops.reembed(
                    model, model_version, actor=actor, batch_size=batch_size, progress=op.progress
                )

        report = op.run(go())
        op.finish(
            report,
            f"re-embedded {report.records} record(s) with {report.model} version {report.version} "
            f"({report.dims} dims, {report.batches} batch(es))",
        )


@click.command()
@click.option("--repair", is_flag=True, help="Rebuild what is derivable: FTS rows, vectors, the version.")
@json_option
@common_options
def check(repair: bool, as_json: bool, store_path: str, config_path: str | None, actor: str) -> None:
    """Check the store's integrity beyond SQLite's own; exit 0 when clean, 3 with findings.

    Every active record has one FTS row and one vector of the configured model; no
    orphan links; conflicts recorded both ways; records_version consistent with the rows;
    supersession chains acyclic. --repair rebuilds FTS rows and vectors, reports what it
    changed, and checks again. --json prints one object: ok (clean), store, clean,
    findings (each kind, record_id, detail) and repaired; with findings it also carries
    "error": "findings" and still exits 3.

    Example:

        retold check --store memory.sqlite --repair
    """

    async def go() -> Any:
        async with open_runtime(store_path, config_path, allow_embedding_mismatch=True) as rt:
            return await rt.ops.check(repair=repair, actor=actor)

    with reported_errors(as_json):
        report = asyncio.run(go())
    if as_json:
        fields: dict[str, Any] = {"ok": report.clean, "store": store_path, "clean": report.clean}
        fields |= {"findings": [_finding(f) for f in report.findings], "repaired": list(report.repaired)}
        if not report.clean:
            fields |= {"error": "findings", "message": f"{len(report.findings)} finding(s) in {store_path}"}
        echo_json(fields)
        if not report.clean:
            sys.exit(EXIT_FINDINGS)
        return
    for line in report.repaired:
        click.echo(f"repaired: {line}")
    for finding in report.findings:
        click.echo(str(finding))
    if not report.clean:
        click.echo(f"{len(report.findings)} finding(s) in {store_path}", err=True)
        sys.exit(EXIT_FINDINGS)
    click.echo(f"{store_path}: clean")


def _finding(finding: Any) -> dict[str, Any]:
    return {"kind": finding.kind, "record_id": finding.record_id, "detail": finding.detail}


@click.group()
def snapshot() -> None:
    """Save a consistent copy of the store, or replace the store with one.

    Example:

        retold snapshot save fixtures/before.sqlite --store memory.sqlite
    """


@snapshot.command("save")
@click.argument("path", type=click.Path(dir_okay=False))
@json_option
@common_options
def snapshot_save(path: str, as_json: bool, store_path: str, config_path: str | None, actor: str) -> None:
    """Copy the whole store (every table) to a new file PATH through SQLite's online backup API.

    Safe while hosts are writing; refuses to overwrite an existing file.

    Example:

        retold snapshot save fixtures/before.sqlite --store memory.sqlite
    """
    with operation("saving the snapshot", as_json) as op:

        async def go() -> Any:
            async with open_runtime(store_path, config_path, allow_embedding_mismatch=True) as rt:
                return await rt.ops.save_snapshot(path, progress=op.progress)

        info = op.run(go())
        op.finish(info, f"saved {info.path}: schema version {info.schema_version}, {info.records} record(s)")


@snapshot.command("load")
@click.argument("path", type=click.Path(dir_okay=False))
@click.option("--yes", is_flag=True, help="Really replace the store. Without it, only validate PATH.")
@json_option
@common_options
def snapshot_load(
    path: str, yes: bool, as_json: bool, store_path: str, config_path: str | None, actor: str
) -> None:
    """Replace the store's contents with the snapshot at PATH; needs --yes and a stopped host.

    The snapshot's schema version is validated first; the load refuses while any other
    connection holds the store.

    Example:

        retold snapshot load fixtures/before.sqlite --store memory.sqlite --yes
    """
    from retold.operations import load_snapshot

    with operation("loading the snapshot", as_json) as op:
        if is_postgres_url(store_path):  # before the snapshot is read: nothing is opened or made
            raise StoreError(
                f"{redact_url(store_path)} is a PostgreSQL store and snapshots are SQLite files; restore it "
                "with pg_restore, or fill an empty database from a snapshot with `retold copy SNAPSHOT URL`"
            )
        info = op.run(load_snapshot(store_path, path, dry_run=not yes, progress=op.progress))
        described = f"{info.path} (schema version {info.schema_version}, {info.records} record(s))"
        if yes:
            summary, note = f"loaded {described} into {store_path}", None
        else:
            summary = f"would replace {store_path} with {described}"
            note = "Nothing was changed. Stop every host using the store and rerun with --yes."
        op.finish({**jsonable(info), "store": store_path, "applied": yes}, summary, note=note)


@click.command("copy")
@click.argument("source")
@click.argument("destination")
@click.option(
    "--config",
    "config_path",
    default=None,
    type=click.Path(exists=True, dir_okay=False),
    help="YAML config file (its embedding settings judge the copied vectors in the check).",
)
@json_option
def copy_command(source: str, destination: str, config_path: str | None, as_json: bool) -> None:
    """Copy a whole store into a new, empty one, across backends; then verify the copy.

    SOURCE and DESTINATION are SQLite files or postgresql:// URLs. SOURCE must exist; the
    destination is created (or must be empty) and is written in one transaction: it holds the whole copy
    or nothing, so an interrupted copy is run again. Afterwards every table's row count is
    compared and `retold check` runs on the destination; exit 0 when both agree. --json
    prints one object (no bar): ok (verified), source, destination (passwords redacted),
    tables (each copied and in_destination), rows_copied, records_version and findings.

    Example:

        retold copy memory.sqlite postgresql://retold@db.internal/memory
    """
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from retold.copying import copy_store

    with reported_errors(as_json):  # before the bar: a refused copy prints one line only
        refuse_missing_store(source)
    bar = Progress(
        TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
        console=Console(stderr=True),
    )  # fmt: skip
    tasks: dict[str, Any] = {}

    def progress(table: str, done: int, total: int) -> None:
        if as_json:  # one object on stdout and nothing drawn, as every --json command
            return
        if not tasks:  # drawn from the first row on: a copy refused at open prints its one line only
            bar.start()
        if table not in tasks:
            tasks[table] = bar.add_task(table, total=total)
        bar.update(tasks[table], completed=done, total=total)

    try:
        with reported_errors(as_json):
            result = asyncio.run(copy_store(source, destination, config_path, progress=progress))
    finally:
        if tasks:
            bar.stop()
    if as_json:
        fields: dict[str, Any] = {
            "ok": result.verified,
            "source": result.report.source,
            "destination": result.report.destination,
            "verified": result.verified,
            "tables": {t: {"copied": c, "in_destination": n} for t, (c, n) in result.counts.items()},
            "rows_copied": sum(c for c, _ in result.counts.values()),
            "records_version": result.report.records_version,
            "findings": [_finding(f) for f in result.findings],
        }
        if not result.verified:
            fields |= {"error": "not_verified", "message": "the copy does not match its source"}
        echo_json(fields)
        if not result.verified:
            sys.exit(EXIT_FINDINGS)
        return
    for table, (copied, counted) in result.counts.items():
        click.echo(f"{table}: {copied} row(s) copied, {counted} in the destination")
    for finding in result.findings:
        click.echo(str(finding))
    if not result.verified:
        click.echo("the copy does not match its source (see above)", err=True)
        sys.exit(EXIT_FINDINGS)
    click.echo(f"copied {result.report.source} to {result.report.destination}: verified")
