"""What retold's CrewAI ``Memory`` and ``StorageBackend`` share: one bound principal, calls in order.

CrewAI scope paths map to retold scopes here (:func:`map_path`), records become CrewAI's
``MemoryRecord`` / ``MemoryMatch`` (:func:`crew_record`, :class:`RetoldMemoryMatch`), and
:class:`Binding` runs every call on the loop that owns the runtime, in submission order. The
rules are documented on :mod:`retold.adapters.crewai_memory`.

One job: acting as one bound principal for CrewAI's two memory seams (``Memory`` and
``StorageBackend``), translating CrewAI's paths, records and filters to retold's and back; it
is long because every memory operation both seams offer (write, search, list, get, forget,
revise) is written here once, with the ordered calls on the owning loop, instead of twice.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import dataclasses
import logging
import threading
import uuid
from collections.abc import Awaitable, Callable, Mapping, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Literal, TypeVar

try:
    from crewai.memory.types import MemoryMatch, MemoryRecord
    from crewai.memory.utils import normalize_scope_path
except ImportError as exc:  # pragma: no cover - depends on the installed extras
    raise ImportError(
        f"retold.adapters.crewai needs CrewAI 1.15 or later: pip install 'retold[crewai]' ({exc})"
    ) from exc
from pydantic import PrivateAttr

from retold.adapters.portal import LoopBridge
from retold.errors import InvalidArgumentError, RetoldError
from retold.models import Principal, Record, Scope, SearchRequest, SearchResult
from retold.policy.grants import readable_scopes
from retold.policy.lifecycle import kept_while_saved
from retold.retrieve.render import render_result, short_id
from retold.sync import SyncRuntime
from retold.tools import limits
from retold.util import clean_text, normalize_ws, text_problem

if TYPE_CHECKING:
    from retold.runtime import Runtime

__all__ = [
    "FORGET_REASON",
    "LIST_MAX",
    "LIVE",
    "METADATA_KEYS",
    "Binding",
    "CrewMemoryRefusedError",
    "RetoldMemoryMatch",
    "crew_path",
    "crew_record",
    "map_path",
    "matches",
    "naive_utc",
    "parse_task_dump",
]

log = logging.getLogger(__name__)
T = TypeVar("T")

LIVE = ("provisional", "confirmed")
METADATA_KEYS = ("evidence", "type", "attribute")
FORGET_REASON = "forgotten through CrewAI Memory"
LIST_MAX = 10_000  # records one listing reads at most


# --- errors ---------------------------------------------------------------------------------


class CrewMemoryRefusedError(RetoldError, ValueError):
    """retold refused a CrewAI memory call; nothing was written. Carries the tools' error shape.

    A ``ValueError`` too, as CrewAI's own ``Memory`` raises for a record it cannot find.
    """

    def __init__(self, code: str, message: str, **extra: Any) -> None:
        super().__init__(f"{code}: {message}")
        self.code, self.message, self.extra = code, message, extra

    def as_dict(self) -> dict[str, Any]:
        return {"ok": False, "error": self.code, "message": self.message, **self.extra}


def _refused(result: Mapping[str, Any]) -> CrewMemoryRefusedError:
    extra = {k: v for k, v in result.items() if k not in ("ok", "error", "message")}
    return CrewMemoryRefusedError(str(result.get("error")), str(result.get("message")), **extra)


# --- scope paths ----------------------------------------------------------------------------


def map_path(path: Any, principal: Principal) -> tuple[bool, Scope | None]:
    """``(mapped, scope)`` for a CrewAI scope path; ``(True, None)`` is ``/`` (every readable scope).

    ``(False, None)``: a foreign or malformed path, which names nothing this principal has.
    """
    if path is None:
        return True, None
    if not isinstance(path, str) or len(path) > limits.MAX_PAYLOAD_CHARS or text_problem(path):
        return False, None
    parts = [p for p in normalize_scope_path(path.strip()).split("/") if p]
    if not parts:
        return True, None
    head, rest = parts[0], parts[1:]
    if head == "user" and (not rest or rest[0] == principal.user_id):
        return True, principal.user_scope
    if head == "agent" and (not rest or rest[0] == principal.agent_id):
        return True, principal.private_scope
    if head == "project" and principal.project_id is not None:
        own = [p for p in principal.project_id.split("/") if p]
        if not rest or rest[: len(own)] == own:
            return True, Scope("project", principal.project_id)
    if head == "org" and rest:
        return True, Scope("org", rest[0])
    return False, None


def crew_path(scope: Scope) -> str:
    """The CrewAI path a retold scope is shown under (a private scope: ``/agent/<agent_id>``)."""
    if scope.kind == "agent":
        return f"/agent/{scope.id.split('/', 1)[0]}"
    return f"/{scope.kind}/{scope.id}"


def naive_utc(moment: datetime) -> datetime:
    """CrewAI compares against naive ``datetime.utcnow()``."""
    return moment.astimezone(UTC).replace(tzinfo=None) if moment.tzinfo else moment


def _aware(moment: datetime) -> datetime:
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment


def crew_record(record: Record, *, importance: float = 0.5) -> MemoryRecord:
    """A retold record as CrewAI sees it: its id, content, path, tags as categories, provenance."""
    return MemoryRecord(
        id=record.id,
        content=record.content,
        scope=crew_path(record.scope),
        categories=list(record.tags),
        metadata={
            "retold": {
                "short_id": short_id(record.id),
                "type": record.type,
                "status": record.status,
                "source_kind": record.source_kind,
                "scope": str(record.scope),
                "creator_agent_id": record.creator_agent_id,
            }
        },
        importance=importance,
        created_at=naive_utc(record.created_at),
        last_accessed=naive_utc(record.created_at),
        source=record.source_ref,
    )


class RetoldMemoryMatch(MemoryMatch):
    """A CrewAI match carrying retold's score and explanation; ``format()`` is retold's rendering.

    CrewAI pastes ``format()`` into the task prompt. Its own format prints content and metadata
    raw, so stored text could pose as another memory; retold's block quotes every content line.
    """

    _rendered: str = PrivateAttr(default="")
    _explanation: Any = PrivateAttr(default=None)

    @classmethod
    def of(cls, result: SearchResult) -> RetoldMemoryMatch:
        explanation = result.explanation
        match = cls(
            record=crew_record(result.record),
            score=float(result.score),
            match_reasons=[*explanation.matched_by, f"gate: {explanation.gate}"],
        )
        match._rendered = render_result(result)
        match._explanation = explanation
        return match

    @property
    def explanation(self) -> Any:
        """retold's :class:`~retold.models.Explanation` for this result."""
        return self._explanation

    def format(self) -> str:
        """retold's block for this result, ending in a blank line so blocks stay apart when joined."""
        return f"{self._rendered}\n" if self._rendered else super().format()


