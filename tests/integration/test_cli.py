"""The CLI as a user runs it: subprocesses against a real store file, checking exit codes."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path

import click
import pytest
from cli_runner import run

import retold
from retold.cli import cli
from retold.models import Entity, Record, Scope
from retold.store import Database, Store, migrate
from retold.testing import FakeClock, record_for_tests

pytestmark = pytest.mark.integration


def _commands(group: click.Group, prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    found: list[tuple[str, ...]] = []
    for name, command in sorted(group.commands.items()):
        if isinstance(command, click.Group):
            found += _commands(command, (*prefix, name))
        else:
            found.append((*prefix, name))
    return found


COMMANDS = _commands(cli)  # every command the CLI has, so a new one cannot go undocumented
# demo opens its own throwaway store; copy names its two stores as arguments (SOURCE DESTINATION).
OPERATOR_COMMANDS = [c for c in COMMANDS if c not in (("demo",), ("copy",))]


def test_console_script_is_installed() -> None:
    script = Path(sys.executable).with_name("retold")
    assert script.exists()
    assert "Usage" in subprocess.run([script, "--help"], capture_output=True, text=True).stdout


@pytest.mark.parametrize("command", OPERATOR_COMMANDS, ids=" ".join)
def test_every_command_has_help_with_an_example_and_the_common_options(command: tuple[str, ...]) -> None:
    out = run(*command, "--help").stdout
    assert "Example:" in out
    for option in ("--store", "--config", "--as"):
        assert option in out


def test_copy_has_help_with_an_example_and_a_config_option() -> None:
    out = run("copy", "--help").stdout
    assert "Example:" in out and "--config" in out and "SOURCE DESTINATION" in out


def test_every_command_is_documented() -> None:
    doc = (Path(__file__).parents[2] / "docs" / "cli.md").read_text()
    assert len(COMMANDS) >= 16
    for command in COMMANDS:
        assert f"## `retold {' '.join(command)}" in doc, command


def test_grant_revoke_round_trip_records_the_operator(tmp_path: Path) -> None:
    db = tmp_path / "m.sqlite"
    out = run("grant", "planner", "user:u1", "--read", "--write", "--create", "--store", db, "--as", "ops")
    assert out.stdout.strip() == "granted planner read+write on user:u1"
    run("revoke", "planner", "user:u1", "--store", db)

    async def events() -> list[dict]:
        async with retold.open_runtime(db) as rt:
            return await rt.store.events(kind="grant.changed")

    changes = asyncio.run(events())
    assert [e["actor"] for e in changes] == ["ops", "admin"]
    assert changes[0]["payload"]["after"] == {"read": True, "write": True}
    assert changes[1]["payload"]["after"] is None


def test_errors_are_one_line_and_nonzero_never_a_traceback(tmp_path: Path) -> None:
    db = tmp_path / "m.sqlite"
    run("migrate", "--store", db)  # a missing store is refused before these (test_cli_missing_store.py)
    cases = [
        ("grant", "planner", "agent:planner/u1", "--store", db),  # private scope
        ("grant", "bad/agent", "user:u1", "--store", db),
        ("revoke", "planner", "user:u9", "--store", db),  # nothing to revoke
        ("get", "no-such-id", "--store", db),
    ]
    for args in cases:
        proc = run(*args, rc=1)
        assert "Traceback" not in proc.stderr
        assert proc.stderr.startswith("Error: ") and proc.stderr.count("\n") == 1, proc.stderr
    bad_scope = run("dump", "--scope", "bogus", "--store", db, rc=2)
    assert "kind:id" in bad_scope.stderr and "Traceback" not in bad_scope.stderr


def test_bad_config_file_is_a_clean_error(tmp_path: Path) -> None:
    cfg = tmp_path / "c.yaml"
    cfg.write_text("retrieval:\n  rrf_kk: 3\n")
    proc = run("migrate", "--store", tmp_path / "m.sqlite", "--config", cfg, rc=1)
    assert "retrieval.rrf_kk" in proc.stderr and "Traceback" not in proc.stderr


async def _seed(db: Path) -> str:
    store = await Store.open(db, clock=FakeClock())
    async with store.transaction():
        entity = await _person(store)
        record = _record(entity, "Prefers concise answers.", Scope("user", "u1"))
        await store.insert_record(record, links=[(entity, "about")])
        await store.append_event(
            "record.created", "planner", record_id=record.id, payload={"outcome": "created"}
        )
    await store.close()
    return record.id


async def _person(store: Store) -> str:
    entity = Entity(
        id="e1",
        kind="person",
        canonical="Aditya",
        scope=Scope("user", "u1"),
        status="confirmed",
        merged_into=None,
        aliases=["aditya"],
        created_at=FakeClock().now(),
    )
    await store.insert_entity(entity)
    return entity.id


def _record(entity: str, content: str, scope: Scope) -> Record:
    return record_for_tests(
        FakeClock().now(),
        content=content,
        subject=f"{entity}/answer_style",
        subject_entity_id=entity,
        attribute="answer_style",
        scope=scope,
        source_ref="session:s1<turn:1>",
        evidence=content,
        tags=["style"],
    )


def test_dump_and_get_print_records(tmp_path: Path) -> None:
    db = tmp_path / "m.sqlite"
    record_id = asyncio.run(_seed(db))
    lines = run("dump", "--scope", "user:u1", "--store", db).stdout.strip().splitlines()
    assert [json.loads(line)["id"] for line in lines] == [record_id]
    assert run("dump", "--scope", "user:u2", "--store", db).stdout == ""
    report = json.loads(run("get", record_id, "--store", db).stdout)
    assert report["record"]["content"] == "Prefers concise answers."
    assert report["links"] == [{"entity_id": "e1", "role": "about"}]
    assert [e["kind"] for e in report["events"]] == ["record.created"]


async def _legacy_store(db: Path) -> None:
    """A version-1 file with one mappable and two unmappable active legacy rows."""
    database = await Database.open(db)
    await migrate(database, target=1)
    async with database.transaction():
        await database.execute(
            "INSERT INTO entities(id, kind, canonical, scope_kind, scope_id, status, created_at) VALUES "
            "('e1','person','Aditya','user','u1','confirmed','2025-01-01T00:00:00.000000Z')"
        )
        for rid, subject, about in (
            ("r1", "aditya/Answer Style", True),
            ("r2", "aditya/x", False),
            ("r3", "aditya/", True),
        ):
            await database.execute(
                "INSERT INTO records(id, type, content, subject, scope_kind, scope_id, source_kind, "
                "creator_agent_id, created_at, event_at, confidence, status) VALUES "
                "(?, 'semantic', 'legacy fact', ?, 'user', 'u1', 'user_statement', 'planner', "
                "'2025-01-01T00:00:00.000000Z', '2025-01-01T00:00:00.000000Z', 0.9, 'confirmed')",
                (rid, subject),
            )
            if about:
                await database.execute(
                    "INSERT INTO record_entities(record_id, entity_id, role) VALUES (?, 'e1', 'about')",
                    (rid,),
                )
    await database.close()


def test_migrate_lists_unmapped_rows_and_exits_2_until_resolved(tmp_path: Path) -> None:
    db = tmp_path / "legacy.sqlite"
    asyncio.run(_legacy_store(db))
    proc = run("migrate", "--store", db, rc=2)
    assert "2 legacy record(s)" in proc.stdout and "r2" in proc.stdout and "r3" in proc.stdout
    assert "r1 " not in proc.stdout
    # Other commands refuse to open the store while issues remain.
    refused = run("dump", "--scope", "user:u1", "--store", db, rc=1)
    assert "retold migrate" in refused.stderr
    run("migrate", "--store", db, rc=2)  # still unresolved: listing changes nothing
    as_json = json.loads(run("migrate", "--store", db, "--json", rc=2).stdout)
    assert (as_json["ok"], as_json["error"]) == (False, "unmapped_records")
    assert sorted(issue["record_id"] for issue in as_json["unmapped"]) == ["r2", "r3"]
    done = run("migrate", "--store", db, "--expire-unmapped", "--as", "ops")
    assert "expired 2 unmapped legacy record(s)" in done.stdout
    run("migrate", "--store", db)  # clean now
    report = json.loads(run("get", "r2", "--store", db).stdout)
    assert report["record"]["status"] == "expired"
    assert [(e["kind"], e["actor"]) for e in report["events"]] == [("record.status", "ops")]
    mapped = json.loads(run("get", "r1", "--store", db).stdout)["record"]
    assert (mapped["subject_entity_id"], mapped["attribute"], mapped["subject"]) == (
        "e1",
        "answer_style",
        "e1/answer_style",
    )


def test_migrate_allow_unmapped_acknowledges(tmp_path: Path) -> None:
    db = tmp_path / "legacy.sqlite"
    asyncio.run(_legacy_store(db))
    out = run("migrate", "--store", db, "--allow-unmapped")
    assert "acknowledged 2" in out.stdout
    report = json.loads(run("get", "r2", "--store", db).stdout)
    assert report["record"]["status"] == "confirmed"  # acknowledged, not retired
    run("dump", "--scope", "user:u1", "--store", db)  # opens normally now


async def _written_store(db: Path) -> str:
    from retold.ingest.write.ingestor import WriteRequest
    from retold.models import Principal

    async with retold.open_runtime(db) as rt:
        await rt.host.provision_user("u1", aliases=["Aditya"])
        await rt.host.grant("planner", Scope("user", "u1"), read=True, write=True)
        p = await rt.hooks.on_session_start(Principal("planner", "u1", "s1"))
        said = "I prefer concise answers without any preamble, please"
        p = await rt.hooks.on_turn(p, "user", said)
        result = await rt.ingestor.write(
            p,
            WriteRequest(
                type="semantic",
                content="Aditya prefers concise answers without preamble.",
                scope=Scope("user", "u1"),
                attribute="answer_style",
                source_kind="user_statement",
                evidence=said,
            ),
        )
        assert result.ok
        return result.record_id or ""


def test_search_from_the_command_line_and_replay(tmp_path: Path) -> None:
    db = tmp_path / "m.sqlite"
    record_id = asyncio.run(_written_store(db))
    out = run("search", "--agent", "planner", "--user", "u1", "concise answers", "--store", db).stdout
    assert "Aditya prefers concise answers without preamble." in out and "search_log:" in out
    row = json.loads(out.split("search_log:", 1)[1])
    assert row["returned"] == [record_id] and row["trigger"] == "tool"
    other = run("search", "--agent", "planner", "--user", "u2", "concise answers", "--store", db).stdout
    assert "no relevant memory" in other and "Aditya prefers" not in other.split("search_log:")[0]
    replay = json.loads(run("search", "--replay", row["id"], "--store", db).stdout)
    assert replay["kept"] == [record_id]
    missing = run("search", "--store", db, rc=2)
    assert "--agent" in missing.stderr
