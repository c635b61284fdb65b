"""What a user hits in the first hour with the CLI (issue 47 item 6): short ids and ``--json``.

``retold get`` takes the 12-character short id the demo, the UI and the tools print, read as
the tools read an id, and refuses an unknown or ambiguous one with one structured error;
``search``, ``check``, ``copy`` and ``grant`` answer ``--json`` with their structured result.
In-process through click's CliRunner, on each backend the suite runs (``copy`` on SQLite files).
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

import retold
from retold.cli import cli
from retold.models import Principal, Scope
from retold.testing import FakeClock, FakeEmbedder, FakeJudge, record_for_tests

USER = Scope("user", "u1")
FAKE = "embedding:\n  model: fake-embedder\n  version: '1'\n  dims: 256\n"
QUOTE = "I prefer concise answers"


@dataclass
class Cli:
    location: Path | str
    config: Path
    ids: dict[str, str]

    def invoke(self, *args: str | Path, code: int = 0, store: bool = True) -> Result:
        tail = ["--store", str(self.location), "--config", str(self.config)] if store else []
        result = CliRunner().invoke(cli, [*map(str, args), *tail])
        assert result.exit_code == code, (result.exit_code, result.stdout, result.stderr, result.exception)
        assert "Traceback" not in result.output
        return result


async def _seed(location: Path | str) -> dict[str, str]:
    async with retold.open_runtime(location, embedder=FakeEmbedder(), judge=FakeJudge()) as rt:
        await rt.host.provision_user("u1", aliases=["Aditya"])
        await rt.host.grant("planner", USER, read=True, write=True)
        p = await rt.hooks.on_session_start(Principal("planner", "u1", "s1"))
        p = await rt.hooks.on_turn(p, "user", f"Hi. {QUOTE}.")
        written = await rt.tools.call(p, "memory_write", {
            "type": "semantic", "content": "Aditya prefers concise answers.", "attribute": "answer_style",
            "source_kind": "user_statement", "evidence": QUOTE,
        })  # fmt: skip
        assert written["ok"], written
        record_id = written["record_id"]
        # A second record whose id ends in the same 12 characters: its short id is ambiguous.
        twin_id = "ffffffff-ffff-7fff-ffff-" + record_id[-12:]
        twin_tail = "ffffffff-ffff-7fff-aaaa-" + "0123456789ab"
        for rid in (twin_id, twin_tail):
            await rt.store.insert_record(record_for_tests(FakeClock().now(), id=rid, content=f"twin {rid}"))
        return {"record": record_id, "twin": twin_id, "other": twin_tail}


@pytest.fixture
def seeded(store_location: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Cli:
    location = store_location("cli.sqlite")
    ids = asyncio.run(_seed(location))
    monkeypatch.setattr("retold.index.embedding_backend.build_embedder", lambda config: FakeEmbedder())
    config = tmp_path / "fake.yaml"
    config.write_text(FAKE)
    return Cli(location, config, ids)


def _one_object(result: Result) -> dict[str, Any]:
    value = json.loads(result.stdout)  # the whole of stdout is one object
    assert isinstance(value, dict)
    return value


def _error_line(result: Result) -> str:
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: "), result.stderr
    return lines[0]


# --- (a) retold get takes the short id ------------------------------------------------------------


def test_get_resolves_the_short_id_the_tools_print(seeded: Cli) -> None:
    unique = seeded.ids["other"]
    full = _one_object(seeded.invoke("get", unique))
    assert full["record"]["id"] == unique
    for ref in (unique[-12:], f"[{unique[-12:]}]", f"  {unique[-12:].upper()} "):  # as results print it
        assert _one_object(seeded.invoke("get", ref)) == full, ref
    as_json = _one_object(seeded.invoke("get", unique[-12:], "--json"))
    assert as_json.pop("ok") is True and as_json == full


def test_get_refuses_an_ambiguous_or_unknown_short_id(seeded: Cli) -> None:
    record, twin = seeded.ids["record"], seeded.ids["twin"]
    short = record[-12:]
    line = _error_line(seeded.invoke("get", short, code=1))
    assert f"short id {short!r} names 2 records" in line and record in line and twin in line
    refused = _one_object(seeded.invoke("get", short, "--json", code=1))
    assert refused["ok"] is False and refused["error"] == "ambiguous_id"
    assert sorted(refused["matches"]) == sorted([record, twin])
    assert _one_object(seeded.invoke("get", record))["record"]["id"] == record  # the full id still works

    assert "no record '000000000000'" in _error_line(seeded.invoke("get", "000000000000", code=1))
    missing = _one_object(seeded.invoke("get", "000000000000", "--json", code=1))
    assert missing["ok"] is False and missing["error"] == "not_found"
    assert _error_line(seeded.invoke("get", short[:-1], code=1))  # 11 characters name nothing


# --- (b) --json on search, check, copy and grant --------------------------------------------------


def test_search_json_is_the_structured_result_with_its_log_row(seeded: Cli) -> None:
    args = ("search", "--agent", "planner", "--user", "u1", "concise answers")
    text = seeded.invoke(*args).stdout
    assert text.startswith("memory_search:") and "search_log:" in text
    out = _one_object(seeded.invoke(*args, "--json"))
    assert out["ok"] is True and out["rendered"].startswith("memory_search:")
    (hit,) = [r for r in out["results"] if r["record_id"] == seeded.ids["record"]]
    assert hit["short_id"] == seeded.ids["record"][-12:] and isinstance(hit["score"], float)
    assert hit["explanation"].startswith("matched:") and hit["explanation_full"]["rrf"]["score"] > 0
    assert out["search_log"]["id"] == out["search_id"]
    assert out["search_log"]["returned"] == [r["record_id"] for r in out["results"]]

    replayed = _one_object(seeded.invoke("search", "--replay", out["search_id"], "--json"))
    assert replayed["ok"] is True and replayed["search_id"] == out["search_id"]
    gone = _one_object(seeded.invoke("search", "--replay", "no-such-search", "--json", code=1))
    assert gone["error"] == "not_found"


def test_check_json_reports_findings_and_keeps_the_exit_code(seeded: Cli) -> None:
    clean = _one_object(seeded.invoke("check", "--json", code=3))  # the twins have no vector or FTS row
    assert clean["ok"] is False and clean["clean"] is False and clean["error"] == "findings"
    kinds = {(f["kind"], f["record_id"]) for f in clean["findings"]}
    assert {rid for _, rid in kinds} >= {seeded.ids["twin"], seeded.ids["other"]}
    assert all(set(f) == {"kind", "record_id", "detail"} for f in clean["findings"])
    repaired = _one_object(seeded.invoke("check", "--repair", "--json"))
    assert repaired["ok"] is True and repaired["findings"] == [] and repaired["repaired"]
    assert _one_object(seeded.invoke("check", "--json")) == {
        "ok": True, "store": str(seeded.location), "clean": True, "findings": [], "repaired": [],
    }  # fmt: skip
    assert seeded.invoke("check").stdout.strip() == f"{seeded.location}: clean"  # text as before


def test_grant_json_is_the_grant(seeded: Cli) -> None:
    out = _one_object(seeded.invoke("grant", "writer", "project:p1", "--write", "--json", "--as", "ops"))
    assert out == {"ok": True, "agent_id": "writer", "scope": "project:p1", "can_read": True,
                   "can_write": True, "actor": "ops"}  # fmt: skip
    refused = _one_object(seeded.invoke("grant", "writer", "project:p1", "--no-read", "--json", code=1))
    assert refused["ok"] is False and refused["error"] == "invalid"
    assert seeded.invoke("grant", "reader", "user:u1").stdout.strip() == "granted reader read on user:u1"


@pytest.mark.sqlite_only("copies between two SQLite files; tests/integration/test_copy.py crosses backends")
def test_copy_json_counts_every_table(tmp_path: Path, backend: str, monkeypatch: pytest.MonkeyPatch) -> None:
    source, destination = tmp_path / "a.sqlite", tmp_path / "b.sqlite"
    asyncio.run(_seed(source))
    monkeypatch.setattr("retold.index.embedding_backend.build_embedder", lambda config: FakeEmbedder())
    config = tmp_path / "fake.yaml"
    config.write_text(FAKE)
    result = CliRunner().invoke(
        cli, ["copy", str(source), str(destination), "--config", str(config), "--json"]
    )
    out = json.loads(result.stdout)
    # The twins written straight to the store have no vector: the check on the copy finds that.
    assert result.exit_code == 3 and out["ok"] is False and out["error"] == "not_verified"
    assert out["source"] == str(source) and out["destination"] == str(destination)
    assert out["tables"]["records"] == {"copied": 3, "in_destination": 3}
    assert out["rows_copied"] == sum(t["copied"] for t in out["tables"].values())
    assert out["findings"] and all(set(f) == {"kind", "record_id", "detail"} for f in out["findings"])
    again = CliRunner().invoke(cli, ["copy", str(source), str(destination), "--json"])
    assert again.exit_code == 1 and json.loads(again.stdout)["error"] == "invalid"  # not empty now
    missing = CliRunner().invoke(cli, ["copy", str(tmp_path / "none.sqlite"), str(destination), "--json"])
    assert missing.exit_code == 1 and json.loads(missing.stdout)["error"] == "store"
