"""The long commands (extract, reembed, erase, retain, expire, snapshot, migrate) alike.

Each ends with one summary line, answers --json with one object (errors included), and
draws a progress bar on stderr only when stderr is a terminal. Run in-process through
click's CliRunner on real SQLite files, with the fake models standing in for the hosted
and packaged ones.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import re
import sqlite3
import threading
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

import retold
from retold.cli import cli
from retold.cli.common import Operation
from retold.graph_nodes.extraction import STAGES
from retold.ingest.extraction.run import reporting_stages
from retold.models import (
    CandidateRecord,
    ExtractionOutput,
    Principal,
    Scope,
    SearchRequest,
    SessionInfo,
    SessionKey,
    SessionSummary,
)
from retold.operations import load_snapshot
from retold.store import LATEST_VERSION, Database, Store, migrate
from retold.testing import FakeEmbedder, FakeExtractor, FakeJudge, FakeReviewer, record_for_tests

USER = Scope("user", "u1")
SUMMARY = re.compile(r"^\S.* in \d+\.\d s$")
OUTPUT = ExtractionOutput(
    [
        CandidateRecord(
            "semantic", "The user prefers concise answers.", "answer_style", "user_statement",
            "I prefer concise answers", 1, [],
        )
    ],
    SessionSummary("The user asked for concise answers.", [], []),
)  # fmt: skip


async def _seed(db: Path) -> dict[str, str]:
    """A fact and a search; an ended session s2 to extract; an expired inference; an old extracted session."""
    now = datetime.now(UTC)
    async with retold.open_runtime(db, embedder=FakeEmbedder(), judge=FakeJudge()) as rt:
        await rt.host.provision_user("u1", aliases=["Aditya"])
        await rt.host.grant("planner", USER, read=True, write=True)
        p = await rt.hooks.on_session_start(Principal("planner", "u1", "s1"))
        p = await rt.hooks.on_turn(p, "user", "Hi. I prefer concise answers, please.")
        fact = await rt.host.write_system(USER, "Aditya prefers concise answers.", attribute="answer_style")
        await rt.search(p, SearchRequest(queries=["concise answers"]))
        p = await rt.hooks.on_session_start(Principal("planner", "u1", "s2"))  # no memory tool used
        p = await rt.hooks.on_turn(p, "user", "Hi. I prefer concise answers, please.")
        p = await rt.hooks.on_turn(p, "assistant", "Understood.")
        await rt.hooks.on_session_end(p)
        stale = record_for_tests(
            now - timedelta(days=40), content="Aditya may like tea.", status="provisional",
            source_kind="agent_inference", expires_at=now - timedelta(days=10),
        )  # fmt: skip
        await rt.store.insert_record(stale)
        await rt.store.put_embedding(stale.id, "fake-embedder", "1", rt.embedder.embed_documents(["tea"])[0])
        ended = now - timedelta(days=rt.config.sessions.retain_days + 5)
        await rt.store.insert_session(SessionInfo("old", "planner", "u1", None, ended, ended, None, None))
        old = SessionKey("planner", "u1", "old")
        await rt.store.append_turn(old, "user", "an old conversation", ended)
        claim = await rt.store.claim_session(old, now=now, stale_before=now - timedelta(hours=1))
        assert claim.claimed_at is not None
        await rt.store.finish_session_extraction(old, claimed_at=claim.claimed_at, now=now)
        return {"fact": fact.record_id or "", "stale": stale.id}


@pytest.fixture
def seeded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path, dict[str, str]]:
    """The seeded store, a config naming the fake embedder, and the seeded ids; no model loads."""
    db, cfg = tmp_path / "m.sqlite", tmp_path / "fake.yaml"
    ids = asyncio.run(_seed(db))  # before the extractor is faked, so that s2 is left to extract
    monkeypatch.setattr("retold.index.embedding_backend.build_embedder", lambda config: FakeEmbedder())
    monkeypatch.setattr(
        "retold.ingest.extraction.structured.extractor_from_config", lambda config: FakeExtractor(OUTPUT)
    )
    monkeypatch.setattr("retold.runtime._reviewer_from_config", lambda config: FakeReviewer())
    cfg.write_text("embedding:\n  model: fake-embedder\n  version: '1'\n  dims: 256\n")
    return db, cfg, ids


def invoke(*args: str | Path, code: int = 0) -> Result:
    result = CliRunner().invoke(cli, [str(a) for a in args])
    assert result.exit_code == code, (result.exit_code, result.stdout, result.stderr, result.exception)
    return result


# command line (after --store and --config) -> the fields its --json object must carry
COMMANDS: dict[str, tuple[list[str], dict[str, Any]]] = {
    "expire": (["expire"], {"expired": ["{stale}"]}),
    "retain": (["retain"], {"sessions": ["planner/u1/old"], "turns": 1}),
    "erase": (
        ["erase", "--record", "{fact}", "--reason", "asked", "--yes"],
        {"target": "record:{fact}", "applied": True, "records": ["{fact}"], "compacted": True},
    ),
    "reembed": (
        ["reembed", "--model", "fake-embedder", "--version", "1", "--batch-size", "1"],
        {"model": "fake-embedder", "version": "1", "dims": 256, "records": 2, "batches": 2},
    ),
    "snapshot save": (["snapshot", "save", "{dir}/snap.sqlite"], {"path": "{dir}/snap.sqlite", "records": 2}),
    "snapshot load": (["snapshot", "load", "{db}"], {"path": "{db}", "applied": False}),
    "migrate": (["migrate"], {"resolution": None, "resolved": 0, "unmapped": []}),
    "extract": (["extract", "s2"], {"session_id": "s2", "status": "extracted"}),
}


def _fill(value: Any, names: dict[str, str]) -> Any:
    if isinstance(value, str):
        return value.format(**names)
    if isinstance(value, list):
        return [_fill(v, names) for v in value]
    if isinstance(value, dict):
        return {k: _fill(v, names) for k, v in value.items()}
    return value


def _command(name: str, seeded: tuple[Path, Path, dict[str, str]]) -> tuple[list[str], dict[str, Any]]:
    db, cfg, ids = seeded
    names = {**ids, "db": str(db), "dir": str(db.parent)}
    args, fields = COMMANDS[name]
    return [*_fill(args, names), "--store", str(db), "--config", str(cfg)], _fill(fields, names)


@pytest.mark.parametrize("name", COMMANDS)
def test_json_prints_one_object_with_the_result_and_the_time(
    name: str, seeded: tuple[Path, Path, dict[str, str]]
) -> None:
    args, fields = _command(name, seeded)
    result = invoke(*args, "--json")
    out = json.loads(result.stdout)  # the whole of stdout is one object
    assert out["ok"] is True and isinstance(out["elapsed_s"], float) and out["elapsed_s"] >= 0
    assert {k: out[k] for k in fields} == fields
    assert result.stderr == ""  # no bar, no notes


@pytest.mark.parametrize("name", COMMANDS)
def test_text_output_ends_with_one_summary_line(name: str, seeded: tuple[Path, Path, dict[str, str]]) -> None:
    args, _ = _command(name, seeded)
    lines = invoke(*args).stdout.splitlines()
    assert SUMMARY.match(lines[-1]), lines
    assert not any(SUMMARY.match(line) for line in lines[:-1]), lines  # details are indented, above it


def test_summary_lines_say_what_was_done(seeded: tuple[Path, Path, dict[str, str]]) -> None:
    db, cfg, ids = seeded
    out = {
        name: invoke(*_command(name, seeded)[0]).stdout for name in ("expire", "retain", "extract", "migrate")
    }
    last = {name: text.splitlines()[-1] for name, text in out.items()}
    assert last["expire"].startswith("expired 1 record(s) in ")
    assert last["retain"].startswith("blanked 1 turn(s) across 1 session(s) in ")
    assert last["extract"].startswith("extracted session s2: 1 considered, 1 superseded, summary created in ")
    written = re.fullmatch(r"  #0 semantic (\S+): superseded:\S+", out["extract"].splitlines()[0])
    assert written is not None, out["extract"]
    rerun = invoke(*_command("extract", seeded)[0], "--force").stdout.splitlines()
    assert rerun[0] == f"  #0 semantic {written[1]}: already_reinforced"
    assert rerun[-1].startswith("extracted session s2: 1 considered, 1 already reinforced, summary ")
    assert re.match(rf"{re.escape(str(db))}: schema version \d+ in ", last["migrate"])
    dry = invoke("erase", "--record", ids["fact"], "--reason", "r", "--store", db, "--config", cfg)
    assert dry.stdout.splitlines()[0] == f"  record {ids['fact']}"
    assert dry.stdout.splitlines()[-1].startswith(f"would erase record:{ids['fact']}: 1 record, ")
    assert "Nothing was changed" in dry.stderr


def test_refusals_under_json_are_one_object_with_the_same_exit_status(
    seeded: tuple[Path, Path, dict[str, str]],
) -> None:
    db, cfg, _ = seeded
    common = ["--store", str(db), "--config", str(cfg), "--json"]
    missing = json.loads(invoke("erase", "--record", "nope", "--reason", "r", *common, code=1).stdout)
    assert missing == {"ok": False, "error": "not_found", "message": "no record 'nope'"}
    usage = json.loads(invoke("erase", "--reason", "r", *common, code=2).stdout)
    assert usage["error"] == "usage" and "exactly one of" in usage["message"]
    mismatch = json.loads(invoke("reembed", "--model", "other", "--version", "1", *common, code=1).stdout)
    assert mismatch["error"] == "invalid" and "does not match the configured embedder" in mismatch["message"]
    taken = json.loads(invoke("snapshot", "save", db, *common, code=1).stdout)
    assert taken["ok"] is False and "already exists" in taken["message"]
    invoke("extract", "s2", *common)
    again = json.loads(invoke("extract", "s2", *common, code=1).stdout)  # the run's fields and the refusal
    assert (again["ok"], again["error"], again["status"], again["reason"]) == (
        False, "skipped", "skipped", "already_extracted",
    )  # fmt: skip
    assert "pass --force" in again["message"]
    # Without --json the same refusals stay one Error: line on stderr, after the summary of a run.
    text = invoke("erase", "--record", "nope", "--reason", "r", "--store", db, "--config", cfg, code=1)
    assert text.stderr == "Error: no record 'nope'\n" and text.stdout == ""
    skipped = invoke("extract", "s2", "--store", db, "--config", cfg, code=1)
    assert re.fullmatch(r"skipped session s2 \(already_extracted\) in \d+\.\d s\n", skipped.stdout)
    assert skipped.stderr.startswith("Error: session s2 was already extracted; pass --force")


def test_a_bar_is_drawn_on_a_terminal_and_never_under_json(
    seeded: tuple[Path, Path, dict[str, str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    db, cfg, _ = seeded
    monkeypatch.setattr("retold.cli.common._stderr_is_terminal", lambda: True)
    args = ["reembed", "--model", "fake-embedder", "--version", "1", "--store", db, "--config", cfg]
    shown = invoke(*args)
    assert "re-embedding" in shown.stderr and "2/2" in shown.stderr
    assert len(shown.stdout.splitlines()) == 1 and SUMMARY.match(shown.stdout.strip())
    quiet = invoke(*args, "--json")
    assert quiet.stderr == "" and json.loads(quiet.stdout)["records"] == 2


async def test_the_operations_report_progress_with_increasing_counts(
    seeded: tuple[Path, Path, dict[str, str]],
) -> None:
    db, cfg, _ = seeded
    now = datetime.now(UTC)
    calls: dict[str, list[tuple[int, int]]] = {"expire": [], "retain": []}
    async with retold.open_runtime(db, cfg, embedder=FakeEmbedder(), judge=FakeJudge()) as rt:
        for n in range(3):
            await rt.store.insert_record(
                record_for_tests(now, content=f"note {n}", expires_at=now - timedelta(days=1))
            )
        expired = await rt.ops.expire(progress=lambda done, total: calls["expire"].append((done, total)))
        await rt.ops.retain(progress=lambda done, total: calls["retain"].append((done, total)))
    assert len(expired) == 4  # the three notes and the seeded inference
    assert calls == {"expire": [(0, 4), (1, 4), (2, 4), (3, 4), (4, 4)], "retain": [(0, 1), (1, 1)]}


def counted_up(calls: list[tuple[int, int]]) -> int:
    """The total a run's progress calls reached, once they are checked to count up from 0 to it."""
    total = calls[-1][1]
    assert total > 0 and calls[0] == (0, total) and calls[-1] == (total, total), calls
    assert all(t == total for _, t in calls), calls
    assert all(a < b for (a, _), (b, _) in itertools.pairwise(calls)), calls
    return total


