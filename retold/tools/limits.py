"""Every bound the tool surface puts on its input, in one place (docs/tools.md has the table).

The published schemas carry these as ``maxLength`` / ``maxItems`` / ``maximum`` (and in
their descriptions, for dialects that drop those keywords), and the handlers enforce
them whatever the model was shown: the whole payload is measured before any other
work, so an oversized or deeply nested input costs O(limit), never O(input).
"""

from __future__ import annotations

from datetime import UTC, datetime

__all__ = [
    "DATE_MAX",
    "DATE_MIN",
    "MAX_ATTRIBUTE_CHARS",
    "MAX_CONTENT_CHARS",
    "MAX_DATE_CHARS",
    "MAX_EVIDENCE_CHARS",
    "MAX_EVIDENCE_TURN",
    "MAX_GET_IDS",
    "MAX_ID_CHARS",
    "MAX_INT_BITS",
    "MAX_JSON_DEPTH",
    "MAX_JSON_NODES",
    "MAX_JSON_TEXT_CHARS",
    "MAX_K",
    "MAX_NAME_CHARS",
    "MAX_PAYLOAD_CHARS",
    "MAX_QUERIES",
    "MAX_QUERY_CHARS",
    "MAX_REASON_CHARS",
    "MAX_SEARCH_ENTITIES",
    "MAX_TAGS",
    "MAX_TAG_CHARS",
    "MAX_WRITE_ENTITIES",
]

# --- the payload as a whole (checked first, before parsing where the payload is JSON text) ---
MAX_JSON_TEXT_CHARS = 131_072
"""A payload sent as JSON text: longer text is refused unparsed (room for \\uXXXX escapes)."""
MAX_PAYLOAD_CHARS = 16_384
"""All strings of a payload together, keys included; the largest valid write is about 7,000."""
MAX_JSON_DEPTH = 8
"""Nesting of objects and arrays; the deepest valid payload (a write's entity) is 3."""
MAX_JSON_NODES = 512
"""Values in a payload, counting every container, string and number."""
MAX_INT_BITS = 63
"""Integers beyond a signed 64-bit range are refused anywhere in a payload (SQLite's INTEGER)."""

# --- memory_search ----------------------------------------------------------------------------
MAX_QUERIES = 3
MAX_QUERY_CHARS = 500
MAX_SEARCH_ENTITIES = 10
MAX_K = 20

# --- ids, names, text -------------------------------------------------------------------------
MAX_GET_IDS = 20
MAX_ID_CHARS = 64
MAX_NAME_CHARS = 200
MAX_CONTENT_CHARS = 1000
MAX_EVIDENCE_CHARS = 2000
MAX_ATTRIBUTE_CHARS = 100
MAX_REASON_CHARS = 500
MAX_WRITE_ENTITIES = 10
MAX_TAGS = 10
MAX_TAG_CHARS = 50
MAX_EVIDENCE_TURN = 1_000_000
MAX_DATE_CHARS = 64

# --- dates (since, until, event_at), compared in UTC -------------------------------------------
DATE_MIN = datetime(1000, 1, 1, tzinfo=UTC)
"""Earlier dates are refused: no memory needs them, and near ``datetime.min`` they overflow."""
DATE_MAX = datetime(9998, 12, 31, 23, 59, 59, 999999, tzinfo=UTC)
"""A year short of ``datetime.max``, so a later ``+ timedelta`` cannot overflow."""
