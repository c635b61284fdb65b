"""Memories in and out as JSON Lines: what ``retold import`` and ``retold export`` run (issue 47).

**The format** is one record per line, the memory tools' fields plus where and when::

    {"content": "Priya uses vim.", "type": "semantic", "attribute": "editor", "scope": "user:u1",
     "source_kind": "user_statement", "evidence": "I use vim", "source_ref": "crm:4411",
     "entities": [{"kind": "person", "name": "Priya", "role": "about"}], "tags": ["tools"],
     "event_at": "2026-01-31T09:00:00Z", "valid_from": null, "valid_until": null,
     "review_at": null, "expires_at": null, "agent_id": "planner", "id": "0190…",
     "created_at": "2026-01-31T09:00:01Z", "status": "confirmed"}

Only ``content`` is required; ``scope`` may come from ``--scope``; ``type`` defaults to semantic
when an ``attribute`` is given, else episodic. ``id``, ``created_at`` and ``status`` are what an
export says about the record and are not written back: the write path gives the imported record
its own id, creation time, status and confidence (a record without ``event_at`` takes its
``created_at`` as its event time). ``expires_at``, when the key is present, is set on the record
the line created (``null``: kept until deleted).

**Other stores' exports** are read as well, detected from the first record of the file or named
with ``format``: mem0's ``get_all`` output (``{"results": [...]}``, a list of memories, a list of
such results, or one memory or result per line) and LangGraph store items (``Item.dict()`` /
``SearchItem.dict()``: ``{"namespace": [...], "key", "value", "created_at", "updated_at"}``, one
per line or a JSON list). mem0 memories become episodic records of their ``user_id``'s scope,
dated by their ``created_at``; LangGraph items land in the scope their namespace maps to under
:class:`~retold.adapters.langgraph_namespaces.NamespaceMap`, and their value is kept as the
store item, so :class:`~retold.adapters.langgraph_store.RetoldStore` ``get`` returns it. Both are
kept until deleted, as in their own stores (an unevidenced claim loses its provisional lifetime).

**The write path** is :meth:`MemoryHost.ingest_many`: each window of ``batch_size`` lines is
decided as one-by-one writes would be (a repeat reinforces, a newer fact supersedes) and commits
per principal in one transaction, so a line is never half-written. The texts of the next window
are embedded in one model call while the current one commits.

**Bad lines** (not JSON, a missing field, a refused write) are skipped and listed with their line
number (for a JSON document: their item number) and the reason; the others are imported.

**Resumable.** After each window commits, a checkpoint next to the input (``FILE.retold-import``)
records how far the import got; the same command run again continues after it, and the checkpoint
goes when the import completes. A line whose source already supplied the same text to the store
is not written again (outcome ``already_imported``), so running an import twice, or past a
checkpoint that lagged one window, duplicates nothing, and a memory forgotten since does not
return. A line's source is its agent and ``source_ref`` (none: the agent alone); mem0 memories
and LangGraph items get ``mem0:<id>`` and ``langgraph:<namespace>:<key>``.

One job: memories in and out as the one JSON Lines format above (the export writes what the import
reads); it is long because of the import: three input shapes, every field checked before a write,
the checkpoint that makes it resumable and the source refs that keep a rerun from writing twice.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import hashlib
import json
import os
from collections import Counter
from collections.abc import AsyncIterator, Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import anyio

from retold.errors import InvalidArgumentError, NotFoundError, RetoldError
from retold.index.passages import split_passages
from retold.ingest.write.request import WriteRequest, WriteResult
from retold.ingest.write.sources import source_origin
from retold.models import (
    ACTIVE_STATUSES,
    ENTITY_KINDS,
    RECORD_TYPES,
    SOURCE_KINDS,
    EntityMention,
    Principal,
    Record,
    Scope,
    validate_id,
)
from retold.policy.lifecycle import kept_while_saved
from retold.store.items import StoreItemRow
from retold.tools import limits
from retold.util import format_ts, normalize_alias, normalize_ws, text_problem

if TYPE_CHECKING:
    from retold.runtime import Runtime

__all__ = [
    "FORMATS",
    "OUTCOMES",
    "ImportReport",
    "Importer",
    "checkpoint_path",
    "count_exported",
    "export_lines",
    "export_records",
    "import_file",
    "record_line",
]

Format = Literal["jsonl", "mem0", "langgraph"]
FORMATS: tuple[str, ...] = ("jsonl", "mem0", "langgraph")
DEFAULT_AGENT = "import"
DEFAULT_BATCH = 200
CHECKPOINT_SUFFIX = ".retold-import"
_CHECKPOINT_VERSION = 1
OUTCOMES: tuple[str, ...] = (
    "created", "reinforced", "already_reinforced", "superseded", "superseded_on_arrival", "conflict",
    "already_imported", "skipped",
)  # fmt: skip
"""What a line can come to, in the order a summary lists them."""
_FRESH = ("created", "superseded", "superseded_on_arrival", "conflict")  # outcomes that made a record
Progress = Callable[[int, int], None]


# --- reports -----------------------------------------------------------------------------------


@dataclass
class ImportReport:
    """What an import did, by outcome; the totals of every run of one import when it was resumed.

    ``done`` is the last line (or item) handled, of ``total``; ``skipped`` lists each skipped
    line with its ``line`` number (the item number for a JSON document), ``error`` and
    ``message``. ``checkpoint`` names the checkpoint file while the import is unfinished.
    """

    path: str
    format: str
    counted_in: Literal["lines", "items"]
    total: int
    done: int = 0
    resumed_from: int = 0
    records: int = 0
    outcomes: dict[str, int] = field(default_factory=dict)
    skipped: list[dict[str, Any]] = field(default_factory=list)
    batches: int = 0
    checkpoint: str | None = None
    interrupted: bool = False

    def summary(self) -> str:
        unit = "line" if self.counted_in == "lines" else "item"
        known = {name: i for i, name in enumerate(OUTCOMES)}
        ordered = sorted(self.outcomes.items(), key=lambda item: (known.get(item[0], len(known)), item[0]))
        parts = ", ".join(f"{n:,} {name}" for name, n in ordered if n) or "nothing"
        resumed = f", resumed after {unit} {self.resumed_from:,}" if self.resumed_from else ""
        return (
            f"imported {self.path} ({self.format}, {self.done:,} of {self.total:,} {unit}s{resumed}): {parts}"
        )


# --- reading the input ---------------------------------------------------------------------------


@dataclass
class _Unit:
    """One input record: its position (line or item number) and its JSON value, or why it is bad."""

    position: int
    value: Any = None
    error: tuple[str, str] | None = None


@dataclass
class _Entry:
    """One unit ready for the write path."""

    position: int
    principal: Principal
    request: WriteRequest
    expires: Any = None  # a datetime or None to set after the commit; _KEEP_EXPIRY leaves it
    keep: bool = False  # a saved-until-deleted memory (mem0, LangGraph): no provisional lifetime
    item: StoreItemRow | None = None  # a LangGraph item kept beside its record
    seen: str | None = None  # the record this source's text already went to (already imported)


_KEEP_EXPIRY = object()


class _Source:
    """The input file: JSON Lines (units are lines) or one JSON document (units are its items)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.document: list[Any] | None = None
        self.lines = 0
        digest = hashlib.sha256()
        head: bytes | None = None
        with path.open("rb") as handle:
            for raw in handle:
                digest.update(raw)
                self.lines += 1
                if head is None and raw.strip():
                    head = raw
        self.sha256 = digest.hexdigest()
        if head is None:
            return
        first = head.lstrip()
        try:
            parsed_head: Any = json.loads(head)
        except ValueError:
            parsed_head = None
        if first.startswith(b"[") or (first.startswith(b"{") and parsed_head is None):
            try:
                whole = json.loads(path.read_text(encoding="utf-8"))
            except (ValueError, UnicodeDecodeError):
                return  # JSON Lines whose first line is bad: reported as that line
            self.document = list(_flatten(whole))

    @property
    def counted_in(self) -> Literal["lines", "items"]:
        return "items" if self.document is not None else "lines"

    @property
    def total(self) -> int:
        return len(self.document) if self.document is not None else self.lines

    def units(self, after: int) -> Iterator[_Unit]:
        if self.document is not None:
            for position, value in enumerate(self.document, start=1):
                if position > after:
                    yield _Unit(position, value)
            return
        with self.path.open("rb") as handle:
            for position, raw in enumerate(handle, start=1):
                if position <= after or not raw.strip():
                    continue
                try:
                    yield _Unit(position, json.loads(raw.decode("utf-8")))
                except (ValueError, UnicodeDecodeError) as exc:
                    yield _Unit(position, error=("invalid_json", f"not a JSON value: {exc}"[:200]))

    def detect(self) -> Format:
        """The format of the first unit that is a JSON object (jsonl when there is none)."""
        for unit in self.units(0):
            for value in _flatten(unit.value):
                if isinstance(value, Mapping):
                    return _shape(value) or "jsonl"
        return "jsonl"


