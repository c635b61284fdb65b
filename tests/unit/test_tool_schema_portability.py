"""Issue 15 item 1: every published tool schema is one hosted providers accept.

The checker (:mod:`retold.tools.portability`) is written from Anthropic's, OpenAI's and
Gemini's documented restrictions; it runs over every tool, for every principal shape
(personal only, with a project, with a host-offered private target, read-only), in both
dialects. The checker is itself tested on the schemas that broke providers before
(the old ``memory_revise`` root ``oneOf``), so a vacuous checker fails here too. The
handler accepts an OpenAI strict-mode call (every optional field sent as null) exactly as
it accepts the portable one.
"""

from __future__ import annotations

import copy
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator
from langchain_core.utils.function_calling import convert_to_openai_tool

from retold.models import Principal, Scope
from retold.tools import TOOL_NAMES, portability, schemas

from .slow import examples
from .writepath import USER, World

PROJECT = Scope("project", "p1")


async def personal(w: World) -> Principal:
    return w.p


async def with_project(w: World) -> Principal:
    await w.rt.host.grant("planner", PROJECT, read=True, write=True)
    return Principal("planner", "u1", "s1", project_id="p1")


async def private_offer(w: World) -> Principal:
    w.rt.tools.offer_target("private", lambda p: p.private_scope)
    return w.p


async def read_only(w: World) -> Principal:
    await w.rt.host.grant("planner", USER, read=True, write=False)
    return w.p


SHAPES: dict[str, tuple[Callable[[World], Awaitable[Principal]], list[str] | None]] = {
    "personal": (personal, ["personal"]),
    "project": (with_project, ["personal", "current_project"]),
    "private": (private_offer, ["personal", "private"]),
    "read_only": (read_only, None),  # nothing writable: no memory_write at all
}


@pytest.mark.parametrize("dialect", schemas.DIALECTS)
@pytest.mark.parametrize("shape", SHAPES)
async def test_every_tool_for_every_principal_shape_is_portable(
    world: World, shape: str, dialect: str
) -> None:
    make, targets = SHAPES[shape]
    principal = await make(world)
    published = world.rt.tools.tool_schemas(principal, dialect=dialect)
    assert published == await world.rt.tools.atool_schemas(principal, dialect=dialect)
    expected = [n for n in TOOL_NAMES if targets is not None or n != "memory_write"]
    assert [t["name"] for t in published] == expected
    portable = {t["name"]: t["input_schema"] for t in world.rt.tools.tool_schemas(principal)}
    for tool in published:
        schema = tool["input_schema"]
        found = portability.problems(schema, dialect)
        assert found == [], (tool["name"], found)
        assert portability.anthropic_problems(schema) == [], tool["name"]
        assert portability.tool_name_problems(tool["name"]) == []
        Draft202012Validator.check_schema(schema)
        if dialect == "openai_strict":
            assert portability.strict_keeps_meaning(portable[tool["name"]], schema) == [], tool["name"]
    if targets is not None:
        write = next(t for t in published if t["name"] == "memory_write")
        assert [v for v in write["input_schema"]["properties"]["write_target"]["enum"] if v] == targets


async def test_no_tool_has_a_combinator_or_conditional_at_its_root(world: World) -> None:
    """The regression of issue 15: memory_revise had oneOf and if/then/else at its root."""
    for tool in world.rt.tools.tool_schemas(world.p):
        assert not set(tool["input_schema"]) & set(portability.ROOT_COMBINATORS), tool["name"]
        assert tool["input_schema"]["type"] == "object"


# --- the checker catches what providers refuse -----------------------------------------------

OLD_REVISE = {  # the memory_revise schema before issue 15, abridged to its shape
    "type": "object",
    "properties": {"id": {"type": "string"}, "action": {"enum": ["confirm", "supersede", "expire"]},
                   "reason": {"type": "string"}, "content": {"type": "string"},
                   "entity_id": {"type": "string"}, "merge_into": {"type": "string"}},
    "oneOf": [
        {"required": ["id", "action", "reason"], "if": {"properties": {"action": {"const": "supersede"}}},
         "then": {"required": ["content"]}},
        {"required": ["entity_id", "merge_into", "reason"]},
    ],
    "additionalProperties": False,
}  # fmt: skip
OLD_ENTITY_ITEMS = {
    "type": "object",
    "properties": {
        "entities": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {"name": {"type": "string"}, "entity_id": {"type": "string"}},
                "anyOf": [{"required": ["name"]}, {"required": ["entity_id"]}],
            },
        }
    },
}


