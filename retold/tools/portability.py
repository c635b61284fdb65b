"""Which tool input schemas hosted model providers accept, checked offline.

A host (or a test) can check a schema before any network call: each function returns
the list of problems, empty when the provider's documented rules hold. The rules, from
each provider's documentation:

**Anthropic** Messages API tool use (docs.anthropic.com/en/docs/agents-and-tools/tool-use/
overview: ``input_schema`` is "a JSON Schema object"): the root is an object schema
(``type: "object"``), and a combinator at the root is refused with HTTP 400
"input_schema does not support oneOf, allOf, or anyOf at the top level". We also keep
``not`` / ``if`` / ``then`` / ``else`` off the root (issue 15).

**OpenAI** strict function calling (developers.openai.com/api/docs/guides/structured-outputs,
"Supported schemas"): the root is an object and not ``anyOf``; every object sets
``additionalProperties: false`` and lists every property in ``required`` (an optional one
is emulated as a union with ``null``); supported are ``type``, ``enum``, ``const``,
``anyOf`` (below the root), ``$ref`` / ``$defs``, ``description``, string ``pattern`` and
``format`` (date-time, time, date, duration, email, hostname, ipv4, ipv6, uuid), number
``multipleOf`` / ``maximum`` / ``exclusiveMaximum`` / ``minimum`` / ``exclusiveMinimum``,
array ``minItems`` / ``maxItems``; ``allOf``, ``not``, ``if`` / ``then`` / ``else``,
``dependentRequired``, ``dependentSchemas`` and ``patternProperties`` are not; at most
5,000 properties, 10 levels of nesting and 1,000 enum values in all (we hold to the
earlier published 100 / 5 / 500). Non-strict function calling takes any JSON Schema with
an object root.

**Gemini** function declarations (ai.google.dev/api/caching#Schema; ``google.genai.types.
Schema``): ``parameters`` is an OpenAPI 3.0 Schema subset with the fields ``type``,
``format``, ``title``, ``description``, ``nullable``, ``enum``, ``maxItems``, ``minItems``,
``properties``, ``required``, ``minProperties``, ``maxProperties``, ``minLength``,
``maxLength``, ``pattern``, ``example``, ``anyOf``, ``propertyOrdering``, ``default``,
``items``, ``minimum``, ``maximum``, ``additionalProperties``; ``type`` is one value
(nullability is ``nullable``, never a type list); ``enum`` lists strings on a STRING;
STRING ``format`` is ``enum`` or ``date-time``; parameter names start with a letter or an
underscore and use only a-z, A-Z, 0-9 and underscores, at most 64 characters.

**Portable** (:func:`portable_problems`) is what all three accept, plus two choices of
ours so a schema reads the same everywhere: no ``anyOf`` at all (Gemini wants it alone
in its node; retold's variants are enums) and a ``type`` on every node.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from typing import Any

from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError

__all__ = [
    "anthropic_problems",
    "gemini_problems",
    "openai_strict_problems",
    "portable_problems",
    "problems",
    "strict_keeps_meaning",
    "tool_name_problems",
]

ROOT_COMBINATORS = ("oneOf", "anyOf", "allOf", "not", "if", "then", "else")
_JSON_TYPES = ("object", "array", "string", "integer", "number", "boolean")

OPENAI_STRICT = frozenset(
    {"type", "description", "title", "enum", "const", "anyOf", "$ref", "$defs", "properties", "required",
     "additionalProperties", "items", "pattern", "format", "multipleOf", "maximum", "exclusiveMaximum",
     "minimum", "exclusiveMinimum", "minItems", "maxItems"}
)  # fmt: skip
OPENAI_STRICT_FORMATS = frozenset(
    {"date-time", "time", "date", "duration", "email", "hostname", "ipv4", "ipv6", "uuid"}
)
OPENAI_STRICT_MAX_DEPTH = 5
OPENAI_STRICT_MAX_PROPERTIES = 100
OPENAI_STRICT_MAX_ENUM_VALUES = 500

GEMINI = frozenset(
    {"type", "format", "title", "description", "nullable", "enum", "maxItems", "minItems", "properties",
     "required", "minProperties", "maxProperties", "minLength", "maxLength", "pattern", "example", "anyOf",
     "propertyOrdering", "default", "items", "minimum", "maximum", "additionalProperties"}
)  # fmt: skip
GEMINI_STRING_FORMATS = frozenset({"enum", "date-time"})
_GEMINI_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,63}")

# Our own subset: every keyword here is understood by all three providers.
PORTABLE = frozenset(
    {"type", "description", "enum", "format", "pattern", "minLength", "maxLength", "minItems", "maxItems",
     "minimum", "maximum", "default", "properties", "required", "additionalProperties", "items"}
)  # fmt: skip


def _nodes(schema: Mapping[str, Any], path: str = "") -> Iterator[tuple[str, Mapping[str, Any], int]]:
    """Every subschema with its path and nesting depth (the root object is depth 1)."""
    stack: list[tuple[str, Any, int]] = [(path or "/", schema, 1)]
    while stack:
        where, node, depth = stack.pop()
        if not isinstance(node, Mapping):
            continue
        yield where, node, depth
        props = node.get("properties")
        if isinstance(props, Mapping):
            for name, sub in props.items():
                stack.append((f"{where.rstrip('/')}/{name}", sub, depth + 1))
        if isinstance(node.get("items"), Mapping):
            stack.append((f"{where.rstrip('/')}/[]", node["items"], depth + 1))
        for key in ("anyOf", "oneOf", "allOf"):
            for i, sub in enumerate(node.get(key) or ()):
                stack.append((f"{where.rstrip('/')}/{key}[{i}]", sub, depth))
        for key in ("not", "if", "then", "else"):
            if isinstance(node.get(key), Mapping):
                stack.append((f"{where.rstrip('/')}/{key}", node[key], depth))
        for name, sub in (node.get("$defs") or {}).items():
            stack.append((f"{where.rstrip('/')}/$defs/{name}", sub, depth))


def _object_root(schema: Mapping[str, Any]) -> list[str]:
    if not isinstance(schema, Mapping) or schema.get("type") != "object":
        return ["/: the root must be an object schema (type: object)"]
    return []


def _types(node: Mapping[str, Any]) -> list[Any]:
    kind = node.get("type")
    return kind if isinstance(kind, list) else [] if kind is None else [kind]


def anthropic_problems(schema: Mapping[str, Any]) -> list[str]:
    """Anthropic tool use: an object root, no combinator or conditional at the root, valid JSON Schema."""
    found = _object_root(schema)
    found += [f"/: {key} at the top level" for key in ROOT_COMBINATORS if key in schema]
    try:
        Draft202012Validator.check_schema(dict(schema))
    except SchemaError as exc:
        found.append(f"/: not a valid JSON Schema: {exc.message}")
    return found


def openai_strict_problems(schema: Mapping[str, Any]) -> list[str]:
    """OpenAI strict function calling's documented subset (see the module docstring)."""
    found = _object_root(schema)
    if "anyOf" in schema:
        found.append("/: the root must not be anyOf")
    properties = enum_values = 0
    for where, node, depth in _nodes(schema):
        if depth > OPENAI_STRICT_MAX_DEPTH:
            found.append(f"{where}: nested {depth} levels deep (limit {OPENAI_STRICT_MAX_DEPTH})")
        found += [f"{where}: {key} is not supported" for key in node if key not in OPENAI_STRICT]
        kinds = _types(node)
        if "format" in node and node["format"] not in OPENAI_STRICT_FORMATS:
            found.append(f"{where}: format {node['format']!r} is not supported")
        if "enum" in node:
            enum_values += len(node["enum"])
            if "null" in kinds and None not in node["enum"]:
                found.append(f"{where}: a nullable enum must list null")
        if "object" in kinds:
            props = node.get("properties") or {}
            properties += len(props)
            if node.get("additionalProperties") is not False:
                found.append(f"{where}: additionalProperties must be false")
            missing = sorted(set(props) - set(node.get("required", ())))
            if missing:
                found.append(f"{where}: every property must be required; not required: {', '.join(missing)}")
    if properties > OPENAI_STRICT_MAX_PROPERTIES:
        found.append(f"/: {properties} properties in all (limit {OPENAI_STRICT_MAX_PROPERTIES})")
    if enum_values > OPENAI_STRICT_MAX_ENUM_VALUES:
        found.append(f"/: {enum_values} enum values in all (limit {OPENAI_STRICT_MAX_ENUM_VALUES})")
    return found


