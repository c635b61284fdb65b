"""Servers warm the embedder in the background at start: scheduled, reported, never fatal (issue 47)."""

from __future__ import annotations

import asyncio
import importlib
import importlib.util
import os
import sys
import threading
import time
import types
from pathlib import Path
from typing import Any

import pytest

import retold
from retold.errors import ConfigError
from retold.index import threads
from retold.testing import FakeEmbedder, FakeJudge


class SlowEmbedder(FakeEmbedder):
    """A FakeEmbedder whose ``warm`` takes ``load_s`` (or waits for ``release``), or raises ``error``."""

    def __init__(self, load_s: float = 0.0, error: Exception | None = None) -> None:
        super().__init__()
        self.load_s = load_s
        self.error = error
        self.release: threading.Event | None = None
        self.warmed = 0
        self.started = threading.Event()

    def warm(self) -> None:
        self.started.set()
        if self.release is not None:
            self.release.wait(30)
        time.sleep(self.load_s)
        if self.error is not None:
            raise self.error
        self.warmed += 1


async def test_the_warm_up_is_scheduled_reported_and_started_once(tmp_path: Path) -> None:
    embedder = SlowEmbedder(load_s=0.2)
    lines: list[str] = []
    async with retold.open_runtime(tmp_path / "m.sqlite", embedder=embedder, judge=FakeJudge()) as rt:
        begun = time.perf_counter()
        task = rt.warm_in_background(lines.append)
        assert time.perf_counter() - begun < 0.1  # returns at once: the server does not wait
        assert lines == ["retold: warming the embedder in the background"]
        assert rt.warm_in_background(lines.append) is task  # a second call joins the first
        assert await task is True
        assert embedder.warmed >= 1 and rt.dense.is_loaded
        assert len(lines) == 2 and lines[1].startswith("retold: the embedder is ready in ")
        assert lines[1].endswith(" s")
        assert rt.warm_in_background(lines.append) is task and len(lines) == 2  # done: nothing new


async def test_a_failed_warm_up_is_reported_and_the_runtime_serves_on(tmp_path: Path) -> None:
    embedder = SlowEmbedder(error=RuntimeError("no weights here"))
    lines: list[str] = []
    async with retold.open_runtime(tmp_path / "m.sqlite", embedder=embedder, judge=FakeJudge()) as rt:
        assert await rt.warm_in_background(lines.append) is False
        assert lines[-1] == (
            "retold: warming the embedder failed (RuntimeError: no weights here); "
            "the first call that embeds will try to load it again"
        )
        p = await rt.hooks.on_session_start(retold.Principal(agent_id="a", user_id="u1", session_id="s1"))
        await rt.host.grant("a", retold.Scope("user", "u1"), read=True, write=True)
        response = await rt.search(p, retold.SearchRequest(queries=["anything"]))
        assert response.results == []
        embedder.error = None  # a later warm-up tries again
        assert await rt.warm_in_background(lines.append) is True


async def test_close_does_not_wait_for_a_load_in_flight(tmp_path: Path) -> None:
    embedder = SlowEmbedder()
    embedder.release = threading.Event()
    rt = await retold.open_runtime(tmp_path / "m.sqlite", embedder=embedder, judge=FakeJudge())
    task = rt.warm_in_background(lambda line: None)
    await asyncio.to_thread(embedder.started.wait, 10)
    begun = time.perf_counter()
    await rt.close()
    assert time.perf_counter() - begun < 5 and task.cancelled()
    embedder.release.set()  # the abandoned load ends in its thread


def test_the_ui_warms_at_start_and_serves_when_the_warm_up_fails(tmp_path: Path) -> None:
    from starlette.testclient import TestClient

    from retold.ui import UiSettings, create_app

    for error in (None, RuntimeError("broken model")):
        embedder = SlowEmbedder(error=error)
        lines: list[str] = []
        path = tmp_path / f"ui-{error is None}.sqlite"
        app = create_app(
            lambda path=path, embedder=embedder: retold.open_runtime(
                path, embedder=embedder, judge=FakeJudge()
            ),
            UiSettings(),
            warm_report=lines.append,
        )
        with TestClient(app, base_url="http://127.0.0.1") as http:
            assert lines[0] == "retold: warming the embedder in the background"
            assert http.get("/").status_code == 200
            deadline = time.monotonic() + 10
            while len(lines) < 2 and time.monotonic() < deadline:
                time.sleep(0.02)
            assert http.get("/").status_code == 200
        expected = "ready in" if error is None else "failed (RuntimeError: broken model)"
        assert expected in lines[1]


