"""Shared by the UI integration and browser tests and scripts/ui_screenshots.py: store, server, browser.

* :func:`demo_store` writes the quickstart story (``make demo``) into a new SQLite file with
  the packaged embedder, then one more search, so every page has something to show.
* :class:`UiServer` runs ``retold ui`` as a subprocess on a free port and reads the address
  it prints.
* :func:`chromium` starts headless Chromium through Selenium with the flags that keep it
  offline. A missing browser is an error naming the package to install, never a skip.
"""

from __future__ import annotations

import asyncio
import os
import re
import subprocess
import sys
import threading
import time
from pathlib import Path
from types import TracebackType
from typing import Any

__all__ = ["CHROMEDRIVER", "CHROMIUM", "UiServer", "chromium", "demo_store"]

CHROMIUM = os.environ.get("RETOLD_CHROMIUM", "/usr/bin/chromium")
CHROMEDRIVER = os.environ.get("RETOLD_CHROMEDRIVER", "/usr/bin/chromedriver")
_SERVING = re.compile(r"serving on (http://\S+/)")


def demo_store(path: Path) -> None:
    """The quickstart story on a new store at ``path`` (quietly), plus the search a user then tries.

    The story forgot the timezone (the stated one and the agent's guess), so that search logs
    an honest empty answer rather than the unverified guess (issue 47 item 6d).
    """
    import retold
    from retold import Principal, SearchRequest
    from retold.quickstart import console, story

    console.quiet = True
    asyncio.run(story(path))

    async def more() -> None:
        async with retold.open_runtime(path) as rt:
            p = Principal(agent_id="planner", user_id="u1", session_id="s1")
            await rt.search(p, SearchRequest(queries=["which timezone is Aditya in"]))

    asyncio.run(more())


class UiServer:
    """``retold ui --store PATH --port 0 ...`` in a subprocess; ``url`` once it serves."""

    def __init__(self, store: Path | str, *args: str, env: dict[str, str] | None = None) -> None:
        self.command = [sys.executable, "-m", "retold", "ui", "--store", str(store), "--port", "0", *args]
        self.env = {**os.environ, **(env or {})}
        self.url = ""
        self.stderr: list[str] = []
        self._proc: subprocess.Popen[str] | None = None

    def __enter__(self) -> UiServer:
        self._proc = subprocess.Popen(
            self.command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=self.env
        )
        found = threading.Event()

        def read() -> None:
            assert self._proc is not None and self._proc.stderr is not None
            for line in self._proc.stderr:
                self.stderr.append(line)
                match = _SERVING.search(line)
                if match and not self.url:
                    self.url = match.group(1)
                    found.set()

        threading.Thread(target=read, daemon=True).start()
        deadline = time.monotonic() + 120
        while not found.wait(0.2):
            if self._proc.poll() is not None or time.monotonic() > deadline:
                self.__exit__(None, None, None)
                raise RuntimeError(f"retold ui did not start: {''.join(self.stderr)[-2000:]}")
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._proc is not None and self._proc.poll() is None:
            self._proc.terminate()
            try:
                self._proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()


def chromium(profile: Path, *, width: int = 1280, height: int = 900) -> Any:
    """Headless Chromium driven by Selenium, offline, with its own profile directory."""
    missing = [p for p in (CHROMIUM, CHROMEDRIVER) if not Path(p).exists()]
    if missing:
        raise RuntimeError(
            f"{', '.join(missing)} not found: install the browser (apt-get install -y chromium "
            "chromium-driver) or point RETOLD_CHROMIUM / RETOLD_CHROMEDRIVER at it"
        )
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in (
        "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync",
        f"--user-data-dir={profile}", f"--window-size={width},{height}", "--hide-scrollbars",
    ):  # fmt: skip
        options.add_argument(flag)
    return webdriver.Chrome(options=options, service=Service(CHROMEDRIVER))