def _flatten(value: Any) -> Iterator[Any]:
    """mem0's ``{"results": [...]}`` (and lists of them) as their memories; anything else as is."""
    if isinstance(value, Mapping) and isinstance(value.get("results"), list) and "memory" not in value:
        yield from value["results"]
    elif isinstance(value, list):
        for element in value:
            if isinstance(element, Mapping) and isinstance(element.get("results"), list):
                yield from element["results"]
            else:
                yield element
    else:
        yield value


def _shape(value: Mapping[str, Any]) -> Format | None:
    if "results" in value or ("memory" in value and "content" not in value):
        return "mem0"
    if {"namespace", "key", "value"} <= set(value):
        return "langgraph"
    if "content" in value:
        return "jsonl"
    return None


# --- one unit → one write ---------------------------------------------------------------------------


class _Bad(Exception):
    def __init__(self, error: str, message: str) -> None:
        super().__init__(message)
        self.error, self.message = error, message


def _text(value: Any, name: str, *, required: bool = False, max_len: int | None = None) -> str | None:
    if value is None:
        if required:
            raise _Bad("invalid_input", f"{name} is missing")
        return None
    if not isinstance(value, str):
        raise _Bad("invalid_input", f"{name} must be text, got {type(value).__name__}")
    if required and not value.strip():
        raise _Bad("invalid_input", f"{name} is blank")
    if max_len is not None and len(value) > max_len:
        raise _Bad("invalid_input", f"{name} is {len(value):,} characters long; the limit is {max_len:,}")
    problem = text_problem(value)
    if problem is not None:
        raise _Bad("invalid_input", f"{name} {problem}")
    return value


