"""Durable state: migrations and every SQLite read and write (spec §3)."""

from retold.store.database import Database
from retold.store.migrations import LATEST_VERSION, migrate
from retold.store.store import Store

__all__ = ["LATEST_VERSION", "Database", "Store", "migrate"]