# --- the binding: one principal, one owning loop, calls in order ---------------------------


def _kickoff_session() -> str:
    return f"crewai-{uuid.uuid4().hex[:16]}"


class Binding:
    """One principal on one runtime; every call runs on the owning loop, in submission order."""

    def __init__(
        self,
        runtime: Runtime | SyncRuntime,
        *,
        agent_id: str,
        user_id: str,
        project_id: str | None,
        session_id: str | None,
        write_target: str,
        loop: asyncio.AbstractEventLoop | None,
        who: str,
    ) -> None:
        # A sync host's handle: the runtime behind it, owned by its portal's loop.
        self.rt: Runtime = runtime.runtime if isinstance(runtime, SyncRuntime) else runtime
        self.fixed_session = session_id is not None
        # Builds and validates the identity now: a bad id is refused before CrewAI sees the memory.
        self.principal = Principal(agent_id, user_id, session_id or _kickoff_session(), project_id)
        if not isinstance(write_target, str) or not write_target.strip():
            raise InvalidArgumentError("write_target must name one of retold's write targets")
        self.write_target = write_target
        self.bridge = LoopBridge(
            self.rt,
            loop,
            who=who,
            sync_use="crew.kickoff() or crew.akickoff()",
            async_use="await memory.a...",
        )
        self.bridge.require_owner()
        self.started = False
        self.active = False  # something ran in the current session since it started
        self._lane: asyncio.Lock | None = None
        self._pending: set[concurrent.futures.Future[Any] | asyncio.Future[Any]] = set()
        self._guard = threading.Lock()
        self.last_search: Any = None

    # --- running on the owning loop -------------------------------------------------------

    async def _in_lane(self, factory: Callable[[], Awaitable[T]]) -> T:
        if self._lane is None:
            self._lane = asyncio.Lock()
        async with self._lane:  # FIFO: calls run in the order they were handed to the loop
            return await factory()

    def call(self, factory: Callable[[], Awaitable[T]]) -> T:
        """Run and wait, for CrewAI's sync callers; refused on the owning loop (it would block it)."""
        if self.bridge.on_owner():
            raise RuntimeError(
                "CrewAI called retold's Memory synchronously on the event loop that owns the runtime, "
                "where it would block; open the runtime with RuntimePortal.open(...) or "
                "retold.open_runtime_sync(...) to use it from kickoff() and akickoff()"
            )
        return self.bridge.call(lambda: self._in_lane(factory))

    async def acall(self, factory: Callable[[], Awaitable[T]]) -> T:
        return await self.bridge.acall(lambda: self._in_lane(factory))

    def post(self, factory: Callable[[], Awaitable[Any]], what: str) -> None:
        """Queue without waiting (CrewAI's background saves); :meth:`wait_pending` waits for it."""
        future: concurrent.futures.Future[Any] | asyncio.Future[Any]
        if self.bridge.on_owner():
            future = asyncio.ensure_future(self._in_lane(factory))
        else:
            future = self.bridge.submit(lambda: self._in_lane(factory))
        with self._guard:
            self._pending.add(future)

        def done(f: Any) -> None:
            with self._guard:
                self._pending.discard(f)
            if not f.cancelled() and f.exception() is not None:
                log.error("retold could not %s for CrewAI", what, exc_info=f.exception())

        future.add_done_callback(done)

    def wait_pending(self) -> None:
        with self._guard:
            pending = list(self._pending)
        for future in pending:
            if isinstance(future, concurrent.futures.Future):
                concurrent.futures.wait([future])

    async def await_pending(self) -> None:
        with self._guard:
            pending = list(self._pending)
        for future in pending:
            wrapped = asyncio.wrap_future(future) if isinstance(future, concurrent.futures.Future) else future
            await asyncio.gather(wrapped, return_exceptions=True)

    # --- on the owning loop ---------------------------------------------------------------

    async def live(self) -> Principal:
        """The principal with its session started (an idle split continues as ``<id>~2``)."""
        if not self.started:
            self.principal = await self.rt.hooks.on_session_start(self.principal)
            self.started = True
        self.active = True
        return self.principal

    async def record_turn(self, role: Literal["user", "assistant"], text: str) -> None:
        text = clean_text(text).strip()
        if text:
            self.principal = await self.rt.hooks.on_turn(await self.live(), role, text)

    async def end(self, *, roll: bool) -> bool:
        """End the current session (schedules extraction); a kickoff-scoped one gets a fresh id."""
        ended = False
        if self.started and self.active:
            ended = await self.rt.hooks.on_session_end(self.principal)
        if roll and not self.fixed_session and self.started:
            p = self.principal
            self.principal = Principal(p.agent_id, p.user_id, _kickoff_session(), p.project_id)
            self.started = self.active = False
        return ended

    async def readable(self, scope: Scope | None, *, own: bool = False) -> list[Scope]:
        """The readable scopes a path covers; for ``/`` with ``own``, only the user's and private one."""
        p = await self.live()
        scopes = await readable_scopes(self.rt.store, p)
        if scope is not None:
            return [s for s in scopes if s == scope]
        if own:
            return [s for s in scopes if s in (p.user_scope, p.private_scope)]
        return scopes

    async def write(
        self,
        content: Any,
        path: Any,
        categories: Sequence[str] | None,
        metadata: Mapping[str, Any] | None,
        *,
        strict_metadata: bool,
    ) -> MemoryRecord:
        """One ``memory_write`` into the scope ``path`` maps to; refusals raise, nothing half-written."""
        p = await self.live()
        payload = self.write_payload(content, categories, metadata, strict_metadata=strict_metadata)
        mapped, scope = map_path(path, p)
        targets = await self.rt.tools.write_targets(p)
        # The tools' codes (spec §8.1): nothing writable at all is scope_not_writable, whatever
        # the path; a name or path this session does not offer is invalid_write_target.
        if not targets:
            raise CrewMemoryRefusedError("scope_not_writable", "this session may not write to any memory")
        writable = ", ".join(crew_path(s) for s in targets.values())
        if not mapped:
            raise CrewMemoryRefusedError(
                "invalid_write_target", f"the CrewAI scope {str(path)[:80]!r} names no memory of this session"
            )
        if scope is None:
            if self.write_target not in targets:
                raise CrewMemoryRefusedError(
                    "invalid_write_target",
                    f"write target {self.write_target[:80]!r} is not offered in this session; "
                    f"writable: {writable}",
                )
            name = self.write_target
        else:
            found = next((n for n, s in targets.items() if s == scope), None)
            if found is None:
                raise CrewMemoryRefusedError(
                    "scope_not_writable",
                    f"this session cannot write {str(path)[:80]!r}; writable: {writable}",
                )
            name = found
        result = await self.rt.tools.call(p, "memory_write", {**payload, "write_target": name})
        if not result.get("ok"):
            raise _refused(result)
        record = await self.rt.store.get_record(result["record_id"])
        if record is None:  # pragma: no cover - a write that reports a record always has one
            raise CrewMemoryRefusedError("not_found", "the written record could not be read back")
        changes = kept_while_saved(record)  # what a crew saves is kept until it is forgotten
        if changes:
            await self.rt.store.update_record(record.id, **changes)
            record = dataclasses.replace(record, **changes)  # type: ignore[arg-type]
        out = crew_record(record)
        out.metadata["retold"]["outcome"] = result.get("outcome")
        return out

    def write_payload(
        self, content: Any, categories: Sequence[str] | None, metadata: Mapping[str, Any] | None,
        *, strict_metadata: bool,
    ) -> dict[str, Any]:  # fmt: skip
        """The ``memory_write`` payload; the handler validates every field again."""
        if not isinstance(content, str) or not content.strip():
            raise CrewMemoryRefusedError("invalid_input", "content must be non-empty text")
        if metadata is not None and not isinstance(metadata, Mapping):
            raise CrewMemoryRefusedError("invalid_input", "metadata must be a mapping")
        meta = dict(metadata or {})
        extra = sorted(k for k in meta if k not in METADATA_KEYS)
        if extra:
            if strict_metadata:
                raise CrewMemoryRefusedError(
                    "invalid_input",
                    f"retold keeps no free-form metadata; supported keys: {', '.join(METADATA_KEYS)} "
                    f"(got {', '.join(map(str, extra))[:200]})",
                )
            log.warning("retold's CrewAI storage does not keep metadata keys %s", extra[:10])
        payload: dict[str, Any] = {"type": meta.get("type", "episodic"), "content": content}
        if meta.get("attribute") is not None:
            payload["attribute"] = meta["attribute"]
        evidence = meta.get("evidence")
        if isinstance(evidence, str) and evidence.strip():
            payload.update(source_kind="user_statement", evidence=evidence)
        else:
            payload["source_kind"] = self.rt.config.integrations.store_source_kind
        if categories:
            if (
                isinstance(categories, str)
                or not isinstance(categories, Sequence)
                or not all(isinstance(c, str) for c in categories)
            ):
                raise CrewMemoryRefusedError("invalid_input", "categories must be a list of strings")
            payload["tags"] = list(dict.fromkeys(categories))
        return payload

    async def search(
        self, query: Any, path: Any, categories: Sequence[str] | None, limit: int
    ) -> list[RetoldMemoryMatch]:
        """retold's search graph on the query text, narrowed to the path's scope; foreign → []."""
        p = await self.live()
        mapped, scope = map_path(path, p)
        if not mapped or not isinstance(query, str):
            return []
        text = normalize_ws(clean_text(query))[: limits.MAX_QUERY_CHARS].strip()
        if not text:
            return []
        wanted = max(1, min(int(limit) if isinstance(limit, int) else 10, limits.MAX_K))
        request = SearchRequest(
            queries=[text], k=limits.MAX_K if categories else wanted,
            scopes=[scope] if scope is not None else None, trigger="tool",
        )  # fmt: skip
        try:
            response = await self.rt.search(p, request)
        except InvalidArgumentError as exc:
            log.warning("retold refused a CrewAI recall: %s", exc)
            return []
        self.last_search = response
        results = response.results
        if categories:
            results = [r for r in results if set(categories) & set(r.record.tags)]
        return [RetoldMemoryMatch.of(r) for r in results[:wanted]]

    async def records(self, path: Any, *, own: bool = False) -> list[Record]:
        """Live records the principal reads under ``path``, newest first."""
        mapped, scope = map_path(path, await self.live())
        if not mapped:
            return []
        found: list[Record] = []
        for s in await self.readable(scope, own=own):
            found.extend(await self.rt.store.records_in_scope(s, statuses=LIVE))
            if len(found) >= LIST_MAX:
                break
        now = self.rt.clock.now()
        found = [r for r in found if r.expires_at is None or _aware(r.expires_at) > now]
        return sorted(found, key=lambda r: (r.created_at, r.id), reverse=True)[:LIST_MAX]

    async def get(self, record_id: Any) -> Record | None:
        """A live record this principal reads; None for a missing or foreign id alike."""
        if not isinstance(record_id, str) or not record_id.strip() or len(record_id) > limits.MAX_ID_CHARS:
            return None
        p = await self.live()
        record = await self.rt.store.get_record(record_id.strip())
        if record is None or record.status not in LIVE:
            return None
        return record if record.scope in await readable_scopes(self.rt.store, p) else None

    async def forget(
        self,
        path: Any,
        categories: Sequence[str] | None,
        record_ids: Sequence[str] | None,
        older_than: datetime | None,
        metadata_filter: Mapping[str, Any] | None,
        *,
        own: bool,
    ) -> int:
        """``memory_forget`` every matching record the principal can change; the count forgotten."""
        p = await self.live()
        if record_ids is not None:
            mapped, scope = map_path(path, p)
            if not mapped:
                return 0
            found = [r for r in [await self.get(i) for i in record_ids] if r is not None]
            candidates = [r for r in found if scope is None or r.scope == scope]
        else:
            candidates = await self.records(path, own=own)
        picked = [r for r in candidates if matches(r, categories, older_than, metadata_filter)]
        forgotten = 0
        for record in picked:
            result = await self.rt.tools.call(p, "memory_forget", {"id": record.id, "reason": FORGET_REASON})
            forgotten += bool(result.get("ok") and result.get("changed", True))
        return forgotten

    async def revise(self, record_id: str, content: str) -> MemoryRecord:
        """A new version of a record through ``memory_revise`` supersede (retold versions, never edits)."""
        p = await self.live()
        if await self.get(record_id) is None:
            raise CrewMemoryRefusedError("not_found", f"no memory {str(record_id)[:80]!r} is visible here")
        payload: dict[str, Any] = {
            "action": "supersede", "id": record_id, "content": content,
            "reason": "updated through CrewAI Memory", "source_kind": "agent_inference",
        }  # fmt: skip
        result = await self.rt.tools.call(p, "memory_revise", payload)
        if not result.get("ok"):
            raise _refused(result)
        record = await self.rt.store.get_record(result["record_id"])
        assert record is not None
        return crew_record(record)


