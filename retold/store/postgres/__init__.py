"""The PostgreSQL backend: the same store on a server, chosen by a ``postgresql://`` URL."""

from __future__ import annotations

__all__ = ["is_postgres_url"]


def is_postgres_url(location: object) -> bool:
    """True for ``postgresql://…`` and ``postgres://…`` (libpq's URL forms)."""
    return isinstance(location, str) and location.startswith(("postgresql://", "postgres://"))
