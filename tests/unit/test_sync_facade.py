"""``retold.open_runtime_sync``: the async API without await, from threads, loops and plain code."""

from __future__ import annotations

import asyncio
import gc
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

import retold
from retold import Principal, Scope, SearchRequest
from retold.errors import InvalidArgumentError, StoreClosedError
from retold.testing import FakeEmbedder, FakeJudge


def _open(path: Path | str) -> retold.SyncRuntime:
    return retold.open_runtime_sync(path, embedder=FakeEmbedder(), judge=FakeJudge())


def _provisioned(rt: retold.SyncRuntime, user: str = "u1") -> Principal:
    rt.host.provision_user(user)
    rt.host.grant("planner", Scope("user", user), read=True, write=True)
    p = Principal(agent_id="planner", user_id=user, session_id=f"s-{user}")
    rt.hooks.on_session_start(p)
    return rt.hooks.on_turn(p, "user", "I prefer concise answers without any preamble.")


def _write(rt: retold.SyncRuntime, p: Principal, content: str) -> dict[str, object]:
    return rt.tools.call(
        p, "memory_write", {"type": "semantic", "content": content, "attribute": "answer_style"}
    )


def test_the_async_api_without_await(store_location) -> None:
    with _open(store_location("sync.sqlite")) as rt:
        p = _provisioned(rt)
        result = _write(rt, p, "Prefers concise answers without preamble.")
        assert result["ok"] is True and result["outcome"] == "created"
        assert next(t["name"] for t in rt.tools.tool_schemas(p)) == "memory_search"
        response = rt.search(p, SearchRequest(queries=["concise answers"]))
        assert [r.record.id for r in response.results] == [result["record_id"]]
        assert rt.ops.record_report(result["record_id"])["record"].id == result["record_id"]
        assert rt.profile(p) == ""  # no evidence given: an inference never enters the profile
        p = rt.hooks.on_turn(p, "user", "Please always answer me in French.")
        said = rt.tools.call(p, "memory_write", {
            "type": "semantic", "content": "Prefers answers in French", "attribute": "answer_language",
            "source_kind": "user_statement", "evidence": "Please always answer me in French.",
        })  # fmt: skip
        assert said["activation"] == "ambient" and "> Prefers answers in French" in rt.profile(p)
        assert rt.config.store.path and not rt.closed
        rt.hooks.on_session_end(p)
    assert rt.closed


def test_errors_are_the_async_apis_exceptions(store_location) -> None:
    with _open(store_location("errors.sqlite")) as rt:
        with pytest.raises(InvalidArgumentError):
            rt.host.grant("", Scope("user", "u1"), read=True)
        p = _provisioned(rt)
        refused = rt.tools.call(p, "memory_get", {"ids": ["not-a-record"]})
        assert refused["ok"] is False and refused["error"] == "not_found"


def test_safe_from_many_threads_at_once(store_location) -> None:
    with _open(store_location("threads.sqlite")) as rt:
        principals = [_provisioned(rt, f"u{i}") for i in range(4)]

        def work(i: int) -> tuple[str, list[str]]:
            p = principals[i % 4]
            written = _write(rt, p, f"Thread {i} says user {p.user_id} likes topic{i} best.")
            found = rt.search(p, SearchRequest(queries=[f"topic{i}"]))
            return str(written["record_id"]), [r.record.id for r in found.results]

        with ThreadPoolExecutor(max_workers=8) as pool:
            results = list(pool.map(work, range(16)))
        for i, (record_id, found) in enumerate(results):
            assert record_id in found, i
            owners = {rt.ops.record_report(r)["record"].scope.id for r in found}
            assert owners == {f"u{i % 4}"}  # never another thread's user


def test_callable_inside_a_running_event_loop(store_location) -> None:
    """A notebook cell runs on a live loop: the facade blocks it briefly instead of deadlocking."""
    with _open(store_location("notebook.sqlite")) as rt:
        p = _provisioned(rt)

        async def cell() -> dict[str, object]:
            return _write(rt, p, "Prefers concise answers without preamble.")

        assert asyncio.run(cell())["ok"] is True


def test_a_call_on_the_owning_loop_is_refused_not_deadlocked(store_location) -> None:
    with _open(store_location("own.sqlite")) as rt:
        p = _provisioned(rt)

        async def on_owner() -> None:
            rt.tools.call(p, "memory_get", {"ids": ["x"]})

        with pytest.raises(RuntimeError, match="await it instead"):
            rt.run(on_owner())
        assert rt.tools.call(p, "memory_get", {"ids": ["x"]})["error"] == "not_found"  # still usable


def test_close_is_clean_idempotent_and_final(store_location) -> None:
    rt = _open(store_location("close.sqlite"))
    p = _provisioned(rt)
    rt.close()
    rt.close()
    assert rt.closed and rt._portal.loop.is_closed()
    with pytest.raises((StoreClosedError, RuntimeError)):
        rt.search(p, SearchRequest(queries=["anything"]))


def test_an_unclosed_facade_is_closed_when_collected(tmp_path: Path) -> None:
    rt = _open(tmp_path / "gc.sqlite")
    _write(rt, _provisioned(rt), "Prefers concise answers without preamble.")
    runtime, loop, thread = rt.runtime, rt._portal.loop, rt._portal._thread
    del rt
    gc.collect()
    assert runtime.closed and loop.is_closed() and not thread.is_alive()
    with _open(tmp_path / "gc.sqlite") as again:  # nothing acknowledged was lost
        p = Principal(agent_id="planner", user_id="u1", session_id="s2")
        found = again.search(p, SearchRequest(queries=["concise answers"]))
        assert [r.record.content for r in found.results] == ["Prefers concise answers without preamble."]


def test_adapters_built_on_the_facade_find_its_loop(tmp_path: Path) -> None:
    from retold.adapters.portal import LoopBridge

    with _open(tmp_path / "bridge.sqlite") as rt:
        bridge = LoopBridge(rt.runtime)
        assert bridge.loop is rt._portal.loop
        assert bridge.call(lambda: rt.runtime.host.grants("planner")) == []