def matches(
    record: Record,
    categories: Sequence[str] | None,
    older_than: datetime | None,
    metadata_filter: Mapping[str, Any] | None,
) -> bool:
    if categories and not set(categories) & set(record.tags):
        return False
    if older_than is not None and _aware(record.created_at) >= _aware(older_than):
        return False
    if metadata_filter:
        shown = crew_record(record).metadata.get("retold", {})
        if any(shown.get(k) != v for k, v in metadata_filter.items()):
            return False
    return True


def parse_task_dump(content: str) -> tuple[str | None, str]:
    """``(task, answer)`` from CrewAI's post-task dump ("Task: ...\\nAgent: ...\\nExpected result:
    ...\\nResult: ..."); ``(None, content)`` for anything else.

    The task ends at the first ``\\nAgent: ``, so the user turn can only come out shorter than
    the task, never holding the model's result; anything doubtful stays in the assistant turn.
    """
    if not content.startswith("Task: "):
        return None, content
    head, sep, tail = content.partition("\nAgent: ")
    if not sep:
        return None, content
    _, sep2, after = tail.partition("\nExpected result: ")
    _, sep3, result = after.partition("\nResult: ")
    if not (sep2 and sep3):
        return None, content
    # CrewAI passes the model's whole ReAct text; the turn is the answer it gave
    answer = result.rpartition("Final Answer:")[2].strip() if "Final Answer:" in result else result
    return head[len("Task: ") :], answer or result
