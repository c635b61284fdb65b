"""Where a search's dense generator runs: the in-process index, or the store itself.

On SQLite the vectors live in this process (:class:`~retold.index.vector.VectorIndex`, an
exact cosine scan over the eligible rows, refreshed from ``records_version``). On
PostgreSQL the store searches them (pgvector, the filter in the same statement:
:mod:`retold.store.postgres.vectors`), so a search process holds no copy of a million
vectors and never loads one. Both answer the same two questions the search asks — the
nearest eligible records, and the cosines among a shortlist (duplicate collapse) — and
return the same shapes, so the retriever does not know which one it has.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence, Set
from collections.abc import Set as AbstractSet
from datetime import datetime
from typing import Any, Protocol

import anyio
import numpy as np

from retold.index.passages import best_passage_cosines
from retold.index.vector import VectorIndex
from retold.models import Scope

__all__ = ["DenseSearch", "InProcessDense", "StoreDense", "Without", "dense_search_for"]


class DenseSearch(Protocol):
    @property
    def is_loaded(self) -> bool: ...

    async def refresh(self) -> str: ...

    async def search(
        self, queries: np.ndarray, eligible: Iterable[str], k: int
    ) -> list[tuple[str, float]]: ...

    async def cosine_lookup(self, record_ids: Sequence[str]) -> Callable[[str, str], float]: ...

    # The write path's questions: records near a candidate, and vectors of records it judges.
    keeps_vectors: bool

    async def catch_up(self) -> None: ...

    async def nearby(
        self, vector: np.ndarray, scope: Scope, record_type: str, *, now: datetime, exclude: Set[str],
        about: str | None, k: int,
    ) -> list[tuple[str, float]]: ...  # fmt: skip

    async def vectors(self, record_ids: Sequence[str]) -> dict[str, np.ndarray]: ...

    # A long record's best passage (retold.index.passages), for the records a search holds.
    async def passage_cosines(self, queries: np.ndarray, record_ids: Sequence[str]) -> dict[str, float]: ...


class Without(AbstractSet[str]):
    """``kept`` less ``dropped`` as a set view: a write excludes a few ids from a scope's
    eligible set without copying it (200K ids: milliseconds per write)."""

    def __init__(self, kept: AbstractSet[str], dropped: AbstractSet[str]) -> None:
        self._kept = kept
        self._dropped = {i for i in dropped if i in kept}

    def __contains__(self, item: object) -> bool:
        return item in self._kept and item not in self._dropped

    def __iter__(self) -> Iterator[str]:
        return (i for i in self._kept if i not in self._dropped)

    def __len__(self) -> int:
        return len(self._kept) - len(self._dropped)


class InProcessDense:
    """The process's :class:`VectorIndex` (SQLite): exact, refreshed per search."""

    def __init__(self, index: VectorIndex, store: Any, incremental_reload_max: int) -> None:
        self._index = index
        self._store = store
        self._reload_max = incremental_reload_max
        self._passages_at: tuple[int, bool] | None = None  # (index version, the store has passages)

    @property
    def is_loaded(self) -> bool:
        return self._index.is_loaded

    async def refresh(self) -> str:
        return await self._index.refresh(self._store, self._reload_max)

    async def search(self, queries: np.ndarray, eligible: Iterable[str], k: int) -> list[tuple[str, float]]:
        # The multiply leaves the event loop: at 50K rows it takes a few milliseconds.
        return await anyio.to_thread.run_sync(self._index.search, queries, eligible, k)

    async def cosine_lookup(self, record_ids: Sequence[str]) -> Callable[[str, str], float]:
        return self._index.cosine_lookup(record_ids)

    keeps_vectors = True

    async def catch_up(self) -> None:
        await self._index.refresh(self._store, self._reload_max)

    async def nearby(
        self, vector: np.ndarray, scope: Scope, record_type: str, *, now: datetime, exclude: Set[str],
        about: str | None, k: int,
    ) -> list[tuple[str, float]]:  # fmt: skip
        """The ``k`` live records of the type in the scope closest to ``vector``, but ``exclude``
        and (``about``) the records about that entity."""
        eligible = await self._store.eligible_ids([scope], now=now, types=[record_type])
        seen = set(exclude)
        if about is not None:
            seen |= await self._store.subject_record_ids(scope, record_type, about)
        return await anyio.to_thread.run_sync(self._index.search, vector, Without(eligible, seen), k)

    async def vectors(self, record_ids: Sequence[str]) -> dict[str, np.ndarray]:
        found = {rid: self._index.vector_for(rid) for rid in record_ids}
        return {rid: vec for rid, vec in found.items() if vec is not None}

    async def passage_cosines(self, queries: np.ndarray, record_ids: Sequence[str]) -> dict[str, float]:
        """Read only from a store that has passages: whether it has any is asked again only after
        the store changed (every write that adds passages bumps the version the index follows),
        so a store of short records pays no query per search."""
        version = self._index.loaded_version
        if self._passages_at is None or self._passages_at[0] != version:
            self._passages_at = (version, await self._store.has_passages())
        if not self._passages_at[1] or not record_ids:
            return {}
        index = self._index
        blobs = await self._store.passage_vectors_for(record_ids, index.model, index.version, index.dims)
        return best_passage_cosines(blobs, queries, index.dims) if blobs else {}


