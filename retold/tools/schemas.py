"""The five memory tools' contracts as plain JSON Schema (spec §11), built per principal.

Every adapter registers these same dicts, and the handlers validate payloads against
exactly what was published, with a conforming draft 2020-12 validator. Schemas close
their objects (``additionalProperties: false``), reject blank text with a ``\\S``
pattern, and carry the limits of :mod:`retold.tools.limits`.

The published schemas are provider-portable (docs/tools.md): a ``type: object`` root
and no ``oneOf`` / ``anyOf`` / ``allOf`` / ``not`` / ``if`` / ``then`` / ``else`` anywhere,
because Anthropic rejects a tool whose ``input_schema`` has a combinator at its root,
OpenAI's strict mode rejects ``allOf`` / ``not`` / conditionals, and Gemini's function
declarations take an OpenAPI subset without them (:mod:`retold.tools.portability`
checks all three). Variants are a required enum plus described optional fields:
``memory_revise`` selects with ``action`` (``merge_entities`` included), a write's
entity gives ``name`` or ``entity_id``; the handlers enforce which fields go with which
variant and answer ``invalid_input`` naming the field.

:func:`openai_strict` turns a portable schema into the form OpenAI's strict function
calling requires (every property required, optional ones nullable); the handlers treat
a null optional field as absent, so either dialect's calls are accepted.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import Any, Literal

from retold.errors import InvalidArgumentError
from retold.models import ENTITY_KINDS, RECORD_TYPES
from retold.tools import limits as L

__all__ = [
    "DESCRIPTIONS",
    "DIALECTS",
    "EXPLAIN_MODES",
    "MERGE_ONLY",
    "RECORD_ACTIONS",
    "REVISE_ACTIONS",
    "SUPERSEDE_ONLY",
    "TOOL_NAMES",
    "WRITABLE_SOURCE_KINDS",
    "Dialect",
    "for_dialect",
    "forget_schema",
    "get_schema",
    "openai_strict",
    "revise_schema",
    "search_schema",
    "tool_schema",
    "write_schema",
]

EXPLAIN_MODES = ("compact", "full")
"""memory_search's ``explain``: compact (the default) gives the summary line; full adds every field."""

TOOL_NAMES = ("memory_search", "memory_get", "memory_write", "memory_revise", "memory_forget")
WRITABLE_SOURCE_KINDS = ("user_statement", "tool_result", "agent_inference")
MAX_GET_IDS = L.MAX_GET_IDS  # kept importable from here

RECORD_ACTIONS = ("confirm", "supersede", "expire")
REVISE_ACTIONS = (*RECORD_ACTIONS, "merge_entities")
SUPERSEDE_ONLY = ("content", "source_kind", "evidence", "evidence_turn")
MERGE_ONLY = ("entity_id", "merge_into")

Dialect = Literal["portable", "openai_strict"]
DIALECTS: tuple[Dialect, ...] = ("portable", "openai_strict")


def _text(max_len: int, description: str | None = None) -> dict[str, Any]:
    """A non-blank string of at most ``max_len`` characters, the limit also said in words."""
    said = f"At most {max_len} characters."
    return {
        "type": "string",
        "pattern": r"\S",
        "maxLength": max_len,
        "description": f"{description} {said}" if description else said,
    }


def _id(description: str) -> dict[str, Any]:
    return _text(L.MAX_ID_CHARS, description)


def _date(description: str) -> dict[str, Any]:
    return {
        "type": "string",
        "format": "date-time",
        "maxLength": L.MAX_DATE_CHARS,
        "description": f"{description} RFC 3339, e.g. 2026-01-31T09:00:00Z; "
        f"between {L.DATE_MIN:%Y-%m-%d} and {L.DATE_MAX:%Y-%m-%d}.",
    }


