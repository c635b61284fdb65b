"""Retold's tunables: one YAML file (spec §2) loaded into typed, frozen models.

Every block and key of spec §2 is a field here with the spec's default, except where
ARCHITECTURE §3 overrides it (the packaged offline embedder and judge, the added
``ingestion.attribute_alias_cosine``, a ``provider`` beside each hosted model). A key
that is unknown, mistyped or out of range raises :class:`~retold.errors.ConfigError`
whose ``.key`` is the dotted path, so a typo never silently falls back to a default.

    from retold.config import load_config

    cfg = load_config("retold.yaml")                    # or load_config() for the defaults
    cfg.retrieval.default_k                             # 8
    floors = cfg.retrieval.gate.floors_for("auto")      # host-issued search floors
    floors.dense_floor.for_record("episodic")           # 0.625
    tighter = cfg.override({"retrieval.default_k": 4})  # a validated, changed copy

This module imports only the standard library, pydantic, yaml and ``retold.errors``,
so ``import retold`` stays cheap.
"""

from __future__ import annotations

import difflib
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, Field, ValidationError
from pydantic_core import ErrorDetails

from retold.config.base import _AT_FIELD, Provider, SourceKind, Trigger, _Block
from retold.config.ingestion import EquivalenceConfig, EvidenceConfig, IngestionConfig
from retold.config.policy import (
    ACTIVATION_CATEGORIES,
    ActivationConfig,
    IntegrationsConfig,
    PolicyConfig,
    SessionsConfig,
    SourceRank,
)
from retold.config.retrieval import (
    AutoDenseFloors,
    AutoGateConfig,
    DenseFloors,
    FreshnessConfig,
    GateConfig,
    GateFloors,
    RetrievalConfig,
    RewriteConfig,
    StatementFloors,
    TriggerConfig,
)
from retold.config.store import EmbeddingConfig, RerankerConfig, StoreConfig
from retold.errors import ConfigError

__all__ = [
    "ACTIVATION_CATEGORIES",
    "DEFAULT_CONFIG",
    "ActivationConfig",
    "AutoDenseFloors",
    "AutoGateConfig",
    "Config",
    "DenseFloors",
    "EmbeddingConfig",
    "EquivalenceConfig",
    "EvidenceConfig",
    "FreshnessConfig",
    "GateConfig",
    "GateFloors",
    "IngestionConfig",
    "IntegrationsConfig",
    "PolicyConfig",
    "Provider",
    "RerankerConfig",
    "RetrievalConfig",
    "RewriteConfig",
    "SessionsConfig",
    "SourceKind",
    "SourceRank",
    "StatementFloors",
    "StoreConfig",
    "Trigger",
    "TriggerConfig",
    "load_config",
]

# --------------------------------------------------------------------------- the whole file


class Config(_Block):
    """Every tunable of retold; ``Config()`` is the default configuration.

    Build one with :func:`load_config` (a YAML file), :meth:`from_mapping` (a dict) or
    :meth:`override` (a changed copy); all three raise :class:`ConfigError` naming the key.
    """

    store: StoreConfig = Field(default_factory=StoreConfig, description="The SQLite file.")
    embedding: EmbeddingConfig = Field(default_factory=EmbeddingConfig, description="The embedder.")
    reranker: RerankerConfig = Field(default_factory=RerankerConfig, description="The optional reranker.")
    retrieval: RetrievalConfig = Field(default_factory=RetrievalConfig, description="Search.")
    ingestion: IngestionConfig = Field(default_factory=IngestionConfig, description="Writes and extraction.")
    policy: PolicyConfig = Field(default_factory=PolicyConfig, description="Source authority.")
    sessions: SessionsConfig = Field(default_factory=SessionsConfig, description="Transcript retention.")
    integrations: IntegrationsConfig = Field(
        default_factory=IntegrationsConfig, description="The LangGraph store, CrewAI Memory and MCP surfaces."
    )
    activation: ActivationConfig = Field(
        default_factory=ActivationConfig, description="The ambient profile and its review queue."
    )

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any]) -> Config:
        """Validate a nested mapping shaped like the YAML file; missing keys take defaults."""
        return _validate(data, source=None)

    def override(self, changes: Mapping[str, Any]) -> Config:
        """A copy with ``changes`` applied, validated like a file.

        Keys are dotted paths (``{"retrieval.gate.auto.relative_floor": 0.7}``) or block names;
        a mapping value is merged into the block rather than replacing it.
        """
        data = self.model_dump()
        for dotted, value in changes.items():
            parts = dotted.split(".")
            node = data
            for depth, part in enumerate(parts[:-1]):
                child = node.setdefault(part, {})
                if not isinstance(child, dict):
                    key = ".".join(parts[: depth + 1])
                    raise ConfigError(f"{key!r} is a value, not a block: cannot set {dotted!r}", key=dotted)
                node = child
            _merge(node, parts[-1], value)
        return _validate(data, source=None)


