"""The tool surface (spec §11, §17.4 "Tool surface", §8.1 step 2) through ``rt.tools.call``."""

from __future__ import annotations

import json
import re
from datetime import timedelta
from typing import Any

import pytest
from jsonschema import Draft202012Validator

from retold.models import EntityMention, Principal, Scope
from retold.testing import record_for_tests
from retold.tools import ERROR_CODES, TOOL_NAMES

from .writepath import USER, World

PROJECT = Scope("project", "p1")
QUOTE = "I prefer concise answers"


async def user_fact(
    w: World, content: str = "Aditya prefers concise answers.", **extra: Any
) -> dict[str, Any]:
    """Say the quote, then save it through the tool as a user statement."""
    await w.say("user", f"{QUOTE}, please.")
    payload = {
        "type": "semantic",
        "content": content,
        "attribute": "answer_style",
        "source_kind": "user_statement",
        "evidence": QUOTE,
        **extra,
    }
    result = await w.rt.tools.call(w.p, "memory_write", payload)
    assert result["ok"], result
    return result


async def foreign_record(w: World) -> str:
    """A record in another user's scope, written by the host."""
    result = await w.rt.host.write_system(Scope("user", "u2"), "Bea's salary is 90k.", attribute="salary")
    assert result.ok and result.record_id
    return result.record_id


async def episode_about(world: World, content: str, name: str) -> dict[str, Any]:
    """A model-issued episodic write about one person, through the tool."""
    entity = {"kind": "person", "name": name, "role": "about"}
    return await world.rt.tools.call(
        world.p, "memory_write", {"type": "episodic", "content": content, "entities": [entity]}
    )


def names(schemas: list[dict[str, Any]]) -> list[str]:
    return [s["name"] for s in schemas]


def write_targets(schemas: list[dict[str, Any]]) -> list[str]:
    write = next(s for s in schemas if s["name"] == "memory_write")
    return write["input_schema"]["properties"]["write_target"]["enum"]


def masked(result: dict[str, Any], *ids: str) -> str:
    text = json.dumps(result, sort_keys=True)
    for i in ids:
        text = text.replace(i, "<ID>")
    return text


# --- schemas ---------------------------------------------------------------------------------


async def test_every_schema_is_valid_draft_2020_12(world: World) -> None:
    world.rt.tools.offer_target("private", lambda p: p.private_scope)
    schemas = world.rt.tools.tool_schemas(world.p)
    assert names(schemas) == list(TOOL_NAMES)
    for schema in schemas:
        assert set(schema) == {"name", "description", "input_schema"}
        Draft202012Validator.check_schema(schema["input_schema"])
        assert schema["input_schema"]["additionalProperties"] is False


async def test_sync_and_async_schemas_agree(world: World) -> None:
    assert world.rt.tools.tool_schemas(world.p) == await world.rt.tools.atool_schemas(world.p)
    assert names(world.rt.tools.tool_schemas(world.p, names=("memory_get", "memory_write"))) == [
        "memory_get",
        "memory_write",
    ]


async def test_sync_schemas_refuse_with_a_store_error_where_no_second_connection_can_read(
    world: World, tmp_path: Any
) -> None:
    import retold
    from retold.errors import StoreClosedError, StoreError

    async with await retold.open_runtime(":memory:") as rt:
        with pytest.raises(StoreError, match="in-memory"):
            rt.tools.tool_schemas(world.p)
        assert names(await rt.tools.atool_schemas(world.p))  # the async path still works
    closed = await retold.open_runtime(tmp_path / "closed.sqlite")
    await closed.close()
    with pytest.raises(StoreClosedError):
        closed.tools.tool_schemas(world.p)


async def test_personal_target_needs_a_read_write_grant(world: World) -> None:
    rt = world.rt
    assert write_targets(rt.tools.tool_schemas(world.p)) == ["personal"]
    await rt.host.grant("planner", USER, read=True, write=False)
    # Nothing writable at all: memory_write is not registered.
    assert "memory_write" not in names(rt.tools.tool_schemas(world.p))
    result = await rt.tools.call(world.p, "memory_write", {"type": "episodic", "content": "x"})
    assert (result["error"], result["offered"]) == ("scope_not_writable", [])  # spec §17.2