def _time(value: Any, name: str) -> datetime | None:
    if value is None:
        return None
    if isinstance(value, int | float) and not isinstance(value, bool):
        try:
            parsed = datetime.fromtimestamp(float(value), tz=UTC)
        except (OverflowError, OSError, ValueError):
            raise _Bad("invalid_input", f"{name} is not a usable timestamp") from None
    else:
        text = _text(value, name, max_len=limits.MAX_DATE_CHARS) or ""
        try:
            parsed = datetime.fromisoformat(text.replace("Z", "+00:00"))
        except ValueError:
            raise _Bad("invalid_input", f"{name} must be an ISO 8601 date-time, got {text[:60]!r}") from None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)
    try:
        parsed = parsed.astimezone(UTC)
    except OverflowError:
        raise _Bad("invalid_input", f"{name} lies outside the dates retold stores") from None
    if not limits.DATE_MIN <= parsed <= limits.DATE_MAX:
        raise _Bad(
            "invalid_input",
            f"{name} must lie between {limits.DATE_MIN:%Y-%m-%d} and {limits.DATE_MAX:%Y-%m-%d}",
        )
    return parsed


def _scope(value: Any, default: Scope | None) -> Scope:
    if value is None:
        if default is None:
            raise _Bad("no_scope", 'the record names no scope: give it a "scope" or run with --scope')
        return default
    if isinstance(value, Mapping) and {"kind", "id"} <= set(value):
        value = f"{value['kind']}:{value['id']}"
    text = _text(value, "scope") or ""
    try:
        return Scope.parse(text)
    except RetoldError as exc:
        raise _Bad("invalid_input", str(exc)) from None


def _principal(agent: str, scope: Scope, user: str | None) -> Principal:
    """Who the import writes as: the record's own user where its scope has one."""
    if scope.kind == "user":
        user = scope.id
    elif scope.kind == "agent" and "/" in scope.id:
        agent, user = scope.id.split("/", 1)
    try:
        return Principal(agent_id=agent, user_id=user or agent)
    except RetoldError as exc:
        raise _Bad("invalid_input", str(exc)) from None


def _agent(value: Any, default: str) -> str:
    if isinstance(value, str) and value.strip():
        try:
            validate_id("agent_id", value)
            return value
        except RetoldError:
            pass
    return default


def _mentions(value: Any) -> list[EntityMention]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise _Bad("invalid_input", "entities must be a list of {kind, name, role}")
    out: list[EntityMention] = []
    for i, item in enumerate(value):
        if not isinstance(item, Mapping):
            raise _Bad("invalid_input", f"entities[{i}] must be an object with kind, name and role")
        kind = item.get("kind", "other")
        role = item.get("role", "mentions")
        if kind not in ENTITY_KINDS:
            raise _Bad("invalid_input", f"entities[{i}].kind must be one of {', '.join(ENTITY_KINDS)}")
        if role not in ("about", "mentions"):
            raise _Bad("invalid_input", f"entities[{i}].role must be about or mentions")
        entity_id = _text(item.get("entity_id"), f"entities[{i}].entity_id", max_len=limits.MAX_ID_CHARS)
        name = _text(item.get("name", item.get("text")), f"entities[{i}].name", max_len=limits.MAX_NAME_CHARS)
        if not (name and name.strip()) and not entity_id:
            raise _Bad("invalid_input", f"entities[{i}] needs a name or an entity_id")
        out.append(EntityMention(kind, name or entity_id or "", role, entity_id or None))
    return out


