"""The PostgreSQL backend: the same store on a server, chosen by a ``postgresql://`` URL.

:mod:`retold.store` registers :func:`backend` for every URL :func:`is_postgres_url` admits
(:mod:`retold.store.backends`); the backend's modules load on the first such open.
"""

from __future__ import annotations

from retold.store.backends import Backend

__all__ = ["backend", "is_postgres_url"]


def is_postgres_url(location: object) -> bool:
    """True for ``postgresql://…`` and ``postgres://…`` (libpq's URL forms)."""
    return isinstance(location, str) and location.startswith(("postgresql://", "postgres://"))


def backend() -> Backend:
    """:class:`~.store.PgStore` on :class:`~.database.PgDatabase`, their modules loaded now."""
    from retold.store.postgres.database import PgDatabase
    from retold.store.postgres.schema import migrate
    from retold.store.postgres.store import PgStore

    return Backend(store_class=PgStore, open_database=PgDatabase.open, migrate=migrate)
