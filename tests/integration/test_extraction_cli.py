"""``retold extract`` and ``retold review-due`` as a user runs them."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

import retold
from retold.cli import cli
from retold.models import CandidateRecord, ExtractionOutput, Principal, Scope, SessionSummary
from retold.store import Store
from retold.testing import FakeClock, FakeEmbedder, FakeExtractor, FakeJudge, FakeReviewer, record_for_tests

pytestmark = pytest.mark.integration

COMMANDS = ("extract", "review-due")


def run(
    *args: str | Path, rc: int = 0, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    full_env = {**os.environ, **(env or {})}
    for name in ("ANTHROPIC_API_KEY", "OPENAI_API_KEY", "OPENROUTER_API_KEY"):
        if env is None or name not in env:
            full_env.pop(name, None)
    proc = subprocess.run(
        [sys.executable, "-m", "retold", *map(str, args)],
        capture_output=True,
        text=True,
        timeout=120,
        env=full_env,
    )
    assert proc.returncode == rc, (proc.returncode, proc.stdout, proc.stderr)
    return proc


@pytest.mark.parametrize("command", COMMANDS)
def test_help_has_an_example_and_the_common_options_and_the_command_is_documented(command: str) -> None:
    out = run(command, "--help").stdout
    assert "Example:" in out and all(option in out for option in ("--store", "--config", "--as"))
    assert f"retold {command}" in (Path(__file__).parents[2] / "docs" / "cli.md").read_text()


async def _seed(path: Path, clock: FakeClock) -> str:
    async with retold.open_runtime(path, embedder=FakeEmbedder(), judge=FakeJudge(), clock=clock) as rt:
        await rt.host.provision_user("u1", aliases=["Aditya"])
        await rt.host.grant("planner", Scope("user", "u1"), read=True, write=True)
        p = await rt.hooks.on_session_start(Principal("planner", "u1", "s1"))
        p = await rt.hooks.on_turn(p, "user", "Hi. I prefer concise answers, please.")
        p = await rt.hooks.on_turn(p, "assistant", "Understood.")
        await rt.hooks.on_session_end(p)
        due = record_for_tests(clock.now(), review_at=clock.now() - timedelta(days=1))
        async with rt.store.transaction():
            await rt.store.insert_record(due)
        return due.id


def test_review_due_flags_the_due_record_once(tmp_path: Path) -> None:
    db = tmp_path / "m.sqlite"
    record_id = asyncio.run(_seed(db, FakeClock()))
    out = run("review-due", "--store", db, "--as", "cron").stdout
    assert out.splitlines()[0] == "flagged 1 record(s) for review" and record_id in out
    assert run("review-due", "--store", db).stdout.strip() == "flagged 0 record(s) for review"

    async def events() -> list[dict[str, Any]]:
        store = await Store.open(db)
        try:
            return await store.events(kind="record.review_due")
        finally:
            await store.close()

    [event] = asyncio.run(events())
    assert event["actor"] == "temporal_reviewer" and event["payload"]["operator"] == "cron"


def test_extract_without_an_extractor_or_a_key_says_what_to_do(tmp_path: Path) -> None:
    db = tmp_path / "m.sqlite"
    asyncio.run(_seed(db, FakeClock()))
    err = run("extract", "s1", "--store", db, rc=1).stderr
    assert "no extractor is configured" in err and "Traceback" not in err
    config = tmp_path / "retold.yaml"
    config.write_text("ingestion:\n  extraction_enabled: true\n")
    err = run("extract", "s1", "--store", db, "--config", config, rc=1).stderr
    assert "ANTHROPIC_API_KEY" in err and err.count("\n") == 1


OUTPUT = ExtractionOutput(
    [
        CandidateRecord(
            "semantic", "The user prefers concise answers.", "answer_style", "user_statement",
            "I prefer concise answers", 1, [],
        )
    ],
    SessionSummary("The user asked for concise answers.", [], []),
)  # fmt: skip


def test_extract_runs_the_graph_and_refuses_a_second_run_without_force(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = tmp_path / "m.sqlite"
    asyncio.run(_seed(db, FakeClock()))
    # The CLI builds models from config; stand fakes in for the hosted ones and the embedder.
    monkeypatch.setattr(
        "retold.ingest.extraction.structured.extractor_from_config", lambda config: FakeExtractor(OUTPUT)
    )
    monkeypatch.setattr("retold.runtime._reviewer_from_config", lambda config: FakeReviewer())
    monkeypatch.setattr("retold.index.embedding_backend.build_embedder", lambda config: FakeEmbedder())
    runner = CliRunner()
    first = runner.invoke(cli, ["extract", "s1", "--store", str(db), "--as", "ops", "--json"])
    assert first.exit_code == 0, first.output
    result = json.loads(first.output)
    assert result["status"] == "extracted" and result["counts"]["created"] == 1
    second = runner.invoke(cli, ["extract", "s1", "--store", str(db)])
    assert second.exit_code == 1 and "pass --force" in second.output
    forced = runner.invoke(cli, ["extract", "s1", "--force", "--store", str(db), "--json"])
    assert forced.exit_code == 0, forced.output
    assert json.loads(forced.output)["candidates"][0]["outcome"] == "already_reinforced"