async def test_current_project_needs_a_project_and_a_write_grant(world: World) -> None:
    rt = world.rt
    with_project = Principal("planner", "u1", "s1", project_id="p1")
    assert write_targets(rt.tools.tool_schemas(with_project)) == ["personal"]
    await rt.host.grant("planner", PROJECT, read=True, write=False)
    assert write_targets(rt.tools.tool_schemas(with_project)) == ["personal"]
    await rt.host.grant("planner", PROJECT, read=True, write=True)
    assert write_targets(rt.tools.tool_schemas(with_project)) == ["personal", "current_project"]
    assert write_targets(rt.tools.tool_schemas(world.p)) == ["personal"]  # no current project


async def test_private_scope_is_offered_only_when_the_host_names_it(world: World) -> None:
    rt = world.rt
    assert "private" not in write_targets(rt.tools.tool_schemas(world.p))
    rt.tools.offer_target("private", lambda p: p.private_scope)
    assert write_targets(rt.tools.tool_schemas(world.p)) == ["personal", "private"]
    result = await rt.tools.call(
        world.p,
        "memory_write",
        {"type": "episodic", "content": "Planning scratch note.", "write_target": "private"},
    )
    assert result["ok"], result
    assert (await world.record(result["record_id"])).scope == world.p.private_scope


async def test_write_target_routes_and_unknown_names_are_refused(world: World) -> None:
    rt = world.rt
    await rt.host.grant("planner", PROJECT, read=True, write=True)
    p = Principal("planner", "u1", "s1", project_id="p1")
    payload = {"type": "episodic", "content": "We chose Postgres for the Atlas service."}
    landed = await rt.tools.call(p, "memory_write", {**payload, "write_target": "current_project"})
    assert landed["ok"] and (await world.record(landed["record_id"])).scope == PROJECT
    default = await rt.tools.call(p, "memory_write", {**payload, "content": "Aditya deploys on Fridays."})
    assert default["ok"] and (await world.record(default["record_id"])).scope == USER
    for target in ("user:u1", "project:p1", "team", "private"):
        refused = await rt.tools.call(p, "memory_write", {**payload, "write_target": target})
        assert refused["error"] == "invalid_write_target", refused


async def test_revise_schema_is_one_flat_object_selected_by_action(world: World) -> None:
    """Issue 15: the old schema's root oneOf (and if/then/else) made Anthropic refuse every call."""
    schema = next(s for s in world.rt.tools.tool_schemas(world.p) if s["name"] == "memory_revise")
    body = schema["input_schema"]
    assert not set(body) & {"oneOf", "anyOf", "allOf", "not", "if", "then", "else"}
    assert body["required"] == ["action", "reason"]
    assert body["properties"]["action"]["enum"] == ["confirm", "supersede", "expire", "merge_entities"]


SCHEMA = "schema"  # the published schema itself refuses the payload
REVISE_CASES: list[tuple[dict[str, Any], str | None]] = [  # payload, the variant rule it breaks
    ({"id": "x", "action": "confirm", "reason": "user said so"}, None),
    ({"id": "x", "action": "expire", "reason": "stale"}, None),
    ({"id": "x", "action": "supersede", "reason": "changed", "content": "new"}, None),
    (
        {"id": "x", "action": "supersede", "reason": "changed"},
        "content is required when action is 'supersede'",
    ),
    (
        {"id": "x", "action": "confirm", "reason": "r", "content": "c"},
        "content is only valid when action is 'supersede'",
    ),
    (
        {
            "id": "x",
            "action": "supersede",
            "reason": "r",
            "content": "c",
            "evidence": "q",
            "evidence_turn": 2,
            "source_kind": "user_statement",
        },
        None,
    ),
    ({"action": "merge_entities", "entity_id": "e1", "merge_into": "e2", "reason": "same person"}, None),
    ({"entity_id": "e1", "merge_into": "e2", "reason": "same person"}, None),  # the old merge shape
    (
        {"action": "merge_entities", "entity_id": "e1", "merge_into": "e2", "reason": "r", "id": "x"},
        "id is only valid when action is 'confirm', 'supersede' or 'expire'",
    ),
    ({"entity_id": "e1", "merge_into": "e2", "reason": "r", "id": "x"}, SCHEMA),  # shapes mixed, no action
    (
        {"action": "merge_entities", "entity_id": "e1", "reason": "r"},
        "merge_into is required when action is 'merge_entities'",
    ),
    (
        {"id": "x", "action": "expire", "reason": "r", "merge_into": "e2"},
        "merge_into is only valid when action is 'merge_entities'",
    ),
    ({"action": "confirm", "reason": "r"}, "id is required when action is 'confirm'"),
    ({"id": "x", "action": "delete", "reason": "r"}, SCHEMA),
    ({"id": "x", "action": "confirm"}, SCHEMA),
    ({"id": "x", "action": "confirm", "reason": "r", "extra": 1}, SCHEMA),
    ({"id": "x", "action": "confirm", "reason": "   "}, SCHEMA),
    (
        {"id": "x", "action": "confirm", "reason": "r", "content": None, "entity_id": None},
        None,
    ),  # strict nulls
]


