"""The five memory tools (spec §11): ``rt.tools.call(principal, name, payload)`` → dict.

Every adapter calls these handlers, so the rules live here once:

* The principal comes from the host; the payload never names an agent, a user or a scope.
* A handler never raises on bad input: it answers ``{"ok": False, "error", "message"}``
  with one of the spec's codes and changes nothing.
* Authorization comes before any check whose message could describe a record or entity:
  an id the caller cannot read answers exactly like an id that never existed.

    result = await rt.tools.call(p, "memory_write", {"type": "semantic", "content": "...",
                                                     "attribute": "answer_style"})
    schemas = rt.tools.tool_schemas(p)   # what to register for this principal
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from jsonschema.exceptions import best_match

from retold.errors import InvalidArgumentError, NotFoundError
from retold.ingest.entities import merge_entities
from retold.ingest.request import Revision, WriteRequest
from retold.ingest.revision import HistoryError, Reviser
from retold.models import EntityMention, Principal, Scope, SearchRequest
from retold.policy.grants import readable_scopes, scopes_from_grants, writable_scopes
from retold.policy.targets import TargetResolver, write_targets
from retold.tools import schemas
from retold.tools.payloads import record_payload, search_payload
from retold.util import schema_validator

if TYPE_CHECKING:
    from retold.runtime import Runtime

__all__ = ["ERROR_CODES", "MemoryTools", "ToolError"]

log = logging.getLogger(__name__)

ERROR_CODES = (
    "not_found", "invalid_input", "scope_not_writable", "invalid_write_target", "entity_ambiguous",
    "invalid_source_kind", "invalid_subject",
)  # fmt: skip
_HOST_SOURCE_KINDS = ("system", "session_summary")
_MAX_MESSAGE = 400


class ToolError(Exception):
    """A structured refusal: becomes ``{"ok": False, "error": code, "message": ...}``."""

    def __init__(self, code: str, message: str, **extra: Any) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.extra = extra

    def as_dict(self) -> dict[str, Any]:
        return {"ok": False, "error": self.code, "message": self.message, **self.extra}


def _not_found(*refs: object) -> ToolError:
    """One shape for a foreign id and an id that never existed: the caller's own input only."""
    shown = [str(r)[:80] for r in refs]
    return ToolError(
        "not_found", f"no memory with id {', '.join(map(repr, shown))} is visible to this session", ids=shown
    )


def _entity_not_found(ref: object) -> ToolError:
    return ToolError("not_found", f"no entity with id {str(ref)[:80]!r} is visible to this session")


Handler = Callable[[Principal, dict[str, Any]], Awaitable[dict[str, Any]]]