def test_mcp_warms_in_the_background_and_says_so_on_stderr_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``retold mcp`` schedules the warm-up before serving; stdout (the stdio transport) stays clean."""
    from retold.adapters import mcp as mcp_adapter

    mcp_cli = importlib.import_module("retold.cli.mcp")  # retold.cli.mcp is also the command's name

    embedder = SlowEmbedder(error=RuntimeError("no torch"))
    seen: dict[str, Any] = {}
    real_open = retold.open_runtime

    def fake_open(path: Any, config: Any = None) -> Any:
        return real_open(path, config, embedder=embedder, judge=FakeJudge())

    async def fake_stdio(rt: Any, principal: Any) -> None:
        seen["scheduled"] = rt._warming is not None
        seen["result"] = await rt._warming  # the warm-up fails; the server is still serving

    monkeypatch.setenv(threads.THREADS_ENV, "0")  # leave this process's torch settings alone
    monkeypatch.setattr("retold.runtime.open_runtime", fake_open)
    monkeypatch.setattr(mcp_adapter, "serve_stdio", fake_stdio)
    principal = retold.Principal(agent_id="a", user_id="u1", session_id="s1")
    asyncio.run(mcp_cli._serve(str(tmp_path / "m.sqlite"), None, principal, None, "s1", False, "", 0))
    out = capsys.readouterr()
    assert seen == {"scheduled": True, "result": False}
    assert out.out == ""
    assert "retold: warming the embedder in the background" in out.err
    assert "retold: warming the embedder failed (RuntimeError: no torch)" in out.err

    async def fake_http(app: Any, *, port: int, on_ready: Any) -> None:  # over HTTP: once it serves
        seen["before"] = app.rt._warming
        on_ready(8765)
        seen["result"] = await app.rt._warming

    monkeypatch.setattr(importlib.import_module("retold.adapters.mcp_http"), "serve_http", fake_http)
    asyncio.run(mcp_cli._serve(str(tmp_path / "m.sqlite"), None, principal, None, "s1", True, "127.0.0.1", 0))
    lines = capsys.readouterr().err.splitlines()
    assert seen["before"] is None and seen["result"] is False
    assert lines[:2] == [
        "retold mcp: serving on http://127.0.0.1:8765/mcp",  # still the first line
        "retold: warming the embedder in the background",
    ]


def test_the_studio_module_loaded_by_path_shares_the_package_modules_runtime() -> None:
    """langgraph dev loads studio.py by path, as another module; make_store imports it by name."""
    from retold.graph_nodes import studio

    spec = importlib.util.spec_from_file_location("retold__graph_nodes__studio", studio.__file__)
    assert spec is not None and spec.loader is not None
    copy = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(copy)
    assert copy._opened is studio._opened and copy._lock is studio._lock


def test_warm_at_start_opens_the_studio_runtime_and_warms_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from retold.adapters.portal import RuntimePortal
    from retold.graph_nodes import studio

    embedder = SlowEmbedder(load_s=0.1)
    portal = RuntimePortal.open(tmp_path / "m.sqlite", embedder=embedder, judge=FakeJudge())
    lines: list[str] = []
    monkeypatch.setattr(studio, "_opened", {"portal": portal, "runtime": portal.runtime})
    monkeypatch.setattr(studio, "_report", lines.append)
    monkeypatch.setenv(threads.THREADS_ENV, "0")  # leave this process's torch settings alone
    try:
        studio.warm_at_start().join(10)
        assert lines == ["retold: warming the embedder in the background"]
        assert portal.run(_result(portal.runtime)) is True
        assert lines[1].startswith("retold: the embedder is ready in ")
    finally:
        portal.close()


async def _result(rt: Any) -> Any:
    return await rt._warming


def test_warm_at_start_reports_a_runtime_that_cannot_open(monkeypatch: pytest.MonkeyPatch) -> None:
    from retold.graph_nodes import studio

    lines: list[str] = []

    def refuse() -> Any:
        raise ConfigError("bad RETOLD_CONFIG")

    monkeypatch.setattr(studio, "_open_runtime", refuse)
    monkeypatch.setattr(studio, "_report", lines.append)
    studio.warm_at_start().join(10)
    assert lines == ["retold: could not open the runtime to warm it (ConfigError: bad RETOLD_CONFIG)"]


# --- torch's threads ---------------------------------------------------------------------------


def test_the_wait_policy_is_set_only_before_torch_loads(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(threads.THREADS_ENV, raising=False)
    monkeypatch.delenv("OMP_WAIT_POLICY", raising=False)
    monkeypatch.delitem(sys.modules, "torch", raising=False)
    threads.configure_torch_threads()
    assert os.environ["OMP_WAIT_POLICY"] == "PASSIVE"
    monkeypatch.setenv("OMP_WAIT_POLICY", "ACTIVE")  # the user's choice stays
    threads.configure_torch_threads()
    assert os.environ["OMP_WAIT_POLICY"] == "ACTIVE"
    monkeypatch.delenv("OMP_WAIT_POLICY")
    monkeypatch.setitem(sys.modules, "torch", types.ModuleType("torch"))  # too late: not touched
    threads.configure_torch_threads()
    assert "OMP_WAIT_POLICY" not in os.environ


def test_retold_torch_threads_sets_the_threads_or_leaves_torch_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = types.ModuleType("torch")
    calls: list[int] = []
    fake.get_num_threads = lambda: 2  # type: ignore[attr-defined]
    fake.set_num_threads = calls.append  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "torch", fake)
    monkeypatch.delenv("OMP_WAIT_POLICY", raising=False)
    monkeypatch.setenv(threads.THREADS_ENV, "1")
    threads.configure_torch_threads()
    assert calls == [1]
    monkeypatch.setenv(threads.THREADS_ENV, "0")
    monkeypatch.delitem(sys.modules, "torch")
    threads.configure_torch_threads()
    assert calls == [1] and "OMP_WAIT_POLICY" not in os.environ
    for bad in ("two", "-1"):
        monkeypatch.setenv(threads.THREADS_ENV, bad)
        with pytest.raises(ConfigError, match=threads.THREADS_ENV):
            threads.configure_torch_threads()