@pytest.mark.parametrize(("payload", "rule"), REVISE_CASES)
async def test_revise_checks_the_published_schema_then_the_fields_of_each_action(
    world: World, payload: dict[str, Any], rule: str | None
) -> None:
    """The schema is flat; the handler refuses what it refuses, then each action's field rules."""
    published = next(s for s in world.rt.tools.tool_schemas(world.p) if s["name"] == "memory_revise")
    conforming = Draft202012Validator(json.loads(json.dumps(published["input_schema"])))
    result = await world.rt.tools.call(world.p, "memory_revise", payload)
    without_nulls = {k: v for k, v in payload.items() if v is not None}
    legacy = "action" not in payload and "id" not in payload
    if rule == SCHEMA:
        assert not conforming.is_valid(payload), payload
        assert result["error"] == "invalid_input" and result["message"].startswith("memory_revise:"), result
        return
    assert conforming.is_valid(without_nulls) or legacy, payload
    if rule is None:  # valid shape, unknown ids: not_found, never a crash
        assert result["error"] == "not_found", result
    else:
        assert result == {"ok": False, "error": "invalid_input", "message": f"memory_revise: {rule}"}


# --- not_found parity and leaks --------------------------------------------------------------


async def test_foreign_and_missing_ids_answer_identically(world: World) -> None:
    rt, p = world.rt, world.p
    foreign = await foreign_record(world)
    missing = "01a00000-0000-7000-8000-000000000000"
    calls = [
        ("memory_get", lambda i: {"ids": [i]}),
        ("memory_revise", lambda i: {"id": i, "action": "confirm", "reason": "r"}),
        ("memory_revise", lambda i: {"id": i, "action": "supersede", "reason": "r", "content": "c"}),
        ("memory_revise", lambda i: {"id": i, "action": "expire", "reason": "r"}),
        ("memory_forget", lambda i: {"id": i, "reason": "r"}),
    ]
    for tool, build in calls:
        for ref_of in (lambda i: i, lambda i: i[-12:]):
            a = await rt.tools.call(p, tool, build(ref_of(foreign)))
            b = await rt.tools.call(p, tool, build(ref_of(missing)))
            assert a["error"] == b["error"] == "not_found", (tool, a, b)
            assert masked(a, ref_of(foreign)) == masked(b, ref_of(missing))
            assert "90k" not in json.dumps(a) and "salary" not in json.dumps(a)
    record = await world.record(foreign)
    assert record.status == "confirmed"


async def test_entity_merge_collapses_missing_and_foreign_entities(world: World) -> None:
    rt, p = world.rt, world.p
    other = await rt.host.write_system(
        Scope("user", "u2"),
        "Bea works on Atlas.",
        type="episodic",
        entities=[EntityMention("project", "Atlas", "about")],
    )
    foreign_entity = (await world.record(other.record_id)).entity_ids[0]
    mine = await rt.host.provision_user("u1", aliases=["Aditya"])
    missing = "01a00000-0000-7000-8000-00000000beef"
    a = await rt.tools.call(
        p, "memory_revise", {"entity_id": foreign_entity, "merge_into": mine.id, "reason": "r"}
    )
    b = await rt.tools.call(p, "memory_revise", {"entity_id": missing, "merge_into": mine.id, "reason": "r"})
    assert a["error"] == b["error"] == "not_found"
    assert masked(a, foreign_entity) == masked(b, missing)
    assert "Atlas" not in json.dumps(a)


async def test_entity_merge_through_revise(world: World) -> None:
    rt, p = world.rt, world.p
    a = await episode_about(world, "Met Bob about Atlas.", "Bob")
    b = await episode_about(world, "Robert reviewed the plan.", "Robert")
    bob = (await world.record(a["record_id"])).entity_ids[0]
    robert = (await world.record(b["record_id"])).entity_ids[0]
    merged = await rt.tools.call(
        p, "memory_revise", {"entity_id": robert, "merge_into": bob, "reason": "same"}
    )
    assert merged["ok"] and merged["merged_into"] == bob and "robert" in merged["aliases"]
    assert (await world.record(b["record_id"])).entity_ids == [bob]
    assert await world.events("entity.merged")


