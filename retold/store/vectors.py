"""Bulk embedding reads for the in-memory vector index (spec §7): full loads and deltas."""

from __future__ import annotations

from retold.store.database import Database
from retold.util import Clock

__all__ = ["VectorsMixin"]


class VectorsMixin:
    db: Database
    clock: Clock
