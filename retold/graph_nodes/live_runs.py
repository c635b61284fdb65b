"""The runs a compiled graph keeps for JSON-input invocations, outside the graph's state.

A run given as plain JSON (``langgraph dev``, HTTP) is built by the first node; the later
nodes find it by a random key the first node writes to a state key that neither the input
nor the output schema holds, so no input can name another run. The graph drops a run when
it ends, fails or is cancelled; past ``limit`` runs in flight the oldest is dropped.
"""

from __future__ import annotations

import secrets
from typing import Generic, TypeVar

__all__ = ["LiveRuns"]

T = TypeVar("T")


class LiveRuns(Generic[T]):
    def __init__(self, limit: int) -> None:
        self._runs: dict[str, T] = {}
        self._limit = limit

    def add(self, run: T) -> str:
        """Keep ``run``; returns its key."""
        key = secrets.token_urlsafe(16)
        while len(self._runs) >= self._limit:
            self._runs.pop(next(iter(self._runs)))
        self._runs[key] = run
        return key

    def __getitem__(self, key: str) -> T:
        return self._runs[key]

    def drop(self, key: str | None) -> None:
        self._runs.pop(key or "", None)

    def __len__(self) -> int:
        return len(self._runs)
