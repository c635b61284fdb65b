"""Issue 15 item 7: hostile tool input is refused, never raised, and its cost is bounded.

The issue's reproductions come first (a lone surrogate in a write and in a search, the
two extreme dates, a 1.7 MB query); then the systematic checks: every string field of
every tool (keys too) refuses a lone surrogate and control characters by name, every
limit a schema publishes is the limit its handler enforces, and the payload as a whole
is bounded in size, depth, node count and integer width before any work.
"""

from __future__ import annotations

import json
import math
import re
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from retold.config import Config
from retold.errors import InvalidArgumentError
from retold.testing import FakeRewriter
from retold.tools import limits, schemas
from retold.util import check_text, clean_text, format_ts, parse_ts, text_problem

from .factories import every_table
from .writepath import World, make_world

QUOTE = "I prefer concise answers"


async def counts(world: World) -> dict[str, int]:
    db = world.rt.store.db
    names = await every_table(world.rt.store)
    out = {name: int(await db.fetchval(f'SELECT count(*) FROM "{name}"')) for name in names}
    out["records_version"] = await world.rt.store.records_version()
    return out


async def refused(world: World, tool: str, payload: Any, *needles: str) -> dict[str, Any]:
    """Call ``tool``; assert invalid_input naming ``needles``, an encodable answer and no change."""
    before = await counts(world)
    result = await world.rt.tools.call(world.p, tool, payload)
    assert result["ok"] is False and result["error"] == "invalid_input", result
    for needle in needles:
        assert needle in result["message"], (needle, result)
    json.dumps(result, ensure_ascii=False).encode("utf-8")  # the adapters' encoding: no raw surrogate
    assert await counts(world) == before
    return result


def write(**fields: Any) -> dict[str, Any]:
    return {
        "type": "semantic",
        "content": "Aditya prefers concise answers.",
        "attribute": "answer_style",
        **fields,
    }


# --- the reproductions ----------------------------------------------------------------


async def test_a_lone_surrogate_in_write_content_is_refused_by_name(world: World) -> None:
    result = await refused(world, "memory_write", write(content="Aditya likes \ud800 tea."), "content")
    assert "lone surrogate (U+D800)" in result["message"]


async def test_a_lone_surrogate_in_a_search_query_is_refused_by_name(world: World) -> None:
    await refused(world, "memory_search", {"queries": ["tea \udfff"]}, "queries/0", "lone surrogate")


@pytest.mark.parametrize(
    ("key", "value"), [("since", "0001-01-01T00:00:00+05:00"), ("until", "9999-12-31T23:59:59-05:00")]
)
async def test_extreme_search_dates_are_refused_not_overflowed(world: World, key: str, value: str) -> None:
    await refused(world, "memory_search", {"queries": ["tea"], key: value}, key, "between 1000-01-01")


async def test_a_1_7_mb_query_is_refused_before_any_search(world: World, monkeypatch: Any) -> None:
    async def no_search(*args: Any) -> None:
        raise AssertionError("the search ran")

    monkeypatch.setattr(world.rt, "search", no_search)
    huge = "connect " * 212_500  # 1.7 MB
    cases = [({"queries": [huge]}, "queries/0 is 1700000 characters long"),
             (json.dumps({"queries": [huge]}), "characters of JSON")]  # fmt: skip
    for payload, needle in cases:
        started = time.perf_counter()
        await refused(world, "memory_search", payload, needle, "limit")
        assert time.perf_counter() - started < 1.0


# --- every string field, every tool -----------------------------------------------------------

BASE: dict[str, dict[str, Any]] = {
    "memory_search": {"queries": ["tea"], "entities": ["Atlas"], "since": "2026-01-01T00:00:00Z",
                      "until": "2026-02-01T00:00:00Z", "types": ["semantic"]},
    "memory_get": {"ids": ["0123456789ab"]},
    "memory_write": write(evidence=QUOTE, source_kind="user_statement", event_at="2026-01-01T00:00:00Z",
                          write_target="personal", tags=["style"],
                          entities=[{"kind": "person", "name": "Aditya", "role": "about",
                                     "entity_id": "e1"}]),
    "memory_revise": {"action": "supersede", "id": "0123456789ab", "reason": "r", "content": "c",
                      "evidence": QUOTE, "source_kind": "user_statement"},
    "memory_forget": {"id": "0123456789ab", "reason": "asked"},
}  # fmt: skip
MERGE = {"action": "merge_entities", "entity_id": "e1", "merge_into": "e2", "reason": "r"}


