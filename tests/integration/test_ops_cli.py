"""The maintenance commands as an operator runs them: subprocesses on real store files (spec §16)."""

from __future__ import annotations

import asyncio
import re
import sqlite3
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from cli_runner import run

import retold
from retold.models import Principal, Scope, SearchRequest, SessionInfo, SessionKey
from retold.testing import FakeEmbedder, FakeJudge, record_for_tests

pytestmark = pytest.mark.integration

FAKE_CONFIG = "embedding:\n  model: fake-embedder\n  version: '1'\n  dims: 256\n"
USER = Scope("user", "u1")


def summary(line: str) -> str:
    """A summary line without its elapsed time (" in 0.3 s"), which no test can predict."""
    assert re.search(r" in \d+\.\d s$", line), line
    return re.sub(r" in \d+\.\d s$", "", line)


def one_line_error(proc: subprocess.CompletedProcess[str]) -> str:
    assert "Traceback" not in proc.stderr, proc.stderr
    assert proc.stderr.startswith("Error: ") and proc.stderr.count("\n") == 1, proc.stderr
    return proc.stderr


@pytest.fixture
def cfg(tmp_path: Path) -> Path:
    """A config naming the fake embedder, so the commands accept the stores these tests build."""
    path = tmp_path / "fake.yaml"
    path.write_text(FAKE_CONFIG)
    return path


async def seed(db: Path) -> dict[str, str]:
    """u1 with a session, a quoted memory and a search; an expired inference; an old extracted session."""
    now = datetime.now(UTC)
    async with retold.open_runtime(db, embedder=FakeEmbedder(), judge=FakeJudge()) as rt:
        await rt.host.provision_user("u1", aliases=["Aditya"])
        await rt.host.grant("planner", USER, read=True, write=True)
        p = await rt.hooks.on_session_start(Principal("planner", "u1", "s1"))
        p = await rt.hooks.on_turn(p, "user", "I prefer concise answers.")
        fact = await rt.host.write_system(USER, "Aditya prefers concise answers.", attribute="answer_style")
        await rt.search(p, SearchRequest(queries=["concise answers"]))
        stale = record_for_tests(
            now - timedelta(days=40), content="Aditya may like tea.", status="provisional",
            source_kind="agent_inference", expires_at=now - timedelta(days=10),
        )  # fmt: skip
        await rt.store.insert_record(stale)
        await rt.store.put_embedding(
            stale.id, "fake-embedder", "1", rt.embedder.embed_documents([stale.content])[0]
        )
        ended = now - timedelta(days=rt.config.sessions.retain_days + 5)
        await rt.store.insert_session(SessionInfo("old", "planner", "u1", None, ended, ended, None, None))
        old = SessionKey("planner", "u1", "old")
        await rt.store.append_turn(old, "user", "an old conversation", ended)
        claim = await rt.store.claim_session(old, now=now, stale_before=now - timedelta(hours=1))
        assert claim.claimed_at is not None
        await rt.store.finish_session_extraction(old, claimed_at=claim.claimed_at, now=now)
        return {"fact": fact.record_id or "", "stale": stale.id}


def test_expire_and_retain_record_the_operator(tmp_path: Path, cfg: Path) -> None:
    db = tmp_path / "m.sqlite"
    ids = asyncio.run(seed(db))
    *listed, last = run("expire", "--store", db, "--config", cfg, "--as", "cron").stdout.splitlines()
    assert (listed, summary(last)) == ([f"  {ids['stale']}"], "expired 1 record(s)")
    assert summary(run("expire", "--store", db, "--config", cfg).stdout.strip()) == "expired 0 record(s)"
    *listed, last = run("retain", "--store", db, "--config", cfg, "--as", "cron").stdout.splitlines()
    assert (listed, summary(last)) == (["  planner/u1/old"], "blanked 1 turn(s) across 1 session(s)")

    async def look() -> tuple[list[dict], list[str]]:
        async with retold.open_runtime(db, embedder=FakeEmbedder(), judge=FakeJudge()) as rt:
            events = await rt.store.events(kind="record.status") + await rt.store.events(
                kind="session.retained"
            )
            return events, [t.content for t in await rt.store.turns(SessionKey("planner", "u1", "old"))]

    events, turns = asyncio.run(look())
    assert [e["actor"] for e in events] == ["cron", "cron"]
    assert turns == [""]


