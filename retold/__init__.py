"""retold: durable, scoped, evidence-backed long-term memory for LLM agents.

    import retold
    from retold import Principal, Scope

    async with retold.open_runtime("memory.sqlite") as rt:
        await rt.host.provision_user("u1", aliases=["Aditya"])
        await rt.host.grant("planner", Scope("user", "u1"), read=True, write=True)

    with retold.open_runtime_sync("memory.sqlite") as rt:      # the same API without await
        rt.host.provision_user("u1")

Importing this package stays cheap: frameworks and models load only when used.
"""

from retold.config import Config, load_config
from retold.errors import (
    AliasConflictError,
    ConfigError,
    EmbeddingMismatchError,
    InvalidArgumentError,
    MigrationIssuesError,
    MissingExtraError,
    NotFoundError,
    RetoldError,
    SchemaVersionError,
    StoreClosedError,
    StoreError,
)
from retold.models import (
    Entity,
    EntityMention,
    Explanation,
    Principal,
    Record,
    Scope,
    SearchRequest,
    SearchResponse,
    SearchResult,
    SessionKey,
    Turn,
)
from retold.policy.prompt import policy_text
from retold.retrieve.render import render_search
from retold.runtime import Runtime, open_runtime
from retold.sync import SyncRuntime, open_runtime_sync

__version__ = "0.1.0"

__all__ = [
    "AliasConflictError",
    "Config",
    "ConfigError",
    "EmbeddingMismatchError",
    "Entity",
    "EntityMention",
    "Explanation",
    "InvalidArgumentError",
    "MigrationIssuesError",
    "MissingExtraError",
    "NotFoundError",
    "Principal",
    "Record",
    "RetoldError",
    "Runtime",
    "SchemaVersionError",
    "Scope",
    "SearchRequest",
    "SearchResponse",
    "SearchResult",
    "SessionKey",
    "StoreClosedError",
    "StoreError",
    "SyncRuntime",
    "Turn",
    "__version__",
    "load_config",
    "open_runtime",
    "open_runtime_sync",
    "policy_text",
    "render_search",
]