@pytest.mark.parametrize(
    ("schema", "dialect", "needle"),
    [
        (OLD_REVISE, "portable", "oneOf at the top level"),
        (OLD_REVISE, "openai_strict", "oneOf is not supported"),
        (OLD_ENTITY_ITEMS, "portable", "anyOf"),
        ({"type": "object", "anyOf": [{"required": ["a"]}]}, "portable", "anyOf at the top level"),
        ({"type": "object", "properties": {"a": {"type": ["string", "null"]}}}, "portable", "type must be"),
        ({"type": "object", "properties": {"a": {"type": "string", "format": "uri"}}}, "portable", "format"),
        ({"type": "object", "properties": {"a": {"enum": ["x"]}}}, "portable", "enum must list strings"),
        ({"type": "object", "properties": {"a": {"type": "array", "items": {"type": "string"},
                                                 "uniqueItems": True}}}, "portable", "uniqueItems"),
        ({"type": "object", "properties": {"a-b": {"type": "string"}}}, "portable", "parameter name"),
        ({"type": "array", "items": {"type": "string"}}, "portable", "root must be an object"),
        ({"type": "object", "properties": {"a": {"type": "string"}}, "additionalProperties": False},
         "openai_strict", "every property must be required"),
        ({"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]},
         "openai_strict", "additionalProperties must be false"),
        ({"type": "object", "properties": {"a": {"type": "string", "maxLength": 3}}, "required": ["a"],
          "additionalProperties": False}, "openai_strict", "maxLength is not supported"),
        ({"type": "object", "properties": {"a": {"type": ["string", "null"], "enum": ["x"]}},
          "required": ["a"], "additionalProperties": False}, "openai_strict", "nullable enum must list null"),
    ],
)  # fmt: skip
def test_the_checker_refuses_what_providers_refuse(schema: dict[str, Any], dialect: str, needle: str) -> None:
    found = portability.problems(schema, dialect)
    assert any(needle in p for p in found), found


def test_strict_keeps_meaning_catches_a_forced_optional_field() -> None:
    """What langchain's strict conversion alone does to a portable schema: optional becomes forced."""
    portable = schemas.search_schema()
    forced = convert_to_openai_tool(schemas.tool_schema("memory_search", portable), strict=True)
    found = portability.strict_keeps_meaning(portable, forced["function"]["parameters"])
    assert any("since: optional, yet not nullable" in p for p in found), found


# --- the strict dialect -----------------------------------------------------------------------


def all_schemas() -> list[dict[str, Any]]:
    return [
        schemas.search_schema(), schemas.get_schema(), schemas.write_schema(["personal", "current_project"]),
        schemas.revise_schema(), schemas.forget_schema(),
    ]  # fmt: skip


@pytest.mark.parametrize("schema", all_schemas(), ids=list(TOOL_NAMES))
def test_strict_dialect_is_idempotent_and_leaves_its_input_alone(schema: dict[str, Any]) -> None:
    before = copy.deepcopy(schema)
    strict = schemas.openai_strict(schema)
    assert schema == before
    assert schemas.openai_strict(strict) == strict
    assert portability.openai_strict_problems(strict) == []


@pytest.mark.parametrize("schema", all_schemas(), ids=list(TOOL_NAMES))
def test_langchain_strict_conversion_of_the_strict_dialect_changes_nothing(schema: dict[str, Any]) -> None:
    """``convert_to_openai_tool(strict=True)`` is what ``ChatOpenAI.bind_tools(strict=True)`` runs."""
    strict = schemas.openai_strict(schema)
    converted = convert_to_openai_tool({"name": "t", "description": "d", "parameters": strict}, strict=True)
    assert converted["function"]["strict"] is True
    assert converted["function"]["parameters"] == strict
    assert portability.openai_strict_problems(converted["function"]["parameters"]) == []


def test_an_unknown_dialect_is_refused(world: World) -> None:
    with pytest.raises(ValueError, match="unknown schema dialect"):
        world.rt.tools.tool_schemas(world.p, dialect="gemini")


@settings(max_examples=examples(40), deadline=None)
@given(
    default_k=st.integers(1, 20),
    targets=st.lists(st.text(min_size=1, max_size=20), min_size=1, max_size=4, unique=True),
)
def test_schemas_stay_portable_for_any_default_k_and_offered_targets(
    default_k: int, targets: list[str]
) -> None:
    """write_target's enum holds whatever names a host offers; k's default comes from config."""
    for schema in (schemas.search_schema(default_k), schemas.write_schema(targets)):
        assert portability.portable_problems(schema) == []
        strict = schemas.openai_strict(schema)
        assert portability.openai_strict_problems(strict) == []
        assert portability.strict_keeps_meaning(schema, strict) == []


# --- the handler takes strict-mode calls ------------------------------------------------------


def strict_call(schema: dict[str, Any], payload: dict[str, Any]) -> dict[str, Any]:
    """``payload`` as a strict-mode model sends it: every property present, null when unset."""
    out = {k: payload.get(k) for k in schema["properties"]}
    item = schema["properties"].get("entities", {}).get("items")
    if item and out.get("entities"):
        out["entities"] = [{k: e.get(k) for k in item["properties"]} for e in out["entities"]]
    return out


async def test_strict_mode_calls_mean_what_portable_calls_mean(world: World) -> None:
    rt, p = world.rt, world.p
    await world.say("user", "I prefer concise answers.")
    strict = {t["name"]: t["input_schema"] for t in rt.tools.tool_schemas(p, dialect="openai_strict")}

    async def call(tool: str, payload: dict[str, Any]) -> dict[str, Any]:
        sent = strict_call(strict[tool], payload)
        assert Draft202012Validator(strict[tool]).is_valid(sent), sent  # what strict mode would emit
        result = await rt.tools.call(p, tool, sent)
        assert result["ok"], (tool, sent, result)
        return result

    written = await call(
        "memory_write",
        {"type": "semantic", "content": "Aditya prefers concise answers.", "attribute": "answer_style",
         "source_kind": "user_statement", "evidence": "I prefer concise answers",
         "entities": [{"kind": "person", "name": "Aditya", "role": "about"}]},
    )  # fmt: skip
    assert written["outcome"] == "created"
    found = await call("memory_search", {"queries": ["concise answers"]})
    assert [r["record_id"] for r in found["results"]] == [written["record_id"]]
    await call("memory_get", {"ids": [written["record_id"]]})
    revised = await call(
        "memory_revise", {"action": "confirm", "id": written["record_id"], "reason": "said so"}
    )
    assert revised["action"] == "confirm"
    await call("memory_forget", {"id": written["record_id"], "reason": "asked"})


async def test_merge_entities_is_an_action_of_the_published_schema(world: World) -> None:
    rt, p = world.rt, world.p
    made = []
    for content, name in (("Met Bob about Atlas.", "Bob"), ("Robert reviewed the plan.", "Robert")):
        entity = {"kind": "person", "name": name, "role": "about", "entity_id": None}  # strict-style null
        result = await rt.tools.call(
            p, "memory_write", {"type": "episodic", "content": content, "entities": [entity]}
        )
        assert result["ok"], result
        made.append((await world.record(result["record_id"])).entity_ids[0])
    bob, robert = made
    payload = {"action": "merge_entities", "entity_id": robert, "merge_into": bob, "reason": "same person"}
    revise = next(t for t in rt.tools.tool_schemas(p) if t["name"] == "memory_revise")
    assert Draft202012Validator(revise["input_schema"]).is_valid(payload)
    merged = await rt.tools.call(p, "memory_revise", payload)
    assert merged["ok"] and merged["action"] == "merge" and merged["merged_into"] == bob, merged
