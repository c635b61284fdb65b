"""Which backend a store location names, chosen before any database opens.

:meth:`Store.open <retold.store.store.Store.open>` opens a SQLite file itself; any other kind
of location is served by a backend registered here: the PostgreSQL one, for ``postgresql://``
URLs, is registered by :mod:`retold.store` (the package), so it is there whenever the store is.
The registry is what lets the base class choose its PostgreSQL subclass without importing it
(:class:`~retold.store.postgres.store.PgStore` imports :class:`~retold.store.store.Store`, never
the other way round), and a backend's modules, psycopg among them, load only when a location
names that backend.

    register_backend(is_postgres_url, load_postgres)   # load_postgres() -> Backend, imports lazily
    backend = backend_for("postgresql://localhost/memory")   # None for a SQLite path
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, NamedTuple

__all__ = ["Backend", "backend_for", "register_backend"]


class Backend(NamedTuple):
    """What :meth:`Store.open <retold.store.store.Store.open>` needs of a backend."""

    store_class: type[Any]
    """The :class:`~retold.store.store.Store` subclass that runs on this backend's database."""
    open_database: Callable[..., Awaitable[Any]]
    """``open_database(location, *, busy_timeout_s, pool_min, pool_max)``: the open database."""
    migrate: Callable[..., Awaitable[list[int]]]
    """``migrate(db, *, progress)``: the backend's schema migration, as :func:`retold.store.migrate`."""


_BACKENDS: list[tuple[Callable[[object], bool], Callable[[], Backend]]] = []


def register_backend(accepts: Callable[[object], bool], load: Callable[[], Backend]) -> None:
    """Serve every location ``accepts`` admits with the backend ``load()`` returns (called per open)."""
    if all(registered != (accepts, load) for registered in _BACKENDS):
        _BACKENDS.append((accepts, load))


def backend_for(location: object) -> Backend | None:
    """The registered backend that serves ``location``, or ``None`` for SQLite (a file path)."""
    for accepts, load in _BACKENDS:
        if accepts(location):
            return load()
    return None
