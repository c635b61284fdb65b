"""Which backend runs the embedding model: ``embedding.backend`` (auto, onnx or torch).

Both backends embed the same vectors for the packaged all-MiniLM-L6-v2 (``OnnxEmbedder``'s
docstring), so the choice is about speed and weight, never about the store: a query embeds in
about 6 ms on ONNX Runtime against about 21 ms on torch, and a new process embeds its first
text in about a second against seven or more (``benchmarks/onnx_embedder.py``). ``auto`` takes
ONNX where it can serve the configuration (the packaged model, on the CPU, onnxruntime and
tokenizers installed) and torch everywhere else, including when the ONNX file cannot be made
or loaded. It lives apart from both embedders because it imports both.

    embedder = build_embedder(config.embedding)   # not loaded yet: see retold.index.embedder.warm
"""

from __future__ import annotations

import importlib.util
from typing import TYPE_CHECKING

from retold.index.embedder import PACKAGED_MODELS, SentenceTransformerEmbedder

if TYPE_CHECKING:
    from retold.config import EmbeddingConfig

__all__ = ["build_embedder", "onnx_serves"]


def onnx_serves(config: EmbeddingConfig) -> bool:
    """Whether the ONNX backend can run this configuration here (nothing is imported to tell)."""
    return (
        config.model in PACKAGED_MODELS
        and config.device in ("auto", "cpu")
        and all(importlib.util.find_spec(name) is not None for name in ("onnxruntime", "tokenizers"))
    )


def build_embedder(config: EmbeddingConfig) -> SentenceTransformerEmbedder:
    """The embedder ``config`` describes, not yet loaded.

    ``onnx`` chosen outright refuses what it cannot serve (a ConfigError naming the key) and a
    missing export (naming the command that makes it); ``auto`` exports at first use and falls
    back to torch, with a warning, when it cannot.
    """
    options = {
        "device": config.device,
        "max_chars": config.max_chars,
        "query_cache_entries": config.query_cache_entries,
    }
    if config.backend == "onnx" or (config.backend == "auto" and onnx_serves(config)):
        from retold.index.onnx_embedder import OnnxEmbedder

        automatic = config.backend == "auto"
        return OnnxEmbedder(
            config.model, config.version, config.dims, auto_export=automatic, fallback=automatic, **options
        )
    return SentenceTransformerEmbedder(config.model, config.version, config.dims, **options)