def _tags(value: Any) -> list[str]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise _Bad("invalid_input", "tags must be a list of text")
    return [
        t for i, t in enumerate(value) if _text(t, f"tags[{i}]", max_len=limits.MAX_TAG_CHARS) and t.strip()
    ]


_MAX_REF_CHARS = 1000


def _bounded_ref(ref: str, prefix: str, *parts: Any) -> str:
    """``ref``, or a digest of what it names when it is too long to keep as a source reference."""
    return ref if len(ref) <= _MAX_REF_CHARS else _derived_ref(prefix, *parts)


def _derived_ref(prefix: str, *parts: Any) -> str:
    digest = hashlib.sha256("\x1f".join("" if p is None else str(p) for p in parts).encode()).hexdigest()
    return f"{prefix}:{digest[:24]}"


class _Reader:
    """Turns input values into write requests under one import's defaults."""

    def __init__(
        self,
        format: Format,
        *,
        scope: Scope | None,
        agent: str,
        source_kind: str | None,
        store_source_kind: str,
        namespace_root: str,
        now: datetime,
    ) -> None:
        from retold.adapters.langgraph_namespaces import NamespaceMap

        self.format = format
        self.scope = scope
        self.agent = agent
        self.source_kind = source_kind
        self.store_source_kind = store_source_kind
        self.namespaces = NamespaceMap(root=namespace_root)
        self.now = now

    def entries(self, unit: _Unit) -> list[_Entry]:
        if unit.error is not None:
            raise _Bad(*unit.error)
        values = list(_flatten(unit.value))
        out = []
        for value in values:
            if not isinstance(value, Mapping):
                raise _Bad("invalid_input", f"a record is a JSON object, got {type(value).__name__}")
            read = {"jsonl": self._record, "mem0": self._mem0, "langgraph": self._langgraph}[self.format]
            out.append(read(unit.position, value))
        return out

    def _kind(self, value: Any, default: str) -> str:
        kind = value if value is not None else (self.source_kind or default)
        if kind not in SOURCE_KINDS:
            raise _Bad("invalid_source_kind", f"source_kind must be one of {', '.join(SOURCE_KINDS)}")
        return str(kind)

    def _record(self, position: int, value: Mapping[str, Any]) -> _Entry:
        if "content" not in value and _shape(value) is not None:
            raise _Bad("invalid_input", f"a {_shape(value)} record in a jsonl file (run with --format)")
        content = _text(value.get("content"), "content", required=True) or ""
        attribute = _text(value.get("attribute"), "attribute", max_len=limits.MAX_ATTRIBUTE_CHARS)
        if attribute is not None and attribute.strip() in ("", "-"):
            attribute = None
        kind_of_record = value.get("type") or ("semantic" if attribute else "episodic")
        if kind_of_record not in RECORD_TYPES:
            raise _Bad("invalid_input", f"type must be one of {', '.join(RECORD_TYPES)}")
        scope = _scope(value.get("scope"), self.scope)
        agent = _agent(value.get("agent_id"), self.agent)
        user = value.get("user_id") if isinstance(value.get("user_id"), str) else None
        principal = _principal(agent, scope, user)
        created = _time(value.get("created_at"), "created_at")
        event_at = _time(value.get("event_at"), "event_at") or created
        ref = _text(value.get("source_ref"), "source_ref", max_len=_MAX_REF_CHARS) or None
        request = WriteRequest(
            type=kind_of_record, content=content, scope=scope,
            source_kind=self._kind(value.get("source_kind"), "agent_inference"), attribute=attribute,
            evidence=_text(value.get("evidence"), "evidence"), entities=_mentions(value.get("entities")),
            event_at=event_at, valid_from=_time(value.get("valid_from"), "valid_from"),
            valid_until=_time(value.get("valid_until"), "valid_until"),
            review_at=_time(value.get("review_at"), "review_at"), tags=_tags(value.get("tags")),
            source_ref=ref, trusted=True,
        )  # fmt: skip
        expires = _time(value["expires_at"], "expires_at") if "expires_at" in value else _KEEP_EXPIRY
        return _Entry(position, principal, request, expires=expires)

    def _mem0(self, position: int, value: Mapping[str, Any]) -> _Entry:
        if "memory" not in value:
            raise _Bad("invalid_input", 'not a mem0 memory: it has no "memory" text')
        content = _text(value.get("memory"), "memory", required=True) or ""
        user = value.get("user_id")
        if user is not None:
            scope = _scope(f"user:{user}", None)
        elif self.scope is not None:
            scope = self.scope
        else:
            raise _Bad("no_scope", "the memory has no user_id: run with --scope for memories without one")
        agent = _agent(value.get("agent_id"), self.agent)
        categories = value.get("categories")
        tags = [c for c in categories if isinstance(c, str) and c.strip()][: limits.MAX_TAGS] if isinstance(
            categories, list
        ) else []  # fmt: skip
        memory_id = value.get("id")
        ref = (
            f"mem0:{memory_id}" if isinstance(memory_id, str | int) and str(memory_id).strip()
            else _derived_ref("mem0", scope, normalize_ws(content))
        )  # fmt: skip
        request = WriteRequest(
            type="episodic", content=content, scope=scope,
            source_kind=self._kind(None, "agent_inference"),
            event_at=_time(value.get("created_at"), "created_at"),
            tags=[t for t in tags if len(t) <= limits.MAX_TAG_CHARS and not text_problem(t)],
            source_ref=_bounded_ref(ref, "mem0", memory_id), trusted=True,
        )  # fmt: skip
        expires = _time(value.get("expiration_date"), "expiration_date")
        return _Entry(position, _principal(agent, scope, None), request, keep=True,
                      expires=expires if expires is not None else _KEEP_EXPIRY)  # fmt: skip

    def _langgraph(self, position: int, value: Mapping[str, Any]) -> _Entry:
        from retold.adapters.langgraph_values import (
            RESERVED_KEY,
            StoreRefusedError,
            dump_value,
            ns_text,
            record_text,
        )

        namespace = value.get("namespace")
        if not isinstance(namespace, list | tuple) or not all(isinstance(n, str) and n for n in namespace):
            raise _Bad("invalid_input", "namespace must be a list of labels")
        key = _text(value.get("key"), "key", required=True, max_len=1024) or ""
        stored = value.get("value")
        if not isinstance(stored, Mapping):
            raise _Bad("invalid_input", "value must be a JSON object")
        stored = {k: v for k, v in stored.items() if k != RESERVED_KEY}
        target = self.namespaces.target(tuple(namespace))
        if target is None:
            raise _Bad(
                "no_scope",
                f"namespace {tuple(namespace)!r} maps to no scope: ({self.namespaces.root!r}, <user>, ...) "
                f"and ({self.namespaces.root!r}, 'project', <id>, ...) do (--namespace-root names the root)",
            )
        try:
            content = record_text(stored, None)
        except StoreRefusedError as exc:
            raise _Bad(exc.code, exc.message) from None
        content = _text(content, "the value's text", required=True) or ""
        evidence = stored.get("evidence") if isinstance(stored.get("evidence"), str) else None
        principal = _principal(self.agent, target.scope, target.user_id)
        created = _time(value.get("created_at"), "created_at")
        updated = _time(value.get("updated_at"), "updated_at")
        ns = ns_text(namespace)
        ref = _bounded_ref(f"langgraph:{ns}:{key}", "langgraph", ns, key)
        request = WriteRequest(
            type="episodic", content=content, scope=target.scope,
            source_kind=self._kind(None, self.store_source_kind), evidence=evidence,
            event_at=updated or created, source_ref=ref, trusted=True,
        )  # fmt: skip
        item = StoreItemRow(
            namespace=ns, key=key, scope=target.scope, record_id=None, value=dump_value(stored),
            agent_id=self.agent, user_id=principal.user_id, created_at=created or updated or self.now,
            updated_at=updated or created or self.now,
        )  # fmt: skip
        return _Entry(position, principal, request, keep=True, item=item, expires=_KEEP_EXPIRY)


