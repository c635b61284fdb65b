"""The five memory tools' contracts as plain JSON Schema (spec §11), built per principal.

Every adapter registers these same dicts, and the handlers validate payloads against
exactly what was published, with a conforming draft 2020-12 validator. Schemas close
their objects (``additionalProperties: false``) and reject blank text with a ``\\S``
pattern, so the published contract and the handler's check cannot disagree.

``memory_revise`` has two argument shapes. Its schema declares every property of both
at the top level and selects with ``oneOf``: ``additionalProperties`` cannot see inside a
``oneOf`` branch, so properties declared only in the branches would make a conforming
validator reject every call (the trap §11 warns about).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from retold.models import ENTITY_KINDS, RECORD_TYPES

__all__ = [
    "DESCRIPTIONS",
    "TOOL_NAMES",
    "WRITABLE_SOURCE_KINDS",
    "forget_schema",
    "get_schema",
    "revise_schema",
    "search_schema",
    "tool_schema",
    "write_schema",
]

TOOL_NAMES = ("memory_search", "memory_get", "memory_write", "memory_revise", "memory_forget")
WRITABLE_SOURCE_KINDS = ("user_statement", "tool_result", "agent_inference")
MAX_GET_IDS = 20

_TEXT = {"type": "string", "pattern": r"\S"}  # non-blank
_ID = {"type": "string", "pattern": r"\S", "maxLength": 64}

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
        "Change a memory you already know by id: 'confirm' a provisional memory, 'supersede' it "
        "with corrected content (quote this session as evidence, as for memory_write), or 'expire' "
        "one that no longer holds. Always give a reason. To merge two entities that are the same "
        "person or project, pass entity_id, merge_into and reason instead."
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
                "type": "array", "items": _TEXT, "minItems": 1, "maxItems": 3,
                "description": "One to three standalone search phrases. Write them as if to a "
                "colleague: name the subject, not the pronoun.",
            },
            "types": {"type": "array", "items": {"enum": list(RECORD_TYPES)}, "uniqueItems": True},
            "entities": {
                "type": "array", "items": _TEXT,
                "description": "Names of people, projects, or repos the task is about.",
            },
            "since": {"type": "string", "format": "date-time"},
            "until": {"type": "string", "format": "date-time"},
            "k": {"type": "integer", "minimum": 1, "maximum": 20, "default": default_k},
            "include_history": {"type": "boolean", "default": False},
        },
        "required": ["queries"],
        "additionalProperties": False,
    }  # fmt: skip


def get_schema() -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {"ids": {"type": "array", "items": _ID, "minItems": 1, "maxItems": MAX_GET_IDS}},
        "required": ["ids"],
        "additionalProperties": False,
    }


def write_schema(write_targets: Sequence[str]) -> dict[str, Any]:
    """``write_targets`` are the symbolic names this principal can write, in preference order."""
    entity = {
        "type": "object",
        "properties": {
            "kind": {"enum": list(ENTITY_KINDS)},
            "name": {**_TEXT, "maxLength": 200},
            "role": {"enum": ["about", "mentions"]},
            "entity_id": {
                **_ID,
                "description": "Pass this when a previous call returned entity_ambiguous, or when "
                "memory_get showed you the exact entity.",
            },
        },
        "required": ["kind", "role"],
        "anyOf": [{"required": ["name"]}, {"required": ["entity_id"]}],
        "additionalProperties": False,
    }
    return {
        "type": "object",
        "properties": {
            "type": {"enum": list(RECORD_TYPES)},
            "content": {**_TEXT, "maxLength": 1000},
            "attribute": {
                "type": "string", "maxLength": 100,
                "description": "Current-fact attribute such as 'timezone'. Required for semantic and "
                "procedural memories. Any entity prefix is ignored.",
            },
            "write_target": {
                "type": "string", "enum": list(write_targets),
                "description": "Optional symbolic destination; omit it to use "
                f"{write_targets[0] if write_targets else 'personal'} memory.",
            },
            "source_kind": {"enum": list(WRITABLE_SOURCE_KINDS), "default": "agent_inference"},
            "evidence": {
                **_TEXT, "maxLength": 2000,
                "description": "Verbatim quote from this session. Required for user_statement.",
            },
            "evidence_turn": {"type": "integer", "minimum": 1},
            "event_at": {"type": "string", "format": "date-time"},
            "entities": {"type": "array", "items": entity, "maxItems": 10},
            "tags": {"type": "array", "items": {**_TEXT, "maxLength": 50}, "maxItems": 10},
        },
        "required": ["type", "content"],
        "additionalProperties": False,
    }  # fmt: skip


_SUPERSEDE_ONLY = ("content", "source_kind", "evidence", "evidence_turn")


def revise_schema() -> dict[str, Any]:
    has_any = lambda names: {"anyOf": [{"required": [n]} for n in names]}  # noqa: E731
    record_shape = {
        "required": ["id", "action", "reason"],
        "not": has_any(["entity_id", "merge_into"]),
        "if": {"properties": {"action": {"const": "supersede"}}},
        "then": {"required": ["content"]},
        "else": {"not": has_any(_SUPERSEDE_ONLY)},
    }
    merge_shape = {
        "required": ["entity_id", "merge_into", "reason"],
        "not": has_any(["id", "action", *_SUPERSEDE_ONLY]),
    }
    return {
        "type": "object",
        "properties": {
            "id": {**_ID, "description": "The memory to revise (full or short id)."},
            "action": {"enum": ["confirm", "supersede", "expire"]},
            "reason": {**_TEXT, "maxLength": 500},
            "content": {**_TEXT, "maxLength": 1000, "description": "supersede only: the corrected memory."},
            "source_kind": {"enum": list(WRITABLE_SOURCE_KINDS), "description": "supersede only."},
            "evidence": {**_TEXT, "maxLength": 2000,
                         "description": "supersede only: verbatim quote from this session."},
            "evidence_turn": {"type": "integer", "minimum": 1, "description": "supersede only."},
            "entity_id": {**_ID, "description": "Entity merge: the duplicate entity."},
            "merge_into": {**_ID, "description": "Entity merge: the entity that survives."},
        },
        "oneOf": [record_shape, merge_shape],
        "additionalProperties": False,
    }  # fmt: skip


def forget_schema() -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {"id": _ID, "reason": {**_TEXT, "maxLength": 500}},
        "required": ["id", "reason"],
        "additionalProperties": False,
    }


def tool_schema(name: str, input_schema: dict[str, Any]) -> dict[str, Any]:
    """The framework-neutral registration: name, description, input schema."""
    return {"name": name, "description": DESCRIPTIONS[name], "input_schema": input_schema}
