"""What every config block shares: strict scalar types, the closed frozen block, the literals."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

SourceKind = Literal["user_statement", "system", "tool_result", "session_summary", "agent_inference"]
"""Where a record's claim came from (spec §2.5); also the keys of ``policy.source_rank``."""

Provider = Literal["anthropic", "openai", "openrouter"]
"""Which hosted API a model name is sent to (ARCHITECTURE §3; OpenRouter is OpenAI-compatible)."""

Trigger = Literal["tool", "auto"]
"""Who issued a search: the model through its tool, or the host once per user turn (spec §14.1)."""

# Scalars are strict: YAML already types its values, so "30" for a count or `yes` for a
# cosine is a mistake to report, not a value to coerce. A strict float still accepts an int.
_Unit = Annotated[float, Field(ge=0.0, le=1.0, strict=True, allow_inf_nan=False)]
_PositiveInt = Annotated[int, Field(ge=1, strict=True)]
_NonNegativeInt = Annotated[int, Field(ge=0, strict=True)]
_Name = Annotated[str, Field(min_length=1, strict=True)]
_Flag = Annotated[bool, Field(strict=True)]

_HAIKU = "claude-haiku-4-5-20251001"


class _Block(BaseModel):
    """Base of every config block: frozen and closed, so a typo is an error, not a silent default.

    Building a block directly raises pydantic's ``ValidationError``; the public entry points
    (:func:`load_config`, :meth:`Config.from_mapping`, :meth:`Config.override`) translate it
    into :class:`ConfigError` with the dotted key.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    @model_validator(mode="before")
    @classmethod
    def _empty_block_is_defaults(cls, data: Any) -> Any:
        # `retrieval:` with every key under it commented out parses to None: mean "defaults".
        return {} if data is None else data


_AT_FIELD = "retold_config_field"
"""Error type a model validator raises to blame one of its fields (ctx["field"]) instead of itself."""
