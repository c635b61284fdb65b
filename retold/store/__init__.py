"""Durable state: migrations and every SQLite read and write (spec §3)."""

from retold.store import postgres
from retold.store.backends import register_backend
from retold.store.database import Database
from retold.store.migrations import LATEST_VERSION, migrate
from retold.store.store import Store

# A postgresql:// location opens the PostgreSQL backend (Store.open chooses it through the registry).
register_backend(postgres.is_postgres_url, postgres.backend)

__all__ = ["LATEST_VERSION", "Database", "Store", "migrate"]
