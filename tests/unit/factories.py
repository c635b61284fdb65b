"""Builders for the unit suite's records and entities, with sane defaults and keyword overrides."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

from retold.models import Entity, Record, Scope
from retold.testing import record_for_tests
from retold.util import new_id, normalize_alias

__all__ = ["MakeEntity", "MakeRecord", "build_entity", "build_record"]

MakeRecord = Callable[..., Record]
MakeEntity = Callable[..., Entity]


def build_record(now: datetime, **overrides: Any) -> Record:
    """A confirmed semantic user statement in ``user:u1`` created and dated ``now``."""
    return record_for_tests(now, **overrides)


def build_entity(now: datetime, canonical: str = "Aditya", **overrides: Any) -> Entity:
    """A confirmed person in ``user:u1`` whose only alias is its normalised canonical name."""
    values: dict[str, Any] = {
        "id": new_id(),
        "kind": "person",
        "canonical": canonical,
        "scope": Scope("user", "u1"),
        "status": "confirmed",
        "merged_into": None,
        "aliases": [normalize_alias(canonical)],
        "created_at": now,
    }
    values.update(overrides)
    return Entity(**values)


async def every_table(store: Any) -> list[str]:
    """Every table of the store, its lexical index's own included: for whole-store fingerprints."""
    if store.dialect == "postgresql":
        sql = "SELECT tablename FROM pg_tables WHERE schemaname = current_schema() ORDER BY tablename"
    else:
        sql = "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name"
    return list(await store.db.fetch_column(sql))