async def test_get_omits_entity_links_the_caller_cannot_read(world: World) -> None:
    rt = world.rt
    org, shared = Scope("org", "acme"), Scope("project", "shared")
    await rt.host.grant("writer", org, read=True)
    await rt.host.grant("writer", shared, read=True, write=True)
    await rt.host.grant("planner", shared, read=True)
    made = await rt.host.write_system(
        org, "Acme is the customer.", type="episodic", entities=[EntityMention("org", "Acme", "about")]
    )
    acme = (await world.record(made.record_id)).entity_ids[0]
    writer = Principal("writer", "u1", "s1")
    rt.tools.offer_target("shared", lambda p: shared)
    note = await rt.tools.call(
        writer,
        "memory_write",
        {
            "type": "episodic",
            "content": "Shared plan mentions the Acme rollout.",
            "write_target": "shared",
            "entities": [
                {"kind": "project", "name": "Rollout", "role": "about"},
                {"kind": "org", "entity_id": acme, "role": "mentions"},
            ],
        },
    )
    assert note["ok"], note
    seen_by_writer = (await rt.tools.call(writer, "memory_get", {"ids": [note["record_id"]]}))["records"][0]
    seen_by_planner = (await rt.tools.call(world.p, "memory_get", {"ids": [note["record_id"]]}))["records"][0]
    assert {e["canonical"] for e in seen_by_writer["entities"]} == {"Rollout", "Acme"}
    assert {e["canonical"] for e in seen_by_planner["entities"]} == {"Rollout"}
    assert acme not in json.dumps(seen_by_planner["entities"])


# --- get, lineage, tombstones ----------------------------------------------------------------


async def test_get_returns_lineage_conflicts_events_and_evidence(world: World) -> None:
    rt, p = world.rt, world.p
    first = await user_fact(world)
    await world.say("user", "Actually I prefer detailed answers with examples now.")
    second = await rt.tools.call(
        p,
        "memory_revise",
        {
            "id": first["record_id"][-12:],
            "action": "supersede",
            "reason": "user changed their mind",
            "content": "Aditya prefers detailed answers with examples.",
            "source_kind": "user_statement",
            "evidence": "I prefer detailed answers with examples",
        },
    )
    assert second["ok"] and second["outcome"] == f"superseded:{first['record_id']}", second
    got = await rt.tools.call(p, "memory_get", {"ids": [second["record_id"], first["record_id"]]})
    new, old = got["records"]
    assert new["supersedes"][0]["record_id"] == first["record_id"]
    assert old["status"] == "superseded" and old["superseded_by"][0]["record_id"] == second["record_id"]
    assert new["evidence"] == "I prefer detailed answers with examples"
    assert new["source_ref"] == "session:s1<turn:2>"
    assert [e["kind"] for e in new["events"]] == ["record.created", "record.activation_decided"]
    assert new["events"][0]["payload"]["manual_revision"] is True
    assert new["events"][0]["payload"]["reason"] == "user changed their mind"


async def test_forgotten_record_answers_with_the_audit_shape_only(world: World) -> None:
    rt, p = world.rt, world.p
    made = await user_fact(world)
    forgot = await rt.tools.call(p, "memory_forget", {"id": made["record_id"], "reason": "user asked"})
    assert forgot["ok"] and forgot["tombstone"] is True and "not erased" in forgot["note"]
    got = (await rt.tools.call(p, "memory_get", {"ids": [made["record_id"]]}))["records"][0]
    assert got["tombstone"] is True
    assert got["content"] is None and got["evidence"] is None and got["source_ref"] is None
    assert "concise" not in json.dumps(got)
    assert [e["kind"] for e in got["events"]] == [
        "record.created",
        "record.activation_decided",
        "record.deleted",
    ]
    assert got["events"][-1]["reason"] == "user asked"
    # Gone from lexical and dense search; the row and its embedding remain for an admin erase.
    assert await rt.store.fts_row(made["record_id"]) is None
    assert rt.index.vector_for(made["record_id"]) is None
    assert await rt.store.get_embedding(made["record_id"]) is not None
    search = await rt.tools.call(
        p, "memory_search", {"queries": ["concise answers"], "include_history": True}
    )
    assert search["results"] == []
    forgetful = await rt.tools.call(p, "memory_forget", {"id": made["record_id"], "reason": "again"})
    assert forgetful["ok"] and forgetful["changed"] is False
    forget_tool = next(s for s in rt.tools.tool_schemas(p) if s["name"] == "memory_forget")
    assert "not erasure" in forget_tool["description"] and "retold erase" in forget_tool["description"]