def string_paths(value: Any, path: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    if isinstance(value, str):
        yield path
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from string_paths(item, (*path, key))
    elif isinstance(value, list):
        for i, item in enumerate(value):
            yield from string_paths(item, (*path, i))


def replaced(payload: Any, path: tuple[Any, ...], bad: str) -> Any:
    out = json.loads(json.dumps(payload))
    node = out
    for step in path[:-1]:
        node = node[step]
    node[path[-1]] = node[path[-1]][:1] + bad + node[path[-1]][1:]
    return out


FIELD_CASES = [
    (tool, path) for tool, base in [*BASE.items(), ("memory_revise", MERGE)] for path in string_paths(base)
]


BAD = {"D800": "\ud800", "DFFF": "\udfff", "NUL": "\x00", "ESC": "\x1b", "DEL": "\x7f", "NEL": "\u0085"}


@pytest.mark.parametrize(
    ("tool", "path"), FIELD_CASES, ids=[f"{t}:{'/'.join(map(str, p))}" for t, p in FIELD_CASES]
)
async def test_every_string_field_refuses_surrogates_and_control_characters(
    world: World, tool: str, path: tuple[Any, ...]
) -> None:
    base = MERGE if path[0] in schemas.MERGE_ONLY and tool == "memory_revise" else BASE[tool]
    where = "/".join(map(str, path))
    for bad in BAD.values():
        payload = replaced(base, path, bad)
        await refused(world, tool, payload, f"{tool}: {where} contains", f"U+{ord(bad):04X}")
        await refused(world, tool, json.dumps(payload), f"{tool}: {where} contains", f"U+{ord(bad):04X}")


@pytest.mark.parametrize("tool", list(BASE))
async def test_keys_are_checked_like_values(world: World, tool: str) -> None:
    await refused(world, tool, {**BASE[tool], "x\ud800": 1}, "a key contains a lone surrogate")
    await refused(world, tool, json.dumps({**BASE[tool], "x\x00": 1}), "a key contains a control character")


async def test_tabs_and_newlines_are_text_not_control(world: World) -> None:
    await world.say("user", "I prefer concise answers,\n\tplease.")
    result = await world.rt.tools.call(
        world.p, "memory_write", write(content="Aditya prefers\n\tconcise answers.", evidence=QUOTE)
    )
    assert result["ok"], result


# --- every published limit is the enforced limit --------------------------------------------


def limited(schema: dict[str, Any], path: tuple[Any, ...] = ()) -> Iterator[tuple[tuple[Any, ...], str, int]]:
    """(payload path, keyword, bound) for every maxLength / maxItems / maximum in ``schema``."""
    for key, prop in schema.get("properties", {}).items():
        for keyword in ("maxLength", "maxItems", "maximum"):
            if keyword in prop:
                yield (*path, key), keyword, prop[keyword]
        items = prop.get("items")
        if isinstance(items, dict):
            if "maxLength" in items:
                yield (*path, key, 0), "maxLength", items["maxLength"]
            yield from limited(items, (*path, key, 0))


def at(payload: dict[str, Any], path: tuple[Any, ...], keyword: str, size: int) -> dict[str, Any]:
    """``payload`` with the value at ``path`` made ``size`` long (or large)."""
    out = json.loads(json.dumps(payload))
    node = out
    for step in path[:-1]:
        node = node[step]
    current = node.get(path[-1]) if isinstance(node, dict) else node[path[-1]]
    if keyword == "maxLength":
        node[path[-1]] = ("Aditya " * size)[:size]
    elif keyword == "maxItems":
        node[path[-1]] = [current[0] if current else "x"] * size
    else:
        node[path[-1]] = size
    return out


def limit_cases() -> Iterator[tuple[str, dict[str, Any], tuple[Any, ...], str, int]]:
    tool_schemas = {
        "memory_search": schemas.search_schema(), "memory_get": schemas.get_schema(),
        "memory_write": schemas.write_schema(["personal"]), "memory_revise": schemas.revise_schema(),
        "memory_forget": schemas.forget_schema(),
    }  # fmt: skip
    for tool, schema in tool_schemas.items():
        for path, keyword, bound in limited(schema):
            if path[0] == "types":
                continue  # an enum: every allowed value is already within the bound
            base = MERGE if tool == "memory_revise" and path[0] in schemas.MERGE_ONLY else BASE[tool]
            if path[0] == "evidence_turn":
                base = {**base, "evidence_turn": 1}
            yield tool, base, path, keyword, bound


LIMIT_CASES = list(limit_cases())


@pytest.mark.parametrize(
    ("tool", "base", "path", "keyword", "bound"),
    LIMIT_CASES,
    ids=[f"{c[0]}:{'/'.join(map(str, c[2]))}:{c[3]}" for c in LIMIT_CASES],
)
async def test_every_published_limit_is_enforced_at_its_bound(
    world: World, tool: str, base: dict[str, Any], path: tuple[Any, ...], keyword: str, bound: int
) -> None:
    where = "/".join(map(str, path))
    over = await world.rt.tools.call(world.p, tool, at(base, path, keyword, bound + 1))
    assert over["error"] == "invalid_input" and f"{tool}: {where}" in over["message"], over
    within = await world.rt.tools.call(world.p, tool, at(base, path, keyword, bound))
    assert f"{tool}: {where}:" not in within.get("message", ""), within


async def test_the_payload_bounds_admit_the_largest_valid_payload(world: World) -> None:
    """Every field at its own limit: no whole-payload bound (text, JSON text, values, depth) refuses it."""
    entity = {"kind": "person", "name": "é" * limits.MAX_NAME_CHARS, "role": "about",
              "entity_id": "é" * limits.MAX_ID_CHARS}  # fmt: skip
    largest = write(
        content="é" * limits.MAX_CONTENT_CHARS, attribute="é" * limits.MAX_ATTRIBUTE_CHARS,
        evidence="é" * limits.MAX_EVIDENCE_CHARS, evidence_turn=limits.MAX_EVIDENCE_TURN,
        source_kind="user_statement", event_at="2026-01-01T00:00:00.000000+00:00",
        entities=[entity] * limits.MAX_WRITE_ENTITIES, tags=["é" * limits.MAX_TAG_CHARS] * limits.MAX_TAGS,
    )  # fmt: skip
    text = json.dumps(largest)  # ensure_ascii: every é is six characters of JSON text
    for payload in (largest, text):
        result = await world.rt.tools.call(world.p, "memory_write", payload)
        message = result.get("message", "")
        assert not message.startswith(("memory_write: payload", "tool input", "the tool input")), result


# --- the payload as a whole -------------------------------------------------------------------


async def test_deep_nesting_is_refused_as_a_dict_and_as_json_text(world: World) -> None:
    deep: Any = "tea"
    for _ in range(100_000):
        deep = [deep]
    await refused(world, "memory_search", {"queries": deep}, "nested deeper than 8 levels")
    text = '{"queries": ' + "[" * 60_000 + '"tea"' + "]" * 60_000 + "}"
    await refused(world, "memory_search", text, "nested deeper than 8 levels")
    shallow_but_too_deep = {"queries": [[[[[[[[["tea"]]]]]]]]]}
    await refused(world, "memory_search", shallow_but_too_deep, "queries/0/0/0/0/0/0/0", "deeper")


async def test_a_cyclic_python_payload_is_refused(world: World) -> None:
    cyclic: dict[str, Any] = {"queries": ["tea"]}
    cyclic["self"] = cyclic
    await refused(world, "memory_search", cyclic, "nested deeper")


async def test_too_many_values_and_too_much_text_are_refused(world: World) -> None:
    await refused(
        world, "memory_search", {"queries": ["tea"] * 1000}, f"more than {limits.MAX_JSON_NODES} values"
    )
    many_keys = {f"k{i}": 1 for i in range(1_000_000)}
    started = time.perf_counter()
    await refused(world, "memory_search", many_keys, "values")
    assert time.perf_counter() - started < 1.0
    await refused(
        world, "memory_search", {"queries": ["tea"], "x": "y" * 20_000}, "x is 20000 characters long"
    )
    spread = {"queries": ["tea"], "a": "y" * 9000, "b": "y" * 9000}
    await refused(world, "memory_search", spread, "payload holds more than the limit of 16384 characters")
    await refused(world, "memory_search", "[" * (limits.MAX_JSON_TEXT_CHARS + 1), "characters of JSON")


@pytest.mark.parametrize("value", [set(), object(), (1, 2), b"bytes", 1j])
async def test_python_values_that_are_not_json_are_refused(world: World, value: Any) -> None:
    await refused(world, "memory_search", {"queries": ["tea"], "k": value}, "k is not a JSON value")


NUMBERS = {
    "2**64": (2**64, "64-bit"), "-2**63-1": (-(2**63) - 1, "64-bit"), "10**5000": (10**5000, "64-bit"),
    "21": (21, "k"), "0": (0, "k"), "5.5": (5.5, "k"), "nan": (math.nan, "k"), "inf": (math.inf, "k"),
    "-inf": (-math.inf, "k"), "1e308": (1e308, "k"), "True": (True, "k"), "'5'": ("5", "k"),
}  # fmt: skip


@pytest.mark.parametrize(("value", "needle"), list(NUMBERS.values()), ids=list(NUMBERS))
async def test_integers_at_int_and_float_limits(world: World, value: Any, needle: str) -> None:
    await refused(world, "memory_search", {"queries": ["tea"], "k": value}, needle)


async def test_an_integral_float_is_an_integer(world: World) -> None:
    """JSON does not tell 5 from 5.0, and JSON Schema counts both as integers."""
    found = await world.rt.tools.call(world.p, "memory_search", {"queries": ["tea"], "k": 5.0})
    assert found["ok"], found
    await world.say("user", f"{QUOTE}.")
    made = await world.rt.tools.call(
        world.p, "memory_write", write(evidence=QUOTE, source_kind="user_statement", evidence_turn=1.0)
    )
    assert made["ok"], made
    huge = '{"queries": ["tea"], "k": 1' + "0" * 5000 + "}"  # beyond int's digit limit
    await refused(world, "memory_search", huge, "not valid JSON")


@pytest.mark.parametrize(
    "value",
    ["0001-01-01T00:00:00+05:00", "9999-12-31T23:59:59-05:00", "0999-12-31T23:59:59Z", "9999-01-01T00:00:00Z",
     "0001-01-01T00:00:00", "9999-12-31T23:59:59.999999+00:00"],
)  # fmt: skip
async def test_out_of_range_dates_are_refused_everywhere(world: World, value: str) -> None:
    for key in ("since", "until"):
        await refused(world, "memory_search", {"queries": ["tea"], key: value}, key, "between")
    await refused(world, "memory_write", write(event_at=value), "event_at", "between")


@pytest.mark.parametrize(
    "value",
    ["not a date", "2026-13-01T00:00:00Z", "2026-02-30", "2026-01-01T25:00:00Z", "2026-01-01T00:00:00+24:00"],
)
async def test_invalid_dates_are_invalid_input(world: World, value: str) -> None:
    await refused(world, "memory_search", {"queries": ["tea"], "since": value}, "since must be an RFC 3339")


async def test_the_earliest_accepted_date_round_trips(world: World) -> None:
    """Year 1000 is stored at fixed width and read back (glibc's %Y would write '999')."""
    made = await world.rt.tools.call(
        world.p, "memory_write", write(type="episodic", attribute=None, event_at="1000-01-01T05:00:00+05:00")
    )
    assert made["ok"], made
    got = await world.rt.tools.call(world.p, "memory_get", {"ids": [made["record_id"]]})
    assert got["records"][0]["event_at"] == "1000-01-01T00:00:00.000000Z"


def test_format_ts_pads_the_year() -> None:
    for year in (1, 999, 1000, 9999):
        text = format_ts(datetime(year, 6, 1, tzinfo=UTC))
        assert text.startswith(f"{year:04d}-06-01T") and parse_ts(text) == datetime(year, 6, 1, tzinfo=UTC)


# --- the shared helpers ----------------------------------------------------------------------


def test_text_helpers() -> None:
    assert text_problem("fine\n\ttext\r, ünïcode 😀") is None
    assert text_problem("a\ud83d") == "contains a lone surrogate (U+D83D) at offset 1"
    assert text_problem("a\x00") == "contains a control character (U+0000) at offset 1"
    assert clean_text("a\ud800b\x00c\x1bd\ne") == "a\ufffdbcd\ne"
    assert clean_text("ok") == "ok"
    assert check_text("ok", "field", 2) == "ok"
    with pytest.raises(InvalidArgumentError, match="field is 3 characters long; the limit is 2"):
        check_text("abc", "field", 2)
    with pytest.raises(
        InvalidArgumentError, match=r"^field contains a lone surrogate \(U\+DC00\) at offset 0$"
    ):
        check_text("\udc00", "field")
    with pytest.raises(InvalidArgumentError, match="must be a string"):
        check_text(3, "field")


def test_offer_target_refuses_an_unstorable_name(world: World) -> None:
    with pytest.raises(InvalidArgumentError, match="offer_target name contains a control character"):
        world.rt.tools.offer_target("pri\x00vate", lambda p: p.private_scope)


def test_docs_tools_md_lists_every_limit_with_its_value() -> None:
    """docs/tools.md's table is the limits module: one row per constant, same value."""
    doc = (Path(__file__).parents[2] / "docs" / "tools.md").read_text()
    rows = dict(re.findall(r"^\| `([A-Z_]+)` \| ([^|]+?) \|", doc, re.M))
    assert set(rows) == set(limits.__all__)
    for name in limits.__all__:
        value = getattr(limits, name)
        shown = format_ts(value).replace(".000000Z", "Z") if isinstance(value, datetime) else str(value)
        assert rows[name] == shown, (name, rows[name], shown)


async def test_the_adapter_context_reaches_the_rewriter_encodable(tmp_path: Path) -> None:
    """The search context is the adapter's transcript text, not tool input: cleaned, not refused."""
    config = Config().override({"retrieval.rewrite.enabled": True})
    fake = FakeRewriter({})
    world = await make_world(tmp_path / "m.sqlite", config=config, rewriter=fake)
    try:
        result = await world.rt.tools.call(
            world.p, "memory_search", {"queries": ["tea"]}, context="user: tea \ud800 please\x00"
        )
        assert result["ok"], result
        assert fake.calls == [(["tea"], "user: tea \ufffd please")]
        json.dumps(fake.calls[0][1], ensure_ascii=False).encode("utf-8")
    finally:
        await world.rt.close()


async def test_memory_get_shows_a_bounded_number_of_events(world: World) -> None:
    """A record reinforced many times answers with its latest events and the total, not all of them."""
    from retold.tools.payloads import MAX_EVENTS

    await world.say("user", "I prefer concise answers, always.")
    first = await world.write("Aditya prefers concise answers.", evidence="I prefer concise answers")
    assert first.record_id is not None
    for n in range(MAX_EVENTS + 5):
        await world.rt.store.append_event("record.reinforced", "planner", record_id=first.record_id,
                                          payload={"n": n})  # fmt: skip
    got = await world.rt.tools.call(world.p, "memory_get", {"ids": [first.record_id]})
    (record,) = got["records"]
    assert (
        len(record["events"]) == MAX_EVENTS and record["events_total"] == MAX_EVENTS + 7
    )  # created, activation_decided, 55 reinforced
    assert record["events"][-1]["payload"] == {"n": MAX_EVENTS + 4}  # the newest are kept, oldest first
