"""``retold import`` and ``retold export``: memories in and out as JSON Lines (issue 47).

The format, the formats read besides it (mem0's ``get_all`` output, LangGraph store items) and
how an import resumes are :mod:`retold.interchange`'s; these commands open the store, draw the
bar and print the summary. An import writes through ``MemoryHost.ingest_many`` (every line
decided as a write is), so a store it fills behaves as one the tools filled.
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path
from typing import Any

import click

from retold.cli.common import CommandFailed, Operation, common_options, json_option, operation, parse_scope
from retold.errors import InvalidArgumentError
from retold.interchange import CHECKPOINT_SUFFIX, DEFAULT_AGENT, DEFAULT_BATCH, FORMATS
from retold.models import SOURCE_KINDS
from retold.runtime import open_runtime

__all__ = ["export_command", "import_command"]

EXIT_INTERRUPTED = 130
SKIPPED_SHOWN = 50  # skipped lines listed in the text summary (--json lists every one)


def _sleeping_torch_threads() -> None:
    """Before torch loads: its idle threads sleep instead of spinning (retold.index.threads).

    An import embeds in a worker thread while the write path runs beside it; with torch's
    threads spinning, 2,000 records took 58 s on a loaded two-core machine, 35 s without.
    """
    try:
        from retold.index.threads import configure_torch_threads
    except ImportError:  # an older tree without it: torch keeps its own defaults
        return
    configure_torch_threads()


def _force_bar(op: Operation, label: str) -> None:
    """--progress: draw the bar on stderr even when it is no terminal (a log, a CI job)."""
    from retold.cli.common import _progress_bar

    if op._bar is None:
        op._bar = _progress_bar(label)
        op._task = op._bar.add_task(label, total=None)


@click.command("import")
@click.argument("file", type=click.Path(dir_okay=False))
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["auto", *FORMATS]),
    default="auto",
    show_default=True,
    help="jsonl (retold's own, what `retold export` writes), mem0 (get_all output) or langgraph "
    "(store items); auto reads it from the file's first record.",
)
@click.option("--scope", default=None, help="The scope of records that name none (kind:id, e.g. user:u1).")
@click.option(
    "--agent",
    default=DEFAULT_AGENT,
    show_default=True,
    help="The agent recorded as creator of records that name none (and of LangGraph items).",
)
@click.option(
    "--source-kind",
    type=click.Choice(SOURCE_KINDS),
    default=None,
    help="The source kind of records that name none. Default: agent_inference (jsonl, mem0); "
    "integrations.store_source_kind (langgraph).",
)
@click.option(
    "--namespace-root",
    default="memories",
    show_default=True,
    help="langgraph: the namespace root that maps (<root>, <user>, ...) to user:<user>.",
)
@click.option(
    "--batch-size",
    default=DEFAULT_BATCH,
    show_default=True,
    type=click.IntRange(min=1, max=2000),
    help="Lines decided and committed together (one transaction per principal).",
)
@click.option(
    "--checkpoint",
    "checkpoint",
    default=None,
    type=click.Path(dir_okay=False),
    help=f"Where to keep the progress. Default: FILE{CHECKPOINT_SUFFIX}, removed when the import completes.",
)
@click.option("--restart", is_flag=True, help="Ignore a checkpoint and read FILE from its first line.")
@click.option(
    "--progress", "show_progress", is_flag=True, help="Draw the bar even when stderr is no terminal."
)
@json_option
@common_options(missing="flag")
def import_command(
    file: str,
    fmt: str,
    scope: str | None,
    agent: str,
    source_kind: str | None,
    namespace_root: str,
    batch_size: int,
    checkpoint: str | None,
    restart: bool,
    show_progress: bool,
    as_json: bool,
    store_path: str,
    config_path: str | None,
    actor: str,
) -> None:
    """Import memories from FILE: JSON Lines, mem0's get_all output or LangGraph store items.

    Every line goes through the write path in batches (a repeat reinforces, a newer fact
    supersedes, each batch commits whole). Bad lines are skipped and listed with their line
    number and reason. Interrupted (Ctrl-C), the same command continues after the last
    committed batch; a line already imported is never written twice (already_imported).
    Prints one summary by outcome (--json: one object). Exit 130 when interrupted.

    Example:

        retold import memories.jsonl --store memory.sqlite --as ops
    """
    from retold.interchange import Importer

    target = parse_scope(scope) if scope is not None else None
    with operation("importing", as_json) as op:
        _sleeping_torch_threads()
        if show_progress:
            _force_bar(op, "importing")
        started: list[Importer] = []

        async def go() -> Any:
            async with open_runtime(store_path, config_path) as rt:
                importer = Importer(
                    rt, file, format=fmt, scope=target, agent=agent, source_kind=source_kind, actor=actor,
                    batch_size=batch_size, checkpoint=checkpoint, restart=restart,
                    namespace_root=namespace_root, progress=op.progress,
                )  # fmt: skip
                started.append(importer)
                return await importer.run()

        try:
            report = op.run(go())
        except KeyboardInterrupt:
            report = started[0].report if started else None
            if report is None:
                raise CommandFailed(
                    "interrupted before anything was imported", code="interrupted", exit_code=EXIT_INTERRUPTED
                ) from None
            unit = "line" if report.counted_in == "lines" else "item"
            stopped = CommandFailed(
                f"interrupted after {unit} {report.done:,} of {report.total:,}: run the same command again "
                f"to go on from there (progress kept in {report.checkpoint})",
                code="interrupted",
                exit_code=EXIT_INTERRUPTED,
            )
            op.finish(report, report.summary(), details=_skipped_lines(report), failure=stopped)
            return
        note = None
        if report.skipped:
            note = f"{len(report.skipped):,} skipped (listed above); the other lines were imported"
        op.finish(report, report.summary(), details=_skipped_lines(report), note=note)


def _skipped_lines(report: Any) -> list[str]:
    unit = "line" if report.counted_in == "lines" else "item"
    shown = [f"  {unit} {s[unit]}: {s['error']}: {s['message']}" for s in report.skipped[:SKIPPED_SHOWN]]
    if len(report.skipped) > SKIPPED_SHOWN:
        shown.append(f"  … and {len(report.skipped) - SKIPPED_SHOWN:,} more (--json lists every one)")
    return shown


@click.command("export")
@click.option(
    "--scope", "scopes", multiple=True, help="Only this scope (kind:id); repeat for several. Default: all."
)
@click.option(
    "-o",
    "--output",
    default=None,
    type=click.Path(dir_okay=False),
    help="Write the records to this file (complete or not at all) instead of stdout.",
)
@click.option("--force", is_flag=True, help="Replace --output when it exists.")
@click.option(
    "--progress", "show_progress", is_flag=True, help="Draw the bar even when stderr is no terminal."
)
@json_option
@common_options
def export_command(
    scopes: tuple[str, ...],
    output: str | None,
    force: bool,
    show_progress: bool,
    as_json: bool,
    store_path: str,
    config_path: str | None,
    actor: str,
) -> None:
    """Write the active records as JSON Lines, the format `retold import` reads.

    One record per line: content, type, attribute, scope, source kind and reference,
    evidence, entities, tags and times, then the id, creation time and status the import
    does not write back. Without --output the lines go to stdout and the summary to stderr;
    --json (with --output) prints the summary as one object.

    Example:

        retold export --store memory.sqlite --scope user:u1 -o u1.jsonl
    """
    from retold.interchange import export_records

    wanted = [parse_scope(s) for s in scopes]
    if as_json and output is None:
        raise click.UsageError("--json needs --output: without it stdout carries the records")
    with operation("exporting", as_json) as op:
        if show_progress:
            _force_bar(op, "exporting")
        target = Path(output) if output is not None else None
        if target is not None and target.exists() and not force:
            raise InvalidArgumentError(f"{output!r} exists; pass --force to replace it")

        async def go(write: Any) -> int:
            async with open_runtime(store_path, config_path, allow_embedding_mismatch=True) as rt:
                return await export_records(rt, write, wanted or None, progress=op.progress)

        if target is None:
            count = op.run(go(sys.stdout.write))
            sys.stdout.flush()
            click.echo(f"exported {count:,} record(s)", err=True)
            return
        folder = target.resolve().parent
        if not folder.is_dir():
            raise InvalidArgumentError(f"no folder {str(folder)!r} to write {output!r} in")
        handle = tempfile.NamedTemporaryFile(  # noqa: SIM115 - kept open across the export, renamed after
            "w", encoding="utf-8", dir=folder, prefix=f".{target.name}.", suffix=".tmp", delete=False
        )
        try:
            with handle:
                count = op.run(go(handle.write))
            os.replace(handle.name, target)
        except BaseException:
            Path(handle.name).unlink(missing_ok=True)
            raise
        listed = ", ".join(str(s) for s in wanted) or "every scope"
        op.finish(
            {"path": str(target), "records": count, "scopes": [str(s) for s in wanted] or None},
            f"exported {count:,} record(s) of {listed} to {target}",
        )
