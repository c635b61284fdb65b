"""Fixtures every contract test module shares."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from retold.config import Config

from .scripted import Memory, open_memory


@pytest.fixture
def memory_config() -> Config | None:
    """The config of :func:`memory`; a module overrides this fixture to change it."""
    return None


@pytest.fixture
async def memory(tmp_path: Path, memory_config: Config | None) -> AsyncIterator[Memory]:
    """A runtime on fakes (see :func:`open_memory`), closed after the test whatever its outcome."""
    m = await open_memory(tmp_path / "memory.sqlite", memory_config)
    yield m
    await m.rt.close()