def gemini_problems(schema: Mapping[str, Any]) -> list[str]:
    """Gemini function declarations' OpenAPI Schema subset (see the module docstring)."""
    found = _object_root(schema)
    for where, node, _depth in _nodes(schema):
        found += [f"{where}: {key} is not a Gemini Schema field" for key in node if key not in GEMINI]
        kind = node.get("type")
        if kind is not None and (not isinstance(kind, str) or kind not in _JSON_TYPES):
            found.append(f"{where}: type must be one of {', '.join(_JSON_TYPES)}, got {kind!r}")
        if "enum" in node and (kind != "string" or not all(isinstance(v, str) for v in node["enum"])):
            found.append(f"{where}: enum must list strings on a string")
        if kind == "string" and "format" in node and node["format"] not in GEMINI_STRING_FORMATS:
            found.append(f"{where}: string format {node['format']!r} is not supported")
        if "anyOf" in node and len(node) > 1 + ("description" in node):
            found.append(f"{where}: anyOf must be the only field of its node")
        for name in node.get("properties") or {}:
            if not isinstance(name, str) or not _GEMINI_NAME.fullmatch(name):
                found.append(f"{where}: property name {name!r} is not a valid parameter name")
    return found


def portable_problems(schema: Mapping[str, Any]) -> list[str]:
    """What Anthropic, OpenAI (non-strict) and Gemini all accept, in retold's own subset."""
    found = anthropic_problems(schema) + gemini_problems(schema)
    for where, node, _depth in _nodes(schema):
        found += [f"{where}: {key} is outside the portable subset" for key in node if key not in PORTABLE]
        if "type" not in node:
            found.append(f"{where}: every node names its type")
        if node.get("type") == "array" and not isinstance(node.get("items"), Mapping):
            found.append(f"{where}: an array names its items")
        if "additionalProperties" in node and node["additionalProperties"] is not False:
            found.append(f"{where}: additionalProperties may only be false")
        props = node.get("properties") or {}
        unknown = [r for r in node.get("required", ()) if r not in props]
        if unknown:
            found.append(f"{where}: required names undeclared properties {unknown}")
        if "default" in node and not Draft202012Validator(dict(node)).is_valid(node["default"]):
            found.append(f"{where}: the default does not satisfy its own schema")
    return sorted(set(found), key=found.index)