# --- the checkpoint ----------------------------------------------------------------------------------


def checkpoint_path(path: str | os.PathLike[str]) -> Path:
    """Where an import of ``path`` keeps its progress by default: beside it."""
    return Path(f"{os.fspath(path)}{CHECKPOINT_SUFFIX}")


def _read_checkpoint(path: Path, sha256: str, store: str, fmt: str) -> dict[str, Any] | None:
    try:
        state = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, ValueError):
        return None  # unreadable: start again (nothing is lost: imported lines are recognised)
    if not isinstance(state, dict) or state.get("version") != _CHECKPOINT_VERSION:
        return None
    if (state.get("sha256"), state.get("store"), state.get("format")) != (sha256, store, fmt):
        return None  # another file's (or version's), another store's, or read as another format
    return state


def _write_checkpoint(path: Path, state: Mapping[str, Any]) -> None:
    scratch = path.with_name(f"{path.name}.tmp")
    try:
        scratch.write_text(json.dumps(state, ensure_ascii=False), encoding="utf-8")
        os.replace(scratch, path)
    except OSError as exc:
        raise InvalidArgumentError(
            f"cannot write the import checkpoint {str(path)!r} ({exc.strerror or exc}); "
            "name a writable place with --checkpoint"
        ) from None


# --- the import ------------------------------------------------------------------------------------