def _enum(values: Sequence[str], description: str | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {"type": "string", "enum": list(values)}
    if description:
        out["description"] = description
    return out


DESCRIPTIONS = {
    "memory_search": (
        "Search long-term memory for facts, past decisions, and procedures relevant to the current "
        "task. Call this before acting on anything that may depend on the user's preferences, prior "
        "decisions, or earlier sessions. Returns nothing when nothing relevant is stored; treat an "
        "empty result as 'no memory', not as an error."
    ),
    "memory_get": (
        "Fetch full memories by id: content, source, evidence, status, superseded lineage, conflicts "
        "and the audit trail. Use it to inspect where a memory came from or to show the user a "
        "disagreement. Only pass ids you have already seen (the short ids in search results work)."
    ),
    "memory_write": (
        "Save one fact, preference, decision, or procedure from this session that would change a "
        "future action. Write one fact per call, as a standalone sentence naming its subject. Quote "
        "the user's own words from this session as evidence for a user_statement; without evidence "
        "the memory is stored as a provisional inference that expires unless confirmed. Do not "
        "save guesses as facts."
    ),
    "memory_revise": (
        "Change a memory you already know by id: action 'confirm' a provisional memory, 'supersede' "
        "it with corrected content (quote this session as evidence, as for memory_write), or "
        "'expire' one that no longer holds; pass id and reason. Action 'merge_entities' merges two "
        "entities that are the same person or project: pass entity_id, merge_into and reason "
        "instead of id. Always give a reason."
    ),
    "memory_forget": (
        "Remove a known memory from normal use when the user asks you to forget it. The memory "
        "stops appearing in search and get answers with a tombstone. This is not erasure: the "
        "stored text stays in the database until an administrator erases it with "
        "'retold erase'; tell the user so if they ask for their data to be deleted."
    ),
}


def search_schema(default_k: int = 5) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {
            "queries": {
                "type": "array", "items": _text(L.MAX_QUERY_CHARS), "minItems": 1, "maxItems": L.MAX_QUERIES,
                "description": f"One to {L.MAX_QUERIES} standalone search phrases. Write them as if to a "
                "colleague: name the subject, not the pronoun.",
            },
            "types": {
                "type": "array", "items": _enum(RECORD_TYPES), "maxItems": len(RECORD_TYPES),
                "description": "Only these memory types.",
            },
            "entities": {
                "type": "array", "items": _text(L.MAX_NAME_CHARS), "maxItems": L.MAX_SEARCH_ENTITIES,
                "description": "Names of people, projects, or repos the task is about.",
            },
            "since": _date("Only memories of events at or after this time."),
            "until": _date("Only memories of events at or before this time."),
            "k": {
                "type": "integer", "minimum": 1, "maximum": L.MAX_K, "default": default_k,
                "description": f"How many memories to return at most. Default {default_k}.",
            },
            "include_history": {
                "type": "boolean", "default": False,
                "description": "Also return superseded and expired memories. Default false.",
            },
            "explain": {
                **_enum(EXPLAIN_MODES), "default": "compact",
                "description": "compact: a one-line explanation per result. full: also each result's "
                "channel ranks and scores, fusion, freshness, gate, dedup and budget. Default compact.",
            },
        },
        "required": ["queries"],
        "additionalProperties": False,
    }  # fmt: skip


def get_schema() -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {
            "ids": {
                "type": "array", "items": _id("A full or short memory id."), "minItems": 1,
                "maxItems": L.MAX_GET_IDS, "description": f"One to {L.MAX_GET_IDS} memory ids.",
            },
        },
        "required": ["ids"],
        "additionalProperties": False,
    }  # fmt: skip


def write_schema(write_targets: Sequence[str]) -> dict[str, Any]:
    """``write_targets`` are the symbolic names this principal can write, in preference order."""
    entity = {
        "type": "object",
        "description": "An entity the memory is about or mentions. Give its name, or its entity_id "
        "when a previous call returned entity_ambiguous or memory_get showed you the exact entity; "
        "one of the two is required.",
        "properties": {
            "kind": _enum(ENTITY_KINDS),
            "name": _text(L.MAX_NAME_CHARS, "The entity's name as the user says it."),
            "role": _enum(["about", "mentions"]),
            "entity_id": _id("The exact entity; instead of name."),
        },
        "required": ["kind", "role"],
        "additionalProperties": False,
    }
    return {
        "type": "object",
        "properties": {
            "type": _enum(RECORD_TYPES),
            "content": _text(L.MAX_CONTENT_CHARS, "The memory: one standalone sentence naming its subject."),
            "attribute": {
                "type": "string", "maxLength": L.MAX_ATTRIBUTE_CHARS,
                "description": "Current-fact attribute such as 'timezone'. Required for semantic and "
                "procedural memories. Any entity prefix is ignored. "
                f"At most {L.MAX_ATTRIBUTE_CHARS} characters.",
            },
            "write_target": _enum(
                write_targets,
                "Optional symbolic destination; omit it to use "
                f"{write_targets[0] if write_targets else 'personal'} memory.",
            ),
            "source_kind": {
                **_enum(WRITABLE_SOURCE_KINDS, "Where the fact comes from. Default agent_inference."),
                "default": "agent_inference",
            },
            "evidence": _text(L.MAX_EVIDENCE_CHARS, "Verbatim quote from this session. Required for "
                              "user_statement."),
            "evidence_turn": {
                "type": "integer", "minimum": 1, "maximum": L.MAX_EVIDENCE_TURN,
                "description": "The session turn the evidence quotes, when you know it.",
            },
            "event_at": _date("When the event happened, if not now."),
            "entities": {
                "type": "array", "items": entity, "maxItems": L.MAX_WRITE_ENTITIES,
                "description": f"At most {L.MAX_WRITE_ENTITIES} entities.",
            },
            "tags": {
                "type": "array", "items": _text(L.MAX_TAG_CHARS), "maxItems": L.MAX_TAGS,
                "description": f"At most {L.MAX_TAGS} short tags.",
            },
        },
        "required": ["type", "content"],
        "additionalProperties": False,
    }  # fmt: skip


