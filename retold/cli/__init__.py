"""The ``retold`` command: argument parsing plus one library call per command.

Every command takes ``--store`` (default ``./memory.sqlite``), ``--config`` and
``--as`` (the operator recorded on audit events). Library errors become one line
on stderr and a non-zero exit, never a traceback.

The commands live in modules by what they are for (:mod:`.admin`, :mod:`.search`,
:mod:`.ops`, :mod:`.entity`, :mod:`.extract`, :mod:`.activation`, :mod:`.demo`, :mod:`.ui`); this
module builds the group from them and keeps ``retold.cli:main``, the console script's entry point.
"""

from __future__ import annotations

import click

from retold.cli.activation import activation, metrics, reviews
from retold.cli.admin import dump, get, grant, migrate, revoke
from retold.cli.demo import demo
from retold.cli.entity import entity
from retold.cli.extract import extract, review_due_command
from retold.cli.mcp import mcp
from retold.cli.ops import check, copy_command, erase, expire, reembed, retain, snapshot
from retold.cli.search import search
from retold.cli.transfer import export_command, import_command
from retold.cli.ui import ui

__all__ = ["cli", "main"]


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="retold")
def cli() -> None:
    """retold: durable, scoped, evidence-backed memory for LLM agents, in one SQLite file.

    Example:

        retold grant planner user:u1 --read --write --store memory.sqlite
    """


for _command in (
    migrate, grant, revoke, dump, search, get,
    expire, retain, erase, reembed, check, snapshot, copy_command,
    demo, extract, review_due_command, mcp, entity, ui, reviews, activation, metrics,
    import_command, export_command,
):  # fmt: skip
    cli.add_command(_command)


def main() -> None:
    """Console-script entry point."""
    cli(prog_name="retold")