def test_erase_prints_first_and_erases_only_with_yes(tmp_path: Path, cfg: Path) -> None:
    db = tmp_path / "m.sqlite"
    ids = asyncio.run(seed(db))
    before = db.read_bytes()
    dry = run("erase", "--record", ids["fact"], "--reason", "asked", "--store", db, "--config", cfg)
    assert dry.stdout.splitlines()[-1].startswith(f"would erase record:{ids['fact']}: 1 record, ")
    assert f"  record {ids['fact']}" in dry.stdout
    assert "Nothing was changed" in dry.stderr
    assert db.read_bytes() == before
    done = run("erase", "--user", "u1", "--reason", "account closed", "--yes", "--as", "dpo", "--store", db,
               "--config", cfg)  # fmt: skip
    assert done.stdout.startswith("erased user:u1: 2 records, 2 sessions (2 turns with text), 1 entity, ")
    assert b"concise answers" not in db.read_bytes()
    assert run("check", "--store", db, "--config", cfg).stdout.strip().endswith(": clean")


def test_erase_refuses_bad_requests_with_one_line(tmp_path: Path, cfg: Path) -> None:
    db = tmp_path / "m.sqlite"
    ids = asyncio.run(seed(db))
    both = run("erase", "--record", ids["fact"], "--user", "u1", "--reason", "r", "--store", db, rc=2)
    assert "exactly one of --record, --session and --user" in both.stderr
    assert "--reason" in run("erase", "--user", "u1", "--store", db, rc=2).stderr
    assert "no record 'nope'" in one_line_error(
        run("erase", "--record", "nope", "--reason", "r", "--yes", "--store", db, "--config", cfg, rc=1)
    )
    assert "no user 'u9'" in one_line_error(
        run("erase", "--user", "u9", "--reason", "r", "--yes", "--store", db, "--config", cfg, rc=1)
    )
    assert "non-blank reason" in one_line_error(
        run("erase", "--user", "u1", "--reason", " ", "--yes", "--store", db, "--config", cfg, rc=1)
    )


def test_check_exits_3_with_findings_and_repair_fixes_them(tmp_path: Path, cfg: Path) -> None:
    db = tmp_path / "m.sqlite"
    ids = asyncio.run(seed(db))
    assert run("check", "--store", db, "--config", cfg).stdout.strip() == f"{db}: clean"
    conn = sqlite3.connect(db)
    with conn:
        conn.execute("DELETE FROM records_fts WHERE record_id = ?", (ids["fact"],))
    conn.close()
    found = run("check", "--store", db, "--config", cfg, rc=3)
    assert found.stdout.splitlines() == [
        f"fts_rows: {ids['fact']} confirmed record has 0 FTS rows, expected 1"
    ]
    assert "1 finding(s)" in found.stderr
    fixed = run("check", "--repair", "--store", db, "--config", cfg, "--as", "ops")
    assert fixed.stdout.splitlines()[0] == f"repaired: rewrote the FTS rows of 1 record(s): {ids['fact']}"
    assert fixed.stdout.splitlines()[-1].endswith(": clean")
    # With the default (MiniLM) configuration the fake vectors are foreign: reported, not refused.
    foreign = run("check", "--store", db, rc=3)
    assert "vector_foreign" in foreign.stdout