async def test_readable_but_unwritable_record_cannot_be_forgotten_or_revised(world: World) -> None:
    rt, p = world.rt, world.p
    await rt.host.grant("planner", PROJECT, read=True, write=False)
    made = await rt.host.write_system(
        PROJECT,
        "Atlas deploys from main.",
        attribute="deploy_branch",
        entities=[EntityMention("project", "Atlas", "about")],
    )
    version = await rt.store.records_version()
    for tool, payload in (
        ("memory_forget", {"id": made.record_id, "reason": "r"}),
        ("memory_revise", {"id": made.record_id, "action": "expire", "reason": "r"}),
        ("memory_revise", {"id": made.record_id, "action": "confirm", "reason": "r"}),
    ):
        result = await rt.tools.call(p, tool, payload)
        assert result["error"] == "scope_not_writable", result
    assert (await world.record(made.record_id)).status == "confirmed"
    assert await rt.store.records_version() == version
    assert (await rt.tools.call(p, "memory_get", {"ids": [made.record_id]}))["ok"]


@pytest.mark.parametrize("history", ["deleted", "superseded", "expired"])
@pytest.mark.parametrize("action", ["confirm", "expire", "supersede"])
async def test_history_cannot_be_revised(world: World, history: str, action: str) -> None:
    rt, p = world.rt, world.p
    made = await user_fact(world)
    await rt.store.set_status(made["record_id"], history)
    version = await rt.store.records_version()
    payload = {"id": made["record_id"], "action": action, "reason": "r"}
    if action == "supersede":
        payload["content"] = "Aditya prefers terse answers."
    result = await rt.tools.call(p, "memory_revise", payload)
    assert result["error"] == "invalid_input" and history in result["message"], result
    assert (await world.record(made["record_id"])).status == history
    assert await rt.store.records_version() == version


async def test_confirm_clears_a_provisional_expiry(world: World) -> None:
    rt, p = world.rt, world.p
    guess = await rt.tools.call(
        p, "memory_write", {"type": "semantic", "content": "Aditya works nights.", "attribute": "work_hours"}
    )
    assert guess["status"] == "provisional" and guess["note"] == "evidence not provided"
    assert (await world.record(guess["record_id"])).expires_at is not None
    confirmed = await rt.tools.call(
        p, "memory_revise", {"id": guess["record_id"], "action": "confirm", "reason": "the user confirmed it"}
    )
    assert confirmed == {
        "ok": True,
        "action": "confirm",
        "record_id": guess["record_id"],
        "status": "confirmed",
        "previous_status": "provisional",
        "changed": True,
    }
    record = await world.record(guess["record_id"])
    assert record.status == "confirmed" and record.expires_at is None
    event = (await world.events("record.confirmed"))[0]
    assert event["payload"]["reason"] == "the user confirmed it" and "expires_at_cleared" in event["payload"]
    world.clock.advance(timedelta(days=400))
    found = await rt.tools.call(p, "memory_search", {"queries": ["Aditya works nights"]})
    assert [r["record_id"] for r in found["results"]] == [guess["record_id"]]


async def test_expire_moves_a_record_to_history(world: World) -> None:
    rt, p = world.rt, world.p
    made = await user_fact(world)
    result = await rt.tools.call(
        p, "memory_revise", {"id": made["record_id"], "action": "expire", "reason": "old"}
    )
    assert result["ok"] and result["status"] == "expired"
    assert (await rt.tools.call(p, "memory_search", {"queries": ["concise answers"]}))["results"] == []
    history = await rt.tools.call(
        p, "memory_search", {"queries": ["concise answers"], "include_history": True}
    )
    assert [r["record_id"] for r in history["results"]] == [made["record_id"]]


