"""CrewAI's ``StorageBackend`` on retold, for code that builds ``Memory(storage=...)`` itself.

Its ``search`` receives only a vector, so it is a dense-only search of retold's own vectors;
what that gives up is listed on :mod:`retold.adapters.crewai_memory`. Prefer
:class:`~retold.adapters.crewai_memory.RetoldCrewMemory`.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

try:
    from crewai.memory.storage import factory as _storage_factory
    from crewai.memory.storage.backend import EmbeddingDimensionMismatchError
    from crewai.memory.types import MemoryRecord, ScopeInfo
except ImportError as exc:  # pragma: no cover - depends on the installed extras
    raise ImportError(
        f"retold.adapters.crewai needs CrewAI 1.15 or later: pip install 'retold[crewai]' ({exc})"
    ) from exc
import numpy as np

from retold.errors import InvalidArgumentError
from retold.models import Principal
from retold.sync import SyncRuntime
from retold.tools import limits
from retold.util import clean_text, normalize_ws, text_problem

if TYPE_CHECKING:
    from retold.runtime import Runtime
from retold.adapters.crewai_binding import (
    Binding,
    CrewMemoryRefusedError,
    crew_path,
    crew_record,
    map_path,
    matches,
    naive_utc,
)

__all__ = [
    "STORAGE_PREFIX",
    "RetoldEmbedder",
    "RetoldStorageBackend",
    "register_storage",
    "unregister_storage",
]


STORAGE_PREFIX = "retold:"
"""``Memory(storage="retold:<name>")`` names a backend given to :func:`register_storage`."""


# --- the StorageBackend --------------------------------------------------------------------


class RetoldEmbedder:
    """CrewAI's embedder callable on retold's query embedder, for :class:`RetoldStorageBackend`.

    Its vectors are in the space of retold's stored vectors, so a dense search can use them.
    The model runs in the calling thread (CrewAI calls embedders synchronously).
    """

    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime

    def __call__(self, input: list[str]) -> list[list[float]]:
        texts = [clean_text(str(t)) for t in input]
        return [list(map(float, v)) for v in np.asarray(self.runtime.embedder.embed_queries(texts))]


class RetoldStorageBackend:
    """CrewAI's ``StorageBackend`` bound to one retold principal (see the module docstring).

    Writes are ``memory_write`` calls (``save`` rewrites each record's ``id`` to retold's record
    id, and ignores its ``embedding`` and ``importance``); reads see only what the principal
    may read; ``search`` is dense-only over retold's vectors. Every method has an async twin.
    """

    def __init__(
        self,
        runtime: Runtime | SyncRuntime,
        *,
        agent_id: str,
        user_id: str,
        project_id: str | None = None,
        session_id: str | None = None,
        write_target: str = "personal",
        loop: asyncio.AbstractEventLoop | None = None,
    ) -> None:
        self._b = Binding(
            runtime, agent_id=agent_id, user_id=user_id, project_id=project_id, session_id=session_id,
            write_target=write_target, loop=loop, who="RetoldStorageBackend",
        )  # fmt: skip

    @classmethod
    def _on(cls, binding: Binding) -> RetoldStorageBackend:
        backend = cls.__new__(cls)
        backend._b = binding
        return backend

    @property
    def principal(self) -> Principal:
        return self._b.principal

    # --- writes ---------------------------------------------------------------------------

    async def _asave(self, records: list[MemoryRecord]) -> None:
        if isinstance(records, MemoryRecord) or not isinstance(records, Sequence):
            raise CrewMemoryRefusedError("invalid_input", "save takes a list of CrewAI MemoryRecords")
        checked = list(records)
        for r in checked:
            if not isinstance(r, MemoryRecord):
                raise CrewMemoryRefusedError("invalid_input", "save takes a list of CrewAI MemoryRecords")
            if r.private:
                raise CrewMemoryRefusedError("invalid_input", "retold has no per-source private records")
            self._b.write_payload(r.content, r.categories, r.metadata, strict_metadata=False)
        for r in checked:
            stored = await self._b.write(r.content, r.scope, r.categories, r.metadata, strict_metadata=False)
            r.id = stored.id  # retold assigns ids; a deduplicated write names the record it reinforced

    def save(self, records: list[MemoryRecord]) -> None:
        self._b.call(lambda: self._asave(records))

    async def asave(self, records: list[MemoryRecord]) -> None:
        await self._b.acall(lambda: self._asave(records))

    async def _aupdate(self, record: MemoryRecord) -> None:
        existing = await self._b.get(record.id)
        if existing is None:
            raise CrewMemoryRefusedError("not_found", f"no memory {record.id[:80]!r} is visible here")
        mapped, scope = map_path(record.scope, self._b.principal)
        if not mapped or (scope is not None and scope != existing.scope):
            raise CrewMemoryRefusedError("invalid_input", "a retold memory cannot move to another scope")
        if normalize_ws(record.content) != normalize_ws(existing.content):
            record.id = (await self._b.revise(existing.id, record.content)).id

    def update(self, record: MemoryRecord) -> None:
        """A changed content becomes a new version (``record.id`` is rewritten to it); tags stay."""
        self._b.call(lambda: self._aupdate(record))

    async def aupdate(self, record: MemoryRecord) -> None:
        await self._b.acall(lambda: self._aupdate(record))

    def delete(
        self,
        scope_prefix: str | None = None,
        categories: list[str] | None = None,
        record_ids: list[str] | None = None,
        older_than: datetime | None = None,
        metadata_filter: dict[str, Any] | None = None,
    ) -> int:
        b = self._b
        return b.call(
            lambda: b.forget(scope_prefix, categories, record_ids, older_than, metadata_filter, own=True)
        )

    async def adelete(
        self,
        scope_prefix: str | None = None,
        categories: list[str] | None = None,
        record_ids: list[str] | None = None,
        older_than: datetime | None = None,
        metadata_filter: dict[str, Any] | None = None,
    ) -> int:
        b = self._b
        return await b.acall(
            lambda: b.forget(scope_prefix, categories, record_ids, older_than, metadata_filter, own=True)
        )

    def reset(self, scope_prefix: str | None = None) -> None:
        """Forget what this principal can change in the scope; ``None``: its own scopes only."""
        self.delete(scope_prefix=scope_prefix)

    async def areset(self, scope_prefix: str | None = None) -> None:
        await self.adelete(scope_prefix=scope_prefix)

    # --- search ---------------------------------------------------------------------------

    async def _asearch(
        self, query_embedding: Sequence[float], scope_prefix: str | None, categories: list[str] | None,
        metadata_filter: dict[str, Any] | None, limit: int, min_score: float,
    ) -> list[tuple[MemoryRecord, float]]:  # fmt: skip
        rt, b = self._b.rt, self._b
        vector = np.asarray(list(query_embedding), dtype=np.float32)
        dims = int(getattr(rt.embedder, "dims", 0) or rt.config.embedding.dims)
        if vector.ndim != 1 or vector.size != dims:
            raise EmbeddingDimensionMismatchError(stored_dim=dims, new_dim=int(vector.size))
        norm = float(np.linalg.norm(vector))
        if not np.isfinite(norm) or norm == 0.0:
            return []
        p = await b.live()
        mapped, scope = map_path(scope_prefix, p)
        if not mapped:
            return []
        scopes = await b.readable(scope)
        floors = rt.config.retrieval.gate.floors_for("tool")
        eligible = await rt.store.eligible_ids(
            scopes, now=rt.clock.now(), exclude_source_kinds=floors.exclude_source_kinds
        )
        if not eligible:
            return []
        await rt.dense.refresh()
        wanted = max(1, min(int(limit), limits.MAX_K * 5))
        hits = await rt.dense.search((vector / norm)[None, :], eligible, wanted * 4)
        scored = [(rid, float(cos)) for rid, cos in hits if rid in eligible and cos >= float(min_score)]
        by_id = {r.id: r for r in await rt.store.get_records([rid for rid, _ in scored])}
        out: list[tuple[MemoryRecord, float]] = []
        for rid, cos in scored:
            record = by_id.get(rid)
            if record is None or cos < floors.dense_floor.for_record(record.type, record.source_kind):
                continue  # the gate's dense floor is the one part of the gate a vector can meet
            if matches(record, categories, None, metadata_filter):
                out.append((crew_record(record), cos))
        return out[:wanted]

    def search(
        self,
        query_embedding: list[float],
        scope_prefix: str | None = None,
        categories: list[str] | None = None,
        metadata_filter: dict[str, Any] | None = None,
        limit: int = 10,
        min_score: float = 0.0,
    ) -> list[tuple[MemoryRecord, float]]:
        """Dense-only: cosine against retold's vectors; needs a :class:`RetoldEmbedder` query vector."""
        b = self._b
        return b.call(
            lambda: self._asearch(
                query_embedding, scope_prefix, categories, metadata_filter, limit, min_score
            )
        )

    async def asearch(
        self,
        query_embedding: list[float],
        scope_prefix: str | None = None,
        categories: list[str] | None = None,
        metadata_filter: dict[str, Any] | None = None,
        limit: int = 10,
        min_score: float = 0.0,
    ) -> list[tuple[MemoryRecord, float]]:
        b = self._b
        return await b.acall(
            lambda: self._asearch(
                query_embedding, scope_prefix, categories, metadata_filter, limit, min_score
            )
        )

    # --- reads ----------------------------------------------------------------------------

    async def _aget(self, record_id: str) -> MemoryRecord | None:
        record = await self._b.get(record_id)
        return crew_record(record) if record is not None else None

    def get_record(self, record_id: str) -> MemoryRecord | None:
        """A record this principal reads; None for a missing and a foreign id alike."""
        return self._b.call(lambda: self._aget(record_id))

    async def aget_record(self, record_id: str) -> MemoryRecord | None:
        return await self._b.acall(lambda: self._aget(record_id))

    async def _alist(self, scope_prefix: str | None, limit: int, offset: int) -> list[MemoryRecord]:
        records = await self._b.records(scope_prefix)
        start = max(0, int(offset))
        return [crew_record(r) for r in records[start : start + max(0, int(limit))]]

    def list_records(
        self, scope_prefix: str | None = None, limit: int = 200, offset: int = 0
    ) -> list[MemoryRecord]:
        return self._b.call(lambda: self._alist(scope_prefix, limit, offset))

    async def alist_records(
        self, scope_prefix: str | None = None, limit: int = 200, offset: int = 0
    ) -> list[MemoryRecord]:
        return await self._b.acall(lambda: self._alist(scope_prefix, limit, offset))

    async def _ainfo(self, scope: str) -> ScopeInfo:
        records = await self._b.records(scope)
        p = self._b.principal
        mapped, target = map_path(scope, p)
        children = sorted({crew_path(r.scope) for r in records}) if mapped and target is None else []
        created = [naive_utc(r.created_at) for r in records]
        return ScopeInfo(
            path=scope or "/",
            record_count=len(records),
            categories=sorted({t for r in records for t in r.tags}),
            oldest_record=min(created) if created else None,
            newest_record=max(created) if created else None,
            child_scopes=children,
        )

    def get_scope_info(self, scope: str) -> ScopeInfo:
        return self._b.call(lambda: self._ainfo(scope))

    async def aget_scope_info(self, scope: str) -> ScopeInfo:
        return await self._b.acall(lambda: self._ainfo(scope))

    def list_scopes(self, parent: str = "/") -> list[str]:
        """Under ``/``: the paths of the readable scopes holding records; retold scopes have no children."""
        return list(self.get_scope_info(parent).child_scopes)

    async def alist_scopes(self, parent: str = "/") -> list[str]:
        return list((await self.aget_scope_info(parent)).child_scopes)

    async def _acategories(self, scope_prefix: str | None) -> dict[str, int]:
        counts: dict[str, int] = {}
        for record in await self._b.records(scope_prefix):
            for tag in record.tags:
                counts[tag] = counts.get(tag, 0) + 1
        return counts

    def list_categories(self, scope_prefix: str | None = None) -> dict[str, int]:
        return self._b.call(lambda: self._acategories(scope_prefix))

    async def alist_categories(self, scope_prefix: str | None = None) -> dict[str, int]:
        return await self._b.acall(lambda: self._acategories(scope_prefix))

    async def _acount(self, scope_prefix: str | None) -> int:
        return len(await self._b.records(scope_prefix))

    def count(self, scope_prefix: str | None = None) -> int:
        return self._b.call(lambda: self._acount(scope_prefix))

    async def acount(self, scope_prefix: str | None = None) -> int:
        return await self._b.acall(lambda: self._acount(scope_prefix))

    def close(self) -> None:
        """Nothing to release: the host owns the runtime."""