class StoreDense:
    """The store's own dense search (PostgreSQL + pgvector); nothing is held in this process."""

    def __init__(self, store: Any, model: str, version: str, dims: int, settings: Any) -> None:
        self._store = store
        self._model, self._version, self._dims = model, version, dims
        self._settings = settings

    @property
    def is_loaded(self) -> bool:
        return True

    async def refresh(self) -> str:
        return "in_store"

    async def search(self, queries: np.ndarray, eligible: Iterable[str], k: int) -> list[tuple[str, float]]:
        return await self._store.vector_search(
            queries, eligible, k, model=self._model, version=self._version, settings=self._settings
        )

    async def cosine_lookup(self, record_ids: Sequence[str]) -> Callable[[str, str], float]:
        """One read of the shortlist's vectors and one Gram matrix, as the in-process index does."""
        blobs = await self._store.vectors_for(record_ids, self._model, self._version, self._dims)
        order = {rid: i for i, rid in enumerate(blobs)}
        block = (
            np.stack([np.frombuffer(b, dtype=np.float32) for b in blobs.values()])
            if blobs
            else np.zeros((0, self._dims), np.float32)
        )
        norms = np.linalg.norm(block, axis=1, keepdims=True)
        block = np.divide(block, norms, out=np.zeros_like(block), where=norms > 0)
        gram = np.clip(block @ block.T, -1.0, 1.0).tolist()

        def lookup(first_id: str, second_id: str) -> float:
            return float(gram[order[first_id]][order[second_id]])

        return lookup

    keeps_vectors = False

    async def catch_up(self) -> None:
        """Nothing is held here: every read is the store's committed state."""

    async def nearby(
        self, vector: np.ndarray, scope: Scope, record_type: str, *, now: datetime, exclude: Set[str],
        about: str | None, k: int,
    ) -> list[tuple[str, float]]:  # fmt: skip
        """As :meth:`InProcessDense.nearby`, with the filter in the statement (no id set is built)."""
        return await self._store.vector_nearby(
            vector, scope, record_type, now=now, exclude=exclude, about=about, k=k,
            model=self._model, version=self._version, settings=self._settings,
        )  # fmt: skip

    async def passage_cosines(self, queries: np.ndarray, record_ids: Sequence[str]) -> dict[str, float]:
        if not record_ids:
            return {}
        blobs = await self._store.passage_vectors_for(record_ids, self._model, self._version, self._dims)
        return best_passage_cosines(blobs, queries, self._dims) if blobs else {}

    async def vectors(self, record_ids: Sequence[str]) -> dict[str, np.ndarray]:
        blobs = await self._store.vectors_for(record_ids, self._model, self._version, self._dims)
        out = {}
        for rid, blob in blobs.items():
            vec = np.frombuffer(blob, dtype=np.float32)
            norm = float(np.linalg.norm(vec))
            out[rid] = vec / norm if norm > 0 else vec.copy()
        return out


def dense_search_for(store: Any, index: VectorIndex, embedding: Any, store_config: Any) -> DenseSearch:
    """The store's search where it has one (PostgreSQL), else the in-process index."""
    if getattr(store, "searches_vectors", False):
        from retold.store.postgres.vectors import VectorSearchSettings

        settings = VectorSearchSettings(
            ef_search=store_config.hnsw_ef_search,
            max_scan_tuples=store_config.hnsw_max_scan_tuples,
            exact_search_max=store_config.exact_search_max,
        )
        return StoreDense(store, index.model, index.version, index.dims, settings)
    return InProcessDense(index, store, embedding.incremental_reload_max)
