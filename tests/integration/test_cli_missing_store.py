"""Issue 45 item 10: a mistyped --store is an error, never a new empty store reported as fine.

Every ``retold`` command that takes a store, run as a user runs it (a subprocess), on a
SQLite path that names no file and on a PostgreSQL URL naming a database that does not
exist: it exits non-zero with one line naming the path, and creates nothing (no file, no
-wal/-shm, no directory, no database). Only ``migrate`` (and ``grant --create``) create a
SQLite store; no command ever creates a PostgreSQL database. The command list is checked
against the CLI itself, so a new command that takes a store joins the test or fails it.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path

import click
import pytest
from cli_runner import run

from retold.cli import cli
from retold.util import new_id

pytestmark = pytest.mark.integration

STORE = "{store}"
# Each command that only reads or changes a store, with the arguments that get it past click's
# parsing; STORE is where the missing location goes.
REFUSING: dict[str, list[str]] = {
    "activation": ["activation", "0190c3a4", "ambient", "--as", "ops", "--reason", "r", "--store", STORE],
    "check": ["check", "--store", STORE],
    "copy": ["copy", STORE, "{out}"],
    "dump": ["dump", "--scope", "user:u1", "--store", STORE],
    "entity merge": ["entity", "merge", "e1", "e2", "--reason", "r", "--store", STORE],
    "erase": ["erase", "--user", "u1", "--reason", "r", "--yes", "--store", STORE],
    "expire": ["expire", "--store", STORE],
    "export": ["export", "-o", "{out}", "--store", STORE],
    "extract": ["extract", "s1", "--store", STORE],
    "get": ["get", "0190c3a4", "--store", STORE],
    "grant": ["grant", "planner", "user:u1", "--read", "--write", "--store", STORE],
    "import": ["import", "{out}", "--store", STORE],
    "mcp": ["mcp", "--agent", "planner", "--user", "u1", "--store", STORE],
    "metrics": ["metrics", "--store", STORE],
    "reembed": ["reembed", "--model", "fake-embedder", "--version", "1", "--store", STORE],
    "retain": ["retain", "--store", STORE],
    "review-due": ["review-due", "--store", STORE],
    "reviews backlog": ["reviews", "backlog", "--store", STORE],
    "reviews list": ["reviews", "list", "--store", STORE],
    "reviews resolve": ["reviews", "resolve", "rv1", "--as", "reject", "--resolver", "ops", "--store", STORE],
    "revoke": ["revoke", "planner", "user:u1", "--store", STORE],
    "search": ["search", "--agent", "planner", "--user", "u1", "answer style", "--store", STORE],
    "snapshot load": ["snapshot", "load", "{out}", "--yes", "--store", STORE],
    "snapshot save": ["snapshot", "save", "{out}", "--store", STORE],
    "ui": ["ui", "--store", STORE],
}
# Commands whose job is to make a store: migrate, grant --create, and demo (a new demo file).
CREATING = {"migrate": ["migrate", "--store", STORE], "grant --create": [*REFUSING["grant"], "--create"]}
NOT_HERE = {"demo"}  # its own --store is "keep the demo store here (a new file)": it creates by design


def store_commands(group: click.Group = cli, prefix: tuple[str, ...] = ()) -> Iterator[str]:
    """Every command of the CLI that takes --store (or, for copy, a SOURCE store)."""
    for name, command in sorted(group.commands.items()):
        path = (*prefix, name)
        if isinstance(command, click.Group):
            yield from store_commands(command, path)
        elif any(p.name in ("store_path", "source") for p in command.params):
            yield " ".join(path)


def test_every_store_command_is_covered() -> None:
    assert set(store_commands()) == set(REFUSING) | {"migrate"} | NOT_HERE


def argv(template: list[str], store: str, out: Path) -> list[str]:
    return [a.replace(STORE, store).replace("{out}", str(out)) for a in template]


def refusal_line(proc: subprocess.CompletedProcess[str]) -> str:
    """The one line a refused command prints (stderr), with nothing else on either stream."""
    assert proc.returncode not in (0, None), (proc.returncode, proc.stdout, proc.stderr)
    assert "Traceback" not in proc.stderr, proc.stderr
    assert proc.stdout == "", proc.stdout
    lines = proc.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: "), proc.stderr
    return lines[0]


def missing_database() -> tuple[str, str]:
    from tests.postgres_server import server_url

    name = f"retold_missing_{new_id().replace('-', '')[:12]}"
    return server_url(name), name


def database_exists(name: str) -> bool:
    import psycopg

    from tests.postgres_server import server_url

    with psycopg.connect(server_url("postgres"), autocommit=True) as conn:
        return conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,)).fetchone() is not None


@pytest.mark.parametrize("command", sorted(REFUSING))
def test_a_missing_store_is_refused_in_one_line_and_nothing_is_created(
    backend: str, tmp_path: Path, command: str
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    out = work / "out.sqlite"
    if command == "snapshot load":  # a real snapshot to load, so only the store can be wrong
        run("migrate", "--store", out)
        before = {p.name for p in work.iterdir()}
    else:
        before = set()
    if backend == "postgresql":
        store, name = missing_database()
    else:
        store, name = str(work / "memroy.sqlite"), str(work / "memroy.sqlite")
    line = refusal_line(run(*argv(REFUSING[command], store, out), rc=None, timeout=60))
    assert name in line, line
    assert {p.name for p in work.iterdir()} == before  # no file, no -wal/-shm, no copy destination
    if backend == "postgresql":
        assert not database_exists(name)


def test_json_commands_answer_one_object(tmp_path: Path) -> None:
    store = tmp_path / "memroy.sqlite"
    proc = run("expire", "--json", "--store", store, rc=1)
    assert json.loads(proc.stdout)["error"] == "store" and str(store) in proc.stdout
    assert list(tmp_path.iterdir()) == []


def test_a_missing_parent_directory_is_not_created(tmp_path: Path) -> None:
    store = tmp_path / "nowhere" / "memory.sqlite"
    assert str(store) in refusal_line(run("check", "--store", store, rc=None))
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("command", sorted(CREATING))
def test_migrate_and_grant_create_create_a_sqlite_store(tmp_path: Path, command: str) -> None:
    store = tmp_path / "memory.sqlite"
    run(*argv(CREATING[command], str(store), tmp_path / "unused"))
    assert store.is_file()
    assert "clean" in run("check", "--store", store).stdout  # and the others open it from then on


@pytest.mark.parametrize("command", sorted(CREATING))
def test_no_command_creates_a_postgresql_database(tmp_path: Path, command: str) -> None:
    store, name = missing_database()
    line = refusal_line(run(*argv(CREATING[command], store, tmp_path / "unused"), rc=None, timeout=60))
    assert name in line and "does not exist" in line, line
    assert not database_exists(name)
