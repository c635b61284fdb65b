"""What a LangGraph store call looks like in retold's terms: checks, value text, items, filters.

Pure functions and the store's error types, used by
:class:`~retold.adapters.langgraph_store.RetoldStore`: namespaces and keys are checked before
anything is queued, a value's searchable text is chosen here, records and store rows become
LangGraph ``Item`` / ``SearchItem`` objects here, and InMemoryStore's filter semantics live here.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from langgraph.store.base import (
    NOT_PROVIDED,
    InvalidNamespaceError,
    Item,
    MatchCondition,
    SearchItem,
)

from retold.errors import IdentityError, InvalidArgumentError, RetoldError
from retold.models import Principal, Record, Scope
from retold.store.items import StoreItemRow
from retold.tools import limits
from retold.tools.handlers import ToolError, _check_json
from retold.util import text_problem

if TYPE_CHECKING:
    pass

__all__ = [
    "LAST_EXPIRY",
    "LIVE",
    "MAX_KEY_CHARS",
    "MAX_LABEL_CHARS",
    "MAX_NAMESPACE_DEPTH",
    "OPERATORS",
    "PAGE",
    "RESERVED_KEY",
    "SCAN_LIMIT",
    "SWEEP_EVERY_S",
    "RetoldSearchItem",
    "StoreArgumentError",
    "StoreIdentityError",
    "StoreNamespaceError",
    "StoreRefusedError",
    "bounded_int",
    "check_filter",
    "check_index",
    "check_key",
    "check_namespace",
    "check_namespace_for_write",
    "check_ttl",
    "check_value",
    "compare_filter",
    "dump_value",
    "expiry_after",
    "explanation_of",
    "field_text",
    "filter_matches",
    "filter_operator",
    "filter_path",
    "identity_refused",
    "is_live",
    "item_of",
    "max_ttl_minutes",
    "namespace_matches",
    "ns_text",
    "ns_tuple",
    "owner_fields",
    "record_item",
    "record_text",
    "refusal_of",
    "search_item",
    "show_namespace",
    "source_fields",
    "value_path",
]

RESERVED_KEY = "_retold"
"""Top-level value key retold fills with provenance for records other surfaces wrote; refused in puts."""
MAX_KEY_CHARS = 1024
MAX_NAMESPACE_DEPTH = 16
MAX_LABEL_CHARS = limits.MAX_NAME_CHARS
SCAN_LIMIT = 10_000  # entries a filtered listing reads at most
PAGE = 200
SWEEP_EVERY_S = 60.0
LIVE = ("provisional", "confirmed")
LAST_EXPIRY = datetime(9999, 1, 1, tzinfo=UTC)
"""The latest expiry a TTL may reach: a date, stored and compared everywhere, holds up to year 9999."""


# --- errors ----------------------------------------------------------------------------------


class StoreRefusedError(RetoldError):
    """A put or delete retold refused; the store is unchanged. Carries the tools' error shape."""

    def __init__(self, code: str, message: str, **extra: Any) -> None:
        super().__init__(message)
        self.code, self.message, self.extra = code, message, extra

    def as_dict(self) -> dict[str, Any]:
        return {"ok": False, "error": self.code, "message": self.message, **self.extra}


class StoreArgumentError(InvalidArgumentError):
    """A malformed store call (limit, query, filter); nothing was read or written."""

    code = "invalid_input"

    def as_dict(self) -> dict[str, Any]:
        return {"ok": False, "error": self.code, "message": str(self)}


class StoreNamespaceError(StoreArgumentError, InvalidNamespaceError):
    """A namespace that maps to no retold scope (or is malformed); the message names it."""


class StoreIdentityError(StoreRefusedError, IdentityError):
    """A served call naming another user than the server's authenticated one (or nobody is).

    ``code`` is ``identity_mismatch`` (the run, or the namespace, names someone else) or
    ``unauthenticated`` (a served run without an authenticated user, outside local
    development mode). Nothing was read or written.
    """