async def test_unevidenced_inference_cannot_supersede_a_user_statement(world: World) -> None:
    rt, p = world.rt, world.p
    await world.say("user", "We deploy Atlas on Fridays.")
    made = await rt.tools.call(
        p,
        "memory_write",
        {
            "type": "semantic",
            "content": "Atlas deploys on Fridays.",
            "attribute": "deploy_day",
            "source_kind": "user_statement",
            "evidence": "We deploy Atlas on Fridays",
            "entities": [
                {"kind": "project", "name": "Atlas", "role": "about"},
                {"kind": "person", "name": "Aditya", "role": "mentions"},
            ],
        },
    )
    assert made["ok"] and made["status"] == "confirmed", made
    target = await world.record(made["record_id"])
    version = await rt.store.records_version()
    refused = await rt.tools.call(
        p,
        "memory_revise",
        {
            "id": made["record_id"],
            "action": "supersede",
            "reason": "I think it moved",
            "content": "Atlas deploys on Mondays.",
        },
    )
    assert refused["error"] == "invalid_input"
    assert "agent_inference" in refused["message"] and "user_statement" in refused["message"]
    assert await rt.store.records_version() == version
    await world.say("user", "Heads up: Atlas deploys on Mondays from now on.")
    done = await rt.tools.call(
        p,
        "memory_revise",
        {
            "id": made["record_id"],
            "action": "supersede",
            "reason": "user moved the deploy day",
            "content": "Atlas deploys on Mondays.",
            "source_kind": "user_statement",
            "evidence": "Atlas deploys on Mondays from now on",
        },
    )
    assert done["ok"] and done["outcome"] == f"superseded:{made['record_id']}", done
    new = await world.record(done["record_id"])
    assert new.source_kind == "user_statement" and new.status == "confirmed"
    assert new.supersedes_id == target.id
    assert (new.subject, new.attribute, new.tags) == (target.subject, target.attribute, target.tags)
    assert await rt.store.record_links(new.id) == await rt.store.record_links(target.id)
    assert {role for _, role in await rt.store.record_links(new.id)} == {"about", "mentions"}
    assert (await world.record(target.id)).status == "superseded"
    superseded = (await world.events("record.superseded", record_id=target.id))[0]
    assert superseded["payload"]["manual_revision"] is True


# --- bad input -------------------------------------------------------------------------------


@pytest.mark.parametrize("payload", [None, 3, "not json", "[1, 2]", [], ["ids"], '"text"', b"\xff", {1: 2}])
@pytest.mark.parametrize("tool", TOOL_NAMES)
async def test_a_payload_that_is_not_an_object_is_invalid_input(
    world: World, tool: str, payload: Any
) -> None:
    result = await world.rt.tools.call(world.p, tool, payload)
    assert result["ok"] is False and result["error"] == "invalid_input", result


@pytest.mark.parametrize(
    ("tool", "payload"),
    [
        ("memory_write", {"type": "semantic", "content": "   ", "attribute": "x"}),
        (
            "memory_write",
            {
                "type": "semantic",
                "content": "Aditya likes tea.",
                "attribute": "t",
                "source_kind": "user_statement",
                "evidence": " \n ",
            },
        ),
        ("memory_revise", {"id": "x", "action": "supersede", "reason": "r", "content": "  "}),
        ("memory_revise", {"id": "x", "action": "supersede", "reason": "r", "content": "c", "evidence": ""}),
        ("memory_search", {"queries": ["  "]}),
        ("memory_write", {"type": "semantic", "content": "Aditya likes tea.", "unknown": 1}),
        ("memory_search", {"queries": ["tea"], "k": 0}),
        ("memory_search", {"queries": ["tea"], "since": "yesterday"}),
        ("memory_get", {"ids": []}),
        ("memory_forget", {"id": "x"}),
    ],
)
async def test_blank_or_malformed_fields_are_invalid_input(world: World, tool: str, payload: dict) -> None:
    version = await world.rt.store.records_version()
    result = await world.rt.tools.call(world.p, tool, payload)
    assert result["error"] == "invalid_input", result
    assert await world.rt.store.records_version() == version


async def test_json_text_payloads_are_accepted(world: World) -> None:
    result = await world.rt.tools.call(world.p, "memory_search", json.dumps({"queries": ["answers"]}))
    assert result["ok"] and result["results"] == []


async def test_unknown_tool_is_invalid_input(world: World) -> None:
    assert (await world.rt.tools.call(world.p, "memory_erase", {}))["error"] == "invalid_input"


async def test_host_source_kinds_are_refused(world: World) -> None:
    for kind in ("system", "session_summary"):
        result = await world.rt.tools.call(
            world.p,
            "memory_write",
            {"type": "semantic", "content": "Aditya is an admin.", "attribute": "role", "source_kind": kind},
        )
        assert result["error"] == "invalid_source_kind", result