def revise_schema() -> dict[str, Any]:
    """One flat object: ``action`` selects the variant; the handler checks which fields it takes."""
    return {
        "type": "object",
        "properties": {
            "action": _enum(
                REVISE_ACTIONS,
                "confirm, supersede or expire the memory `id`; merge_entities merges entity `entity_id` "
                "into `merge_into`.",
            ),
            "reason": _text(L.MAX_REASON_CHARS, "Why; always required."),
            "id": _id("confirm / supersede / expire: the memory to revise (full or short id)."),
            "content": _text(L.MAX_CONTENT_CHARS, "supersede only, required there: the corrected memory."),
            "source_kind": _enum(WRITABLE_SOURCE_KINDS, "supersede only. Default agent_inference."),
            "evidence": _text(L.MAX_EVIDENCE_CHARS, "supersede only: verbatim quote from this session."),
            "evidence_turn": {
                "type": "integer", "minimum": 1, "maximum": L.MAX_EVIDENCE_TURN,
                "description": "supersede only: the session turn the evidence quotes.",
            },
            "entity_id": _id("merge_entities only: the duplicate entity."),
            "merge_into": _id("merge_entities only: the entity that survives."),
        },
        "required": ["action", "reason"],
        "additionalProperties": False,
    }  # fmt: skip


def forget_schema() -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {
            "id": _id("The memory to forget (full or short id)."),
            "reason": _text(L.MAX_REASON_CHARS, "Why; usually the user's request."),
        },
        "required": ["id", "reason"],
        "additionalProperties": False,
    }


def tool_schema(name: str, input_schema: dict[str, Any]) -> dict[str, Any]:
    """The framework-neutral registration: name, description, input schema."""
    return {"name": name, "description": DESCRIPTIONS[name], "input_schema": input_schema}


# --- dialects -------------------------------------------------------------------------------

# Not in the keyword subset OpenAI's strict mode documents as supported; the handler still
# enforces each of them (the limits are also in the descriptions).
_NOT_STRICT = frozenset({"default", "minLength", "maxLength", "uniqueItems"})


def openai_strict(schema: dict[str, Any]) -> dict[str, Any]:
    """``schema`` as OpenAI strict function calling requires it; a new dict, idempotent.

    Every object lists all its properties in ``required`` and closes itself; a property
    that was optional becomes nullable (``type: [T, "null"]``, and ``null`` joins its
    ``enum``), so the model sends ``null`` for "absent" and the handler reads it so.
    Keywords outside the documented strict subset are dropped.
    """

    def walk(node: dict[str, Any], optional: bool) -> dict[str, Any]:
        out = {k: copy.deepcopy(v) for k, v in node.items() if k not in _NOT_STRICT}
        properties = node.get("properties")
        if isinstance(properties, dict):
            required = set(node.get("required", ()))
            out["properties"] = {k: walk(v, k not in required) for k, v in properties.items()}
            out["required"] = list(properties)
            out["additionalProperties"] = False
        if isinstance(node.get("items"), dict):
            out["items"] = walk(node["items"], False)
        if optional:
            kinds = node["type"] if isinstance(node["type"], list) else [node["type"]]
            out["type"] = [*kinds, "null"] if "null" not in kinds else kinds
            if "enum" in out and None not in out["enum"]:
                out["enum"] = [*out["enum"], None]
        return out

    return walk(schema, False)


def for_dialect(schema: dict[str, Any], dialect: str) -> dict[str, Any]:
    """``schema`` (portable) in ``dialect``; an unknown dialect is a programming error."""
    if dialect == "portable":
        return schema
    if dialect == "openai_strict":
        return openai_strict(schema)
    raise InvalidArgumentError(f"unknown schema dialect {dialect!r}; use one of {', '.join(DIALECTS)}")
