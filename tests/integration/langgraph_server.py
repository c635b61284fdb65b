"""Waiting for a `langgraph dev` server the test started: the tests that serve one share this."""

from __future__ import annotations

import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path


def wait_until_ready(proc: subprocess.Popen[bytes], base: str, log: Path, *, timeout_s: float = 90) -> None:
    """Return once ``base + "/ok"`` answers 200; fail with the server log if it exits or times out."""
    deadline = time.monotonic() + timeout_s
    while True:
        if proc.poll() is not None:
            raise AssertionError(log.read_text(errors="replace")[-4000:])
        try:
            with urllib.request.urlopen(base + "/ok", timeout=2) as response:
                if response.status == 200:
                    return
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            pass
        if time.monotonic() > deadline:
            raise AssertionError(f"langgraph dev did not answer /ok within {timeout_s:g} s")
        time.sleep(0.3)