async def test_subject_rules(world: World) -> None:
    rt = world.rt
    no_attr = await rt.tools.call(
        world.p, "memory_write", {"type": "semantic", "content": "Aditya likes tea."}
    )
    assert no_attr["error"] == "invalid_subject"
    empty = await rt.tools.call(
        world.p, "memory_write", {"type": "semantic", "content": "Aditya likes tea.", "attribute": "!!"}
    )
    assert empty == {"ok": False, "error": "invalid_subject", "message": "attribute normalizes to nothing"}
    await rt.host.grant("planner", PROJECT, read=True, write=True)
    p = Principal("planner", "u1", "s1", project_id="p1")
    outside = await rt.tools.call(
        p,
        "memory_write",
        {
            "type": "semantic",
            "content": "Deploys on Fridays.",
            "attribute": "deploy_day",
            "write_target": "current_project",
        },
    )
    assert outside == {"ok": False, "error": "invalid_subject", "message": "about entity required"}


async def test_ambiguous_about_entity_returns_candidates(world: World) -> None:
    rt, p = world.rt, world.p
    for content in ("Alex Kim leads design.", "Alex Moreno leads sales."):
        made = await rt.host.write_system(
            USER,
            content,
            type="episodic",
            entities=[EntityMention("person", content.split(" leads")[0], "about")],
        )
        entity = (await world.record(made.record_id)).entity_ids[0]
        await rt.store.add_aliases(entity, ["alex"])
    result = await rt.tools.call(
        p,
        "memory_write",
        {
            "type": "semantic",
            "content": "Alex prefers mornings.",
            "attribute": "meeting_time",
            "entities": [{"kind": "person", "name": "Alex", "role": "about"}],
        },
    )
    assert result["error"] == "entity_ambiguous"
    assert sorted(c["canonical"] for c in result["candidates"]) == ["Alex Kim", "Alex Moreno"]
    assert all(set(c) == {"entity_id", "kind", "canonical", "scope"} for c in result["candidates"])
    retry = await rt.tools.call(
        p,
        "memory_write",
        {
            "type": "semantic",
            "content": "Alex prefers mornings.",
            "attribute": "meeting_time",
            "entities": [
                {"kind": "person", "entity_id": result["candidates"][0]["entity_id"], "role": "about"}
            ],
        },
    )
    assert retry["ok"], retry


async def test_write_reports_outcomes_notes_and_timings(world: World) -> None:
    rt, p = world.rt, world.p
    made = await user_fact(world)
    assert made["outcome"] == "created" and made["status"] == "confirmed" and made["note"] is None
    assert {"evidence", "embed", "transaction", "total"} <= set(made["timings_ms"])
    again = await rt.tools.call(
        p,
        "memory_write",
        {
            "type": "semantic",
            "content": "Aditya prefers concise answers.",
            "attribute": "answer_style",
            "source_kind": "user_statement",
            "evidence": QUOTE,
        },
    )
    assert again["outcome"] == "already_reinforced"
    await world.say("assistant", "You told me you like Rust.")
    downgraded = await rt.tools.call(
        p,
        "memory_write",
        {
            "type": "semantic",
            "content": "Aditya likes Rust.",
            "attribute": "language",
            "source_kind": "user_statement",
            "evidence": "You told me you like Rust",
        },
    )
    assert downgraded["status"] == "provisional" and "assistant" in downgraded["note"], downgraded


# --- short ids -------------------------------------------------------------------------------


async def test_short_ids_resolve_and_differ_for_records_written_minutes_apart(world: World) -> None:
    rt, p = world.rt, world.p
    ids = []
    for n in range(3):
        made = await rt.tools.call(p, "memory_write", {"type": "episodic", "content": f"Standup note {n}."})
        ids.append(made["record_id"])
        world.clock.advance(timedelta(minutes=3))
    found = await rt.tools.call(p, "memory_search", {"queries": ["standup note"], "types": ["episodic"]})
    shorts = {r["short_id"] for r in found["results"]}
    assert len(shorts) == 3 and all(re.fullmatch(r"[0-9a-f]{12}", s) for s in shorts)
    for s in shorts:
        assert f"[{s}]" in found["rendered"]
        got = await rt.tools.call(p, "memory_get", {"ids": [s]})
        assert got["ok"] and got["records"][0]["short_id"] == s
    bracketed = await rt.tools.call(p, "memory_get", {"ids": [f"[{ids[0][-12:].upper()}]"]})
    assert bracketed["records"][0]["record_id"] == ids[0]