class Importer:
    """One import of one file into one runtime's store; :attr:`report` holds the totals so far.

    ``progress(done, total)`` is called after each committed window. An interruption
    (Ctrl-C, cancellation) leaves the checkpoint at the last committed window and
    :attr:`report` saying how far it got; the exception propagates.
    """

    def __init__(
        self,
        rt: Runtime,
        path: str | os.PathLike[str],
        *,
        format: str = "auto",
        scope: Scope | None = None,
        agent: str = DEFAULT_AGENT,
        source_kind: str | None = None,
        actor: str = "admin",
        batch_size: int = DEFAULT_BATCH,
        checkpoint: str | os.PathLike[str] | None = None,
        restart: bool = False,
        namespace_root: str = "memories",
        progress: Progress | None = None,
    ) -> None:
        if format != "auto" and format not in FORMATS:
            raise InvalidArgumentError(f"format must be auto or one of {', '.join(FORMATS)}, got {format!r}")
        if source_kind is not None and source_kind not in SOURCE_KINDS:
            raise InvalidArgumentError(f"source_kind must be one of {', '.join(SOURCE_KINDS)}")
        if batch_size < 1:
            raise InvalidArgumentError("batch_size must be at least 1")
        validate_id("agent_id", agent)
        file = Path(path)
        if not file.is_file():
            raise NotFoundError(f"no file to import at {str(file)!r}")
        self.rt = rt
        self.file = file
        self.wanted = format
        self.scope = scope
        self.agent = agent
        self.source_kind = source_kind
        self.actor = actor
        self.batch_size = batch_size
        self.checkpoint = Path(checkpoint) if checkpoint is not None else checkpoint_path(file)
        self.restart = restart
        self.namespace_root = namespace_root
        self.progress = progress
        self.report: ImportReport | None = None

    async def run(self) -> ImportReport:
        source = await anyio.to_thread.run_sync(_Source, self.file)
        fmt: Format = source.detect() if self.wanted == "auto" else self.wanted  # type: ignore[assignment]
        store = str(getattr(self.rt.store.db, "path", ""))
        state = None if self.restart else _read_checkpoint(self.checkpoint, source.sha256, store, fmt)
        report = ImportReport(
            path=str(self.file), format=fmt, counted_in=source.counted_in, total=source.total,
            checkpoint=str(self.checkpoint),
        )  # fmt: skip
        if state is not None:
            report.done = report.resumed_from = int(state.get("done", 0))
            report.records = int(state.get("records", 0))
            report.outcomes = dict(state.get("outcomes", {}))
            report.skipped = list(state.get("skipped", []))
            report.batches = int(state.get("batches", 0))
        self.report = report
        saved = {"version": _CHECKPOINT_VERSION, "sha256": source.sha256, "store": store, "format": fmt}
        _write_checkpoint(self.checkpoint, {**saved, **self._state(report)})  # writable, before any write
        reader = _Reader(
            fmt, scope=self.scope, agent=self.agent, source_kind=self.source_kind,
            store_source_kind=self.rt.config.integrations.store_source_kind,
            namespace_root=self.namespace_root, now=self.rt.clock.now(),
        )  # fmt: skip
        if self.progress is not None:
            self.progress(report.done, report.total)
        try:
            await self._import(source, reader, report, saved)
        except BaseException:
            report.interrupted = True
            raise
        self.checkpoint.unlink(missing_ok=True)
        report.checkpoint = None
        await self.rt.store.append_event(
            "store.imported", self.actor,
            payload={"file": self.file.name, "format": fmt, "total": report.total, "records": report.records,
                     "outcomes": report.outcomes, "skipped": len(report.skipped)},
        )  # fmt: skip
        return report

    def _state(self, report: ImportReport) -> dict[str, Any]:
        return {
            "done": report.done, "records": report.records, "outcomes": report.outcomes,
            "skipped": report.skipped, "batches": report.batches,
        }  # fmt: skip

    async def _import(
        self, source: _Source, reader: _Reader, report: ImportReport, saved: Mapping[str, Any]
    ) -> None:
        windows = self._windows(source, reader, report.done)
        current = await anext(windows, None)
        warming = self._warm(current)
        while current is not None:
            following = await anext(windows, None)
            if warming is not None:
                await warming
            warming = self._warm(following)  # the next window embeds while this one commits
            last, entries, bad = current
            tally = _Tally()
            await self._commit(entries, tally)
            for position, error, message in bad:
                tally.skip(position, error, message)
            # Counted once the whole window has committed, so the totals always match the checkpoint;
            # lines of a window cut short are recognised as already imported by the next run.
            unit = "line" if report.counted_in == "lines" else "item"
            for outcome, n in tally.outcomes.items():
                report.outcomes[outcome] = report.outcomes.get(outcome, 0) + n
            report.skipped += [
                {unit: position, "error": error, "message": message}
                for position, error, message in sorted(tally.skipped)
            ]
            report.records += tally.records
            report.done = last
            report.batches += 1
            _write_checkpoint(self.checkpoint, {**saved, **self._state(report)})
            if self.progress is not None:
                self.progress(report.done, report.total)
            current = following
        if warming is not None:
            await warming

    async def _windows(
        self, source: _Source, reader: _Reader, after: int
    ) -> AsyncIterator[tuple[int, list[_Entry], list[tuple[int, str, str]]]]:
        """Up to ``batch_size`` units at a time: (last position, entries, bad units)."""
        units = source.units(after)
        while True:
            chunk = await anyio.to_thread.run_sync(_take, units, self.batch_size)
            if not chunk:
                return
            entries: list[_Entry] = []
            bad: list[tuple[int, str, str]] = []
            for unit in chunk:
                try:
                    entries += reader.entries(unit)
                except _Bad as exc:
                    bad.append((unit.position, exc.error, exc.message))
            yield chunk[-1].position, await self._unseen(entries), bad

    async def _unseen(self, entries: list[_Entry]) -> list[_Entry]:
        """Mark the entries whose source already gave the store the same text (already imported).

        A source is an origin (:func:`_origin`) and a text is the record's stripped content, as
        ``record_sources`` keeps both for every write, a reinforcement included.
        """
        known = await self.rt.store.records_with_sources(
            (_origin(e), e.request.content.strip()) for e in entries
        )
        for entry in entries:
            entry.seen = known.get((_origin(entry), entry.request.content.strip()))
        return entries

    def _warm(self, window: tuple[int, list[_Entry], Any] | None) -> asyncio.Task[None] | None:
        """Embed a window's texts in one model call, in a worker thread (the task ends when done).

        The write path then finds every vector in the judge's cache, as an extraction's
        evidence check does (one model call per window instead of one per record). A judge
        that does not embed with the store's embedder has no cache to fill: nothing is done.
        """
        judge = self.rt.judge
        prefetch = getattr(judge, "prefetch", None)
        if window is None or prefetch is None or getattr(judge, "embedder", None) is not self.rt.embedder:
            return None
        chars = self.rt.config.embedding.passage_chars
        texts: list[str] = []
        for entry in window[1]:
            if entry.seen is None:
                content = entry.request.content.strip()
                texts += [content, *split_passages(content, chars)]
        if not texts:
            return None

        async def embed() -> None:
            # A failed prefetch only costs speed: each write then embeds its own text.
            with contextlib.suppress(Exception):
                await anyio.to_thread.run_sync(prefetch, texts)

        return asyncio.ensure_future(embed())

    async def _commit(self, entries: list[_Entry], tally: _Tally) -> None:
        """One ``ingest_many`` per principal, in the order each first appears in the window."""
        await self._unseen(entries)  # again: the window before this one has committed since
        groups: dict[Principal, list[_Entry]] = {}
        seen = [e for e in entries if e.seen is not None]
        for entry in entries:
            if entry.seen is None:
                groups.setdefault(entry.principal, []).append(entry)
        if seen:
            tally.outcomes["already_imported"] += len(seen)
        await self._after([], seen)  # what a run cut short after their commit may have left undone
        for principal, group in groups.items():
            results = await self.rt.host.ingest_many(principal, [e.request for e in group], actor=self.actor)
            landed: list[tuple[_Entry, WriteResult]] = []
            for entry, result in zip(group, results, strict=True):
                if not result.ok or result.record_id is None:
                    tally.skip(entry.position, result.error or "error", result.message or "refused")
                    continue
                tally.outcomes[(result.outcome or "written").split(":", 1)[0]] += 1
                tally.records += 1
                landed.append((entry, result))
            await self._after(landed, [])

    async def _after(self, landed: list[tuple[_Entry, WriteResult]], seen: list[_Entry]) -> None:
        """Expiry and LangGraph store items, in one transaction after the batch (idempotent on a rerun)."""
        todo = [(e, r.record_id, (r.outcome or "").split(":", 1)[0] in _FRESH) for e, r in landed]
        todo += [(e, e.seen, False) for e in seen]
        todo = [
            (entry, record_id, fresh) for entry, record_id, fresh in todo
            if entry.keep or entry.item is not None or (fresh and entry.expires is not _KEEP_EXPIRY)
        ]  # fmt: skip
        if not todo:
            return
        store = self.rt.store
        records = {r.id: r for r in await store.get_records([rid for _, rid, _ in todo if rid])}
        async with store.transaction():
            for entry, record_id, fresh in todo:
                record = records.get(record_id or "")
                if record is None:
                    continue
                changes: dict[str, Any] = {}
                if entry.keep:
                    changes |= kept_while_saved(record)
                if fresh and entry.expires is not _KEEP_EXPIRY and record.expires_at != entry.expires:
                    changes["expires_at"] = entry.expires
                if changes:
                    await store.update_record(record.id, **changes)
                if entry.item is not None:
                    item = entry.item
                    await store.put_store_item(dataclasses.replace(item, record_id=record.id))
                    await store.append_event(
                        "store.item_put", self.actor, record_id=record.id,
                        payload={"agent_id": entry.principal.agent_id, "user_id": entry.principal.user_id,
                                 "session_id": None, "scope": str(item.scope), "namespace": item.namespace,
                                 "key": item.key, "outcome": "imported"},
                    )  # fmt: skip


