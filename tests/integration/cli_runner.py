"""Run the ``retold`` CLI as a user would: a subprocess, its exit code checked."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path


def run(*args: str | Path, rc: int | None = 0, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """``python -m retold ARGS``; asserts the exit code unless ``rc`` is None."""
    proc = subprocess.run(
        [sys.executable, "-m", "retold", *map(str, args)], capture_output=True, text=True, timeout=timeout
    )
    if rc is not None:
        assert proc.returncode == rc, (proc.returncode, proc.stdout, proc.stderr)
    return proc
