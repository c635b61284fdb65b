"""The exceptions retold raises.

Every error derives from :class:`RetoldError`, so ``except retold.RetoldError`` catches
anything the library raises on purpose. Misuse errors also derive from the built-in
exception a Python user would expect (``ValueError`` for bad arguments, ``RuntimeError``
for bad state), and SQLite errors are translated at the store boundary with ``from exc``.

    RetoldError
     ├── ConfigError (ValueError)           a config key is unknown, mistyped or out of range
     ├── InvalidArgumentError (ValueError)  a bad id, scope, alias or argument from the host
     │    └── AliasConflictError            an alias already names a different entity
     ├── NotFoundError (LookupError)        no such record, entity or session
     ├── IdentityError (PermissionError)    a served graph cannot tell who is calling
     ├── MissingExtraError (ImportError)    an optional extra is not installed
     └── StoreError                         the SQLite store cannot do what was asked
          ├── StoreClosedError (RuntimeError)
          ├── SchemaVersionError            the file was written by a newer retold
          ├── MigrationIssuesError          legacy rows need an operator's decision
          └── EmbeddingMismatchError        stored vectors came from another model

Tool handlers never raise these at an agent: they turn them into the structured
``{"ok": False, "error": ..., "message": ...}`` results of ARCHITECTURE §5.
"""

from __future__ import annotations

__all__ = [
    "AliasConflictError",
    "ConfigError",
    "EmbeddingMismatchError",
    "IdentityError",
    "InvalidArgumentError",
    "MigrationIssuesError",
    "MissingExtraError",
    "NotFoundError",
    "RetoldError",
    "SchemaVersionError",
    "StoreClosedError",
    "StoreError",
]


class RetoldError(Exception):
    """Base class of every error retold raises on purpose."""


class ConfigError(RetoldError, ValueError):
    """A configuration file or value is invalid; the message names the key."""

    def __init__(self, message: str, *, key: str | None = None) -> None:
        super().__init__(message)
        self.key = key


class InvalidArgumentError(RetoldError, ValueError):
    """A host-supplied argument (id, scope, alias) is not acceptable; nothing was written."""


class AliasConflictError(InvalidArgumentError):
    """An alias already names a different entity of the same kind in the scope."""


class NotFoundError(RetoldError, LookupError):
    """The named record, entity or session does not exist (or is not visible)."""


class IdentityError(RetoldError, PermissionError):
    """A served graph has no authenticated caller, or the input names someone else."""


class MissingExtraError(RetoldError, ImportError):
    """An optional dependency is missing; the message names the extra to install."""

    def __init__(self, package: str, extra: str, feature: str) -> None:
        super().__init__(
            f"{feature} needs the {package!r} package, which is not installed. "
            f"Install it with: pip install 'retold[{extra}]'"
        )
        self.package = package
        self.extra = extra


class StoreError(RetoldError):
    """The SQLite store could not complete an operation."""


class StoreClosedError(StoreError, RuntimeError):
    """The store (or runtime) was used after it was closed."""


class SchemaVersionError(StoreError):
    """The database was written by a newer retold than this one."""


class MigrationIssuesError(StoreError):
    """Legacy rows could not be mapped by a migration and still await an operator.

    ``retold migrate`` lists them; ``--expire-unmapped`` retires them and
    ``--allow-unmapped`` acknowledges them.
    """

    def __init__(self, count: int, path: str) -> None:
        super().__init__(
            f"{count} legacy record(s) in {path} could not be mapped to a structured subject by "
            f"migration 2. Run `retold migrate --store {path}` to list them, then retire them with "
            "--expire-unmapped or acknowledge them with --allow-unmapped "
            "(or open the store with allow_migration_issues=True)."
        )
        self.count = count


class EmbeddingMismatchError(StoreError):
    """Stored vectors were made by a different embedding model, version or width."""
