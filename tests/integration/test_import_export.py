"""``retold import`` and ``retold export`` on real SQLite with the packaged embedder (issue 47, item 5).

An export imported into a fresh store exports the same records; mem0's ``get_all`` output and
LangGraph store items land where their own stores kept them; a bad line is skipped with its
number and reason while the others commit; an interrupted import continues after its last
committed batch and never writes a line twice; a store path that names no file is refused
and nothing is created.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from cli_runner import run
from click.testing import CliRunner

import retold
from retold.cli import cli
from retold.config import Config
from retold.index.embedding_backend import build_embedder
from retold.ingest.write.request import WriteRequest
from retold.interchange import Importer, checkpoint_path, import_file
from retold.models import EntityMention, Principal, Scope

pytestmark = pytest.mark.integration

ROOT = Path(__file__).parents[2]
U1 = Scope("user", "u1")
# What an export reports but an import does not write back (the new store gives its own).
NOT_WRITTEN_BACK = ("id", "created_at")


@pytest.fixture(scope="module")
def embedder() -> Any:
    """The packaged all-MiniLM-L6-v2, loaded once for the in-process tests."""
    model = build_embedder(Config().embedding)
    model.warm()
    return model


def write_lines(path: Path, lines: list[Any]) -> Path:
    path.write_text(
        "".join((x if isinstance(x, str) else json.dumps(x)) + "\n" for x in lines), encoding="utf-8"
    )
    return path


def exported(path: Path) -> list[dict[str, Any]]:
    """The lines of an export without what a fresh store gives anew, in a stable order."""
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    for row in rows:
        for key in NOT_WRITTEN_BACK:
            row.pop(key)
    return sorted(rows, key=lambda r: (r["scope"], r.get("event_at") or "", r["content"]))


async def seed(path: Path, embedder: Any) -> None:
    """Records of every kind: a tool write quoting the session, host facts, an inference, a project."""
    async with retold.open_runtime(path, embedder=embedder) as rt:
        await rt.host.provision_user("u1", aliases=["Aditya"])
        await rt.host.grant("planner", U1, read=True, write=True)
        await rt.host.grant("planner", Scope("project", "atlas"), read=True, write=True)
        p = await rt.hooks.on_session_start(Principal("planner", "u1", "s1"))
        p = await rt.hooks.on_turn(p, "user", "I moved to Lisbon last spring, and I use vim for everything.")
        wrote = await rt.tools.call(
            p, "memory_write",
            {"type": "semantic", "content": "Aditya uses vim.", "attribute": "editor",
             "source_kind": "user_statement", "evidence": "I use vim for everything", "tags": ["tools"]},
        )  # fmt: skip
        assert wrote["ok"], wrote
        guess = await rt.tools.call(
            p, "memory_write", {"type": "semantic", "content": "Aditya may prefer tea.", "attribute": "drink"}
        )
        assert guess["ok"] and guess["status"] == "provisional", guess
        host = Principal("crm", "u1")
        requests = [
            WriteRequest(
                type="semantic", content="Priya leads the Atlas project.", scope=U1, source_kind="system",
                attribute="role", entities=[EntityMention("person", "Priya", "about"),
                                            EntityMention("project", "Atlas", "mentions")],
                source_ref="crm:17", trusted=True,
            ),
            WriteRequest(
                type="episodic", content="Aditya flew to Osaka for the Atlas offsite.", scope=U1,
                source_kind="tool_result", event_at=datetime(2025, 3, 4, 9, tzinfo=UTC),
                valid_from=datetime(2025, 3, 4, tzinfo=UTC), valid_until=datetime(2025, 3, 9, tzinfo=UTC),
                tags=["travel", "calendar"], source_ref="calendar:88", trusted=True,
            ),
            WriteRequest(
                type="procedural", content="To release Atlas, tag the commit and run the smoke tests.",
                scope=Scope("project", "atlas"), source_kind="system", attribute="release",
                entities=[EntityMention("project", "Atlas", "about")],
                review_at=datetime(2027, 1, 1, tzinfo=UTC), source_ref="wiki:release", trusted=True,
            ),
        ]  # fmt: skip
        results = await rt.host.ingest_many(host, requests)
        assert all(r.ok for r in results), results


def test_an_export_imported_into_a_fresh_store_exports_the_same_records(
    tmp_path: Path, embedder: Any
) -> None:
    import asyncio

    source, copy = tmp_path / "source.sqlite", tmp_path / "copy.sqlite"
    asyncio.run(seed(source, embedder))
    first, second = tmp_path / "first.jsonl", tmp_path / "second.jsonl"
    out = json.loads(run("export", "--store", source, "-o", first, "--json").stdout)
    assert out["ok"] and out["records"] == 5, out
    report = json.loads(run("import", first, "--store", copy, "--create", "--json").stdout)
    assert report["ok"] and report["outcomes"] == {"created": 5} and report["skipped"] == [], report
    assert report["checkpoint"] is None and not checkpoint_path(first).exists()
    run("export", "--store", copy, "-o", second)
    assert exported(second) == exported(first)
    lines = {row["content"]: row for row in exported(first)}
    vim = lines["Aditya uses vim."]
    assert vim["source_kind"] == "user_statement" and vim["evidence"] == "I use vim for everything"
    assert vim["source_ref"].startswith("session:s1") and "entities" not in vim  # the user's own entity
    assert lines["Aditya may prefer tea."]["status"] == "provisional"
    assert lines["Aditya may prefer tea."]["expires_at"] is not None  # carried over, not restarted
    priya = lines["Priya leads the Atlas project."]
    assert priya["entities"] == [
        {"kind": "person", "name": "Priya", "role": "about"},
        {"kind": "project", "name": "Atlas", "role": "mentions"},
    ]
    assert lines["Aditya flew to Osaka for the Atlas offsite."]["valid_until"].startswith("2025-03-09")
    # A second import of the same export writes nothing.
    again = json.loads(run("import", first, "--store", copy, "--json").stdout)
    assert again["outcomes"] == {"already_imported": 5} and again["records"] == 0, again
    # Without --output the lines go to stdout and the summary to stderr.
    piped = run("export", "--store", copy, "--scope", "project:atlas")
    assert [json.loads(x)["scope"] for x in piped.stdout.splitlines()] == ["project:atlas"]
    assert piped.stderr.strip() == "exported 1 record(s)"
    refused = run("export", "--store", copy, "-o", second, rc=1)
    assert "exists" in refused.stderr and "--force" in refused.stderr


MEM0_RESULTS = {
    "results": [
        {"id": "m-1", "memory": "Is a vegetarian", "hash": "h1", "user_id": "alice",
         "metadata": {"src": "chat"}, "categories": ["food"],
         "created_at": "2024-07-20T01:35:36.123456-07:00", "updated_at": None},
        {"id": "m-2", "memory": "Has a dog named Pixel", "user_id": "alice",
         "created_at": "2024-07-21T10:00:00-07:00", "updated_at": "2024-07-22T10:00:00-07:00"},
        {"id": "m-3", "memory": "Plays the cello", "user_id": "bob", "agent_id": "tutor",
         "created_at": "2024-08-01T12:00:00Z"},
        {"id": "m-4", "memory": "Likes dark mode", "agent_id": "tutor", "created_at": "2024-08-02T12:00:00Z"},
    ],
    "relations": [],
}  # fmt: skip


async def test_mem0_get_all_output_becomes_each_users_episodic_memories(
    tmp_path: Path, embedder: Any
) -> None:
    document = tmp_path / "mem0.json"
    document.write_text(json.dumps(MEM0_RESULTS, indent=2), encoding="utf-8")  # pretty-printed, as saved
    async with retold.open_runtime(tmp_path / "m.sqlite", embedder=embedder) as rt:
        report = await import_file(rt, document)
        assert (report.format, report.counted_in, report.total) == ("mem0", "items", 4)
        assert report.outcomes == {"created": 3, "skipped": 1}, report
        assert report.skipped == [{"item": 4, "error": "no_scope", "message": report.skipped[0]["message"]}]
        assert "--scope" in report.skipped[0]["message"]
        alice = {r.content: r for r in await rt.store.records_in_scope(Scope("user", "alice"))}
        assert set(alice) == {"Is a vegetarian", "Has a dog named Pixel"}
        veg = alice["Is a vegetarian"]
        assert veg.type == "episodic" and veg.tags == ["food"] and veg.source_ref == "mem0:m-1"
        assert veg.event_at == datetime(2024, 7, 20, 8, 35, 36, 123456, tzinfo=UTC)
        assert veg.expires_at is None  # kept until deleted, as mem0 keeps it
        (cello,) = await rt.store.records_in_scope(Scope("user", "bob"))
        assert cello.creator_agent_id == "tutor"
        # One result object per line, and a list of results, read the same; nothing is written twice.
        lines = write_lines(tmp_path / "mem0.jsonl", [MEM0_RESULTS, *MEM0_RESULTS["results"]])
        again = await import_file(rt, lines, scope=Scope("user", "carol"))
        assert again.format == "mem0" and again.counted_in == "lines"
        # m-4 (no user_id) lands under carol once; its repeat in the same batch reinforces it.
        assert again.outcomes == {"already_imported": 6, "created": 1, "already_reinforced": 1}, again
        listed = tmp_path / "mem0-list.json"
        listed.write_text(json.dumps([MEM0_RESULTS, MEM0_RESULTS]), encoding="utf-8")
        assert (await import_file(rt, listed)).outcomes == {"already_imported": 6, "skipped": 2}


async def test_langgraph_store_items_are_searchable_and_get_returns_their_value(
    tmp_path: Path, embedder: Any, store_location: Any
) -> None:
    from langgraph.store.memory import InMemoryStore

    from retold.adapters.langgraph_store import RetoldStore

    theirs = InMemoryStore()
    await theirs.aput(("memories", "u1"), "editor", {"content": "Uses vim with a dark theme.", "n": 1})
    await theirs.aput(
        ("memories", "u1", "prefs"), "tone", {"text": "terse replies", "evidence": "keep it short"}
    )
    await theirs.aput(("memories", "project", "atlas"), "owner", {"content": "Priya owns Atlas."})
    await theirs.aput(("documents", "u1"), "readme", {"content": "Not memory."})
    items = [i.dict() for i in await theirs.asearch((), limit=100)]
    export = write_lines(tmp_path / "store.jsonl", items)
    async with retold.open_runtime(store_location("lg.sqlite"), embedder=embedder) as rt:
        report = await import_file(rt, export)
        assert report.format == "langgraph" and report.outcomes == {"created": 3, "skipped": 1}, report
        (bad,) = report.skipped
        assert bad["error"] == "no_scope" and "documents" in bad["message"]
        await rt.host.grant("planner", U1, read=True)
        await rt.host.grant("planner", Scope("project", "atlas"), read=True)
        store = RetoldStore(rt, agent_id="planner", default_user_id="u1")
        item = await store.aget(("memories", "u1"), "editor")
        assert item is not None and item.value == {"content": "Uses vim with a dark theme.", "n": 1}
        tone = await store.aget(("memories", "u1", "prefs"), "tone")
        assert tone is not None and tone.value["evidence"] == "keep it short"
        owner = await store.aget(("memories", "project", "atlas"), "owner")
        assert owner is not None and owner.value == {"content": "Priya owns Atlas."}
        hits = await store.asearch(("memories", "u1"), query="which editor does the user use", limit=3)
        assert hits and hits[0].key == "editor"
        row = await rt.store.store_item_row('["memories","u1"]', "editor")
        record = await rt.store.get_record(row.record_id)  # type: ignore[union-attr]
        assert record is not None and record.expires_at is None and record.type == "episodic"
        assert (await import_file(rt, export)).outcomes == {"already_imported": 3, "skipped": 1}


async def test_bad_lines_are_skipped_with_their_number_and_reason(
    tmp_path: Path, embedder: Any, store_location: Any
) -> None:
    file = write_lines(
        tmp_path / "mixed.jsonl",
        [
            {"content": "Aditya drinks black coffee.", "type": "semantic", "attribute": "coffee",
             "scope": "user:u1"},
            "{not json",
            {"type": "episodic", "scope": "user:u1"},
            "",
            {"content": "Aditya is a vegetarian.", "type": "semantic", "scope": "user:u1"},
            {"content": "Met Priya in Lisbon.", "scope": "user:u1", "event_at": "last tuesday"},
            {"content": "Met Priya in Lisbon.", "scope": "user:u1", "event_at": "2025-05-06T10:00:00+02:00"},
        ],
    )  # fmt: skip
    async with retold.open_runtime(store_location("b.sqlite"), embedder=embedder) as rt:
        report = await import_file(rt, file)
        assert report.outcomes == {"created": 2, "skipped": 4}, report
        assert report.total == 7 and report.done == 7
        assert [(s["line"], s["error"]) for s in report.skipped] == [
            (2, "invalid_json"), (3, "invalid_input"), (5, "invalid_subject"), (6, "invalid_input"),
        ]  # fmt: skip
        assert "content is missing" in report.skipped[1]["message"]
        assert "attribute required" in report.skipped[2]["message"]
        records = await rt.store.records_in_scope(U1)
        assert sorted(r.content for r in records) == ["Aditya drinks black coffee.", "Met Priya in Lisbon."]


class Stop(KeyboardInterrupt):
    """What Ctrl-C raises, from the progress callback once a batch has committed."""


async def test_an_interrupted_import_resumes_after_its_last_batch_and_writes_nothing_twice(
    tmp_path: Path, embedder: Any, store_location: Any
) -> None:
    lines = [
        {"content": f"On day {i} Aditya reviewed pull request {1000 + i} for the Atlas project.",
         "scope": "user:u1", "event_at": f"2025-04-{1 + i % 28:02d}T09:00:00Z"}
        for i in range(30)
    ]  # fmt: skip
    file = write_lines(tmp_path / "long.jsonl", lines)
    seen: list[tuple[int, int]] = []

    def stop_after_first_batch(done: int, total: int) -> None:
        seen.append((done, total))
        if done >= 10:
            raise Stop

    async with retold.open_runtime(store_location("r.sqlite"), embedder=embedder) as rt:
        importer = Importer(rt, file, batch_size=10, progress=stop_after_first_batch)
        with pytest.raises(Stop):
            await importer.run()
        assert seen == [(0, 30), (10, 30)]
        assert importer.report is not None and importer.report.interrupted and importer.report.done == 10
        state = json.loads(checkpoint_path(file).read_text())
        assert state["done"] == 10 and state["outcomes"] == {"created": 10}
        assert len(await rt.store.records_in_scope(U1)) == 10
        # The checkpoint lags one batch behind what committed (a crash between the two).
        state["done"] = 5
        checkpoint_path(file).write_text(json.dumps(state))
        resumed = await import_file(rt, file, batch_size=10)
        assert resumed.resumed_from == 5 and resumed.done == 30 and not resumed.interrupted
        assert resumed.outcomes == {"created": 30, "already_imported": 5}, resumed
        assert not checkpoint_path(file).exists() and resumed.checkpoint is None
        assert len(await rt.store.records_in_scope(U1)) == 30
        # Run once more from the top: every line is recognised, nothing is written.
        again = await import_file(rt, file)
        assert again.outcomes == {"already_imported": 30} and again.records == 0
        assert len(await rt.store.records_in_scope(U1)) == 30
        # A memory forgotten since stays forgotten when the file is imported again.
        await rt.host.grant("import", U1, read=True, write=True)
        first = (await rt.store.records_in_scope(U1))[0]
        forgot = await rt.tools.call(
            Principal("import", "u1"), "memory_forget", {"id": first.id, "reason": "asked"}
        )
        assert forgot["ok"], forgot
        assert (await import_file(rt, file, restart=True)).outcomes == {"already_imported": 30}
        assert len(await rt.store.records_in_scope(U1)) == 29
        done = [e["payload"] for e in await rt.store.events(kind="store.imported")]
        assert [(d["file"], d["records"]) for d in done] == [
            ("long.jsonl", 30),
            ("long.jsonl", 0),
            ("long.jsonl", 0),
        ]


def test_the_command_reports_an_interruption_and_the_next_run_goes_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = tmp_path / "c.sqlite"
    run("migrate", "--store", store)
    file = write_lines(
        tmp_path / "in.jsonl",
        [{"content": f"Aditya booked meeting room {i} for Thursday.", "scope": "user:u1"} for i in range(6)],
    )
    real = Importer._commit
    calls = {"n": 0}

    async def commit_then_stop(self: Importer, entries: list[Any], report: Any) -> None:
        calls["n"] += 1
        if calls["n"] == 2:
            raise KeyboardInterrupt
        await real(self, entries, report)

    monkeypatch.setattr(Importer, "_commit", commit_then_stop)
    runner = CliRunner()
    args = ["import", str(file), "--store", str(store), "--batch-size", "3", "--json"]
    stopped = runner.invoke(cli, args)
    assert stopped.exit_code == 130, stopped.output
    body = json.loads(stopped.stdout)
    assert body["ok"] is False and body["error"] == "interrupted" and body["done"] == 3
    assert "run the same command again" in body["message"] and checkpoint_path(file).exists()
    monkeypatch.setattr(Importer, "_commit", real)
    finished = runner.invoke(cli, args)
    assert finished.exit_code == 0, finished.output
    body = json.loads(finished.stdout)
    assert body["ok"] and body["resumed_from"] == 3 and body["outcomes"] == {"created": 6}, body
    text = runner.invoke(cli, ["import", str(file), "--store", str(store)])
    assert text.exit_code == 0 and "6 already_imported" in text.stdout.splitlines()[-1], text.output


@pytest.mark.parametrize("command", ["import", "export"])
def test_a_store_path_that_names_no_file_is_refused_and_not_created(tmp_path: Path, command: str) -> None:
    file = write_lines(tmp_path / "in.jsonl", [{"content": "x", "scope": "user:u1"}])
    missing = tmp_path / "work" / "memroy.sqlite"
    missing.parent.mkdir()
    args = [file] if command == "import" else ["-o", tmp_path / "work" / "out.jsonl"]
    proc = run(command, *args, "--store", missing, rc=1)
    assert proc.stdout == "" and proc.stderr.startswith("Error: no store at") and str(missing) in proc.stderr
    assert list(missing.parent.iterdir()) == []
    as_json = run(command, *args, "--store", missing, "--json", rc=1)
    assert json.loads(as_json.stdout)["error"] == "store"
    assert list(missing.parent.iterdir()) == [] and not checkpoint_path(file).exists()


def test_a_missing_input_file_is_refused_and_nothing_is_made(tmp_path: Path) -> None:
    store = tmp_path / "s.sqlite"
    run("migrate", "--store", store)
    proc = run("import", tmp_path / "nowhere.jsonl", "--store", store, rc=1)
    assert "no file to import" in proc.stderr and "nowhere.jsonl" in proc.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s.sqlite"]


def test_the_import_speed_benchmark_runs(tmp_path: Path) -> None:
    out = tmp_path / "speed.json"
    proc = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "import_speed.py"), "--records", "30", "--json", str(out)],
        capture_output=True, text=True, timeout=600, cwd=ROOT,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    data = json.loads(out.read_text())
    assert data["import"]["records"] == 30 and data["again"]["records"] == 0
    assert data["round_trip"]["outcomes"] == {"created": data["export"]["records"]}


@pytest.fixture(autouse=True)
def _no_leftover_checkpoints(tmp_path: Path) -> Iterator[None]:
    yield
    assert not list(tmp_path.glob("*.tmp")), "a checkpoint's scratch file was left behind"