def _merge(node: dict[str, Any], key: str, value: Any) -> None:
    if isinstance(value, Mapping) and isinstance(node.get(key), dict):
        for sub_key, sub_value in value.items():
            _merge(node[key], sub_key, sub_value)
    else:
        node[key] = value


# --------------------------------------------------------------------------- loading and errors


def _validate(data: Any, *, source: str | None) -> Config:
    where = f"{source}: " if source else ""
    if not isinstance(data, Mapping):
        raise ConfigError(
            f"{where}the configuration must be a mapping of blocks (store, embedding, reranker, retrieval, "
            f"ingestion, policy, sessions, integrations, activation), not {type(data).__name__}"
        )
    try:
        return Config.model_validate(dict(data))
    except ValidationError as exc:
        raise _to_config_error(exc, source=source) from exc


def _to_config_error(exc: ValidationError, *, source: str | None) -> ConfigError:
    """Turn every pydantic error into one ConfigError keyed by the first error's dotted path."""
    lines: list[str] = []
    first_key: str | None = None
    for error in exc.errors():
        key, line = _describe(error)
        if first_key is None:
            first_key = key
        lines.append(line)
    where = f"invalid configuration in {source}" if source else "invalid configuration"
    if len(lines) == 1:
        return ConfigError(f"{where}: {lines[0]}", key=first_key)
    listing = "\n".join(f"  {line}" for line in lines)
    return ConfigError(f"{where} ({len(lines)} errors):\n{listing}", key=first_key)


def _describe(error: ErrorDetails) -> tuple[str | None, str]:
    """The dotted key of one pydantic error and a one-line explanation naming it."""
    raw = list(error["loc"])
    if error["type"] in ("extra_forbidden", "invalid_key"):
        # The last location is the offending key itself, whatever its type (YAML allows `1:`).
        raw.pop()
        loc = [str(part) for part in raw]
        name = str(error["input"]) if error["type"] == "invalid_key" else str(error["loc"][-1])
        key = ".".join([*loc, name])
        if error["type"] == "invalid_key":
            return key, f"key {error['input']!r} in {'.'.join(loc) or 'the top level'} must be a string"
        hint = ""
        close = difflib.get_close_matches(name, _field_names(loc), n=1, cutoff=0.6)
        if close:
            hint = f" (did you mean {close[0]!r}?)"
        return key, f"unknown key {key!r}{hint}"

    loc = [str(part) for part in raw if not isinstance(part, int)]
    indexes = "".join(f"[{part}]" for part in raw if isinstance(part, int))
    if error["type"] == _AT_FIELD:
        loc.append(str((error.get("ctx") or {})["field"]))
    key = ".".join(loc) or None
    if error["type"] == _AT_FIELD:
        return key, f"{key}: {error['msg']}"
    got = repr(error["input"])
    if len(got) > 60:
        got = got[:57] + "..."
    label = f"{key}{indexes}" if key else "the configuration"
    if error["type"] == "missing":
        return key, f"{label}: missing required key"
    return key, f"{label}: {error['msg']} (got {got})"


def _field_names(loc: list[str]) -> list[str]:
    """The keys allowed at ``loc``, to suggest a fix for a typo."""
    model: type[BaseModel] = Config
    for part in loc:
        field = model.model_fields.get(part)
        annotation = field.annotation if field else None
        if not (isinstance(annotation, type) and issubclass(annotation, BaseModel)):
            return []
        model = annotation
    return list(model.model_fields)


def load_config(path: str | os.PathLike[str] | None = None) -> Config:
    """Load the YAML config file at ``path``; ``None`` or an empty file gives the defaults.

    Raises :class:`ConfigError` naming the file when it is missing, unreadable, not YAML or
    not a mapping, and naming the dotted key when a value is unknown, mistyped or out of range.
    """
    if path is None:
        return DEFAULT_CONFIG
    source = os.fspath(path)
    try:
        text = Path(source).read_text(encoding="utf-8")
    except FileNotFoundError as exc:
        raise ConfigError(f"config file not found: {source}") from exc
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read config file {source}: {exc}") from exc
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ConfigError(f"config file {source} is not valid YAML: {exc}") from exc
    if data is None:
        return DEFAULT_CONFIG
    if not isinstance(data, Mapping):
        raise ConfigError(
            f"config file {source} must hold a mapping of blocks (store, embedding, reranker, retrieval, "
            f"ingestion, policy, sessions, integrations, activation) at the top level, "
            f"not a {type(data).__name__}"
        )
    return _validate(data, source=source)


DEFAULT_CONFIG: Config = Config()
"""The spec §2 defaults with the ARCHITECTURE §3 overrides; shared safely because it is frozen."""
