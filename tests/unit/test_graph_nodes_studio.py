"""The ``langgraph dev`` factories share one runtime, whichever event loop asks for it first."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from typing import Any

import pytest

from retold.graph_nodes import studio


def test_the_runtime_is_opened_once_for_factories_on_several_loops(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The server calls the factories on more than one loop at once; an asyncio lock would bind to one."""
    monkeypatch.setenv("RETOLD_STORE", str(tmp_path / "memory.sqlite"))
    monkeypatch.delenv("RETOLD_CONFIG", raising=False)
    monkeypatch.setattr(studio, "_opened", {})
    count = 4
    barrier = threading.Barrier(count)
    results: list[Any] = [None] * count
    errors: list[BaseException] = []

    def ask(index: int) -> None:
        try:
            barrier.wait(timeout=30)
            results[index] = asyncio.run(asyncio.wait_for(studio.runtime(), timeout=60))
        except BaseException as exc:  # surfaced below, in the test's thread
            errors.append(exc)

    threads = [threading.Thread(target=ask, args=(i,)) for i in range(count)]
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=90)
        assert not any(thread.is_alive() for thread in threads)
        assert errors == []
        assert results[0] is not None and all(rt is results[0] for rt in results)
        assert studio._opened["portal"].runtime is results[0]
    finally:
        portal = studio._opened.get("portal")
        if portal is not None:
            portal.close()