def page_count(path: Path) -> int:
    with sqlite3.connect(path) as conn:
        return int(conn.execute("PRAGMA page_count").fetchone()[0])


async def test_snapshots_migrations_and_extraction_count_up_to_their_total(
    seeded: tuple[Path, Path, dict[str, str]], tmp_path: Path
) -> None:
    db, cfg, _ = seeded
    calls: dict[str, list[tuple[int, int]]] = {"extract": [], "save": [], "load": [], "migrate": []}
    threads: set[int] = set()

    def into(name: str) -> Callable[[int, int], None]:
        def progress(done: int, total: int) -> None:
            threads.add(threading.get_ident())
            calls[name].append((done, total))

        return progress

    snap = tmp_path / "snap.sqlite"
    models = {"extractor": FakeExtractor(OUTPUT), "reviewer": FakeReviewer()}
    async with retold.open_runtime(db, cfg, embedder=FakeEmbedder(), judge=FakeJudge(), **models) as rt:
        with reporting_stages(into("extract")):
            assert (await rt.extract_session("s2")).status == "extracted"
        await rt.ops.save_snapshot(snap, progress=into("save"))
    await load_snapshot(db, snap, progress=into("load"))
    fresh = await Database.open(tmp_path / "fresh.sqlite")
    try:
        await migrate(fresh, progress=into("migrate"))
    finally:
        await fresh.close()

    pages = page_count(snap)
    totals = {name: counted_up(made) for name, made in calls.items()}
    assert totals == {"extract": len(STAGES), "save": pages, "load": pages, "migrate": LATEST_VERSION}
    assert len(calls["save"]) > 2 and len(calls["load"]) > 2  # copied in steps, not at once
    assert threads == {threading.get_ident()}  # on the event loop, like the other operations