# --- storage="retold:<name>" ---------------------------------------------------------------

_REGISTERED: dict[str, RetoldStorageBackend] = {}
_registry_lock = threading.Lock()


def _resolve(spec: str) -> RetoldStorageBackend | None:
    if not isinstance(spec, str) or not spec.startswith(STORAGE_PREFIX):
        previous = _previous_factory
        return previous(spec) if previous is not None else None
    name = spec[len(STORAGE_PREFIX) :]
    with _registry_lock:
        backend = _REGISTERED.get(name)
    if backend is None:
        raise InvalidArgumentError(
            f"no retold storage is registered as {name[:80]!r}; call register_storage({name[:80]!r}, backend)"
        )
    return backend


_previous_factory: Callable[[str], Any] | None = None


def register_storage(name: str, backend: RetoldStorageBackend) -> str:
    """Route ``Memory(storage="retold:<name>")`` to ``backend``; returns that spec string.

    Installs retold's factory with CrewAI's ``set_memory_storage_factory`` (process-wide) the
    first time, keeping a factory registered before it for the specs retold does not handle.
    """
    global _previous_factory
    if not isinstance(name, str) or not name.strip() or text_problem(name):
        raise InvalidArgumentError("register_storage needs a non-blank name")
    if not isinstance(backend, RetoldStorageBackend):
        raise InvalidArgumentError("register_storage needs a RetoldStorageBackend")
    with _registry_lock:
        _REGISTERED[name] = backend
        current = getattr(_storage_factory, "_factory", None)
        if current is not _resolve:
            _previous_factory = current
            _storage_factory.set_memory_storage_factory(_resolve)
    return f"{STORAGE_PREFIX}{name}"


def unregister_storage(name: str) -> bool:
    """Forget ``retold:<name>``; a ``Memory`` built from it keeps its backend. False if unknown."""
    with _registry_lock:
        return _REGISTERED.pop(name, None) is not None
