"""The in-memory vector index of spec §7: exact cosine search over the stored vectors.

The index is a projection of the ``embeddings`` rows made by one ``(model, version,
dims)``. It keeps one L2-normalised float32 row per record in a private matrix that
grows by doubling, and hides removed records with a ``live`` flag instead of
rebuilding. Searches score only the rows of the caller's eligible ids, so vector
search can never return a record the store did not already clear for the caller.

Keeping up with other processes: every write bumps ``store_meta.records_version`` and
stamps the rows it touched with the new value. :meth:`VectorIndex.refresh` compares
that counter with the version it loaded, fetches only the records changed since, and
applies them in place, or rebuilds when there are more than ``incremental_reload_max``.
A process tells the index about its own committed writes (:meth:`~VectorIndex.upsert`,
:meth:`~VectorIndex.remove`, :meth:`~VectorIndex.touch`) with the version the write
committed; refresh then skips those changes instead of re-reading them, so a burst of
local writes never forces a rebuild on the search path.

All mutation and every search run under one ``threading.Lock``: refresh does its SQL
first and takes the lock only to apply the result, so a search never sees a row move
between filtering and scoring.

One job: the in-process vector index; it is long because keeping it current in place with
other processes' writes, under one lock, is most of the work.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Sequence, Set, Sized
from dataclasses import dataclass
from itertools import repeat
from typing import TYPE_CHECKING, Literal

import anyio.to_thread
import numpy as np

if TYPE_CHECKING:
    from retold.store import Store
    from retold.store.vectors import VectorChange, VectorRows

__all__ = ["RefreshOutcome", "VectorIndex"]

RefreshOutcome = Literal["loaded", "current", "delta", "reloaded"]

# Gathering rows costs several times a streamed multiply per row: once the eligible set is
# more than 1/8 of the index, scoring every used row and picking the eligible ones is faster.
_FULL_SCAN_SHARE = 8


_SCORE_BLOCK = 2048
"""Rows scored per block with several queries: 3 MB of float32 x 384, which stays in a core's L2."""


def _best_cosines(block: np.ndarray, queries: np.ndarray) -> np.ndarray:
    """Each row's highest score over the queries, from matrix-vector products.

    BLAS serves a block times a (dims, 2) matrix several times slower than two
    matrix-vector products (measured 5.6 ms against 2.8 ms at 50K x 384), and a max over
    axis 1 of a two-column result costs another 1.5 ms. With several queries the rows are
    scored in cache-sized blocks, so each row is read from memory once, not once per query
    (a cold 50K index: 4.2 ms against 5.0).
    """
    if len(queries) == 1 or len(block) <= _SCORE_BLOCK:
        best = block @ queries[0]
        for query in queries[1:]:
            np.maximum(best, block @ query, out=best)
        return _settled(best)
    best = np.empty(len(block), dtype=np.float32)
    scratch = np.empty(_SCORE_BLOCK, dtype=np.float32)
    for start in range(0, len(block), _SCORE_BLOCK):
        rows = block[start : start + _SCORE_BLOCK]
        out = best[start : start + len(rows)]
        np.dot(rows, queries[0], out=out)
        for query in queries[1:]:
            other = scratch[: len(rows)]
            np.dot(rows, query, out=other)
            np.maximum(out, other, out=out)
    return _settled(best)


def _settled(scores: np.ndarray) -> np.ndarray:
    """Cosines rounded to 6 decimals, with -0.0 made 0.0, in place.

    BLAS sums a row's products in an order that depends on how many rows it is given and
    where they sit, so one record's float32 cosine can differ in its last bit between a
    gathered block and a full scan — and which one a search takes depends on how much of
    the index other tenants hold. Rounding well above that noise keeps a record's score,
    its rank among ties and its rendering ("0.00", never "-0.00") the same whatever else
    is indexed.
    """
    np.round(scores, 6, out=scores)
    scores += np.float32(0.0)
    return scores


@dataclass
class _State:
    """Everything a full load replaces at once."""

    matrix: np.ndarray  # (capacity, dims) float32; rows past len(ids) are unused
    live: np.ndarray  # (capacity,) bool
    ids: list[str]
    pos: dict[str, int]
    live_count: int