def identity_refused(code: str, message: str) -> StoreIdentityError:
    return StoreIdentityError(code, message)


def refusal_of(result: Mapping[str, Any]) -> StoreRefusedError:
    extra = {k: v for k, v in result.items() if k not in ("ok", "error", "message")}
    return StoreRefusedError(str(result.get("error")), str(result.get("message")), **extra)


class RetoldSearchItem(SearchItem):
    """A search hit: LangGraph's fields plus retold's ``record_id`` and ``explanation``."""

    def __init__(self, *, record_id: str | None, explanation: dict[str, Any] | None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.record_id = record_id
        self.explanation = explanation


def ns_text(namespace: Sequence[str]) -> str:
    return json.dumps(list(namespace), ensure_ascii=True, separators=(",", ":"))


def ns_tuple(text: str) -> tuple[str, ...]:
    return tuple(json.loads(text))


def show_namespace(namespace: Sequence[Any]) -> str:
    return repr(tuple(str(label)[:40] for label in list(namespace)[:MAX_NAMESPACE_DEPTH]))[:300]


def check_namespace(namespace: Any) -> None:
    if not isinstance(namespace, tuple | list) or len(namespace) > MAX_NAMESPACE_DEPTH:
        raise StoreNamespaceError(f"a namespace is a tuple of at most {MAX_NAMESPACE_DEPTH} strings")
    for label in namespace:
        if not isinstance(label, str) or not label or len(label) > MAX_LABEL_CHARS or "." in label:
            raise StoreNamespaceError(
                f"namespace {show_namespace(namespace)}: labels are non-empty strings of at most "
                f"{MAX_LABEL_CHARS} "
                "characters without '.'"
            )
        problem = text_problem(label)
        if problem is not None:
            raise StoreNamespaceError(f"namespace {show_namespace(namespace)}: a label {problem}")


def check_namespace_for_write(namespace: tuple[str, ...]) -> None:
    if namespace and namespace[0] == "langgraph":
        raise StoreNamespaceError('the namespace root label "langgraph" is reserved by LangGraph')


def check_key(key: Any) -> str:
    if not isinstance(key, str) or not key or len(key) > MAX_KEY_CHARS or text_problem(key):
        raise StoreRefusedError(
            "invalid_input", f"a key is non-empty text of at most {MAX_KEY_CHARS} characters"
        )
    return key


def check_value(value: Any) -> dict[str, Any]:
    """A JSON object within the tools' bounds, with no reserved key; else invalid_input."""
    if not isinstance(value, Mapping):
        raise StoreRefusedError("invalid_input", f"a value must be a dict, got {type(value).__name__}")
    value = dict(value)
    if RESERVED_KEY in value:
        raise StoreRefusedError(
            "invalid_input", f"value key {RESERVED_KEY!r} is reserved for retold's provenance"
        )
    try:
        _check_json("store value", value)
        json.dumps(value, allow_nan=False)
    except ToolError as refused:
        raise StoreRefusedError(refused.code, refused.message) from None
    except (TypeError, ValueError):
        raise StoreRefusedError(
            "invalid_input", "a value must be JSON: finite numbers, strings, lists, dicts"
        ) from None
    return value


def check_ttl(ttl: Any, now: datetime) -> float | None:
    """Minutes, positive and finite, whose expiry from ``now`` a date can hold; else invalid_input.

    Checked before anything is written: a put with a ttl past :data:`LAST_EXPIRY` is refused
    whole, never half-written.
    """
    if ttl is None or ttl is NOT_PROVIDED:
        return None
    if (
        isinstance(ttl, bool)
        or not isinstance(ttl, int | float)
        or not 0 < ttl <= max_ttl_minutes(now)  # also refuses nan, inf and ints too big for a float
    ):
        raise StoreRefusedError(
            "invalid_input",
            f"ttl is a positive number of minutes expiring before {LAST_EXPIRY.year} "
            f"(at most {max_ttl_minutes(now):.0f} minutes from now)",
        )
    return float(ttl)


def max_ttl_minutes(now: datetime) -> float:
    """The longest TTL that still expires by :data:`LAST_EXPIRY`, counted from ``now``."""
    if now.tzinfo is None:
        now = now.replace(tzinfo=UTC)
    return max(0.0, (LAST_EXPIRY - now) / timedelta(minutes=1))


def expiry_after(now: datetime, ttl_minutes: float) -> datetime:
    """``now + ttl``, capped at :data:`LAST_EXPIRY` (a refresh on read restarts a TTL from a later now)."""
    if ttl_minutes >= max_ttl_minutes(now):
        return LAST_EXPIRY
    return now + timedelta(minutes=ttl_minutes)


def check_index(index: Any) -> list[str] | None:
    if index is None or index is False:
        return None
    if not isinstance(index, list) or not index or len(index) > 32:
        raise StoreRefusedError("invalid_input", "index is False, None, or a list of 1 to 32 field paths")
    for path in index:
        if not isinstance(path, str) or not path or len(path) > 200 or text_problem(path):
            raise StoreRefusedError("invalid_input", "index field paths are non-empty text")
    return list(index)


def field_text(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, str):
        return value
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return "\n".join(value)  # Deep Agents' legacy file content: a list of lines
    return dump_value(value)


def value_path(value: Any, path: str) -> Any:
    for part in path.split("."):
        if isinstance(value, Mapping):
            value = value.get(part)
        elif isinstance(value, list) and part.isdigit() and int(part) < len(value):
            value = value[int(part)]
        else:
            return None
    return value


def record_text(value: dict[str, Any], fields: Sequence[str] | None) -> str:
    """The text retold indexes: the index fields, else ``content``, else the value as JSON."""
    if fields is not None:
        parts = [t for t in (field_text(value_path(value, f)) for f in fields) if t and t.strip()]
        if not parts:
            raise StoreRefusedError(
                "invalid_input", f"none of the index fields {list(fields)[:5]} holds text"
            )
        return "\n".join(parts)
    text = field_text(value.get("content")) if "content" in value else None
    if text is None:
        text = dump_value({k: v for k, v in value.items() if k != "evidence"})
    if not text.strip():
        raise StoreRefusedError("invalid_input", "the value holds no text to remember")
    return text


def source_fields(value: dict[str, Any], default_kind: str) -> dict[str, Any]:
    """A value quoting the user's own turn is a user statement with that evidence, checked as usual."""
    evidence = value.get("evidence")
    if isinstance(evidence, str) and evidence.strip():
        return {"source_kind": "user_statement", "evidence": evidence}
    return {"source_kind": default_kind}


def dump_value(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, sort_keys=True, separators=(",", ":"), allow_nan=False)


def is_live(record: Record, now: datetime) -> bool:
    return record.status in LIVE and (record.expires_at is None or record.expires_at > now)


def item_of(row: StoreItemRow, namespace: Sequence[str]) -> Item:
    return Item(
        value=json.loads(row.value), key=row.key, namespace=tuple(namespace),
        created_at=row.created_at, updated_at=row.updated_at,
    )  # fmt: skip


def record_item(record: Record, root: tuple[str, ...]) -> Item:
    """A record no key refers to (written by the tools, extraction, the host) as an item."""
    return Item(
        value={
            "content": record.content,
            RESERVED_KEY: {
                "record_id": record.id,
                "type": record.type,
                "source_kind": record.source_kind,
                "status": record.status,
                "scope": str(record.scope),
            },
        },
        key=record.id,
        namespace=tuple(root),
        created_at=record.created_at,
        updated_at=record.last_reinforced_at or record.created_at,
    )


def search_item(
    item: Item, score: float | None, record_id: str | None, explanation: dict[str, Any] | None
) -> RetoldSearchItem:
    return RetoldSearchItem(
        namespace=item.namespace, key=item.key, value=item.value, created_at=item.created_at,
        updated_at=item.updated_at, score=score, record_id=record_id, explanation=explanation,
    )  # fmt: skip


def explanation_of(result: Any, search_id: str) -> dict[str, Any]:
    e = result.explanation
    return {
        "search_id": search_id, "record_id": result.record.id, "matched_by": list(e.matched_by),
        "gate": e.gate, "dedup": e.dedup, "fused_rank": e.fused_rank, "source_kind": e.source_kind,
        "status": e.status, "summary": e.summary,
    }  # fmt: skip


def owner_fields(principal: Principal, scope: Scope) -> dict[str, Any]:
    """Owner fields every write event carries, so erasing the user or session reaches the event."""
    return {"agent_id": principal.agent_id, "user_id": principal.user_id,
            "session_id": principal.session_id, "scope": str(scope)}  # fmt: skip


def bounded_int(value: Any, low: int, high: int, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise StoreArgumentError(f"{name} must be an integer from {low} to {high}")
    return value


OPERATORS = ("$eq", "$ne", "$gt", "$gte", "$lt", "$lte")


def check_filter(filter_: Any) -> None:
    if filter_ is None:
        return
    if not isinstance(filter_, Mapping):
        raise StoreArgumentError("filter must be a dict of value field → expected value")
    try:
        _check_json("filter", dict(filter_))
    except ToolError as refused:
        raise StoreArgumentError(refused.message) from None
    stack: list[Any] = [filter_]
    while stack:
        node = stack.pop()
        if isinstance(node, Mapping):
            for key, sub in node.items():
                if isinstance(key, str) and key.startswith("$") and key not in OPERATORS:
                    raise StoreArgumentError(
                        f"filter operator {key[:20]!r} is not one of {', '.join(OPERATORS)}"
                    )
                stack.append(sub)
        elif isinstance(node, list):
            stack.extend(node)


def filter_matches(value: Mapping[str, Any], filter_: Mapping[str, Any]) -> bool:
    """LangGraph InMemoryStore's filter semantics: exact (nested) match, or $eq/$ne/$gt/$gte/$lt/$lte.

    A key absent from the value that contains dots is a path (``"user.access-level"``), as in
    LangGraph's newer stores.
    """
    return all(compare_filter(filter_path(value, k), v) for k, v in filter_.items())


def filter_path(value: Mapping[str, Any], key: str) -> Any:
    if key in value or "." not in key:
        return value.get(key)
    node: Any = value
    for part in key.split("."):
        if not isinstance(node, Mapping):
            return None
        node = node.get(part)
    return node


def compare_filter(actual: Any, wanted: Any) -> bool:
    if isinstance(wanted, Mapping):
        if any(isinstance(k, str) and k.startswith("$") for k in wanted):
            return all(filter_operator(actual, op, operand) for op, operand in wanted.items())
        return isinstance(actual, Mapping) and all(
            compare_filter(actual.get(k), v) for k, v in wanted.items()
        )
    if isinstance(wanted, list | tuple):
        return (
            isinstance(actual, list | tuple)
            and len(actual) == len(wanted)
            and all(compare_filter(a, w) for a, w in zip(actual, wanted, strict=True))
        )
    return bool(actual == wanted)


def filter_operator(actual: Any, op: str, operand: Any) -> bool:
    if op == "$eq":
        return bool(actual == operand)
    if op == "$ne":
        return bool(actual != operand)
    try:
        a, b = float(actual), float(operand)
    except (TypeError, ValueError):
        return False  # a non-number never satisfies an ordering (InMemoryStore would raise)
    return {"$gt": a > b, "$gte": a >= b, "$lt": a < b, "$lte": a <= b}[op]


def namespace_matches(condition: MatchCondition, namespace: tuple[str, ...]) -> bool:
    path = tuple(condition.path)
    if len(namespace) < len(path):
        return False
    if condition.match_type == "prefix":
        pairs = zip(namespace, path, strict=False)
    else:
        pairs = zip(reversed(namespace), reversed(path), strict=False)
    return all(p == "*" or n == p for n, p in pairs)