def problems(schema: Mapping[str, Any], dialect: str = "portable") -> list[str]:
    """The problems of ``schema`` in ``dialect`` (``portable`` or ``openai_strict``)."""
    if dialect == "portable":
        return portable_problems(schema)
    if dialect == "openai_strict":
        return openai_strict_problems(schema)
    raise ValueError(f"unknown dialect {dialect!r}")


def strict_keeps_meaning(
    portable: Mapping[str, Any], strict: Mapping[str, Any], path: str = "/"
) -> list[str]:
    """Where ``strict`` changes what ``portable`` lets a model leave out.

    Strict mode makes every property required, so a property the portable schema leaves
    optional must become nullable there (else the model is forced to invent a value),
    and a required one must stay non-nullable.
    """
    found: list[str] = []
    props, strict_props = portable.get("properties") or {}, strict.get("properties") or {}
    if set(props) != set(strict_props):
        found.append(f"{path}: properties differ: {sorted(set(props) ^ set(strict_props))}")
    required = set(portable.get("required", ()))
    for name in set(props) & set(strict_props):
        where = f"{path.rstrip('/')}/{name}"
        nullable = "null" in _types(strict_props[name])
        if name in required and nullable:
            found.append(f"{where}: required, yet nullable in the strict schema")
        if name not in required and not nullable:
            found.append(f"{where}: optional, yet not nullable in the strict schema")
        items, strict_items = props[name].get("items"), strict_props[name].get("items")
        if isinstance(items, Mapping) and isinstance(strict_items, Mapping):
            found += strict_keeps_meaning(items, strict_items, f"{where}/[]")
    return found


def tool_name_problems(name: str) -> list[str]:
    """A tool name every provider accepts: a letter or underscore, then letters, digits, underscores."""
    return [] if _GEMINI_NAME.fullmatch(name) else [f"tool name {name!r} is not portable"]