class VectorIndex:
    """Exact cosine search over one model's stored vectors, kept current across processes.

    ``ids``, ``pos`` and ``live`` are diagnostic snapshots (copies); the matrix itself is
    never exposed, because copying it at 50K records costs about 200 MB.
    """

    def __init__(self, model: str, version: str, dims: int, *, initial_capacity: int = 1024) -> None:
        if dims < 1:
            raise ValueError(f"dims must be >= 1, got {dims}")
        if initial_capacity < 1:
            raise ValueError(f"initial_capacity must be >= 1, got {initial_capacity}")
        self.model = model
        self.version = version
        self.dims = dims
        self._initial_capacity = initial_capacity
        self._lock = threading.Lock()
        self._state = self._empty_state(initial_capacity)
        # The index_version each record's row reflects: guards against applying stale data.
        self._applied: dict[str, int] = {}
        # This process's own writes not yet covered by loaded_version; refresh skips them.
        self._local: dict[str, int] = {}
        self._loaded_version = 0
        self._loaded = False

    # --- diagnostics --------------------------------------------------------------------------

    @property
    def ids(self) -> list[str]:
        """Record id of each matrix row (a copy)."""
        with self._lock:
            return list(self._state.ids)

    @property
    def pos(self) -> dict[str, int]:
        """Matrix row of each record id, removed ones included (a copy)."""
        with self._lock:
            return dict(self._state.pos)

    @property
    def live(self) -> np.ndarray:
        """Liveness flag of each used matrix row (a copy)."""
        with self._lock:
            return self._state.live[: len(self._state.ids)].copy()

    @property
    def capacity(self) -> int:
        """Rows allocated in the private matrix; doubles when an upsert needs a new row."""
        with self._lock:
            return int(self._state.matrix.shape[0])

    @property
    def loaded_version(self) -> int:
        """The ``records_version`` up to which every change is reflected here."""
        with self._lock:
            return self._loaded_version

    @property
    def is_loaded(self) -> bool:
        return self._loaded

    def __len__(self) -> int:
        """Live (searchable) records."""
        with self._lock:
            return self._state.live_count

    def __repr__(self) -> str:
        return (
            f"VectorIndex(model={self.model!r}, version={self.version!r}, dims={self.dims}, "
            f"live={len(self)}, loaded_version={self.loaded_version})"
        )

    # --- loading and refresh ------------------------------------------------------------------

    async def load(self, store: Store) -> None:
        """Replace the index with every compatible stored vector (other models' rows are skipped)."""
        await self._load(store, force=False)

    async def _load(self, store: Store, *, force: bool) -> None:
        rows = await store.load_vectors(self.model, self.version, self.dims)
        # Decoding 50K rows is a few hundred MB of copying: keep it off the event loop.
        state, versions = await anyio.to_thread.run_sync(self._build_state, rows)
        self._install(state, versions, rows.records_version, force=force)

    async def refresh(self, store: Store, incremental_reload_max: int) -> RefreshOutcome:
        """Catch up with writes committed since :attr:`loaded_version`, by any process.

        Returns ``"loaded"`` when the index was not loaded yet (a full load),
        ``"current"`` when nothing new was committed or every change came from this
        process (then :attr:`loaded_version` just advances), ``"delta"`` when it applied
        at most ``incremental_reload_max`` genuinely new changes in place, and
        ``"reloaded"`` when there were more and it rebuilt from the store (also when
        the durable version went backwards, as after restoring the file from a backup).
        When the index is current this costs one ``SELECT`` of ``store_meta``.
        """
        if incremental_reload_max < 0:
            raise ValueError(f"incremental_reload_max must be >= 0, got {incremental_reload_max}")
        if not self._loaded:
            await self.load(store)
            return "loaded"
        durable = await store.records_version()
        with self._lock:
            since = self._loaded_version
            local = len(self._local)
        if durable < since:  # the file went back in time (restored from a backup): start over
            await self._load(store, force=True)
            return "reloaded"
        if durable == since:
            return "current"
        # Local writes are the only changes refresh may drop, so fetching max + local + 1
        # rows is enough to know whether the genuinely new ones exceed the max.
        found = await store.vector_changes(
            since, self.model, self.version, self.dims, limit=incremental_reload_max + local
        )
        decoded = [(change, self._decode(change)) for change in found.changes]
        with self._lock:
            new = [(c, vec) for c, vec in decoded if self._applied.get(c.record_id, -1) < c.index_version]
            if found.complete and len(new) <= incremental_reload_max:
                for change, vec in new:
                    if vec is None:
                        self._remove_row(change.record_id)
                    else:
                        self._set_row(change.record_id, vec)
                    self._applied[change.record_id] = change.index_version
                seen = max((c.index_version for c in found.changes), default=0)
                self._advance(max(found.records_version, seen))
                return "delta" if new else "current"
        await self.load(store)
        return "reloaded"

    def _decode(self, change: VectorChange) -> np.ndarray | None:
        if change.vector is None:
            return None
        try:
            return self._normalise(np.frombuffer(change.vector, dtype=np.float32))
        except ValueError:
            return None  # a zero or non-finite stored vector cannot be ranked: treat it as absent

    def _build_state(self, rows: VectorRows) -> tuple[_State, dict[str, int]]:
        count = len(rows.ids)
        capacity = max(self._initial_capacity, 1 << max(count - 1, 0).bit_length())
        state = self._empty_state(capacity)
        if count:
            block = np.frombuffer(b"".join(rows.blobs), dtype=np.float32).reshape(count, self.dims)
            norms = np.linalg.norm(block, axis=1)
            usable = np.isfinite(block).all(axis=1) & (norms > 0)
            state.matrix[:count][usable] = block[usable] / norms[usable, None]
            state.live[:count] = usable
            state.live_count = int(usable.sum())
        state.ids = list(rows.ids)
        state.pos = {record_id: row for row, record_id in enumerate(rows.ids)}
        return state, dict(zip(rows.ids, rows.index_versions, strict=True))

    def _install(self, state: _State, versions: dict[str, int], records_version: int, *, force: bool) -> None:
        """Swap in a freshly built state, keeping local writes newer than its snapshot.

        Unless ``force``d, a snapshot older than what the index already reflects (a
        concurrent refresh got there first) is dropped rather than rolling the index back.
        """
        new_version = max(records_version, max(versions.values(), default=0))
        with self._lock:
            if self._loaded and self._loaded_version > new_version and not force:
                return
            old_state, old_applied = self._state, self._applied
            newer = {} if force else {i: v for i, v in self._local.items() if v > new_version}
            self._state, self._applied = state, versions
            for record_id, version in newer.items():  # written here after the snapshot was read
                row = old_state.pos.get(record_id)
                if row is not None and old_state.live[row]:
                    self._set_row(record_id, old_state.matrix[row].copy())
                else:
                    self._remove_row(record_id)
                self._applied[record_id] = max(version, old_applied.get(record_id, version))
            self._loaded = True
            self._loaded_version = new_version
            self._local = newer

    def _advance(self, version: int) -> None:
        if version > self._loaded_version:
            self._loaded_version = version
            self._local = {i: v for i, v in self._local.items() if v > version}

    # --- this process's writes ----------------------------------------------------------------

    def upsert(self, record_id: str, vec: np.ndarray, index_version: int) -> bool:
        """Add or overwrite a record's row after a committed write at ``index_version``.

        The vector is L2-normalised here. Returns False (and changes nothing) when the
        index already reflects a newer version of the record, which happens when a
        refresh applied another process's later write first.
        """
        row = self._normalise(np.asarray(vec, dtype=np.float32))
        with self._lock:
            if not self._note_local(record_id, index_version):
                return False
            self._set_row(record_id, row)
            return True

    def remove(self, record_id: str, index_version: int) -> bool:
        """Hide a record (``live[pos] = False``) after a committed write at ``index_version``.

        Returns False when the index already reflects a newer version of the record.
        Removing an id that has no row is allowed: refresh will still skip that change.
        """
        with self._lock:
            if not self._note_local(record_id, index_version):
                return False
            self._remove_row(record_id)
            return True

    def forget(self, record_id: str, index_version: int) -> None:
        """Erase a record's row after a committed erasure: hide it and zero its vector.

        :meth:`remove` only hides a row; an erased record's vector must not stay in this
        process's memory either (spec §16). Applies whatever version the index holds.
        """
        with self._lock:
            self._note_local(record_id, max(index_version, self._applied.get(record_id, index_version)))
            self._remove_row(record_id)
            row = self._state.pos.get(record_id)
            if row is not None:
                self._state.matrix[row] = 0.0

    def touch(self, record_id: str, index_version: int) -> bool:
        """Note a committed write that left the record's vector as it was (say, a status change).

        Every record write bumps the version, so without this the next refresh would
        re-read the record and count it as a change from another process.
        """
        with self._lock:
            return self._note_local(record_id, index_version)

    def _note_local(self, record_id: str, index_version: int) -> bool:
        if self._applied.get(record_id, -1) > index_version:
            return False
        self._applied[record_id] = index_version
        if index_version > self._loaded_version:
            self._local[record_id] = max(index_version, self._local.get(record_id, 0))
        return True

    # --- rows (callers hold the lock) -----------------------------------------------------------

    def _set_row(self, record_id: str, vec: np.ndarray) -> None:
        state = self._state
        row = state.pos.get(record_id)
        if row is None:
            row = len(state.ids)
            if row == state.matrix.shape[0]:
                self._grow()
                state = self._state
            state.ids.append(record_id)
            state.pos[record_id] = row
        state.matrix[row] = vec
        if not state.live[row]:
            state.live[row] = True
            state.live_count += 1

    def _remove_row(self, record_id: str) -> None:
        state = self._state
        row = state.pos.get(record_id)
        if row is not None and state.live[row]:
            state.live[row] = False
            state.live_count -= 1

    def _grow(self) -> None:
        state = self._state
        capacity = state.matrix.shape[0] * 2
        matrix = np.zeros((capacity, self.dims), dtype=np.float32)
        matrix[: len(state.ids)] = state.matrix[: len(state.ids)]
        live = np.zeros(capacity, dtype=bool)
        live[: len(state.ids)] = state.live[: len(state.ids)]
        state.matrix, state.live = matrix, live

    def _empty_state(self, capacity: int) -> _State:
        return _State(
            matrix=np.zeros((capacity, self.dims), dtype=np.float32),
            live=np.zeros(capacity, dtype=bool),
            ids=[],
            pos={},
            live_count=0,
        )

    def _normalise(self, vec: np.ndarray) -> np.ndarray:
        if vec.ndim != 1 or vec.shape[0] != self.dims:
            raise ValueError(f"expected a vector of {self.dims} values, got shape {vec.shape}")
        norm = float(np.linalg.norm(vec))
        if not np.isfinite(norm) or norm == 0.0:
            raise ValueError("a vector must be finite and non-zero to be indexed")
        return (vec / norm).astype(np.float32, copy=False)

    # --- search and lookups -------------------------------------------------------------------

    def search(self, qvec: np.ndarray, eligible_ids: Iterable[str], k: int) -> list[tuple[str, float]]:
        """The ``k`` eligible live records closest to the query, as ``(record_id, cosine)``, best first.

        ``qvec`` is one query vector ``(dims,)`` or several ``(n, dims)``; with several,
        each record scores its highest cosine over the queries (spec §10: dense search
        keeps the best cosine per record) and the union is cut to ``k``. Only rows of
        ``eligible_ids`` are looked up and scored, so the cost follows the eligible set,
        not the index size; ids the index does not hold are ignored. Ties break by id.
        """
        queries = np.asarray(qvec, dtype=np.float32)
        if queries.ndim == 1:
            queries = queries[None, :]
        if queries.ndim != 2 or queries.shape[1] != self.dims:
            raise ValueError(f"expected query vectors of {self.dims} values, got shape {queries.shape}")
        if k <= 0 or queries.shape[0] == 0:
            return []
        norms = np.linalg.norm(queries, axis=1, keepdims=True)
        queries = np.divide(queries, norms, out=np.zeros_like(queries), where=norms > 0)
        with self._lock:
            state = self._state
            used = len(state.ids)
            if isinstance(eligible_ids, Set) and len(eligible_ids) * _FULL_SCAN_SHARE >= used > 0:
                return self._search_dense_set(state, used, queries, eligible_ids, k)
            lookups = map(state.pos.get, eligible_ids, repeat(-1))
            count = len(eligible_ids) if isinstance(eligible_ids, Sized) else -1
            rows = np.fromiter(lookups, dtype=np.intp, count=count)
            rows = rows[rows >= 0]
            if rows.size * _FULL_SCAN_SHARE < used:  # a small set: gather and score just its rows
                rows = np.unique(rows)  # duplicates out, ascending for memory locality
                rows = rows[state.live[rows]]
                best = _best_cosines(state.matrix[rows], queries)
            else:  # most rows: one multiply over the used block beats copying them out
                mask = np.zeros(used, dtype=bool)
                mask[rows] = True
                mask &= state.live[:used]
                rows = np.flatnonzero(mask)
                best = _best_cosines(state.matrix[:used], queries)[rows]
            if rows.size == 0:
                return []
            if rows.size > k:
                # Keep every row tied with the k-th score so the id tie-break below decides.
                kth = best[np.argpartition(-best, k - 1)[k - 1]]
                keep = best >= kth
                rows, best = rows[keep], best[keep]
            found = list(
                zip([state.ids[row] for row in rows.tolist()], np.clip(best, -1.0, 1.0).tolist(), strict=True)
            )
        found.sort(key=lambda hit: (-hit[1], hit[0]))
        return found[:k]

    @staticmethod
    def _search_dense_set(
        state: _State, used: int, queries: np.ndarray, eligible: Set[str], k: int
    ) -> list[tuple[str, float]]:
        """Score every live row, then walk the best rows checking set membership.

        For an eligible set covering most of the index, mapping every eligible id to its
        row costs more than the multiply itself; checking only the best-scoring rows against
        the set is exact and touches O(k) ids in the common case. The caller holds the lock.
        """
        best = _best_cosines(state.matrix[:used], queries)
        best[~state.live[:used]] = -np.inf
        window = min(used, max(4 * k, 64))
        while True:
            top = np.argpartition(-best, window - 1)[:window] if window < used else np.arange(used)
            top = top[np.isfinite(best[top])]
            ids = state.ids
            hits = [
                (ids[row], score)
                for row, score in zip(top.tolist(), np.clip(best[top], -1.0, 1.0).tolist(), strict=True)
                if ids[row] in eligible
            ]
            if len(hits) >= k or window >= used:
                break
            window = min(used, window * 4)
        if len(hits) > k:
            # Keep everything tied with the k-th score so the id tie-break decides, as below.
            hits.sort(key=lambda hit: -hit[1])
            kth = hits[k - 1][1]
            hits = [h for h in hits if h[1] >= kth]
        hits.sort(key=lambda hit: (-hit[1], hit[0]))
        return hits[:k]

    def vector_for(self, record_id: str) -> np.ndarray | None:
        """A copy of the record's normalised vector, or None when it is not indexed or removed."""
        with self._lock:
            row = self._state.pos.get(record_id)
            if row is None or not self._state.live[row]:
                return None
            return self._state.matrix[row].copy()

    def cosine_lookup(self, record_ids: Sequence[str]) -> Callable[[str, str], float]:
        """A ``cosine`` over a fixed set of records from one multiply under the lock.

        Duplicate collapse compares every survivor with every kept one; a pairwise lookup
        per comparison takes the lock and crosses into numpy each time. Records outside the
        set, or not indexed, raise KeyError as :meth:`cosine` does.
        """
        with self._lock:
            state = self._state
            rows = {
                rid: row for rid in record_ids if (row := state.pos.get(rid)) is not None and state.live[row]
            }
            block = state.matrix[list(rows.values())] if rows else np.zeros((0, self.dims), np.float32)
        order = {rid: i for i, rid in enumerate(rows)}
        gram = np.clip(block @ block.T, -1.0, 1.0).tolist()

        def lookup(first_id: str, second_id: str) -> float:
            return float(gram[order[first_id]][order[second_id]])

        return lookup

    def cosine(self, first_id: str, second_id: str) -> float:
        """Cosine between two indexed records, clipped to [-1, 1].

        Raises KeyError naming the id when either is not indexed or has been removed,
        since a made-up score would silently steer dedupe and supersession.
        """
        with self._lock:
            state = self._state
            rows = []
            for record_id in (first_id, second_id):
                row = state.pos.get(record_id)
                if row is None or not state.live[row]:
                    raise KeyError(record_id)
                rows.append(row)
            value = float(state.matrix[rows[0]] @ state.matrix[rows[1]])
        return float(np.clip(value, -1.0, 1.0))
