"""The five memory tools (spec §11): ``rt.tools.call(principal, name, payload)`` → dict.

Every adapter calls these handlers, so the rules live here once:

* The principal comes from the host; the payload never names an agent, a user or a scope.
* A handler never raises on bad input: it answers ``{"ok": False, "error", "message"}``
  with one of the spec's codes and changes nothing.
* Authorization comes before any check whose message could describe a record or entity:
  an id the caller cannot read answers exactly like an id that never existed.
* Hostile input is bounded before any work (:mod:`retold.tools.limits`): the payload's size,
  depth and node count, every string (keys too) free of lone surrogates and control
  characters, integers within 64 bits, dates within a range that cannot overflow. A refusal
  names the field and never echoes what could not be encoded.
* A null optional field is an absent one, so OpenAI strict-mode calls (every field sent,
  optional ones as null) mean what the portable schema means.

One job: the tools' handlers and the input checks they share; it is long because five tools
each bound, authorize and answer their input in the spec's exact shapes.

    result = await rt.tools.call(p, "memory_write", {"type": "semantic", "content": "...",
                                                     "attribute": "answer_style"})
    schemas = rt.tools.tool_schemas(p)   # what to register for this principal
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Protocol

from jsonschema.exceptions import best_match

from retold.errors import InvalidArgumentError, NotFoundError
from retold.ingest.write.entities import merge_entities
from retold.ingest.write.request import Revision, WriteRequest
from retold.ingest.write.revision import HistoryError, Reviser
from retold.models import EntityMention, Principal, Scope, SearchRequest
from retold.policy.grants import readable_scopes, scopes_from_grants, writable_scopes
from retold.policy.targets import TargetResolver, write_targets
from retold.tools import limits, schemas
from retold.tools.payloads import record_payload, search_payload
from retold.util import check_text, clean_text, schema_validator, text_problem

if TYPE_CHECKING:
    from retold.config import Config
    from retold.index.vector import VectorIndex
    from retold.ingest.write.ingestor import Ingestor
    from retold.models import SearchResponse
    from retold.store import Store

__all__ = ["ERROR_CODES", "MemoryTools", "ToolError", "ToolServices"]

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


class ToolServices(Protocol):
    """What the tools use of the runtime: its store, index, write path, status changes, config, search."""

    config: Config
    store: Store
    index: VectorIndex
    ingestor: Ingestor
    reviser: Reviser

    async def search(self, principal: Principal, request: SearchRequest) -> SearchResponse: ...


class MemoryTools:
    """The tool surface over one runtime; ``rt.tools``."""

    def __init__(self, rt: ToolServices) -> None:
        self._rt = rt
        self._reviser = rt.reviser
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
        self._offered[check_text(name, "offer_target name", limits.MAX_ID_CHARS)] = resolve

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

    def _schemas(
        self, targets: dict[str, Scope], names: tuple[str, ...] | None, dialect: str
    ) -> list[dict[str, Any]]:
        built = {
            "memory_search": schemas.search_schema(self._rt.config.retrieval.default_k),
            "memory_get": schemas.get_schema(),
            "memory_revise": schemas.revise_schema(),
            "memory_forget": schemas.forget_schema(),
        }
        if targets:  # with nothing writable, memory_write is not registered at all
            built["memory_write"] = schemas.write_schema(list(targets))
        wanted = names or schemas.TOOL_NAMES
        return [
            schemas.tool_schema(n, schemas.for_dialect(built[n], dialect))
            for n in schemas.TOOL_NAMES
            if n in built and n in wanted
        ]

    def tool_schemas(
        self, principal: Principal, *, names: tuple[str, ...] | None = None, dialect: str = "portable"
    ) -> list[dict[str, Any]]:
        """The tools to register for this principal (sync: frameworks build tools synchronously).

        ``names`` narrows the set (auto mode registers no memory_search). ``dialect`` is
        ``"portable"`` (Anthropic, Gemini, OpenAI non-strict) or ``"openai_strict"`` (every
        field required, optional ones nullable: for OpenAI's ``strict: true``).
        """
        schemas.for_dialect({}, dialect)  # an unknown dialect fails before any store read
        return self._schemas(self._write_targets_sync(_principal(principal)), names, dialect)

    async def atool_schemas(
        self, principal: Principal, *, names: tuple[str, ...] | None = None, dialect: str = "portable"
    ) -> list[dict[str, Any]]:
        """:meth:`tool_schemas` without blocking the event loop."""
        schemas.for_dialect({}, dialect)
        return self._schemas(await self.write_targets(_principal(principal)), names, dialect)

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
            _check_json(name if name in schemas.TOOL_NAMES else "tool input", args)
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

    def _validate(self, tool: str, schema: dict[str, Any], args: dict[str, Any]) -> dict[str, Any]:
        """``args`` without its null optional fields, once it conforms to ``schema``."""
        args = _absent_nulls(args, schema)
        error = best_match(schema_validator(schema).iter_errors(args))
        if error is not None:
            where = "/".join(str(p) for p in error.absolute_path) or "payload"
            raise ToolError("invalid_input", f"{tool}: {where}: {error.message}"[:_MAX_MESSAGE])
        return args

    # --- memory_search ----------------------------------------------------------------------

    async def _search(
        self, principal: Principal, args: dict[str, Any], context: str | None, trigger: str
    ) -> dict[str, Any]:
        tool = "memory_search"
        args = self._validate(tool, schemas.search_schema(self._rt.config.retrieval.default_k), args)
        request = SearchRequest(
            queries=list(args["queries"]),
            context=clean_text(context) if isinstance(context, str) else None,  # the adapter's text
            types=list(dict.fromkeys(args["types"])) if "types" in args else None,
            entities=list(args["entities"]) if "entities" in args else None,
            since=_datetime(tool, args, "since"),
            until=_datetime(tool, args, "until"),
            k=_integer(args, "k"),
            include_history=bool(args.get("include_history", False)),
            trigger=trigger,  # type: ignore[arg-type]
        )
        explain = args.get("explain", "compact")
        response = await self._rt.search(principal, request)
        retrieval = self._rt.config.retrieval
        return search_payload(
            response, explain=explain, rrf_k=retrieval.rrf_k, similarity_weight=retrieval.similarity_weight
        )

    # --- memory_get -------------------------------------------------------------------------

    async def _get(self, principal: Principal, args: dict[str, Any]) -> dict[str, Any]:
        args = self._validate("memory_get", schemas.get_schema(), args)
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
        offered = list(targets)
        if not targets:  # the tool is not registered; a call anyway learns that nothing is writable (§8.1)
            raise ToolError("scope_not_writable", "this session may not write to any memory", offered=offered)
        schema = schemas.write_schema(offered)
        args = _absent_nulls(args, schema)
        # The default is the first offered target (personal when offered), so a principal whose
        # only writable memory is the project writes there without naming it.
        wanted = args.get("write_target", offered[0])
        if isinstance(wanted, str) and wanted not in targets:
            raise ToolError(
                "invalid_write_target",
                f"write_target {wanted[:80]!r} is not offered in this session; choose one of "
                f"{', '.join(offered)}",
                offered=offered,
            )
        args = self._validate("memory_write", schema, args)
        for i, entity in enumerate(args.get("entities", [])):
            if "name" not in entity and "entity_id" not in entity:
                raise ToolError("invalid_input", f"memory_write: entities/{i}: give a name or an entity_id")
        request = WriteRequest(
            type=args["type"],
            content=args["content"],
            scope=targets[wanted],
            source_kind=args.get("source_kind", "agent_inference"),
            attribute=args.get("attribute"),
            evidence=args.get("evidence"),
            evidence_turn=_integer(args, "evidence_turn"),
            entities=[
                EntityMention(
                    kind=e["kind"], text=e.get("name", ""), role=e["role"], entity_id=e.get("entity_id")
                )
                for e in args.get("entities", [])
            ],
            event_at=_datetime("memory_write", args, "event_at"),
            tags=list(args.get("tags", [])),
        )
        result = await self._rt.ingestor.write(principal, request)
        out = result.as_dict()
        if result.ok:
            out["write_target"] = wanted
        return out

    # --- memory_revise ----------------------------------------------------------------------

    async def _revise(self, principal: Principal, args: dict[str, Any]) -> dict[str, Any]:
        schema = schemas.revise_schema()
        args = _absent_nulls(args, schema)
        if "action" not in args and "id" not in args and "entity_id" in args and "merge_into" in args:
            args = {**args, "action": "merge_entities"}  # the pre-issue-15 merge shape, still accepted
        args = self._validate("memory_revise", schema, args)
        _check_variant(args)
        if args["action"] == "merge_entities":
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
                evidence_turn=_integer(args, "evidence_turn"),
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
        args = self._validate("memory_forget", schemas.forget_schema(), args)
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
    """The payload as a dict; JSON text longer than the limit is refused unparsed."""
    if isinstance(payload, str | bytes | bytearray):
        if len(payload) > limits.MAX_JSON_TEXT_CHARS:
            raise ToolError(
                "invalid_input",
                f"the tool input is {len(payload)} characters of JSON; "
                f"the limit is {limits.MAX_JSON_TEXT_CHARS}",
            )
        try:
            payload = json.loads(payload)
        except RecursionError:
            raise ToolError(
                "invalid_input", f"tool input: payload is nested deeper than {limits.MAX_JSON_DEPTH} levels"
            ) from None
        except ValueError:  # UnicodeDecodeError and the int-digits limit are ValueErrors too
            raise ToolError("invalid_input", "the tool input is not valid JSON; send a JSON object") from None
    if not isinstance(payload, dict):  # its keys are checked with the rest, within the limits
        raise ToolError(
            "invalid_input", f"the tool input must be a JSON object, got {type(payload).__name__}"
        )
    return payload


def _check_json(tool: str, payload: dict[str, Any]) -> None:
    """Refuse what no handler should touch, in O(limits) whatever the payload's size.

    Containers are counted before they are entered and strings are measured before they
    are scanned, so a 2 MB string or a million-key object costs one comparison; a cycle
    (possible in a Python payload) ends at the depth limit.
    """
    nodes = chars = 0
    stack: list[tuple[Any, str, int]] = [(payload, "", 1)]

    def refuse(where: str, why: str) -> ToolError:
        return ToolError("invalid_input", f"{tool}: {where or 'payload'} {why}"[:_MAX_MESSAGE])

    def text(value: str, where: str) -> None:
        nonlocal chars
        chars += len(value)
        if chars > limits.MAX_PAYLOAD_CHARS:
            if len(value) > limits.MAX_PAYLOAD_CHARS:
                raise refuse(where, f"is {len(value)} characters long, over the payload limit of "
                             f"{limits.MAX_PAYLOAD_CHARS}")  # fmt: skip
            raise refuse(
                "payload", f"holds more than the limit of {limits.MAX_PAYLOAD_CHARS} characters of text"
            )
        problem = text_problem(value)
        if problem is not None:
            raise refuse(where, problem)

    while stack:
        value, where, depth = stack.pop()
        if isinstance(value, str):
            text(value, where)
        elif value is None or isinstance(value, bool | float):
            pass
        elif isinstance(value, int):
            if value.bit_length() > limits.MAX_INT_BITS:
                raise refuse(where, "is an integer outside the signed 64-bit range")
        elif isinstance(value, dict | list):
            if depth > limits.MAX_JSON_DEPTH:
                raise refuse(where, f"is nested deeper than {limits.MAX_JSON_DEPTH} levels")
            nodes += len(value)
            if nodes > limits.MAX_JSON_NODES:
                raise refuse("payload", f"holds more than {limits.MAX_JSON_NODES} values")
            if isinstance(value, list):
                stack.extend((item, f"{where}/{i}".lstrip("/"), depth + 1) for i, item in enumerate(value))
                continue
            for key, item in value.items():
                if not isinstance(key, str):
                    raise refuse(where, f"has a key that is not a string ({type(key).__name__})")
                text(key, f"{where}: a key" if where else "a key")
                stack.append((item, f"{where}/{key}".lstrip("/"), depth + 1))
        else:
            raise refuse(where, f"is not a JSON value ({type(value).__name__})")


def _absent_nulls(args: dict[str, Any], schema: dict[str, Any]) -> dict[str, Any]:
    """``args`` without null optional fields, in objects of arrays too (strict-mode calls send them)."""
    required = set(schema.get("required", ()))
    out = {k: v for k, v in args.items() if v is not None or k in required}
    for key, prop in schema.get("properties", {}).items():
        items = prop.get("items")
        if isinstance(out.get(key), list) and isinstance(items, dict) and items.get("type") == "object":
            out[key] = [_absent_nulls(v, items) if isinstance(v, dict) else v for v in out[key]]
    return out


def _check_variant(args: dict[str, Any]) -> None:
    """memory_revise: which fields go with which ``action`` (the schema is flat, this is not)."""
    action = args["action"]
    if action == "merge_entities":
        needed, allowed = ("entity_id", "merge_into"), {"action", "reason", *schemas.MERGE_ONLY}
    else:
        needed = ("id", "content") if action == "supersede" else ("id",)
        allowed = {"action", "reason", "id", *(schemas.SUPERSEDE_ONLY if action == "supersede" else ())}
    for key in needed:
        if key not in args:
            raise ToolError("invalid_input", f"memory_revise: {key} is required when action is {action!r}")
    for key in sorted(set(args) - allowed):
        only = "'merge_entities'" if key in schemas.MERGE_ONLY else "'supersede'"
        if key == "id":
            only = "'confirm', 'supersede' or 'expire'"
        raise ToolError("invalid_input", f"memory_revise: {key} is only valid when action is {only}")


def _integer(args: dict[str, Any], key: str) -> int | None:
    """A validated JSON integer as an int (JSON Schema also counts ``5.0`` as an integer)."""
    value = args.get(key)
    return None if value is None else int(value)


def _datetime(tool: str, args: dict[str, Any], key: str) -> datetime | None:
    """An RFC 3339 date-time in UTC (no offset means UTC), within the range that cannot overflow."""
    text = args.get(key)
    if text is None:
        return None
    try:
        value = datetime.fromisoformat(text)
    except ValueError:
        raise ToolError(
            "invalid_input", f"{tool}: {key} must be an RFC 3339 date-time, got {text[:60]!r}"
        ) from None
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    try:
        value = value.astimezone(UTC)
    except OverflowError:  # e.g. 0001-01-01T00:00:00+05:00 is before datetime.min in UTC
        value = None
    if value is None or not limits.DATE_MIN <= value <= limits.DATE_MAX:
        raise ToolError(
            "invalid_input",
            f"{tool}: {key} must lie between {limits.DATE_MIN:%Y-%m-%d} and "
            f"{limits.DATE_MAX:%Y-%m-%d} (UTC), got {text[:60]!r}",
        )
    return value
