"""Builders for the unit suite's records and entities, with sane defaults and keyword overrides."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

from retold.models import Entity, Record, Scope
from retold.util import new_id, normalize_alias

__all__ = ["MakeEntity", "MakeRecord", "build_entity", "build_record"]

MakeRecord = Callable[..., Record]
MakeEntity = Callable[..., Entity]


def build_record(now: datetime, **overrides: Any) -> Record:
    """A confirmed semantic user statement in ``user:u1`` created and dated ``now``."""
    values: dict[str, Any] = {
        "id": new_id(),
        "type": "semantic",
        "version": 1,
        "content": "Aditya prefers concise answers",
        "subject": "-",
        "subject_entity_id": None,
        "attribute": None,
        "scope": Scope("user", "u1"),
        "source_kind": "user_statement",
        "source_ref": None,
        "creator_agent_id": "planner",
        "evidence": None,
        "created_at": now,
        "event_at": now,
        "expires_at": None,
        "valid_from": None,
        "valid_until": None,
        "review_at": None,
        "review_flagged_at": None,
        "confidence": 0.95,
        "status": "confirmed",
        "supersedes_id": None,
        "reinforcements": 0,
        "last_reinforced_at": None,
        "tags": [],
        "entity_ids": [],
    }
    unknown = set(overrides) - set(values) - {"index_version"}
    if unknown:
        raise TypeError(f"build_record got unknown field(s): {sorted(unknown)}")
    values.update(overrides)
    return Record(**values)


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
