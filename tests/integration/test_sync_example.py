"""examples/sync_quickstart.py runs offline with the packaged embedder and prints what it promises."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.integration


def test_sync_quickstart(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "sync_quickstart.py"), str(tmp_path / "memory.sqlite")],
        capture_output=True,
        text=True,
        timeout=180,
        env={**os.environ, "HOME": str(tmp_path)},
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.splitlines() == [
        "memory_write: created (confirmed)",
        "search: ['Aditya prefers concise answers.']",
    ]
