"""`make demo`'s story with the real packaged embedder: every step lands as the README says."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import retold
from retold import Principal, Scope, SearchRequest
from retold.quickstart import story

pytestmark = pytest.mark.integration

ROOT = Path(__file__).parents[2]


def _forgotten(text: str) -> list[tuple[str, str]]:
    """(short id, timezone) of each `memory_forget [id] "Aditya's timezone is ..."` line printed."""
    found = re.findall(r"memory_forget \[([0-9a-f]{12})\] \"Aditya's timezone is (CET|PST)\.\"", text)
    assert sorted(tz for _, tz in found) == ["CET", "PST"], text
    return found


async def test_the_quickstart_story_holds(tmp_path: Path) -> None:
    out = await story(tmp_path / "demo.sqlite")
    assert (out["concise"]["outcome"], out["concise"]["status"]) == ("created", "confirmed")
    assert (out["guess"]["status"], out["guess"]["note"]) == ("provisional", "evidence not provided")
    assert out["rust"]["status"] == "provisional"
    assert out["rust"]["note"] == "downgraded from user_statement: quote is from a assistant turn"
    assert out["detailed"]["outcome"] == f"superseded:{out['concise']['record_id']}"
    assert out["pst"]["outcome"] == f"conflict:{out['cet']['record_id']}"
    assert out["pst"]["status"] == "provisional"
    found = out["found"]["results"]
    assert [r["record_id"] for r in found] == [out["detailed"]["record_id"]]
    assert found[0]["explanation"].startswith("matched: dense")
    assert out["empty"]["results"] == [] and out["empty"]["empty_reason"].startswith("best dense")
    assert "no relevant memory" in out["empty"]["rendered"]
    record = out["got"]["records"][0]
    assert [r["record_id"] for r in record["supersedes"]] == [out["concise"]["record_id"]]
    assert record["evidence"] == "I now prefer detailed answers with examples"
    assert out["forgot"]["tombstone"] is True and "not erased" in out["forgot"]["note"]


async def test_the_forget_step_names_what_it_forgot_and_leaves_no_guess_to_answer(tmp_path: Path) -> None:
    """The user's timezone goes, the stated CET and the unverified PST guess alike (issue 47 item 6d).

    Forgetting only CET left the agent's PST guess as the answer `retold ui`'s search then
    showed; the step now forgets what the search about the timezone returned, naming each.
    """
    path = tmp_path / "demo.sqlite"
    out = await story(path)
    timezone = {out["cet"]["record_id"], out["pst"]["record_id"]}
    assert {r["record_id"] for r in out["held"]["results"]} == timezone  # the conflict, both sides
    forgotten = out["forgot"]["records"]
    assert {f["record_id"] for f in forgotten} == timezone and all(f["tombstone"] for f in forgotten)
    assert {(f["short_id"], f["content"]) for f in forgotten} == {
        (out["cet"]["record_id"][-12:], "Aditya's timezone is CET."),
        (out["pst"]["record_id"][-12:], "Aditya's timezone is PST."),
    }
    assert out["after"]["results"] == [] and "no relevant memory" in out["after"]["rendered"]
    async with retold.open_runtime(path) as rt:  # what `retold ui` then searches and lists
        p = Principal(agent_id="planner", user_id="u1", session_id="s1")
        asked = await rt.search(p, SearchRequest(queries=["which timezone is Aditya in"]))
        assert [r.record.content for r in asked.results] == []
        live = {r.content: r.status for r in await rt.store.records_in_scope(Scope("user", "u1"))}
        assert not any("timezone" in content for content in live)
        assert live["Aditya works night shifts."] == "provisional"  # the other guess stays, provisional


def test_retold_demo_and_the_example_script_tell_the_story(tmp_path: Path) -> None:
    env = {**os.environ, "COLUMNS": "200"}
    for command in (
        [sys.executable, "-m", "retold", "demo", "--store", str(tmp_path / "a.sqlite")],
        [sys.executable, str(ROOT / "examples" / "quickstart.py"), str(tmp_path / "b.sqlite")],
    ):
        done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=300, cwd=ROOT)
        assert done.returncode == 0, done.stderr
        text = done.stdout
        expected = ["created, confirmed", "evidence not provided", "superseded:", "conflict:"]
        expected += ["memory_search: 1 result", "no relevant memory", "replaced", "tombstone True"]
        expected += ["memory_search: 2 results", "-> no relevant memory"]
        expected += [f'[{short}] "Aditya\'s timezone is {tz}."' for short, tz in _forgotten(text)]
        for line in expected:
            assert line in text, (line, text)
    again = subprocess.run(
        [sys.executable, "-m", "retold", "demo", "--store", str(tmp_path / "a.sqlite")],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert again.returncode != 0 and "already exists" in again.stderr


def test_make_demo_keeps_its_store_once_and_never_overwrites_it(tmp_path: Path) -> None:
    """`make demo` runs `examples/quickstart.py --keep-in memory.sqlite` for `retold ui` to show."""
    kept = tmp_path / "memory.sqlite"
    command = [sys.executable, str(ROOT / "examples" / "quickstart.py"), "--keep-in", str(kept)]
    env = {**os.environ, "COLUMNS": "200"}
    first = subprocess.run(command, capture_output=True, text=True, env=env, timeout=300, cwd=tmp_path)
    assert first.returncode == 0, first.stderr
    assert kept.exists() and "kept the demo store" in " ".join(first.stdout.split())
    before = kept.stat().st_mtime_ns, kept.stat().st_size
    second = subprocess.run(command, capture_output=True, text=True, env=env, timeout=300, cwd=tmp_path)
    assert second.returncode == 0, second.stderr
    said = " ".join(second.stdout.split())  # rich wraps long paths
    assert "left as it was" in said and "tombstone True" in said  # the story ran again
    assert (kept.stat().st_mtime_ns, kept.stat().st_size) == before
