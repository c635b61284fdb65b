"""Load a local model once, on first use or ``warm()``, from any thread.

The embedder and the reranker share this: a double-checked lock so concurrent first calls
load the weights once, an injectable factory so tests never touch torch, and a check hook
that refuses a model of the wrong shape before anyone uses it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Generic, TypeVar

__all__ = ["LazyModel"]

M = TypeVar("M")


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