@dataclass
class _Tally:
    """One window's outcomes, added to the report once the whole window has committed."""

    outcomes: Counter[str] = field(default_factory=Counter)
    skipped: list[tuple[int, str, str]] = field(default_factory=list)
    records: int = 0

    def skip(self, position: int, error: str, message: str) -> None:
        self.outcomes["skipped"] += 1
        self.skipped.append((position, error, message))


def _origin(entry: _Entry) -> str:
    """The source a trusted write by the entry's principal contributes (no session, no user)."""
    return source_origin(entry.principal.agent_id, None, None, entry.request.source_ref)


def _take(units: Iterator[_Unit], n: int) -> list[_Unit]:
    out: list[_Unit] = []
    for unit in units:
        out.append(unit)
        if len(out) >= n:
            break
    return out


async def import_file(rt: Runtime, path: str | os.PathLike[str], **options: Any) -> ImportReport:
    """Import ``path`` into ``rt``'s store (see :class:`Importer` for the options)."""
    return await Importer(rt, path, **options).run()


# --- the export -------------------------------------------------------------------------------------


async def export_lines(rt: Runtime, scopes: Sequence[Scope] | None = None) -> AsyncIterator[dict[str, Any]]:
    """Every active record of ``scopes`` (default: every scope holding records), oldest first per scope."""
    store = rt.store
    wanted = list(scopes) if scopes else [s for s, _ in await store.scope_counts(None)]
    entities: dict[str, Any] = {}
    for scope in wanted:
        for record in await store.records_in_scope(scope):
            mentions = []
            for entity_id, role in await store.record_links(record.id):
                if entity_id not in entities:
                    entities[entity_id] = await store.follow_merges(entity_id)
                entity = entities[entity_id]
                if entity is None or _is_principal(entity, record, role):
                    continue
                mention = {"kind": entity.kind, "name": entity.canonical, "role": role}
                if mention not in mentions:
                    mentions.append(mention)
            yield record_line(record, mentions)


