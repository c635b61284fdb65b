"""Shared fixtures for the unit suite: a fake clock, default config, a real SQLite store, factories."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from retold.config import Config
from retold.models import Entity, Record
from retold.store import Store
from retold.testing import FakeClock

from .factories import MakeEntity, MakeRecord, build_entity, build_record


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def config() -> Config:
    return Config()


@pytest.fixture
def store_path(store_location: Any) -> Path | str:
    """A SQLite file, or the URL of a fresh PostgreSQL database holding the schema."""
    return store_location("memory.sqlite")


@pytest.fixture
async def store(store_path: Path, clock: FakeClock) -> AsyncIterator[Store]:
    """An opened store on ``tmp_path / "memory.sqlite"`` reading time from ``clock``."""
    opened = await Store.open(store_path, clock=clock)
    try:
        yield opened
    finally:
        await opened.close()


@pytest.fixture
def make_record(clock: FakeClock) -> MakeRecord:
    """``make_record(content="...", status="provisional")`` → a Record timed at ``clock.now()``."""

    def make(**overrides: Any) -> Record:
        return build_record(clock.now(), **overrides)

    return make


@pytest.fixture
def make_entity(clock: FakeClock) -> MakeEntity:
    """``make_entity("Aditya")`` → a confirmed person in ``user:u1`` aliased by its normalised name."""

    def make(canonical: str = "Aditya", **overrides: Any) -> Entity:
        return build_entity(clock.now(), canonical, **overrides)

    return make


@pytest.fixture
async def world(store_path: Path | str) -> AsyncIterator[Any]:
    """A runtime on fakes with user u1 provisioned ("Aditya"), planner granted, session s1 open."""
    from .writepath import make_world

    w = await make_world(store_path)
    try:
        yield w
    finally:
        await w.rt.close()
