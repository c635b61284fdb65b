"""Fixtures every contract test module shares."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest

from retold.config import Config

from .scripted import Memory, open_memory


@pytest.fixture
def memory_config() -> Config | None:
    """The config of :func:`memory`; a module overrides this fixture to change it."""
    return None


@pytest.fixture
async def memory(
    store_location: Callable[[str], Path | str], memory_config: Config | None
) -> AsyncIterator[Memory]:
    """A runtime on fakes (see :func:`open_memory`) on each backend, closed after the test."""
    m = await open_memory(store_location("memory.sqlite"), memory_config)
    yield m
    await m.rt.close()