async def test_ambiguous_short_id_names_only_readable_records(world: World) -> None:
    rt, p, now = world.rt, world.p, world.clock.now()
    tail = "abcdef012345"
    mine = [
        record_for_tests(now, id=f"01a00000-0000-7000-8000-{tail}"),
        record_for_tests(now, id=f"01a00001-0000-7000-8000-{tail}"),
    ]
    foreign = record_for_tests(now, id=f"01a00002-0000-7000-8000-{tail}", scope=Scope("user", "u2"))
    solo = record_for_tests(now, id="01a00003-0000-7000-8000-bbbbbbbbbbbb")
    twin = record_for_tests(now, id="01a00004-0000-7000-8000-bbbbbbbbbbbb", scope=Scope("user", "u2"))
    for record in (*mine, foreign, solo, twin):
        await rt.store.insert_record(record)
    result = await rt.tools.call(p, "memory_get", {"ids": [tail]})
    assert result["error"] == "invalid_input"
    assert mine[0].id in result["message"] and mine[1].id in result["message"]
    assert foreign.id not in result["message"]
    # A foreign record sharing the short id neither blocks nor leaks.
    got = await rt.tools.call(p, "memory_get", {"ids": ["bbbbbbbbbbbb"]})
    assert [r["record_id"] for r in got["records"]] == [solo.id]


# --- search through the tool -----------------------------------------------------------------


async def test_search_tool_returns_rendered_and_structured_results(world: World) -> None:
    rt, p = world.rt, world.p
    made = await user_fact(world)
    found = await rt.tools.call(p, "memory_search", {"queries": ["concise answers"], "k": 3})
    assert found["ok"] and [r["record_id"] for r in found["results"]] == [made["record_id"]]
    assert found["rendered"].startswith("memory_search: 1 result")
    assert found["results"][0]["explanation"].startswith("matched:")
    empty = await rt.tools.call(p, "memory_search", {"queries": ["kubernetes cluster quota"]})
    assert empty["results"] == [] and empty["empty_reason"] and "no relevant memory" in empty["rendered"]
    log = await rt.store.search_log(empty["search_id"])
    assert log is not None and log["trigger"] == "tool"


async def test_naming_the_user_selects_nothing_but_naming_someone_else_does(world: World) -> None:
    """The user's own person entity is not an entity hit: every personal record is about them."""
    rt, p = world.rt, world.p
    await user_fact(world)
    bob = await episode_about(world, "Met him for the quarterly review.", "Bob")
    unrelated = await rt.tools.call(p, "memory_search", {"queries": ["Aditya's favourite football club"]})
    assert unrelated["results"] == [] and "no entity match" in unrelated["empty_reason"]
    named = await rt.tools.call(p, "memory_search", {"queries": ["what did Bob do"]})
    assert [r["record_id"] for r in named["results"]] == [bob["record_id"]]
    assert "entity" in named["results"][0]["matched_by"]


async def test_an_entity_in_most_records_is_searched_as_a_word_not_an_entity(world: World) -> None:
    """A name linked to most readable records selects nothing: no entity hit, no gate exemption."""
    rt, p = world.rt, world.p
    for i in range(40):
        await episode_about(
            world, f"Call number {i} with him went over the {['budget', 'roadmap'][i % 2]}.", "Bob"
        )
    hire = await episode_about(world, "He asked us to hire a second designer for the mobile app.", "Bob")
    unrelated = await rt.tools.call(p, "memory_search", {"queries": ["Bob's favourite football club"]})
    assert unrelated["results"] == []
    asked = await rt.tools.call(p, "memory_search", {"queries": ["Bob wants to hire a second designer"]})
    assert asked["results"] and asked["results"][0]["record_id"] == hire["record_id"]
    assert all("entity" not in r["matched_by"] for r in asked["results"])
    log = await rt.store.search_log(asked["search_id"])
    assert log is not None
    (bob,) = await rt.store.entities_by_alias("bob", scopes=[p.user_scope])
    assert json.loads(log["config_flags"])["broad_entities"] == [bob.id]


async def test_every_error_code_is_a_spec_code(world: World) -> None:
    assert set(ERROR_CODES) == {
        "not_found",
        "invalid_input",
        "scope_not_writable",
        "invalid_write_target",
        "entity_ambiguous",
        "invalid_source_kind",
        "invalid_subject",
    }
