"""Small shared helpers: ids, time, timers and the text normalisations every layer agrees on.

The normalisations live here (not in ``ingest``) because the store's migration 2 must
produce exactly the attribute slug a new write produces.
"""

from __future__ import annotations

import json
import re
import time
import unicodedata
from collections.abc import Mapping
from datetime import UTC, datetime
from functools import cache
from typing import TYPE_CHECKING, Any, Protocol

from uuid6 import uuid7

from retold.errors import InvalidArgumentError

if TYPE_CHECKING:
    from jsonschema import Draft202012Validator

__all__ = [
    "Clock",
    "SystemClock",
    "Timer",
    "check_text",
    "clean_text",
    "format_ts",
    "new_id",
    "normalize_alias",
    "normalize_attribute",
    "normalize_ws",
    "parse_ts",
    "schema_validator",
    "text_problem",
]

_WS = re.compile(r"\s+")
_NON_SLUG = re.compile(r"[^0-9a-z]+")
# What SQLite's UTF-8 binding cannot encode (lone surrogates) and the control characters
# (Unicode Cc) other than tab, newline and carriage return.
_UNSTORABLE = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\ud800-\udfff]")
_CONTROL = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")
_SURROGATE = re.compile("[\ud800-\udfff]")


def new_id() -> str:
    """A UUIDv7 string, so creation order also sorts by id (spec §3)."""
    return str(uuid7())


class Clock(Protocol):
    """Where retold reads the time; tests pass ``retold.testing.FakeClock``."""

    def now(self) -> datetime: ...


class SystemClock:
    """The wall clock, in UTC."""

    def now(self) -> datetime:
        return datetime.now(UTC)


def maybe_json(value: Any) -> Any:
    """A JSON column's value decoded when it holds an object or array; anything else as given."""
    if isinstance(value, str) and value[:1] in "[{":
        try:
            return json.loads(value)
        except ValueError:
            return value
    return value


def format_ts(value: datetime) -> str:
    """ISO 8601 UTC with fixed width, so stored timestamps compare correctly as strings.

    The year is padded by hand: glibc's ``%Y`` writes year 999 as ``999``, which
    :func:`parse_ts` cannot read back and which sorts after ``2026``.
    """
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    value = value.astimezone(UTC)
    return f"{value.year:04d}-" + value.strftime("%m-%dT%H:%M:%S.%fZ")


def parse_ts(value: str | None) -> datetime | None:
    """Inverse of :func:`format_ts`; also accepts any ISO 8601 string (naive means UTC)."""
    if value is None:
        return None
    parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)
    return parsed.astimezone(UTC)


def text_problem(value: str) -> str | None:
    """Why ``value`` cannot be stored as given, naming the first bad character; None when it can.

    A lone surrogate (``"\\ud800"``) makes SQLite's UTF-8 binding raise, and control
    characters other than tab, newline and carriage return have no business in memory
    text. The description escapes the character, so a caller may echo it safely.
    """
    found = _UNSTORABLE.search(value)
    if found is None:
        return None
    char = found.group()
    what = "a lone surrogate" if "\ud800" <= char <= "\udfff" else "a control character"
    return f"contains {what} (U+{ord(char):04X}) at offset {found.start()}"


def check_text(value: object, field: str, max_len: int | None = None) -> str:
    """``value`` when it is a storable string of at most ``max_len`` characters.

    Raises :class:`~retold.errors.InvalidArgumentError` naming ``field`` otherwise; the
    message never echoes the value, so it is safe to show or encode. The length is checked
    first, so an oversized value costs O(1).
    """
    if not isinstance(value, str):
        raise InvalidArgumentError(f"{field} must be a string, got {type(value).__name__}")
    if max_len is not None and len(value) > max_len:
        raise InvalidArgumentError(f"{field} is {len(value)} characters long; the limit is {max_len}")
    problem = text_problem(value)
    if problem is not None:
        raise InvalidArgumentError(f"{field} {problem}")
    return value


def clean_text(value: str) -> str:
    """``value`` made storable: lone surrogates become U+FFFD and other disallowed controls go.

    For text retold must keep rather than refuse (a transcript turn); tool input is
    refused instead (:func:`check_text`), so a model learns what it sent was wrong.
    """
    if _UNSTORABLE.search(value) is None:
        return value
    return _CONTROL.sub("", _SURROGATE.sub("\ufffd", value))


def normalize_ws(text: str) -> str:
    """Collapse runs of whitespace to one space and strip the ends."""
    return _WS.sub(" ", text).strip()


def normalize_alias(text: str) -> str:
    """Exact-lookup form of an entity alias: lower-cased, whitespace-collapsed, diacritics removed."""
    decomposed = unicodedata.normalize("NFKD", text)
    stripped = "".join(ch for ch in decomposed if not unicodedata.combining(ch))
    return normalize_ws(stripped).casefold()


def normalize_attribute(hint: str | None) -> str:
    """Lower-case snake_case attribute slug from a writer's hint.

    Only the part after the last ``/`` counts: an attribute that carries an entity
    prefix (``aditya/Explanation Style``) must not choose the stored entity (spec §17.2).
    ``"-"`` (the episodic no-attribute marker) is kept; anything else that reduces to
    nothing returns ``""`` and the caller reports ``attribute normalizes to nothing``.
    """
    if hint is None:
        return ""
    tail = hint.rsplit("/", 1)[-1].strip()
    if tail == "-":
        return "-"
    # Split camelCase before lower-casing so answerStyle and answer_style agree.
    tail = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", tail)
    return _NON_SLUG.sub("_", normalize_alias(tail)).strip("_")


class Timer:
    """Collects per-stage wall-clock milliseconds: ``with timer("embed"): ...``."""

    def __init__(self) -> None:
        self.timings_ms: dict[str, float] = {}
        self._started = time.perf_counter()

    def __call__(self, stage: str) -> _Stage:
        return _Stage(self, stage)

    def total(self) -> float:
        return (time.perf_counter() - self._started) * 1000.0


class _Stage:
    def __init__(self, timer: Timer, stage: str) -> None:
        self._timer = timer
        self._stage = stage
        self._t0 = 0.0

    def __enter__(self) -> None:
        self._t0 = time.perf_counter()

    def __exit__(self, *exc: object) -> None:
        elapsed = (time.perf_counter() - self._t0) * 1000.0
        self._timer.timings_ms[self._stage] = self._timer.timings_ms.get(self._stage, 0.0) + elapsed


def schema_validator(schema: Mapping[str, Any]) -> Draft202012Validator:
    """A checked, cached draft 2020-12 validator for one JSON schema (tool inputs, model replies)."""
    return _schema_validator(json.dumps(schema, sort_keys=True))


@cache
def _schema_validator(key: str) -> Draft202012Validator:
    from jsonschema import Draft202012Validator

    schema = json.loads(key)
    Draft202012Validator.check_schema(schema)
    return Draft202012Validator(schema)