async def count_exported(rt: Runtime, scopes: Sequence[Scope] | None = None) -> int:
    counts = await rt.store.scope_counts(list(scopes) if scopes else None)
    return sum(n for _, by_status in counts for status, n in by_status.items() if status in ACTIVE_STATUSES)


def _is_principal(entity: Any, record: Record, role: str) -> bool:
    """The record's own user's person entity: a subject-less write in that user's scope links it."""
    scope = record.scope
    return (
        role == "about" and scope.kind == "user" and entity.kind == "person" and entity.scope == scope
        and normalize_alias(scope.id) in entity.aliases
    )  # fmt: skip


def record_line(record: Record, entities: Sequence[Mapping[str, Any]] = ()) -> dict[str, Any]:
    """One exported record: the fields an import reads back, then what the export only reports."""

    def ts(value: datetime | None) -> str | None:
        return format_ts(value) if value is not None else None

    line: dict[str, Any] = {"content": record.content, "type": record.type}
    if record.attribute and record.attribute != "-":
        line["attribute"] = record.attribute
    line |= {"scope": str(record.scope), "source_kind": record.source_kind}
    optional = {
        "source_ref": record.source_ref, "evidence": record.evidence,
        "entities": list(entities) or None, "tags": list(record.tags) or None,
        "event_at": ts(record.event_at), "valid_from": ts(record.valid_from),
        "valid_until": ts(record.valid_until), "review_at": ts(record.review_at),
    }  # fmt: skip
    line |= {k: v for k, v in optional.items() if v is not None}
    line["expires_at"] = ts(record.expires_at)
    line |= {
        "agent_id": record.creator_agent_id, "id": record.id, "created_at": ts(record.created_at),
        "status": record.status,
    }  # fmt: skip
    return line


async def export_records(
    rt: Runtime,
    write: Callable[[str], Any],
    scopes: Sequence[Scope] | None = None,
    *,
    progress: Progress | None = None,
) -> int:
    """Write each record as one JSON line through ``write``; return how many."""
    total = await count_exported(rt, scopes)
    done = 0
    if progress is not None:
        progress(0, total)
    async for line in export_lines(rt, scopes):
        write(json.dumps(line, ensure_ascii=False) + "\n")
        done += 1
        if progress is not None and (done % 100 == 0 or done == total):
            progress(done, max(total, done))
    return done