def test_snapshot_save_and_load(tmp_path: Path, cfg: Path) -> None:
    db, snap = tmp_path / "m.sqlite", tmp_path / "snap.sqlite"
    ids = asyncio.run(seed(db))
    saved = run("snapshot", "save", snap, "--store", db, "--config", cfg)
    assert summary(saved.stdout.strip()) == f"saved {snap}: schema version {schema_version(db)}, 2 record(s)"
    assert "already exists" in one_line_error(run("snapshot", "save", snap, "--store", db, rc=1))
    run("erase", "--record", ids["fact"], "--reason", "r", "--yes", "--store", db, "--config", cfg)

    async def hold_and_load() -> subprocess.CompletedProcess[str]:
        async with retold.open_runtime(db, embedder=FakeEmbedder(), judge=FakeJudge()):
            return await asyncio.to_thread(run, "snapshot", "load", snap, "--yes", "--store", db, rc=1)

    held = asyncio.run(hold_and_load())
    assert "another connection holds the store" in one_line_error(held)
    dry = run("snapshot", "load", snap, "--store", db)
    assert dry.stdout.startswith(f"would replace {db} with {snap}")
    assert content_of(db, ids["fact"]) == ""
    loaded = run("snapshot", "load", snap, "--yes", "--store", db)
    assert loaded.stdout.startswith(f"loaded {snap}")
    assert content_of(db, ids["fact"]) == "Aditya prefers concise answers."
    bogus = tmp_path / "bogus.sqlite"
    bogus.write_bytes(b"x" * 4096)
    assert "not a readable SQLite database" in one_line_error(
        run("snapshot", "load", bogus, "--yes", "--store", db, rc=1)
    )


def schema_version(db: Path) -> int:
    conn = sqlite3.connect(db)
    try:
        return int(conn.execute("SELECT max(version) FROM schema_migrations").fetchone()[0])
    finally:
        conn.close()


def content_of(db: Path, record_id: str) -> str:
    conn = sqlite3.connect(db)
    try:
        return str(conn.execute("SELECT content FROM records WHERE id = ?", (record_id,)).fetchone()[0])
    finally:
        conn.close()


def test_reembed_refuses_stale_floors_then_rebuilds_with_the_packaged_model(tmp_path: Path) -> None:
    """The store was searched under fake-embedder/1; the default config names MiniLM with the same floors."""
    db = tmp_path / "m.sqlite"
    ids = asyncio.run(seed(db))
    model = "sentence-transformers/all-MiniLM-L6-v2"
    refused = one_line_error(run("reembed", "--model", model, "--version", "1", "--store", db, rc=1))
    assert "'fake-embedder' version '1'" in refused and "retrieval.gate.dense_floor" in refused
    mismatch = one_line_error(run("reembed", "--model", "other", "--version", "1", "--store", db, rc=1))
    assert "does not match the configured embedder" in mismatch
    recalibrated = tmp_path / "recalibrated.yaml"
    recalibrated.write_text("retrieval:\n  gate:\n    dense_floor:\n      semantic: 0.44\n")
    done = run("reembed", "--model", model, "--version", "1", "--store", db, "--config", recalibrated,
               "--batch-size", "1", "--as", "ops")  # fmt: skip
    assert (
        summary(done.stdout.strip())
        == f"re-embedded 2 record(s) with {model} version 1 (384 dims, 2 batch(es))"
    )
    assert "re-embedding" not in done.stderr  # no progress bar when stderr is not a terminal
    assert run("check", "--store", db, "--config", recalibrated).stdout.strip().endswith(": clean")

    async def events() -> list[dict]:
        async with retold.open_runtime(db, recalibrated) as rt:  # opens: the vectors match the config
            return await rt.store.events(kind="store.reembedded")

    (event,) = asyncio.run(events())
    assert event["actor"] == "ops" and event["payload"]["model"] == model and event["payload"]["records"] == 2
    assert ids


def test_a_file_that_is_not_a_database_fails_at_once_and_exits(tmp_path: Path) -> None:
    """The failed connection is closed: its thread used to keep the process alive after the error."""
    garbage = tmp_path / "garbage.sqlite"
    garbage.write_text("not a database, only text that is long enough to have a header page\n" * 4)
    proc = subprocess.run(
        [sys.executable, "-m", "retold", "expire", "--store", str(garbage)],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert proc.returncode == 1, (proc.returncode, proc.stderr)
    assert "file is not a database" in one_line_error(proc)
    assert garbage.read_text().startswith("not a database")  # untouched
