"""The LangGraph-side examples run offline, end to end, and tell the story their docstrings promise."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def run_example(name: str, tmp_path: Path) -> list[str]:
    env = {**os.environ, "HOME": str(tmp_path), "LANGSMITH_TRACING": "false"}
    proc = subprocess.run(
        [sys.executable, str(ROOT / "examples" / name), str(tmp_path / "memory.sqlite")],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout.splitlines()


def test_deepagents_example(tmp_path: Path) -> None:
    assert run_example("deepagents_memory.py", tmp_path) == [
        "session s1: saved the preference",
        "session s2 recalled: > Prefers concise answers without preamble.",
        "record: Prefers concise answers without preamble. [superseded]",
        "record: Prefers detailed answers with examples. [confirmed]",
    ]


def test_custom_graph_example(tmp_path: Path) -> None:
    assert run_example("custom_graph_memory.py", tmp_path) == [
        "s1: reply 'Noted.'; recalled blocks: 0",
        "s2: reply 'Here is the summary, short and direct.'; recalled blocks: 1",
        "s2 turn 1 user: Summarise the meeting in concise answers without preamble",
        "s2 turn 2 assistant: Here is the summary, short and direct.",
    ]