def test_snapshots_and_extraction_show_their_counts_on_the_bar(
    seeded: tuple[Path, Path, dict[str, str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    db, cfg, _ = seeded
    snap, common = db.parent / "snap.sqlite", ["--store", db, "--config", cfg]
    monkeypatch.setattr("retold.cli.common._stderr_is_terminal", lambda: True)
    shown = {
        "extracting": invoke("extract", "s2", *common),
        "saving the snapshot": invoke("snapshot", "save", snap, *common),
        "loading the snapshot": invoke("snapshot", "load", snap, "--yes", *common),
    }
    pages = page_count(snap)
    counts = {"extracting": len(STAGES), "saving the snapshot": pages, "loading the snapshot": pages}
    for label, result in shown.items():
        assert label in result.stderr and f"{counts[label]}/{counts[label]}" in result.stderr, result.stderr
        lines = result.stdout.splitlines()
        assert SUMMARY.match(lines[-1]) and not any(SUMMARY.match(line) for line in lines[:-1]), lines
    loaded = invoke("snapshot", "load", snap, "--yes", *common, "--json")
    assert loaded.stderr == "" and json.loads(loaded.stdout)["applied"] is True


async def _at_version_7(location: Path | str) -> None:
    """A store three migrations behind the latest, on either backend."""
    if isinstance(location, Path):
        db = await Database.open(location)
        try:
            await migrate(db, target=7)
        finally:
            await db.close()
        return
    store = await Store.open(location)  # PostgreSQL's tables start at its baseline, version 7
    try:
        for table in ("passage_vectors", "activation_reviews", "record_activation", "store_items"):
            await store.db.execute_atomic(f"DROP TABLE {table}")
        await store.db.execute_atomic("DROP INDEX records_scope_order")
        await store.db.execute_atomic("DELETE FROM schema_migrations WHERE version >= 8")
    finally:
        await store.close()


def test_migrate_counts_the_migrations_it_applies(
    store_location: Callable[[str], Path | str], monkeypatch: pytest.MonkeyPatch
) -> None:
    location = store_location("old.sqlite")
    asyncio.run(_at_version_7(location))
    assert LATEST_VERSION == 12, "five migrations to apply"
    calls: list[tuple[int, int]] = []
    drawn = Operation.progress

    def recorded(op: Operation, done: int, total: int) -> None:
        calls.append((done, total))
        drawn(op, done, total)

    monkeypatch.setattr(Operation, "progress", recorded)
    monkeypatch.setattr("retold.cli.common._stderr_is_terminal", lambda: True)
    shown = invoke("migrate", "--store", location)
    assert calls == [(0, 5), (1, 5), (2, 5), (3, 5), (4, 5), (5, 5)]
    assert "migrating" in shown.stderr and "5/5" in shown.stderr
    assert len(shown.stdout.splitlines()) == 1 and SUMMARY.match(shown.stdout.strip())
    assert shown.stdout.startswith(f"{location}: schema version {LATEST_VERSION} in ")