class MemoryTools:
    """The tool surface over one runtime; ``rt.tools``."""

    def __init__(self, rt: Runtime) -> None:
        self._rt = rt
        self._reviser = Reviser(rt.store, rt.index)
        self._offered: dict[str, TargetResolver] = {}
        self._handlers: dict[str, Handler] = {
            "memory_get": self._get,
            "memory_write": self._write,
            "memory_revise": self._revise,
            "memory_forget": self._forget,
        }

    # --- what the model is offered ----------------------------------------------------------

    def offer_target(self, name: str, resolve: TargetResolver) -> None:
        """Offer one more symbolic write target, e.g. ``("private", lambda p: p.private_scope)``.

        The name appears in ``write_target`` only for principals that can write the scope it
        resolves to; the private agent scope is never offered unless the host names it here.
        """
        if not isinstance(name, str) or not name.strip() or not callable(resolve):
            raise InvalidArgumentError("offer_target needs a non-blank name and a callable(principal)")
        self._offered[name] = resolve

    async def write_targets(self, principal: Principal) -> dict[str, Scope]:
        """Symbolic name → scope for everything this principal may write (spec §8.1 step 2)."""
        readable = set(await readable_scopes(self._rt.store, principal))
        writable = [s for s in await writable_scopes(self._rt.store, principal) if s in readable]
        return write_targets(principal, writable, self._offered)

    def _write_targets_sync(self, principal: Principal) -> dict[str, Scope]:
        store = self._rt.store
        readable = set(scopes_from_grants(principal, store.grants_for_sync(principal.agent_id), write=False))
        grants = store.grants_for_sync(principal.agent_id, can_write=True)
        writable = [s for s in scopes_from_grants(principal, grants, write=True) if s in readable]
        return write_targets(principal, writable, self._offered)

    def _schemas(self, targets: dict[str, Scope], names: tuple[str, ...] | None) -> list[dict[str, Any]]:
        built = {
            "memory_search": schemas.search_schema(self._rt.config.retrieval.default_k),
            "memory_get": schemas.get_schema(),
            "memory_revise": schemas.revise_schema(),
            "memory_forget": schemas.forget_schema(),
        }
        if targets:  # with nothing writable, memory_write is not registered at all
            built["memory_write"] = schemas.write_schema(list(targets))
        wanted = names or schemas.TOOL_NAMES
        return [schemas.tool_schema(n, built[n]) for n in schemas.TOOL_NAMES if n in built and n in wanted]

    def tool_schemas(
        self, principal: Principal, *, names: tuple[str, ...] | None = None
    ) -> list[dict[str, Any]]:
        """The tools to register for this principal (sync: frameworks build tools synchronously).

        ``names`` narrows the set (auto mode registers no memory_search).
        """
        return self._schemas(self._write_targets_sync(_principal(principal)), names)

    async def atool_schemas(
        self, principal: Principal, *, names: tuple[str, ...] | None = None
    ) -> list[dict[str, Any]]:
        """:meth:`tool_schemas` without blocking the event loop."""
        return self._schemas(await self.write_targets(_principal(principal)), names)

    # --- dispatch ---------------------------------------------------------------------------

    async def call(
        self,
        principal: Principal,
        name: str,
        payload: Any,
        *,
        context: str | None = None,
        trigger: str = "tool",
    ) -> dict[str, Any]:
        """Run one tool; returns a JSON-serialisable dict and never raises on bad input.

        ``payload`` is a dict or JSON text of one. ``context`` (memory_search only) is the
        adapter's current-turn context; ``trigger`` is ``"auto"`` for host-issued searches.
        """
        principal = _principal(principal)
        try:
            args = _as_object(payload)
            if name == "memory_search":
                return await self._search(principal, args, context, trigger)
            handler = self._handlers.get(name) if isinstance(name, str) else None
            if handler is None:
                raise ToolError(
                    "invalid_input",
                    f"unknown tool {str(name)[:80]!r}; tools: {', '.join(schemas.TOOL_NAMES)}",
                )
            return await handler(principal, args)
        except ToolError as refused:
            return refused.as_dict()
        except HistoryError as exc:
            return ToolError("invalid_input", str(exc)).as_dict()
        except InvalidArgumentError as exc:
            return ToolError("invalid_input", str(exc)[:_MAX_MESSAGE]).as_dict()

    def _validate(self, tool: str, schema: dict[str, Any], args: dict[str, Any]) -> None:
        error = best_match(schema_validator(schema).iter_errors(args))
        if error is not None:
            where = "/".join(str(p) for p in error.absolute_path) or "payload"
            raise ToolError("invalid_input", f"{tool}: {where}: {error.message}"[:_MAX_MESSAGE])

    # --- memory_search ----------------------------------------------------------------------

    async def _search(
        self, principal: Principal, args: dict[str, Any], context: str | None, trigger: str
    ) -> dict[str, Any]:
        self._validate("memory_search", schemas.search_schema(self._rt.config.retrieval.default_k), args)
        request = SearchRequest(
            queries=list(args["queries"]),
            context=context,
            types=list(args["types"]) if "types" in args else None,
            entities=list(args["entities"]) if "entities" in args else None,
            since=_datetime(args, "since"),
            until=_datetime(args, "until"),
            k=args.get("k"),
            include_history=bool(args.get("include_history", False)),
            trigger=trigger,  # type: ignore[arg-type]
        )
        return search_payload(await self._rt.search(principal, request))

    # --- memory_get -------------------------------------------------------------------------

    async def _get(self, principal: Principal, args: dict[str, Any]) -> dict[str, Any]:
        self._validate("memory_get", schemas.get_schema(), args)
        readable = await readable_scopes(self._rt.store, principal)
        ids, missing = [], []
        for ref in args["ids"]:
            found = await self._resolve(ref, readable)
            (ids if found else missing).append(found or ref)
        if missing:
            return _not_found(*missing).as_dict()
        records = await self._rt.store.get_records(ids)
        return {"ok": True, "records": [await record_payload(self._rt.store, r, readable) for r in records]}

    async def _resolve(self, ref: str, readable: list[Scope]) -> str | None:
        """A full or short id → the one readable record it names; None when there is none."""
        text = ref.strip().strip("[]").strip()
        matches = await self._rt.store.resolve_record_ref(text, readable)
        if not matches and text != text.lower():
            matches = await self._rt.store.resolve_record_ref(text.lower(), readable)
        if len(matches) > 1:
            raise ToolError(
                "invalid_input",
                f"short id {text!r} matches {len(matches)} of your memories; pass the full id "
                f"({', '.join(matches)})",
            )
        return matches[0] if matches else None

    async def _record_for_change(self, principal: Principal, ref: str) -> Any:
        """Readable (else not_found), then writable (else scope_not_writable)."""
        store = self._rt.store
        record_id = await self._resolve(ref, await readable_scopes(store, principal))
        record = await store.get_record(record_id) if record_id else None
        if record is None:
            raise _not_found(ref)
        if record.scope not in await writable_scopes(store, principal):
            raise ToolError(
                "scope_not_writable", f"this session can read but not change memories in {record.scope}"
            )
        return record

    # --- memory_write -----------------------------------------------------------------------

    async def _write(self, principal: Principal, args: dict[str, Any]) -> dict[str, Any]:
        claimed = args.get("source_kind")
        if isinstance(claimed, str) and claimed in _HOST_SOURCE_KINDS:
            raise ToolError(
                "invalid_source_kind",
                f"source_kind {claimed!r} is reserved for the host and the session extractor; use "
                "user_statement with a quote, tool_result, or agent_inference",
            )
        targets = await self.write_targets(principal)
        if not targets:
            raise ToolError("scope_not_writable", "this session has no memory it may write to")
        wanted = args.get("write_target", "personal")
        if isinstance(wanted, str) and wanted not in targets:
            raise ToolError(
                "invalid_write_target",
                f"write_target {wanted[:80]!r} is not offered in this session; choose one of "
                f"{', '.join(targets)}",
            )
        self._validate("memory_write", schemas.write_schema(list(targets)), args)
        request = WriteRequest(
            type=args["type"],
            content=args["content"],
            scope=targets[wanted],
            source_kind=args.get("source_kind", "agent_inference"),
            attribute=args.get("attribute"),
            evidence=args.get("evidence"),
            evidence_turn=args.get("evidence_turn"),
            entities=[
                EntityMention(
                    kind=e["kind"], text=e.get("name", ""), role=e["role"], entity_id=e.get("entity_id")
                )
                for e in args.get("entities", [])
            ],
            event_at=_datetime(args, "event_at"),
            tags=list(args.get("tags", [])),
        )
        result = await self._rt.ingestor.write(principal, request)
        out = result.as_dict()
        if result.ok:
            out["write_target"] = wanted
        return out

    # --- memory_revise ----------------------------------------------------------------------

    async def _revise(self, principal: Principal, args: dict[str, Any]) -> dict[str, Any]:
        self._validate("memory_revise", schemas.revise_schema(), args)
        if "entity_id" in args:
            return await self._merge(principal, args)
        record = await self._record_for_change(principal, args["id"])
        reason, action = args["reason"].strip(), args["action"]
        actor = principal.agent_id
        if action == "supersede":
            revision = Revision(
                content=args["content"],
                reason=reason,
                source_kind=args.get("source_kind", "agent_inference"),
                evidence=args.get("evidence"),
                evidence_turn=args.get("evidence_turn"),
            )
            out = (await self._rt.ingestor.revise(principal, record, revision)).as_dict()
            if out["ok"]:
                out["action"] = "supersede"
                out["superseded_id"] = record.id
            return out
        change = await (self._reviser.confirm if action == "confirm" else self._reviser.expire)(
            record.id, reason=reason, actor=actor
        )
        return {"ok": True, "action": action, "record_id": change.record_id, "status": change.status,
                "previous_status": change.previous_status, "changed": change.changed}  # fmt: skip

    async def _merge(self, principal: Principal, args: dict[str, Any]) -> dict[str, Any]:
        """Entity merge: both entities must be readable and writable, else one not_found."""
        store = self._rt.store
        readable = set(await readable_scopes(store, principal))
        writable = {s for s in await writable_scopes(store, principal) if s in readable}
        entities = []
        for ref in (args["entity_id"], args["merge_into"]):
            entity = await store.follow_merges(ref.strip())
            if entity is None or entity.scope not in writable:
                raise _entity_not_found(ref)
            entities.append(entity)
        try:
            survivor = await merge_entities(
                store, entities[0].id, entities[1].id, actor=principal.agent_id, reason=args["reason"].strip()
            )
        except NotFoundError as exc:
            raise _entity_not_found(args["entity_id"]) from exc
        return {"ok": True, "action": "merge", "entity_id": entities[0].id, "merged_into": survivor.id,
                "canonical": survivor.canonical, "aliases": list(survivor.aliases)}  # fmt: skip

    # --- memory_forget ----------------------------------------------------------------------

    async def _forget(self, principal: Principal, args: dict[str, Any]) -> dict[str, Any]:
        self._validate("memory_forget", schemas.forget_schema(), args)
        record = await self._record_for_change(principal, args["id"])
        change = await self._reviser.forget(
            record.id, reason=args["reason"].strip(), actor=principal.agent_id
        )
        return {
            "ok": True, "record_id": change.record_id, "status": "deleted", "tombstone": True,
            "changed": change.changed,
            "note": "removed from search and get; not erased: the stored text remains until an "
            "administrator runs 'retold erase'",
        }  # fmt: skip


def _principal(principal: Any) -> Principal:
    """The host's identity for the caller: a programming error if missing, never tool input."""
    if not isinstance(principal, Principal):
        raise TypeError(
            f"principal must be a retold.Principal derived by the host, got {type(principal).__name__}"
        )
    return principal


def _as_object(payload: Any) -> dict[str, Any]:
    if isinstance(payload, str | bytes | bytearray):
        try:
            payload = json.loads(payload)
        except (ValueError, UnicodeDecodeError):
            raise ToolError("invalid_input", "the tool input is not valid JSON; send a JSON object") from None
    if not isinstance(payload, dict) or not all(isinstance(k, str) for k in payload):
        raise ToolError(
            "invalid_input", f"the tool input must be a JSON object, got {type(payload).__name__}"
        )
    return payload


def _datetime(args: dict[str, Any], key: str) -> datetime | None:
    """An RFC 3339 date-time; a value without an offset is read as UTC."""
    text = args.get(key)
    if text is None:
        return None
    try:
        value = datetime.fromisoformat(text)
    except ValueError:
        raise ToolError("invalid_input", f"{key} must be an RFC 3339 date-time, got {text[:60]!r}") from None
    return value if value.tzinfo is not None else value.replace(tzinfo=UTC)
