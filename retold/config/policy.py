"""Config blocks for source ranks, sessions and the framework integrations (spec §2.5, §2.6)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from retold.config.base import (
    SourceKind,
    _Block,
    _Name,
    _NonNegativeInt,
    _PositiveInt,
)

# --------------------------------------------------------------------------- 2.5 policy, 2.6 sessions


class SourceRank(_Block):
    """Authority of each source kind: a record may supersede an equal- or lower-ranked one (spec §2.5).

    All five kinds are required when the block is given, so a forgotten kind is an error rather
    than a silent default.
    """

    user_statement: _NonNegativeInt = Field(description="Rank of what the user said. Integer >= 0.")
    system: _NonNegativeInt = Field(description="Rank of host/system-provided facts. Integer >= 0.")
    tool_result: _NonNegativeInt = Field(description="Rank of tool output. Integer >= 0.")
    session_summary: _NonNegativeInt = Field(
        description="Rank of extractor-written session summaries. Integer >= 0."
    )
    agent_inference: _NonNegativeInt = Field(description="Rank of the agent's own inferences. Integer >= 0.")

    def rank_of(self, kind: SourceKind) -> int:
        """The rank of one source kind."""
        if kind not in _SOURCE_KINDS:
            raise ValueError(f"unknown source kind {kind!r}")
        rank: int = getattr(self, kind)
        return rank


_SOURCE_KINDS: frozenset[str] = frozenset(SourceRank.model_fields)


class PolicyConfig(_Block):
    """Which record wins a disagreement (spec §2.5, §6.2)."""

    source_rank: SourceRank = Field(
        default_factory=lambda: SourceRank(
            user_statement=4, system=3, tool_result=2, session_summary=2, agent_inference=1
        ),
        description="Rank per source kind; also sets a new record's initial status and confidence.",
    )


class SessionsConfig(_Block):
    """Transcript retention (spec §2.6)."""

    retain_days: _PositiveInt = Field(
        90,
        description=(
            "Days a transcript is kept after its session ended and was extracted; `retold retain` "
            "blanks older ones. Unextracted sessions are kept regardless of age. Integer >= 1."
        ),
    )


class IntegrationsConfig(_Block):
    """How surfaces that carry no retold vocabulary write (LangGraph ``BaseStore``, CrewAI ``Memory``)."""

    store_source_kind: Literal["agent_inference", "tool_result", "user_statement"] = Field(
        "agent_inference",
        description=(
            "The source kind of a write through the LangGraph store or CrewAI's Memory when it "
            "carries no evidence: the agent's own claim by default (provisional, lowest rank). A "
            "write whose value carries `evidence` quoting the user's turns is a user_statement "
            "whatever this says. One of agent_inference, tool_result, user_statement."
        ),
    )
    default_session_id: _Name = Field(
        "default",
        description=(
            "The session a store or Memory write is recorded under when no run names one (no "
            "`thread_id` in the run config). A non-empty string."
        ),
    )


# --------------------------------------------------------------------------- activation (spec §8.2, §11)

ActivationCategory = Literal[
    "identity", "communication", "constraints", "workflow", "interests", "relationships"
]
"""What a semantic claim is about, as the activation policy reads it (:mod:`retold.policy.activation`)."""

ACTIVATION_CATEGORIES: tuple[str, ...] = (
    "identity", "communication", "constraints", "workflow", "interests", "relationships",
)  # fmt: skip


class ActivationConfig(_Block):
    """Which semantic records the agent always knows: the ambient profile (spec §8.2, §11).

    A record is ``conditional`` (found by search) unless the policy makes it ``ambient``:
    host-verified evidence in the principal's own user turns, a promotable category, and a
    standing-default form. Borderline ones wait in the review queue (`retold reviews`).
    """

    enabled: bool = Field(
        True,
        description=(
            "Run the activation policy after each write. Off: every record stays conditional and "
            "the profile is empty. true or false."
        ),
    )
    promotable_categories: list[ActivationCategory] = Field(
        default_factory=lambda: ["identity", "communication", "constraints", "workflow"],
        description=(
            "Categories whose standing defaults may enter the profile. Any of identity, "
            "communication, constraints, workflow, interests, relationships."
        ),
    )
    review_borderline: bool = Field(
        True,
        description=(
            "Queue a promotable claim whose form the rules cannot call a standing default (hedged, "
            "unmarked) for a person to decide, instead of leaving it conditional silently. true or false."
        ),
    )
    profile_max_tokens: _PositiveInt = Field(
        400,
        description=(
            "Token budget of the rendered profile block; records past it are left out in a fixed "
            "order, so the block stays byte-identical while the ambient set is unchanged. Integer >= 1."
        ),
    )
    profile_in_prompt: bool = Field(
        True,
        description=(
            "Add the profile to the system message in the Deep Agents middleware and CrewAI's "
            "wrap_llm, and to the drop-in nodes' state, in every memory mode. rt.profile and the "
            "LangGraph store's profile reads answer either way. true or false."
        ),
    )
    classifier: Literal["rules", "model"] = Field(
        "rules",
        description=(
            "`model`: a configured chat model proposes a category for claims the rules cannot "
            "place; the rules still decide, and a proposal alone only queues a review. One of "
            "rules, model."
        ),
    )
