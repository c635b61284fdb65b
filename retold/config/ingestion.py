"""Config blocks for the write path, the equivalence judge, evidence and extraction (spec §2.4)."""

from __future__ import annotations

from pydantic import Field

from retold.config.base import (
    _HAIKU,
    Provider,
    _Block,
    _Flag,
    _Name,
    _NonNegativeInt,
    _PositiveInt,
    _Unit,
)

# --------------------------------------------------------------------------- 2.4 ingestion


class EquivalenceConfig(_Block):
    """The judge that calls two claims same, contradictory or distinct (spec §2.4, §6.3)."""

    model: _Name = Field(
        "retold/conservative-judge-v1",
        description=(
            "The equivalence judge. The default is the offline rule-based conservative judge "
            "(no NLI model ships on PyPI); cross-encoder/nli-deberta-v3-small needs a model hub."
        ),
    )
    entail_floor: _Unit = Field(
        0.70,
        description=(
            "NLI judges: minimum directed entailment probability, in both directions, for calling two "
            "claims the same and reinforcing the existing record. In [0, 1]."
        ),
    )
    contradict_floor: _Unit = Field(
        0.70,
        description=(
            "NLI judges: minimum directed contradiction probability, in either direction, for "
            "recording a conflict rather than a duplicate. In [0, 1]."
        ),
    )
    same_cosine: _Unit = Field(
        0.85,
        description=(
            "The conservative judge (the default model): lowest embedding cosine at which two claims "
            "its rules call equivalent are the same. It scores no entailment or contradiction "
            "probability (its contradictions are named rules), so the two floors above do not apply "
            "to it. In [0, 1]."
        ),
    )


class EvidenceConfig(_Block):
    """What makes a quote substantial enough to support a direct claim (spec §2.4)."""

    min_characters: _PositiveInt = Field(
        15, description="Fewest characters in an evidence quote. Integer >= 1."
    )
    min_words: _PositiveInt = Field(3, description="Fewest words in an evidence quote. Integer >= 1.")
    entail_floor: _Unit = Field(
        0.70,
        description=(
            "Minimum score when the judge compares the evidence quote with a direct user or tool claim; "
            "calibrated apart from the equivalence floors. In [0, 1]."
        ),
    )


class IngestionConfig(_Block):
    """Writing, deduplicating, extracting and expiring records (spec §2.4, §6, §8)."""

    dedup_candidate_cosine: _Unit = Field(
        0.85,
        description=(
            "At or above this cosine to an active record of the same scope and type about a different "
            "entity, the ingestor asks the equivalence judge. In [0, 1]."
        ),
    )
    attribute_alias_cosine: _Unit = Field(
        0.6,
        description=(
            "Cosine a record under another attribute needs before a same or contradicts verdict "
            "collapses the two attributes into one fact (spec §6.3); the verdict alone is not enough. "
            "Provisional value, to be calibrated for the default embedder. In [0, 1]."
        ),
    )
    equivalence: EquivalenceConfig = Field(
        default_factory=EquivalenceConfig, description="The equivalence judge and its floors."
    )
    evidence: EvidenceConfig = Field(default_factory=EvidenceConfig, description="Evidence quote checks.")
    provisional_ttl_days: _PositiveInt = Field(
        30,
        description=(
            "Lifetime of every provisional record (unsupported inferences, lower-authority conflicts); "
            "an independent reinforcement extends it. Integer >= 1."
        ),
    )
    summary_ttl_days: _PositiveInt = Field(
        180, description="Lifetime of generated session summaries. Integer >= 1."
    )
    reinforcements_to_confirm: _PositiveInt = Field(
        2, description="Reinforcements that promote a provisional record to confirmed. Integer >= 1."
    )
    max_entity_attributes: _PositiveInt = Field(
        64,
        description=(
            "Active attributes of one entity the judge compares, most recently reinforced first; "
            "reaching it records attribute_scan_truncated. Integer >= 1."
        ),
    )
    extraction_enabled: _Flag = Field(
        False,
        description=(
            "Runs hosted session extraction when a session ends (spec §8.2). Needs the provider's API "
            "key (ANTHROPIC_API_KEY, OPENAI_API_KEY or OPENROUTER_API_KEY) and the hosted extra; off, "
            "sessions stay unextracted until `retold extract` runs with an extractor."
        ),
    )
    extraction_provider: Provider = Field("anthropic", description="The hosted API of the extraction model.")
    extraction_model: _Name = Field(_HAIKU, description="The hosted model that extracts session candidates.")
    extraction_max_candidates: _PositiveInt = Field(
        20, description="Caps the candidates from one session extraction. Integer >= 1."
    )
    review_provider: Provider = Field("anthropic", description="The hosted API of the review model.")
    review_model: _Name = Field(
        _HAIKU,
        description=(
            "The separate structured-output model that accepts, rejects or narrows extractor candidates "
            "before persistence."
        ),
    )
    temporal_review_batch_size: _PositiveInt = Field(
        100, description="Bounds one atomic-claim pass over due records. Integer >= 1."
    )
    extraction_timeout_ms: _PositiveInt = Field(
        60000,
        description="Per-call limit on the hosted extractor; a timeout fails the run closed. Integer >= 1.",
    )
    review_timeout_ms: _PositiveInt = Field(
        30000,
        description="Per-call limit on the hosted reviewer; a timeout fails the run closed. Integer >= 1.",
    )
    hosted_max_output_tokens: _PositiveInt = Field(
        4096, description="Caps one structured completion from either hosted model. Integer >= 1."
    )
    extraction_context_max_entities: _NonNegativeInt = Field(
        200, description="Readable aliases handed to the extractor as context. Integer >= 0."
    )
    extraction_context_max_subjects: _NonNegativeInt = Field(
        200, description="Active writable subjects handed to the extractor as context. Integer >= 0."
    )
    extraction_claim_timeout_minutes: _PositiveInt = Field(
        30,
        description=(
            "How long a worker's claim on a session lasts; a crashed worker's claim expires and the "
            "next caller reclaims the session. Integer >= 1."
        ),
    )
    summary_max_chars: _PositiveInt = Field(
        1200, description="Caps one session summary, its decisions line included. Integer >= 1."
    )
    session_idle_timeout_minutes: _PositiveInt = Field(
        30,
        description=(
            "Idle gap after which an adapter that cannot signal session end splits the session. Integer >= 1."
        ),
    )
