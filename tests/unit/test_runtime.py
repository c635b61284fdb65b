"""open_runtime: awaitable and async context manager, model injection, config loading, close."""

from __future__ import annotations

from pathlib import Path

import pytest

import retold
from retold.config import Config
from retold.errors import ConfigError, InvalidArgumentError, StoreClosedError
from retold.host import MemoryHost
from retold.models import Scope
from retold.store import Store
from retold.testing import FakeClock, FakeEmbedder, FakeJudge


async def test_awaited_runtime_has_a_host_and_a_store(tmp_path: Path) -> None:
    path = tmp_path / "memory.sqlite"
    rt = await retold.open_runtime(path)
    try:
        assert isinstance(rt, retold.Runtime)
        assert isinstance(rt.store, Store)
        assert isinstance(rt.host, MemoryHost)
        assert isinstance(rt.config, Config)
        assert rt.store.path == str(path)
        assert await rt.store.schema_version() == Store.latest_schema_version()
        # Models default to config: the packaged embedder (not loaded until used) and its judge.
        assert rt.embedder.name == "sentence-transformers/all-MiniLM-L6-v2" and not rt.embedder.is_loaded
        assert rt.judge.name == "conservative"
    finally:
        await rt.close()
    assert path.exists()


async def test_runtime_as_context_manager_uses_the_given_clock_and_models(tmp_path: Path) -> None:
    clock, embedder, judge = FakeClock(), FakeEmbedder(dims=16), FakeJudge()
    async with retold.open_runtime(tmp_path / "m.sqlite", clock=clock, embedder=embedder, judge=judge) as rt:
        assert rt.embedder is embedder
        assert rt.judge is judge
        assert rt.clock is clock and rt.store.clock is clock
        await rt.host.grant("planner", Scope("user", "u1"), read=True, write=True)
        (event,) = await rt.store.events(kind="grant.changed")
        assert event["at"].startswith("2026-01-01T12:00:00")
    assert rt.closed


async def test_close_twice_is_fine_and_later_use_raises(tmp_path: Path) -> None:
    rt = await retold.open_runtime(tmp_path / "m.sqlite")
    await rt.close()
    await rt.close()
    assert rt.closed and rt.store.db.closed
    with pytest.raises(StoreClosedError):
        await rt.store.get_record("anything")
    with pytest.raises(StoreClosedError):
        await rt.host.grant("planner", Scope("user", "u1"))


async def test_data_survives_reopening(tmp_path: Path) -> None:
    path = tmp_path / "m.sqlite"
    async with retold.open_runtime(path) as rt:
        await rt.host.grant("planner", Scope("org", "acme"))
    async with retold.open_runtime(path) as rt:
        assert [g.scope for g in await rt.host.grants("planner")] == [Scope("org", "acme")]


async def test_config_is_loaded_from_a_yaml_path(tmp_path: Path) -> None:
    config_path = tmp_path / "retold.yaml"
    config_path.write_text("ingestion:\n  provisional_ttl_days: 7\n", encoding="utf-8")
    async with retold.open_runtime(tmp_path / "m.sqlite", config=str(config_path)) as rt:
        assert rt.config.ingestion.provisional_ttl_days == 7
    async with retold.open_runtime(tmp_path / "m.sqlite", config=config_path) as rt:
        assert rt.config.ingestion.provisional_ttl_days == 7


async def test_store_path_defaults_to_the_config(tmp_path: Path) -> None:
    path = tmp_path / "from-config.sqlite"
    config = Config().override({"store.path": str(path)})
    async with retold.open_runtime(config=config) as rt:
        assert rt.store.path == str(path)
    assert path.exists()


async def test_invalid_config_type_raises(tmp_path: Path) -> None:
    with pytest.raises(InvalidArgumentError, match="config must be"):
        await retold.open_runtime(tmp_path / "m.sqlite", config=42)  # type: ignore[arg-type]
    assert not (tmp_path / "m.sqlite").exists()


async def test_missing_config_file_raises_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="not found"):
        await retold.open_runtime(tmp_path / "m.sqlite", config=tmp_path / "absent.yaml")
