"""retold as a LangGraph ``BaseStore``: LangMem's memory tools, Deep Agents' ``StoreBackend`` and
``runtime.store`` in any graph read and write retold memory, under retold's rules.

    store = RetoldStore(rt, agent_id="planner")          # ("memories", user_id, ...) → user:<id>
    graph = builder.compile(store=store)                  # or create_agent(..., store=store)

* **Namespaces → scopes** (:class:`NamespaceMap`, in :mod:`retold.adapters.langgraph_namespaces`):
  ``("memories", <user>, ...)`` is that user's scope, ``("memories", "project", <project>, ...)``
  the project's. Anything else is refused with :class:`StoreNamespaceError` naming the namespace.
  Grants decide (``rt.host.grant``), exactly as for the tools: a namespace the principal cannot
  read answers like an empty one (get → None, search → []), a put or delete where it cannot write
  raises :class:`StoreRefusedError` carrying the tools' ``{"ok": False, "error":
  "scope_not_writable", ...}``.
* **Who is calling** (:func:`~retold.adapters.langgraph_namespaces.run_caller`): agent =
  ``agent_id``; user = the run's (``configurable.user_id`` / ``langgraph_user_id`` / the run
  context's ``user_id``), else the namespace's, else ``default_user_id``; session = the run's
  ``thread_id``, outside a run ``integrations.default_session_id``. Read from the caller's run
  at call time, never from the background batch task.
* **Served runs act as the authenticated user.** In a run a LangGraph server serves
  (``langgraph_auth_user`` in its config) the user is that user's ``identity``, exactly as for
  the middleware and tools (:mod:`retold.graph_nodes.identity`); a run naming anyone else, or
  a namespace of another user, raises :class:`StoreIdentityError` (``identity_mismatch``)
  before anything is read or written, and a served run nobody is authenticated on raises it
  (``unauthenticated``) unless ``RETOLD_GRAPH_IDENTITY=input``. A request an authenticated
  user makes to the server's ``/store`` API acts as them too. Outside a server nothing changes.
* **Outside a run** (host code; a LangChain ``@tool`` or ``RunnableLambda`` invoked outside a
  graph) the namespace names the user unless the call's config names one, and
  ``list_namespaces`` is the operator's view: every namespace of the scopes this agent holds
  read grants on, whoever's they are (user ids and the labels they chose). Inside a run that
  knows its user it lists only what that user may read.
* **TTL** is bounded by what a date holds: a ttl expiring after 9999-01-01 is refused
  (``invalid_input``) before anything is written; a refresh on read stops at that date.
* **Writes go through the tools**: a put is ``memory_write`` (an episodic memory in the
  namespace's scope; evidence, dedup, audit as usual) or, for a key whose record only it uses,
  ``memory_revise`` supersede; a delete is ``memory_forget`` once no other key uses the record.
  The whole value is kept beside the record (``store_items``) and returned exactly by get.
* **Search** with a query runs the search graph (gate on unless ``gate=False``, logged) over the
  namespace's scope; each hit is a :class:`RetoldSearchItem` with retold's fused ``score`` and
  ``explanation``. Records other surfaces wrote in the scope appear under the scope's root namespace keyed by
  record id, their value ``{"content": ..., "_retold": {provenance}}``; ``_retold`` is reserved.
* **The ambient profile** (:mod:`retold.adapters.langgraph_profile`): ``store.profile(user_id)``
  / ``await store.aprofile(...)``, and the read-only reserved key ``"_retold_profile"`` whose
  ``get`` answers the namespace's principal's profile; a put or delete of it is refused.
* **Loops**: async calls run on the loop that owns the runtime (:class:`LoopBridge`), batched
  there; sync calls work from any thread or other loop, and refuse clearly on the owning loop.

One job: LangGraph's ``BaseStore`` operations (get, put, delete, search, list namespaces) done
as retold's tools and search; it is long because each operation carries the caller's identity,
the grants, TTL and the keys a record is saved under, while namespaces, values and the profile
live in their own modules (:mod:`~retold.adapters.langgraph_namespaces`,
:mod:`~retold.adapters.langgraph_values`, :mod:`~retold.adapters.langgraph_profile`).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
from langgraph.store.base import (
    NOT_PROVIDED,
    GetOp,
    Item,
    ListNamespacesOp,
    MatchCondition,
    NotProvided,
    Op,
    PutOp,
    Result,
    SearchItem,
    SearchOp,
    TTLConfig,
)
from langgraph.store.base.batch import AsyncBatchedBaseStore

from retold.adapters.langgraph_namespaces import (
    CALLER,
    Call,
    Caller,
    NamespaceMap,
    NamespaceTarget,
    Outcome,
    current_caller,
)
from retold.adapters.langgraph_profile import PROFILE_KEY, ProfileAccess, is_profile_key, profile_refused
from retold.adapters.langgraph_values import (
    LIVE,
    MAX_KEY_CHARS,
    MAX_NAMESPACE_DEPTH,
    PAGE,
    RESERVED_KEY,
    SCAN_LIMIT,
    SWEEP_EVERY_S,
    RetoldSearchItem,
    StoreArgumentError,
    StoreIdentityError,
    StoreNamespaceError,
    StoreRefusedError,
    bounded_int,
    check_filter,
    check_index,
    check_key,
    check_namespace,
    check_namespace_for_write,
    check_ttl,
    check_value,
    dump_value,
    expiry_after,
    explanation_of,
    filter_matches,
    identity_refused,
    is_live,
    item_of,
    namespace_matches,
    ns_text,
    ns_tuple,
    owner_fields,
    record_item,
    record_text,
    refusal_of,
    search_item,
    show_namespace,
    source_fields,
)
from retold.adapters.portal import LoopBridge
from retold.errors import InvalidArgumentError
from retold.index.embedder import embed_queries
from retold.models import Principal, Record, Scope, SearchRequest, validate_id
from retold.policy.grants import readable_scopes
from retold.policy.lifecycle import kept_while_saved
from retold.store.items import StoreItemRow
from retold.tools import limits
from retold.util import normalize_ws, text_problem

if TYPE_CHECKING:
    from retold.runtime import Runtime

__all__ = [
    "PROFILE_KEY",
    "RESERVED_KEY",
    "NamespaceMap",
    "NamespaceTarget",
    "RetoldSearchItem",
    "RetoldStore",
    "StoreArgumentError",
    "StoreIdentityError",
    "StoreNamespaceError",
    "StoreRefusedError",
]

# --- the store -------------------------------------------------------------------------------


class RetoldStore(ProfileAccess, AsyncBatchedBaseStore):
    """A LangGraph ``BaseStore`` over one retold runtime, acting as agent ``agent_id``.

    ``namespaces`` is a :class:`NamespaceMap` (or any object with ``target(namespace)`` and
    ``namespace_for(scope)``); ``index_fields`` are the value fields whose text is searchable by
    default (None: ``content``, else the whole value as JSON); ``loop`` the loop that owns the
    runtime when it cannot be found (see :mod:`retold.adapters.portal`). ``gate=False`` returns
    every match of a query search instead of only what clears retold's relevance gate (the
    search log records the zero floors).
    """

    supports_ttl = True

    def __init__(
        self,
        runtime: Runtime,
        *,
        agent_id: str,
        namespaces: NamespaceMap | Any = None,
        default_user_id: str | None = None,
        index_fields: Sequence[str] | None = None,
        ttl_config: TTLConfig | None = None,
        loop: asyncio.AbstractEventLoop | None = None,
        gate: bool = True,
    ) -> None:
        # AsyncBatchedBaseStore.__init__ wants a running loop; the owner may be elsewhere.
        self._task: asyncio.Task | None = None  # first: its __del__ reads it even when a check below refuses
        self._rt = runtime
        validate_id("agent_id", agent_id)
        self.agent_id = agent_id
        self.namespaces = namespaces if namespaces is not None else NamespaceMap()
        self.default_user_id = default_user_id
        self.index_fields = list(index_fields) if index_fields is not None else None
        self.ttl_config = ttl_config
        if not isinstance(gate, bool):
            raise InvalidArgumentError("gate must be True or False")
        self.gate = gate
        self._bridge = LoopBridge(
            runtime,
            loop,
            who="RetoldStore",
            sync_use="store.get/put/search",
            async_use="await store.aget/aput/asearch",
        )
        self._loop = self._bridge.loop  # type: ignore[assignment]
        self._aqueue: asyncio.Queue[tuple[asyncio.Future, Op]] = asyncio.Queue()
        self._key_locks: dict[tuple[str, str], asyncio.Lock] = {}
        self._swept = 0.0

    # --- where calls run --------------------------------------------------------------------

    def _ensure_task(self) -> None:
        if self._bridge.on_owner():
            super()._ensure_task()

    async def _queued(self, op: Op) -> Any:
        """Run one op through the batch task on the owning loop, answering for this op alone."""
        call = Call(op, current_caller())

        async def on_owner() -> Outcome:
            self._loop = self._bridge.loop  # type: ignore[assignment]
            self._ensure_task()
            future = self._loop.create_future()  # type: ignore[union-attr]
            self._aqueue.put_nowait((future, call))  # type: ignore[arg-type]
            return await future

        outcome: Outcome = await self._bridge.acall(on_owner)
        if outcome.error is not None:
            raise outcome.error
        return outcome.result

    async def aget(
        self, namespace: tuple[str, ...], key: str, *, refresh_ttl: bool | None = None
    ) -> Item | None:
        refresh = (
            refresh_ttl if refresh_ttl is not None else (self.ttl_config or {}).get("refresh_on_read", True)
        )
        return await self._queued(GetOp(tuple(namespace), key, refresh_ttl=refresh))

    async def asearch(
        self,
        namespace_prefix: tuple[str, ...],
        /,
        *,
        query: str | None = None,
        filter: dict[str, Any] | None = None,
        limit: int = 10,
        offset: int = 0,
        refresh_ttl: bool | None = None,
    ) -> list[SearchItem]:
        refresh = (
            refresh_ttl if refresh_ttl is not None else (self.ttl_config or {}).get("refresh_on_read", True)
        )
        return await self._queued(
            SearchOp(tuple(namespace_prefix), filter, limit, offset, query, refresh_ttl=refresh)
        )

    async def aput(
        self,
        namespace: tuple[str, ...],
        key: str,
        value: Mapping[str, Any],
        index: Literal[False] | list[str] | None = None,
        *,
        ttl: float | NotProvided | None = NOT_PROVIDED,
    ) -> None:
        if ttl is NOT_PROVIDED:
            ttl = (self.ttl_config or {}).get("default_ttl")
        await self._queued(PutOp(tuple(namespace), key, value, index, ttl=ttl))  # type: ignore[arg-type]

    async def adelete(self, namespace: tuple[str, ...], key: str) -> None:
        await self._queued(PutOp(tuple(namespace), key, None))

    async def alist_namespaces(
        self,
        *,
        prefix: tuple[str, ...] | None = None,
        suffix: tuple[str, ...] | None = None,
        max_depth: int | None = None,
        limit: int = 100,
        offset: int = 0,
    ) -> list[tuple[str, ...]]:
        conditions = []
        for path in (prefix, suffix):  # refused before queueing, as LangGraph's own stores do
            if path is not None:
                check_namespace(path)
        if prefix:
            conditions.append(MatchCondition(match_type="prefix", path=tuple(prefix)))
        if suffix:
            conditions.append(MatchCondition(match_type="suffix", path=tuple(suffix)))
        return await self._queued(
            ListNamespacesOp(
                match_conditions=tuple(conditions), max_depth=max_depth, limit=limit, offset=offset
            )
        )

    # The sync side: handed to the owning loop from a thread or another loop; never on the owner.

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        ops = list(ops)
        return self._bridge.call(lambda: self.abatch(ops))

    def get(self, namespace: tuple[str, ...], key: str, *, refresh_ttl: bool | None = None) -> Item | None:
        caller = current_caller()
        return self._bridge.call(
            lambda: self._with(caller, self.aget(namespace, key, refresh_ttl=refresh_ttl))
        )

    def search(
        self,
        namespace_prefix: tuple[str, ...],
        /,
        *,
        query: str | None = None,
        filter: dict[str, Any] | None = None,
        limit: int = 10,
        offset: int = 0,
        refresh_ttl: bool | None = None,
    ) -> list[SearchItem]:
        caller = current_caller()
        return self._bridge.call(
            lambda: self._with(
                caller,
                self.asearch(
                    namespace_prefix, query=query, filter=filter, limit=limit, offset=offset,
                    refresh_ttl=refresh_ttl,
                ),
            )
        )  # fmt: skip

    def put(
        self,
        namespace: tuple[str, ...],
        key: str,
        value: Mapping[str, Any],
        index: Literal[False] | list[str] | None = None,
        *,
        ttl: float | NotProvided | None = NOT_PROVIDED,
    ) -> None:
        caller = current_caller()
        self._bridge.call(lambda: self._with(caller, self.aput(namespace, key, value, index, ttl=ttl)))

    def delete(self, namespace: tuple[str, ...], key: str) -> None:
        caller = current_caller()
        self._bridge.call(lambda: self._with(caller, self.adelete(namespace, key)))

    def list_namespaces(
        self,
        *,
        prefix: tuple[str, ...] | None = None,
        suffix: tuple[str, ...] | None = None,
        max_depth: int | None = None,
        limit: int = 100,
        offset: int = 0,
    ) -> list[tuple[str, ...]]:
        return self._bridge.call(
            lambda: self.alist_namespaces(
                prefix=prefix, suffix=suffix, max_depth=max_depth, limit=limit, offset=offset
            )
        )

    # The ambient profile (retold.adapters.langgraph_profile): read-only, the caller read here.

    async def aprofile(self, user_id: str | None = None, *, project_id: str | None = None) -> str:
        """The profile block of this store's agent and ``user_id`` ("" when nothing is ambient).

        Inside a run that names its user, that user is the caller and another ``user_id``
        reads ""; outside one, ``user_id`` (else ``default_user_id``) is. ``project_id``
        adds that project's ambient records, as working in it would.
        """
        caller = current_caller()
        return await self._bridge.acall(
            lambda: self._profile_for(user_id, project_id, caller.user_id, caller.thread_id)
        )

    def profile(self, user_id: str | None = None, *, project_id: str | None = None) -> str:
        """:meth:`aprofile` for sync callers (threads, other loops)."""
        caller = current_caller()
        return self._bridge.call(
            lambda: self._profile_for(user_id, project_id, caller.user_id, caller.thread_id)
        )

    async def _with(self, caller: Caller, coro: Any) -> Any:
        """Await ``coro`` on the owning loop as ``caller`` (the sync caller's run identity)."""
        token = CALLER.set(caller)
        try:
            return await coro
        finally:
            CALLER.reset(token)

    # --- executing ops ----------------------------------------------------------------------

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        """Execute ops in order. Queued calls answer one by one; direct calls raise the first error."""
        ops = list(ops)
        if any(not isinstance(op, Call) for op in ops) and not self._bridge.on_owner():
            caller = current_caller()
            return await self._bridge.acall(lambda: self._with(caller, self.abatch(ops)))
        await self._maybe_sweep()
        results: list[Any] = []
        for op in ops:
            if isinstance(op, Call):
                try:
                    results.append(Outcome(await self._execute(op.op, op.caller), None))
                except Exception as exc:  # answered to that op's caller only
                    results.append(Outcome(None, exc))
            else:
                results.append(await self._execute(op, current_caller()))
        return results

    async def _execute(self, op: Op, caller: Caller) -> Any:
        if isinstance(op, GetOp):
            return await self._get(op, caller)
        if isinstance(op, SearchOp):
            return await self._search(op, caller)
        if isinstance(op, PutOp):
            if op.value is None:
                await self._delete(op, caller)
            else:
                await self._put(op, caller)
            return None
        if isinstance(op, ListNamespacesOp):
            return await self._list_namespaces(op, caller)
        raise InvalidArgumentError(f"RetoldStore cannot execute {type(op).__name__}")

    async def _maybe_sweep(self) -> None:
        now = time.monotonic()
        if now - self._swept >= SWEEP_EVERY_S:
            self._swept = now
            await self._rt.store.sweep_store_items(self._rt.clock.now())

    # --- namespaces and principals ------------------------------------------------------------

    def _target(self, namespace: tuple[str, ...]) -> NamespaceTarget:
        check_namespace(namespace)
        target = self.namespaces.target(namespace)
        if target is None:
            raise StoreNamespaceError(
                f"namespace {show_namespace(namespace)} maps to no retold scope; "
                "use ('memories', <user_id>, ...) or "
                "('memories', 'project', <project_id>, ...), or configure RetoldStore(namespaces=...)"
            )
        return target

    def _own(self, target: NamespaceTarget, caller: Caller, namespace: tuple[str, ...]) -> None:
        """A caller a LangGraph server authenticated may only name its own user's namespaces."""
        if caller.authenticated and target.user_id is not None and target.user_id != caller.user_id:
            raise identity_refused(
                "identity_mismatch",
                f"namespace {show_namespace(namespace)} belongs to another user than the authenticated "
                "one: a served run acts only as its authenticated user",
            )

    def _principal(self, target: NamespaceTarget, caller: Caller) -> Principal:
        """Agent, user and session for one op. Inside a run that names its user, that user acts:
        another user's namespace then fails the grant check (a user grant counts only for its
        own user), so nothing a run is steered to name crosses users. Outside a run, the
        namespace names the user (the host's own code is the caller)."""
        user = caller.user_id or target.user_id or self.default_user_id
        if not user:
            raise StoreNamespaceError(
                f"namespace of {target.scope} needs the caller's user: run with "
                'config={"configurable": {"user_id": ...}} or pass RetoldStore(default_user_id=...)'
            )
        session = caller.thread_id or self._rt.config.integrations.default_session_id
        try:
            return Principal(
                agent_id=self.agent_id,
                user_id=user,
                session_id=session,
                project_id=target.scope.id if target.scope.kind == "project" else None,
            )
        except InvalidArgumentError as exc:
            raise StoreNamespaceError(f"namespace of {target.scope}: {exc}") from None

    async def _can_read(self, principal: Principal, scope: Scope) -> bool:
        return scope in await readable_scopes(self._rt.store, principal)

    async def _write_target(self, principal: Principal, scope: Scope) -> str:
        """The tools' symbolic target naming ``scope`` for this principal, or the tools' refusal."""
        for name, offered in (await self._rt.tools.write_targets(principal)).items():
            if offered == scope:
                return name
        raise StoreRefusedError("scope_not_writable", f"this session cannot write to {scope}")

    def _lock(self, namespace: str, key: str) -> asyncio.Lock:
        return self._key_locks.setdefault((namespace, key), asyncio.Lock())

    # --- get --------------------------------------------------------------------------------

    async def _get(self, op: GetOp, caller: Caller) -> Item | None:
        target = self._target(op.namespace)
        self._own(target, caller, op.namespace)
        if not isinstance(op.key, str) or not op.key or len(op.key) > MAX_KEY_CHARS:
            return None
        principal = self._principal(target, caller)
        if not await self._can_read(principal, target.scope):
            return None
        if is_profile_key(op.key):
            return await self._profile_get(principal, op.namespace, op.key)
        store, now = self._rt.store, self._rt.clock.now()
        ns = ns_text(op.namespace)
        row = await store.get_store_item(ns, op.key, target.scope, now=now)
        if row is not None:
            if op.refresh_ttl:
                row = await self._refresh(row, now)
            return item_of(row, op.namespace)
        record = await self._keyless_record(target, op.namespace, op.key, now)
        return record_item(record, target.root) if record is not None else None

    async def _keyless_record(
        self, target: NamespaceTarget, namespace: tuple[str, ...], key: str, now: datetime
    ) -> Record | None:
        """The live record of ``target``'s scope that no item carries, when ``key`` is its id at the root."""
        if tuple(namespace) != target.root or len(key) > limits.MAX_ID_CHARS:
            return None
        store = self._rt.store
        record = await store.get_record(key)
        if record is None or not is_live(record, now) or record.scope != target.scope:
            return None
        return None if await store.records_with_items([record.id]) else record

    async def _refresh(self, row: StoreItemRow, now: datetime) -> StoreItemRow:
        """``refresh_ttl``: the item's TTL restarts; its record's expiry only ever moves later."""
        if row.ttl_minutes is None:
            return row
        expires = expiry_after(now, row.ttl_minutes)
        await self._rt.store.set_store_item_expiry(row.namespace, row.key, expires)
        if row.record_id is not None:
            record = await self._rt.store.get_record(row.record_id)
            if record is not None and record.expires_at is not None and record.expires_at < expires:
                await self._rt.store.update_record(record.id, expires_at=expires)
        return row

    # --- put --------------------------------------------------------------------------------

    async def _put(self, op: PutOp, caller: Caller) -> None:
        target = self._target(op.namespace)
        self._own(target, caller, op.namespace)
        check_namespace_for_write(op.namespace)
        if is_profile_key(op.key):
            raise profile_refused(op.key)
        key = check_key(op.key)
        value = check_value(op.value)
        ttl = check_ttl(op.ttl, self._rt.clock.now())  # before anything is written: no half-write
        fields = check_index(op.index)
        principal = self._principal(target, caller)
        write_target = await self._write_target(principal, target.scope)
        content = (
            None
            if op.index is False
            else record_text(value, fields if fields is not None else self.index_fields)
        )
        if content is not None and len(content) > limits.MAX_CONTENT_CHARS:
            raise StoreRefusedError(
                "invalid_input",
                f"the value's text to index is {len(content):,} characters and a memory holds at most "
                f"{limits.MAX_CONTENT_CHARS:,}: split it into several items, name shorter fields in "
                "index=[...], or put it with index=False (kept and returned by get, never searched)",
            )
        ns = ns_text(op.namespace)
        store, tools = self._rt.store, self._rt.tools
        async with self._lock(ns, key):
            existing = await store.store_item_row(ns, key)
            now = self._rt.clock.now()
            old = await store.get_record(existing.record_id) if existing and existing.record_id else None
            sole = old is not None and await store.store_item_users(old.id) == [(ns, key)]
            if existing is None:  # a record another surface wrote, listed under its id: this key's record
                old = await self._keyless_record(target, op.namespace, key, now)
                sole = old is not None
            outcome = "unindexed"
            record_id: str | None = None
            if content is not None:
                payload = source_fields(value, self._rt.config.integrations.store_source_kind)
                if (
                    old is not None
                    and is_live(old, now)
                    and old.scope == target.scope
                    and (normalize_ws(old.content) == normalize_ws(content))
                ):
                    record_id, outcome = old.id, "unchanged"
                elif sole and old is not None and is_live(old, now) and old.scope == target.scope:
                    result = await tools.call(
                        principal, "memory_revise",
                        {"action": "supersede", "id": old.id, "content": content,
                         "reason": "a LangGraph store put replaced this key's value", **payload},
                    )  # fmt: skip
                    if not result.get("ok"):
                        raise refusal_of(result)
                    record_id, outcome = result["record_id"], f"superseded:{old.id}"
                else:
                    result = await tools.call(
                        principal,
                        "memory_write",
                        {"type": "episodic", "content": content, "write_target": write_target, **payload},
                    )
                    if not result.get("ok"):
                        raise refusal_of(result)
                    record_id, outcome = result["record_id"], str(result.get("outcome"))
            elif sole and old is not None and is_live(old, now):
                await self._forget(principal, old.id, "a LangGraph store put made this key unindexed")
            expires = expiry_after(now, ttl) if ttl is not None else None
            if expires is None and record_id is not None:
                await self._keep(record_id)
            if expires is not None and record_id is not None and outcome != "unchanged":
                fresh = outcome.startswith(("created", "superseded"))
                record = await store.get_record(record_id)
                if (
                    fresh
                    and record is not None
                    and (record.expires_at is None or record.expires_at > expires)
                ):
                    await store.update_record(record_id, expires_at=expires)
            await store.put_store_item(
                StoreItemRow(
                    namespace=ns, key=key, scope=target.scope, record_id=record_id,
                    value=dump_value(value), agent_id=self.agent_id, user_id=principal.user_id,
                    created_at=existing.created_at if existing else now, updated_at=now,
                    expires_at=expires, ttl_minutes=ttl,
                )
            )  # fmt: skip
            await store.append_event(
                "store.item_put", self.agent_id, record_id=record_id,
                payload={
                    **owner_fields(principal, target.scope), "namespace": ns, "key": key, "outcome": outcome
                },
            )  # fmt: skip

    async def _keep(self, record_id: str) -> None:
        """A value put without a ttl is kept until it is deleted, as in every LangGraph store: its
        record loses the provisional lifetime an unevidenced claim gets elsewhere (its rank and
        status stay those of the agent's own claim). A reinforcement then extends no lifetime
        (:func:`retold.policy.lifecycle.kept_while_saved`)."""
        record = await self._rt.store.get_record(record_id)
        changes = kept_while_saved(record) if record is not None else {}
        if changes:
            await self._rt.store.update_record(record_id, **changes)

    async def _forget(self, principal: Principal, record_id: str, reason: str) -> None:
        result = await self._rt.tools.call(principal, "memory_forget", {"id": record_id, "reason": reason})
        if not result.get("ok") and result.get("error") != "not_found":
            raise refusal_of(result)

    # --- delete -----------------------------------------------------------------------------

    async def _delete(self, op: PutOp, caller: Caller) -> None:
        target = self._target(op.namespace)
        self._own(target, caller, op.namespace)
        if is_profile_key(op.key):
            raise profile_refused(op.key)
        principal = self._principal(target, caller)
        await self._write_target(principal, target.scope)
        if not isinstance(op.key, str) or not op.key or len(op.key) > MAX_KEY_CHARS:
            return
        ns, store = ns_text(op.namespace), self._rt.store
        async with self._lock(ns, op.key):
            existing = await store.store_item_row(ns, op.key)
            if existing is None:  # deleting a keyless record by its id forgets it, as memory_forget would
                record = await self._keyless_record(target, op.namespace, op.key, self._rt.clock.now())
                if record is not None:
                    await self._forget(principal, record.id, "a LangGraph store delete removed it")
                return
            if existing.scope != target.scope:
                return
            if existing.record_id is not None and await store.store_item_users(existing.record_id) == [
                (ns, op.key)
            ]:
                record = await store.get_record(existing.record_id)
                if record is not None and record.status in LIVE:
                    await self._forget(principal, record.id, "a LangGraph store delete removed its key")
            await store.delete_store_item(ns, op.key)
            await store.append_event(
                "store.item_deleted", self.agent_id, record_id=existing.record_id,
                payload={**owner_fields(principal, target.scope), "namespace": ns, "key": op.key},
            )  # fmt: skip

    # --- search -----------------------------------------------------------------------------

    async def _search(self, op: SearchOp, caller: Caller) -> list[SearchItem]:
        prefix = tuple(op.namespace_prefix)
        check_namespace(prefix)
        limit, offset = (
            bounded_int(op.limit, 0, 1000, "limit"),
            bounded_int(op.offset, 0, 1_000_000, "offset"),
        )
        check_filter(op.filter)
        target = self.namespaces.target(prefix)
        if target is not None:
            self._own(target, caller, prefix)
            principal = self._principal(target, caller)
            readable = await self._can_read(principal, target.scope)
            areas = {target.scope: target.root} if readable else {}
        else:
            principal, areas = await self._areas_under(prefix, caller)
        if limit == 0 or not areas:
            return []
        if op.query is not None:
            return await self._query(op, prefix, areas, principal, limit, offset)
        return await self._list(op, prefix, areas, limit, offset)

    async def _areas_under(
        self, prefix: tuple[str, ...], caller: Caller
    ) -> tuple[Principal, dict[Scope, tuple[str, ...]]]:
        """A prefix above any one scope's namespace (``("memories",)``, ``()``): the caller's readable
        scopes whose root namespace lies under it, as LangGraph's stores search every namespace
        that starts with the prefix. Another user's scope is never among them: a user grant
        counts only for its own user."""
        user = caller.user_id or self.default_user_id
        if not user:
            raise StoreNamespaceError(
                f"namespace prefix {show_namespace(prefix)} spans every user's memories: run with "
                'config={"configurable": {"user_id": ...}} or pass RetoldStore(default_user_id=...)'
            )
        principal = self._run_principal(Caller(caller.thread_id, user, caller.authenticated))
        areas: dict[Scope, tuple[str, ...]] = {}
        for scope in await readable_scopes(self._rt.store, principal):
            root = None if scope.is_private else self.namespaces.namespace_for(scope)
            if root is not None and tuple(root[: len(prefix)]) == prefix:
                areas[scope] = tuple(root)
        return principal, areas

    async def _query(
        self, op: SearchOp, prefix: tuple[str, ...], areas: Mapping[Scope, tuple[str, ...]],
        principal: Principal, limit: int, offset: int,
    ) -> list[SearchItem]:  # fmt: skip
        query = op.query.strip() if isinstance(op.query, str) else ""
        if not query or len(query) > limits.MAX_QUERY_CHARS or text_problem(query):
            raise StoreArgumentError(
                f"query must be non-blank text of at most {limits.MAX_QUERY_CHARS} characters"
            )
        k = min(limits.MAX_K, offset + limit)
        scopes = list(areas)
        response = await self._rt.search(
            principal, SearchRequest(queries=[query], k=k, scopes=scopes, gate=self.gate)
        )
        store, now = self._rt.store, self._rt.clock.now()
        ids = [r.record.id for r in response.results]
        items = await store.store_items_for_records(ids, scopes, ns_text(prefix) if prefix else None, now=now)
        keyed = await store.records_with_items(ids)
        relevance = await self._relevance(query, ids)
        out: list[SearchItem] = []
        for result in response.results:
            explanation = explanation_of(result, response.search_id)
            score = relevance.get(result.record.id, 0.0)
            for row in items.get(result.record.id, []):
                item = item_of(row, ns_tuple(row.namespace))
                out.append(search_item(item, score, row.record_id, explanation))
            root = areas.get(result.record.scope)
            if result.record.id not in keyed and root is not None and root[: len(prefix)] == prefix:
                item = record_item(result.record, root)
                out.append(search_item(item, score, result.record.id, explanation))
        if op.filter:
            out = [i for i in out if filter_matches(i.value, op.filter)]
        return out[offset : offset + limit]

    async def _relevance(self, query: str, record_ids: Sequence[str]) -> dict[str, float]:
        """Each hit's ``score``: the cosine of the query and the record's vector, clipped to [0, 1],
        the number LangGraph's InMemoryStore reports over the same embedder (so a threshold
        written for it means the same here). The order stays retold's fused ranking; the fused
        score is in the explanation. The query's vector is the one the search just embedded
        (the embedder's query cache)."""
        if not record_ids:
            return {}
        embedding = self._rt.config.embedding
        vector = (await embed_queries(self._rt.embedder, [query]))[0]
        blobs = await self._rt.store.vectors_for(
            record_ids, embedding.model, embedding.version, embedding.dims
        )
        norm = float(np.linalg.norm(vector)) or 1.0
        out: dict[str, float] = {}
        for record_id, blob in blobs.items():
            stored = np.frombuffer(blob, dtype=np.float32)
            length = float(np.linalg.norm(stored))
            cosine = float(stored @ vector) / (length * norm) if length else 0.0
            out[record_id] = min(1.0, max(0.0, cosine))
        return out

    async def _list(
        self, op: SearchOp, prefix: tuple[str, ...], areas: Mapping[Scope, tuple[str, ...]], limit: int,
        offset: int,
    ) -> list[SearchItem]:  # fmt: skip
        """Items under ``prefix``, newest first, across every readable scope under it; a scope's
        records no key refers to are listed under its root namespace when that lies under it."""
        store, now = self._rt.store, self._rt.clock.now()
        ns = ns_text(prefix) if prefix else None
        roots = {scope: root if root[: len(prefix)] == prefix else None for scope, root in areas.items()}
        if len(areas) == 1 and not op.filter:
            ((scope, root),) = areas.items()
            entries = await store.store_entries(
                [scope], ns, root=scope if roots[scope] else None, now=now, limit=limit, offset=offset
            )
            return await self._entry_items(entries, root, op.refresh_ttl, now)
        wanted, gathered = offset + limit, []
        for scope, root in areas.items():
            scanned = 0
            while scanned < SCAN_LIMIT:
                page = await store.store_entries(
                    [scope], ns, root=scope if roots[scope] else None, now=now, limit=PAGE, offset=scanned
                )
                gathered += [(entry, root) for entry in page]
                scanned += len(page)
                if len(page) < PAGE or (not op.filter and scanned >= wanted):
                    break
        gathered.sort(key=lambda pair: (pair[0].updated_at, pair[0].record_id or ""), reverse=True)
        matched: list[SearchItem] = []
        for entry, root in gathered:
            if len(matched) >= wanted:
                break
            refresh = op.refresh_ttl and not op.filter and len(matched) >= offset
            for item in await self._entry_items([entry], root, refresh, now):
                if not op.filter or filter_matches(item.value, op.filter):
                    matched.append(item)
        return matched[offset : offset + limit]

    async def _entry_items(
        self, entries: list[Any], root: tuple[str, ...], refresh: bool, now: datetime
    ) -> list[SearchItem]:
        records = {
            r.id: r
            for r in await self._rt.store.get_records([e.record_id for e in entries if e.item is None])
        }
        out: list[SearchItem] = []
        for entry in entries:
            if entry.item is not None:
                row = await self._refresh(entry.item, now) if refresh else entry.item
                out.append(search_item(item_of(row, ns_tuple(row.namespace)), None, row.record_id, None))
            elif entry.record_id in records:
                record = records[entry.record_id]
                out.append(search_item(record_item(record, root), None, record.id, None))
        return out

    # --- list_namespaces --------------------------------------------------------------------

    async def _list_namespaces(self, op: ListNamespacesOp, caller: Caller) -> list[tuple[str, ...]]:
        """Namespaces the caller may read: inside a run that knows its user, only what that user
        may read (their own namespaces, and the projects and shared scopes granted); outside
        one (host code, an operator) those of every scope this agent holds read grants on."""
        limit = bounded_int(op.limit, 0, 10_000, "limit")
        offset = bounded_int(op.offset, 0, 1_000_000, "offset")
        if op.max_depth is not None:
            bounded_int(op.max_depth, 1, MAX_NAMESPACE_DEPTH * 4, "max_depth")
        store, now = self._rt.store, self._rt.clock.now()
        if caller.user_id:
            principal = self._run_principal(caller)
            scopes = [s for s in await readable_scopes(store, principal) if not s.is_private]
        else:
            grants = await store.grants_for(self.agent_id, can_read=True)
            scopes = [g.scope for g in grants if g.agent_id == self.agent_id and not g.scope.is_private]
        found: set[tuple[str, ...]] = set()
        for text in await store.store_namespaces(scopes, now=now):
            namespace = ns_tuple(text)
            mapped = self.namespaces.target(namespace)
            if mapped is not None and mapped.scope in scopes and self._listable(mapped, caller):
                found.add(namespace)
        for scope in await store.scopes_with_records(scopes, now=now):
            root = self.namespaces.namespace_for(scope)
            mapped = self.namespaces.target(tuple(root)) if root is not None else None
            if root is not None and (mapped is None or self._listable(mapped, caller)):
                found.add(tuple(root))
        namespaces = [ns for ns in found if all(namespace_matches(c, ns) for c in op.match_conditions or ())]
        if op.max_depth is not None:
            namespaces = list({ns[: op.max_depth] for ns in namespaces})
        return sorted(namespaces)[offset : offset + limit]

    @staticmethod
    def _listable(target: NamespaceTarget, caller: Caller) -> bool:
        """Inside a run, a namespace belonging to a user is listed only for that user."""
        return not caller.user_id or target.user_id is None or target.user_id == caller.user_id

    def _run_principal(self, caller: Caller) -> Principal:
        try:
            return Principal(
                agent_id=self.agent_id,
                user_id=caller.user_id,  # type: ignore[arg-type]
                session_id=caller.thread_id or self._rt.config.integrations.default_session_id,
            )
        except InvalidArgumentError as exc:
            raise StoreArgumentError(f"list_namespaces: {exc}") from None
