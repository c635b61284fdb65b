"""retold as CrewAI's unified memory: ``Crew(memory=RetoldCrewMemory(...))``, and a ``StorageBackend``.

    with RuntimePortal.open("memory.sqlite") as portal:     # or rt = retold.open_runtime_sync(...)
        memory = RetoldCrewMemory(portal.runtime, agent_id="planner", user_id="u1")   # (or rt)
        Crew(agents=[...], tasks=[...], memory=memory).kickoff()        # or: await crew.akickoff()

**Why a Memory and not only a backend.** CrewAI's ``Memory.recall`` embeds the query with its
own embedder and hands a ``StorageBackend`` only the vector. At that seam retold would lose its
lexical and entity channels, its relevance gate and its explanations, and the vector would come
from another model (another space, often another width). :class:`RetoldCrewMemory` is a
``Memory`` (the type ``Crew.memory`` accepts) that takes the text where CrewAI still has it:

* ``recall`` / ``arecall`` run retold's search graph on the query text (gate on, logged, scope
  narrowed to the CrewAI path) and return :class:`RetoldMemoryMatch` objects: retold's fused score,
  ``match_reasons`` from the explanation, ``explanation`` itself, and a ``format()`` that is
  retold's quoted rendering (stored text cannot pose as another memory in the task prompt).
* ``remember`` / ``remember_many`` (and async) are ``memory_write`` calls: an episodic memory,
  source kind ``integrations.store_source_kind`` (``metadata={"evidence": quote}`` makes it a
  user statement when retold finds the quote in the session's turns), CrewAI categories as
  tags, dedup and supersession as usual. The returned ``MemoryRecord`` has retold's record id.
* ``forget`` tombstones through ``memory_forget`` (audited), only what the principal can change;
  ``reset`` is a scope-limited forget, never a wipe of the store (see below).
* ``extract_memories`` calls no LLM: the content CrewAI hands over after each task ("Task: ...
  Result: ...") is recorded as the session's turns (task → user turn, result → assistant turn)
  and ``[]`` is returned, so nothing unevidenced is written. retold's own extraction (with
  evidence checks and review) runs when the session ends.
* No LLM and no embedder are ever built: the analysis LLM and the OpenAI embedder CrewAI's
  ``Memory`` would create lazily are refused with a clear error instead.

**Identity** is explicit and fixed at construction: ``agent_id``, ``user_id``, optional
``project_id``. **Session**: ``session_id=`` pins one; without it each unit of work gets its own
id ``crewai-<hex>``, and CrewAI's end-of-kickoff ``drain_writes()`` ends it (scheduling
extraction), so one kickoff is one session as for :class:`~retold.adapters.crewai.CrewAIMemory`.

**CrewAI scope paths → retold scopes** (:func:`map_path`; sub-paths collapse: retold scopes have
no children): ``/`` or None → every scope the principal reads (writes: ``write_target``, default
the user's scope); ``/user`` and ``/user/<own user>/...`` → ``user:<user>``; ``/project`` and
``/project/<own project>/...`` → ``project:<project>``; ``/agent`` and ``/agent/<own agent>/...``
→ the private ``agent:<agent>/<user>`` scope (written only if the host offers it as a write
target); ``/org/<id>`` → ``org:<id>``. Any other path (another
user's, another agent's, CrewAI's ``/crew/...``) is foreign: reads answer empty, writes raise
:class:`CrewMemoryRefusedError` carrying ``{"ok": False, "error": "invalid_write_target", ...}``
(``scope_not_writable`` when the principal may write nowhere at all, whatever the path).
Grants decide the rest exactly as for the tools. ``reset()`` / ``reset("/")`` forgets the
principal's own scopes (its user scope and its private scope); a shared project is reset only
when named (``reset("/project/<id>")``) and writable. A crew can never erase another user's memory.

**Loops.** CrewAI calls ``Memory`` synchronously, under ``akickoff()`` too (task-start recall and
the post-task save run on the kickoff's event loop). Every call runs on the loop that owns the
runtime (:class:`~retold.adapters.portal.LoopBridge`), in submission order. So open the runtime
on a :class:`~retold.adapters.portal.RuntimePortal` (or ``retold.open_runtime_sync``) for both
``kickoff()`` and ``akickoff()``: a blocking call on the owning loop itself is refused with a
``RuntimeError`` (CrewAI logs a failed task-start recall and goes on); writes from there are queued.

**RetoldStorageBackend** is the honest version of the lower seam, for code that builds
``Memory(storage=...)`` itself: it is bound to one principal, writes go through ``memory_write``,
and ``search`` gets only a vector, so it is a dense-only search of retold's own vectors (the
query must come from :class:`RetoldEmbedder`, else ``EmbeddingDimensionMismatchError``): no
lexical or entity channel, no rewrite, fusion, freshness, relevance gate (only its dense floor),
rerank, explanation or search log. :func:`register_storage` routes ``Memory(storage="retold:<name>")``
to a registered backend through CrewAI's ``set_memory_storage_factory``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any, Literal

try:
    from crewai.memory.types import MemoryMatch, MemoryRecord
    from crewai.memory.unified_memory import Memory
except ImportError as exc:  # pragma: no cover - depends on the installed extras
    raise ImportError(
        f"retold.adapters.crewai needs CrewAI 1.15 or later: pip install 'retold[crewai]' ({exc})"
    ) from exc
from pydantic import PrivateAttr

from retold.adapters.portal import RuntimePortal
from retold.errors import InvalidArgumentError
from retold.models import Principal
from retold.sync import SyncRuntime

if TYPE_CHECKING:
    from retold.runtime import Runtime
from retold.adapters.crewai_binding import (
    Binding,
    CrewMemoryRefusedError,
    RetoldMemoryMatch,
    crew_path,
    crew_record,
    map_path,
    parse_task_dump,
)
from retold.adapters.crewai_storage import (
    RetoldEmbedder,
    RetoldStorageBackend,
    register_storage,
    unregister_storage,
)

__all__ = [
    "CrewMemoryRefusedError",
    "RetoldCrewMemory",
    "RetoldEmbedder",
    "RetoldMemoryMatch",
    "RetoldStorageBackend",
    "RuntimePortal",
    "crew_path",
    "map_path",
    "register_storage",
    "unregister_storage",
]


# --- CrewAI's Memory ------------------------------------------------------------------------


class RetoldCrewMemory(Memory):
    """CrewAI's ``Memory`` on retold: pass it as ``Crew(memory=...)`` or ``Agent(memory=...)``.

    ``agent_id`` / ``user_id`` / ``project_id`` are the caller, fixed here; ``session_id`` pins
    the session (default: one per kickoff, ended by CrewAI's end-of-kickoff ``drain_writes``).
    ``write_target`` is where ``remember`` writes when no scope is given (a retold write-target
    name: ``personal`` = the user's scope, ``current_project``). ``loop`` is the loop that owns
    the runtime when it is neither a portal's nor the running one.
    """

    _binding: Any = PrivateAttr(default=None)

    def __init__(
        self,
        runtime: Runtime | SyncRuntime,
        *,
        agent_id: str,
        user_id: str,
        project_id: str | None = None,
        session_id: str | None = None,
        write_target: str = "personal",
        read_only: bool = False,
        loop: asyncio.AbstractEventLoop | None = None,
        **fields: Any,
    ) -> None:
        if fields.get("root_scope") is not None:
            raise InvalidArgumentError(
                "RetoldCrewMemory takes no root_scope: where memory lives is decided by the principal's "
                "retold scopes (/user/<id>, /project/<id>, /agent/<id>)"
            )
        unknown = sorted(set(fields) - {"root_scope"})
        if unknown:
            raise InvalidArgumentError(
                f"RetoldCrewMemory does not use CrewAI Memory's {', '.join(unknown)}: retold calls no "
                "LLM or CrewAI embedder, and ranks, deduplicates and consolidates itself"
            )
        binding = Binding(
            runtime, agent_id=agent_id, user_id=user_id, project_id=project_id, session_id=session_id,
            write_target=write_target, loop=loop, who="RetoldCrewMemory",
        )  # fmt: skip
        super().__init__(storage=RetoldStorageBackend._on(binding), read_only=read_only, llm="retold")
        self._binding = binding

    def __deepcopy__(self, memo: dict[int, Any] | None = None) -> RetoldCrewMemory:
        """A handle on the runtime: copies of a crew or agent share it (a store is not copyable)."""
        return self

    # --- what CrewAI must never build here ------------------------------------------------

    @property
    def _llm(self) -> Any:
        raise RuntimeError(
            "RetoldCrewMemory calls no LLM: retold writes what it is given and extracts from the "
            "recorded turns when a session ends"
        )

    @property
    def _embedder(self) -> Any:
        raise RuntimeError("RetoldCrewMemory builds no CrewAI embedder: retold embeds with its own model")

    # --- identity -------------------------------------------------------------------------

    @property
    def principal(self) -> Principal:
        """The principal in use (its session id changes per kickoff unless one was pinned)."""
        return self._binding.principal

    @property
    def last_search(self) -> Any:
        """The last recall's :class:`~retold.models.SearchResponse` (its ``empty_reason`` when empty)."""
        return self._binding.last_search

    # --- remember ---------------------------------------------------------------------------

    def remember(
        self,
        content: str,
        scope: str | None = None,
        categories: list[str] | None = None,
        metadata: dict[str, Any] | None = None,
        importance: float | None = None,
        source: str | None = None,
        private: bool = False,
        agent_role: str | None = None,
        root_scope: str | None = None,
    ) -> MemoryRecord | None:
        """One ``memory_write``; the record as retold stored it (its id, its scope path).

        ``importance`` and ``source`` are not kept (retold ranks by relevance and freshness and
        records provenance itself); ``private`` is refused: retold's privacy is its scopes
        (``/agent/<id>``). None when ``read_only``, as for CrewAI's Memory.
        """
        if self.read_only:
            return None
        self._check_write(private, root_scope)
        b = self._binding
        return b.call(lambda: b.write(content, scope, categories, metadata, strict_metadata=True))

    async def aremember(
        self,
        content: str,
        scope: str | None = None,
        categories: list[str] | None = None,
        metadata: dict[str, Any] | None = None,
        importance: float | None = None,
        source: str | None = None,
        private: bool = False,
        agent_role: str | None = None,
        root_scope: str | None = None,
    ) -> MemoryRecord | None:
        """:meth:`remember` without blocking the caller's loop."""
        if self.read_only:
            return None
        self._check_write(private, root_scope)
        b = self._binding
        return await b.acall(lambda: b.write(content, scope, categories, metadata, strict_metadata=True))

    def remember_many(
        self,
        contents: list[str],
        scope: str | None = None,
        categories: list[str] | None = None,
        metadata: dict[str, Any] | None = None,
        importance: float | None = None,
        source: str | None = None,
        private: bool = False,
        agent_role: str | None = None,
        root_scope: str | None = None,
    ) -> list[MemoryRecord]:
        """Queue one write per item and return ``[]`` at once, as CrewAI's does; ``recall`` waits.

        The call itself is checked first (a bad scope, metadata or item refuses the whole batch
        before anything is queued); a write retold refuses later is logged.
        """
        if not contents or self.read_only:
            return []
        items = self._check_many(contents, private, root_scope, categories, metadata)
        b = self._binding
        for item in items:
            b.post(lambda c=item: b.write(c, scope, categories, metadata, strict_metadata=True), "remember")
        return []

    async def aremember_many(
        self,
        contents: list[str],
        scope: str | None = None,
        categories: list[str] | None = None,
        metadata: dict[str, Any] | None = None,
        importance: float | None = None,
        source: str | None = None,
        private: bool = False,
        agent_role: str | None = None,
    ) -> list[MemoryRecord]:
        """The writes of :meth:`remember_many`, awaited: the stored records, in order."""
        if not contents or self.read_only:
            return []
        items = self._check_many(contents, private, None, categories, metadata)
        b = self._binding

        async def write_all() -> list[MemoryRecord]:
            return [await b.write(c, scope, categories, metadata, strict_metadata=True) for c in items]

        return await b.acall(write_all)

    def _check_write(self, private: bool, root_scope: str | None) -> None:
        if private:
            raise CrewMemoryRefusedError(
                "invalid_input", "retold has no per-source private records: write to a scope instead"
            )
        if root_scope is not None:
            raise CrewMemoryRefusedError(
                "invalid_write_target", "retold decides where memory lives from the principal, not root_scope"
            )

    def _check_many(
        self, contents: Any, private: bool, root_scope: str | None,
        categories: list[str] | None, metadata: dict[str, Any] | None,
    ) -> list[str]:  # fmt: skip
        self._check_write(private, root_scope)
        if isinstance(contents, str) or not isinstance(contents, Sequence):
            raise CrewMemoryRefusedError("invalid_input", "contents must be a list of strings")
        items = list(contents)
        for item in items:
            self._binding.write_payload(item, categories, metadata, strict_metadata=True)
        return items

    # --- extract (no LLM) ------------------------------------------------------------------

    def extract_memories(self, content: str) -> list[str]:
        """Record ``content`` as the session's turns for retold's own extraction; ``[]``.

        CrewAI calls this after each task with "Task: ... Result: ..." and stores what it
        returns. retold stores nothing unevidenced here: the task becomes the user turn and the
        result the assistant turn; the session's end runs retold's extraction on them.
        """
        if self.read_only or not isinstance(content, str) or not content.strip():
            return []
        b = self._binding
        b.post(lambda: self._record_dump(content), "record the task as turns")
        return []

    async def aextract_memories(self, content: str) -> list[str]:
        """:meth:`extract_memories`, awaited until the turns are recorded."""
        if self.read_only or not isinstance(content, str) or not content.strip():
            return []
        await self._binding.acall(lambda: self._record_dump(content))
        return []

    async def _record_dump(self, content: str) -> None:
        task, result = parse_task_dump(content)
        if task is not None:
            await self._binding.record_turn("user", task)
        await self._binding.record_turn("assistant", result)

    # --- recall -----------------------------------------------------------------------------

    def recall(
        self,
        query: str,
        scope: str | None = None,
        categories: list[str] | None = None,
        limit: int = 10,
        depth: Literal["shallow", "deep"] = "deep",
        source: str | None = None,
        include_private: bool = False,
    ) -> list[MemoryMatch]:
        """retold's search graph on ``query`` (whitespace-normalised, first 500 characters).

        ``depth`` is ignored (there is no LLM-driven deep recall: the graph is one pass), as
        are ``source`` and ``include_private`` (privacy is the scopes). A foreign scope → ``[]``.
        """
        b = self._binding
        return list(b.call(lambda: b.search(query, scope, categories, limit)))

    async def arecall(
        self,
        query: str,
        scope: str | None = None,
        categories: list[str] | None = None,
        limit: int = 10,
        depth: Literal["shallow", "deep"] = "deep",
        source: str | None = None,
        include_private: bool = False,
    ) -> list[MemoryMatch]:
        """:meth:`recall` without blocking the caller's loop."""
        b = self._binding
        return list(await b.acall(lambda: b.search(query, scope, categories, limit)))

    # --- forget / reset / update -------------------------------------------------------------

    def forget(
        self,
        scope: str | None = None,
        categories: list[str] | None = None,
        older_than: datetime | None = None,
        metadata_filter: dict[str, Any] | None = None,
        record_ids: list[str] | None = None,
    ) -> int:
        """Tombstone matching records this principal can change (audited); the number forgotten.

        With no ``record_ids`` and no scope, only the principal's own scopes (user, private).
        """
        b = self._binding
        return b.call(lambda: b.forget(scope, categories, record_ids, older_than, metadata_filter, own=True))

    async def aforget(
        self,
        scope: str | None = None,
        categories: list[str] | None = None,
        older_than: datetime | None = None,
        metadata_filter: dict[str, Any] | None = None,
        record_ids: list[str] | None = None,
    ) -> int:
        """:meth:`forget` without blocking the caller's loop."""
        b = self._binding
        return await b.acall(
            lambda: b.forget(scope, categories, record_ids, older_than, metadata_filter, own=True)
        )

    def reset(self, scope: str | None = None) -> None:
        """Forget everything in ``scope`` this principal can change; ``None``: its own scopes only."""
        self.forget(scope=scope)

    def reset_all(self) -> None:
        """The same as ``reset()``: one crew never wipes the store, or any other user's memory."""
        self.forget()

    def update(
        self,
        record_id: str,
        content: str | None = None,
        scope: str | None = None,
        categories: list[str] | None = None,
        metadata: dict[str, Any] | None = None,
        importance: float | None = None,
    ) -> MemoryRecord:
        """A new content version (``memory_revise`` supersede): the returned record has a new id.

        retold keeps history instead of editing: scope, categories and metadata cannot change.
        """
        if scope is not None or categories is not None or metadata is not None:
            raise CrewMemoryRefusedError(
                "invalid_input", "retold versions a memory's content; its scope and tags cannot be edited"
            )
        b = self._binding
        if content is None or self.read_only:
            found = b.call(lambda: b.get(record_id))
            if found is None:
                raise CrewMemoryRefusedError(
                    "not_found", f"no memory {str(record_id)[:80]!r} is visible here"
                )
            return crew_record(found)
        return b.call(lambda: b.revise(record_id, content))

    # --- the end of a unit of work ----------------------------------------------------------

    def drain_writes(self) -> None:
        """Wait for queued writes, then end a kickoff-scoped session (scheduling extraction).

        CrewAI calls this at the end of every kickoff. On the owning loop it cannot wait: the
        session end is queued behind the writes instead.
        """
        b = self._binding
        if b.bridge.on_owner():
            b.post(lambda: b.end(roll=True), "end the kickoff's session")
            return
        b.wait_pending()
        if not b.fixed_session:
            b.call(lambda: b.end(roll=True))

    async def adrain_writes(self) -> None:
        """:meth:`drain_writes` for async code."""
        b = self._binding
        await b.await_pending()
        if not b.fixed_session:
            await b.acall(lambda: b.end(roll=True))

    def end_session(self) -> bool:
        """End the current session now (schedules extraction); False when nothing ran in it."""
        b = self._binding
        b.wait_pending()
        return bool(b.call(lambda: b.end(roll=True)))

    async def aend_session(self) -> bool:
        """:meth:`end_session` for async code."""
        b = self._binding
        await b.await_pending()
        return bool(await b.acall(lambda: b.end(roll=True)))

    def close(self) -> None:
        """Wait for queued writes and end the session; the runtime stays open (the host owns it)."""
        self.end_session()
