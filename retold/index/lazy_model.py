"""Load a local model once, on first use or ``warm()``, from any thread.

The embedder and the reranker share this: a double-checked lock so concurrent first calls
load the weights once, an injectable factory so tests never touch torch, and a check hook
that refuses a model of the wrong shape before anyone uses it.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any, Generic, TypeVar

from retold.errors import RetoldError

__all__ = ["LazyModel", "ModelLoadError", "hub_offline", "load_local_or_cached"]

M = TypeVar("M")


class ModelLoadError(RetoldError, RuntimeError):
    """A local model could not be loaded; the message names the model and why."""


def hub_offline() -> bool:
    """True when the environment forbids model-hub access (HF_HUB_OFFLINE / TRANSFORMERS_OFFLINE)."""
    return any(
        os.environ.get(n, "").strip().lower() in {"1", "true", "yes", "on"}
        for n in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")
    )


def load_local_or_cached(
    constructor: Callable[..., Any], name: str, local: Path, *, device: str, what: str, hint: str
) -> Any:
    """Load a sentence-transformers model from a local folder, else from the user's HF cache.

    ``what`` names the model's role in errors ("embedding model", "reranker model"); ``hint``
    is the sentence that tells the user how to fix it. Never downloads when the hub is off.
    """
    if local.is_dir():
        try:
            return constructor(str(local), device=device, local_files_only=True)
        except Exception as exc:
            raise ModelLoadError(
                f"cannot load the {what} from {str(local)!r}: {type(exc).__name__}: {exc}. "
                "Check that the folder holds a complete sentence-transformers model."
            ) from exc
    offline = hub_offline()
    try:
        return constructor(name, device=device, local_files_only=offline)
    except Exception as exc:
        where = (
            "it is not in the local Hugging Face cache and HF_HUB_OFFLINE is set"
            if offline
            else "it is not in the local Hugging Face cache and could not be fetched from the model hub"
        )
        raise ModelLoadError(
            f"cannot load {what} {name!r}: {where} ({type(exc).__name__}: {exc}). "
            f"Download it once on a machine with hub access, {hint}"
        ) from exc


class LazyModel(Generic[M]):
    """Base for wrappers around a model that is expensive to load."""

    def __init__(self, factory: Callable[[], M] | None = None) -> None:
        self._factory = factory
        self._model: M | None = None
        self._load_lock = threading.Lock()

    @property
    def is_loaded(self) -> bool:
        return self._model is not None

    def warm(self) -> None:
        """Load the model now (blocking; seconds for torch) instead of on the first call."""
        self._ensure_model()

    def _ensure_model(self) -> M:
        model = self._model
        if model is not None:
            return model
        with self._load_lock:
            if self._model is None:
                loaded = self._factory() if self._factory is not None else self._load()
                self._check(loaded)
                self._model = loaded
            return self._model

    def _load(self) -> M:
        raise NotImplementedError

    def _check(self, model: M) -> None:
        """Refuse a loaded model that cannot serve (wrong width, wrong label count)."""
