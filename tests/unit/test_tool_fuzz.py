"""Fuzzing the tool surface: arbitrary input never raises, and a failed call changes nothing.

Every tool gets arbitrary JSON, near-valid payloads built from its own schema's keys,
things that are not JSON at all, and hostile input (issue 15 item 7): lone surrogates,
NUL and control characters in any string or key, invalid and extreme dates, huge and
deeply nested payloads (as Python values and as JSON text), numbers at the int and float
limits, NaN and infinities; under principals with different grants. Each answer must be
a dict that JSON- and UTF-8-encodes (a message echoing a lone surrogate would break the
adapters); each failure must carry a spec error code and a message and leave every
table's row count and ``records_version`` as they were. Every call's work is bounded:
what reaches the search and the write path is within the limits of
:mod:`retold.tools.limits`, and each call returns within a generous wall-clock bound.
``RETOLD_SLOW_TESTS=1`` raises the example count to 10,000 per tool.
"""

from __future__ import annotations

import asyncio
import json
import math
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from retold.ingest.write.request import Revision, WriteRequest
from retold.models import EntityMention, Principal, Scope, SearchRequest
from retold.tools import ERROR_CODES, TOOL_NAMES, limits

from .factories import every_table
from .slow import examples
from .writepath import USER, World, make_world

EXAMPLES = examples(120)  # 10,000 under RETOLD_SLOW_TESTS=1 (tests/unit/slow.py)
PROJECT = Scope("project", "p1")
OUTCOMES: list[str] = []  # what the fuzz reached, for the coverage guard below
REACHED: list[str] = []  # which bounded entry points the fuzz reached
SECONDS_PER_CALL = 10.0  # generous: a refused 2 MB payload takes microseconds


class Harness:
    """One world on its own event loop, shared by every example (set-up is the slow part)."""

    def __init__(self, path: Path) -> None:
        self.loop = asyncio.new_event_loop()
        self.world: World = self.loop.run_until_complete(make_world(path))
        self.ids: list[str] = []
        self.entity_ids: list[str] = []
        self.loop.run_until_complete(self._seed())
        self._bound_what_reaches_the_work()
        p = self.world.p
        self.principals = [
            p,
            Principal("planner", "u1", "s1", project_id="p1"),
            Principal("reader", "u1", "s9", project_id="p1"),  # read-only on the project
            Principal("nobody", "u3"),  # no grants, no session
            Principal("planner", "u2", "s2"),  # another user: only the private scope
        ]

    async def _seed(self) -> None:
        w = self.world
        rt = w.rt
        await rt.host.grant("planner", PROJECT, read=True, write=True)
        await rt.host.grant("reader", PROJECT, read=True)
        await w.say("user", "I prefer concise answers, and Atlas deploys on Fridays.")
        made = [
            await w.write("Aditya prefers concise answers.", evidence="I prefer concise answers"),
            await w.write("Aditya works nights.", attribute="work_hours", source_kind="agent_inference"),
            await w.write("We picked Postgres for Atlas.", type="episodic", attribute=None),
        ]
        project = await rt.host.write_system(
            PROJECT, "Atlas deploys on Fridays.", attribute="deploy_day",
            entities=[EntityMention("project", "Atlas", "about")],
        )  # fmt: skip
        foreign = await rt.host.write_system(Scope("user", "u2"), "Bea's salary is 90k.", attribute="salary")
        gone = await w.write("Aditya's old phone number is 555.", attribute="phone", evidence=None)
        for result in (*made, project, foreign, gone):
            assert result.ok and result.record_id
            self.ids.append(result.record_id)
        await rt.store.set_status(gone.record_id or "", "deleted")
        for record_id in self.ids:
            self.entity_ids += (await rt.store.require_record(record_id)).entity_ids

    def _bound_what_reaches_the_work(self) -> None:
        """Wrap the search and the write path: what a tool hands them must be within the limits.

        An assertion here escapes ``tools.call`` (it catches only its own refusals), so an
        unbounded input reaching the expensive work fails the fuzz.
        """
        rt = self.world.rt
        search, write, revise = rt.search, rt.ingestor.write, rt.ingestor.revise

        async def bounded_search(principal: Principal, request: SearchRequest) -> Any:
            REACHED.append("search")
            assert 1 <= len(request.queries) <= limits.MAX_QUERIES
            assert all(len(q) <= limits.MAX_QUERY_CHARS for q in request.queries)
            assert len(request.entities or ()) <= limits.MAX_SEARCH_ENTITIES
            assert request.k is None or (isinstance(request.k, int) and 1 <= request.k <= limits.MAX_K)
            for bound in (request.since, request.until):
                assert bound is None or limits.DATE_MIN <= bound <= limits.DATE_MAX
            return await search(principal, request)

        async def bounded_write(principal: Principal, request: WriteRequest, **kw: Any) -> Any:
            REACHED.append("write")
            assert len(request.content) <= limits.MAX_CONTENT_CHARS
            assert len(request.evidence or "") <= limits.MAX_EVIDENCE_CHARS
            assert len(request.entities) <= limits.MAX_WRITE_ENTITIES and len(request.tags) <= limits.MAX_TAGS
            assert request.evidence_turn is None or isinstance(request.evidence_turn, int)
            assert request.event_at is None or limits.DATE_MIN <= request.event_at <= limits.DATE_MAX
            return await write(principal, request, **kw)

        async def bounded_revise(principal: Principal, target: Any, revision: Revision, **kw: Any) -> Any:
            REACHED.append("revise")
            assert len(revision.content) <= limits.MAX_CONTENT_CHARS
            assert len(revision.evidence or "") <= limits.MAX_EVIDENCE_CHARS
            return await revise(principal, target, revision, **kw)

        rt.search = bounded_search  # type: ignore[method-assign]
        rt.ingestor.write = bounded_write  # type: ignore[method-assign]
        rt.ingestor.revise = bounded_revise  # type: ignore[method-assign]

    def run(self, coro: Any) -> Any:
        return self.loop.run_until_complete(coro)

    async def snapshot(self) -> dict[str, int]:
        db = self.world.rt.store.db
        names = await every_table(self.world.rt.store)
        counts = {}
        for name in names:
            # The spec keeps an ambiguous_alias audit event even for a refused write (§9).
            where = " WHERE kind != 'ambiguous_alias'" if name == "events" else ""
            counts[name] = int(await db.fetchval(f'SELECT count(*) FROM "{name}"{where}'))
        counts["records_version"] = await self.world.rt.store.records_version()
        return counts

    def close(self) -> None:
        self.run(self.world.rt.close())
        self.loop.close()


@pytest.fixture(scope="module")
def harness(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Harness]:
    h = Harness(tmp_path_factory.mktemp("fuzz") / "memory.sqlite")
    try:
        yield h
    finally:
        h.close()


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=30),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner, max_size=4),
    max_leaves=12,
)

# --- hostile values (issue 15 item 7) ---------------------------------------------------------

HOSTILE_CHARS = ["\ud800", "\udbff", "\udc00", "\udfff", "\x00", "\x01", "\x1b", "\x7f", "\x85", "\x9f",
                 "\u2028", "\ufeff", "\U0001f600", "\t", "\n", "\r"]  # fmt: skip
hostile_text = st.one_of(
    st.text(alphabet=st.sampled_from(HOSTILE_CHARS) | st.characters(codec=None, exclude_categories=()),
            max_size=12),
    st.tuples(st.sampled_from(["Aditya prefers concise answers.", "I prefer concise answers", "Atlas"]),
              st.sampled_from(HOSTILE_CHARS)).map(lambda t: t[0][:5] + t[1] + t[0][5:]),
)  # fmt: skip
HOSTILE_DATES = [
    "0001-01-01T00:00:00+05:00", "9999-12-31T23:59:59-05:00", "0001-01-01T00:00:00", "9999-12-31T23:59:59",
    "0999-12-31T23:59:59Z", "1000-01-01T00:00:00Z", "9998-12-31T23:59:59Z", "9999-01-01T00:00:00Z",
    "0000-01-01", "2026-02-30", "2026-01-01T24:00:00", "2026-01-01T00:00:00+24:00",
    "2026-01-01T00:00:00+23:59", "2026-01-01T00:00:00\x00", "2026-01-01\ud800", "+002026-01-01",
    "2026-W01-1", "",
]  # fmt: skip
HOSTILE_NUMBERS = [
    2**63 - 1, 2**63, -(2**63), -(2**63) - 1, 2**64, 10**30, 10**400, 1e308, -1e308, sys.float_info.max,
    sys.float_info.min, 5e-324, math.nan, math.inf, -math.inf, -0.0, 5.0, 1.5, 20.0, 21.0, True, False,
]  # fmt: skip


def _nested(depth: int, leaf: Any, as_dict: bool) -> Any:
    for _ in range(depth):
        leaf = {"queries": leaf} if as_dict else [leaf]
    return leaf


HUGE = "connect " * 212_500  # the 1.7 MB query
HOSTILE_BLOBS = [
    HUGE, "é" * (limits.MAX_PAYLOAD_CHARS + 1), "x" * (limits.MAX_EVIDENCE_CHARS + 1), ["tea"] * 10_000,
    _nested(50_000, "tea", as_dict=False), _nested(50_000, "tea", as_dict=True),
    _nested(9, "tea", as_dict=False), {f"k{i}": i for i in range(20_000)},
]  # fmt: skip
HOSTILE_TEXTS = [  # whole payloads as JSON text
    json.dumps({"queries": [HUGE]}), '{"queries": ' + "[" * 60_000 + '"tea"' + "]" * 60_000 + "}",
    '{"queries": ["tea"], "k": 1' + "0" * 5000 + "}", '{"queries": ["tea"], "k": NaN}',
    '{"queries": ["tea"], "k": Infinity}', '{"queries": ["\\ud800"]}', '{"queries": ["\\u0000"]}',
    '{"\\udfff": 1}', b'{"queries": ["\xff"]}', "[" * (limits.MAX_JSON_TEXT_CHARS + 1),
]  # fmt: skip
hostile_values = st.one_of(
    hostile_text,
    st.sampled_from(HOSTILE_DATES),
    st.sampled_from(HOSTILE_NUMBERS),
    st.integers(),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from(range(len(HOSTILE_BLOBS))).map(lambda i: HOSTILE_BLOBS[i]),
    st.lists(hostile_text, max_size=4),
    st.dictionaries(hostile_text, hostile_text, max_size=3),
)


KEYS = [
    "queries", "types", "entities", "since", "until", "k", "include_history", "ids", "type", "content",
    "attribute", "write_target", "source_kind", "evidence", "evidence_turn", "event_at", "tags", "id",
    "action", "reason", "entity_id", "merge_into", "context", "agent_id", "scope",
]  # fmt: skip


def plausible_values(h: Harness) -> st.SearchStrategy[Any]:
    """Values that pass some checks, so the fuzz reaches the deeper branches too."""
    ids = st.sampled_from(h.ids)
    return st.one_of(
        ids,
        ids.map(lambda i: i[-12:]),
        st.sampled_from(h.entity_ids or ["x"]),
        st.sampled_from(
            ["semantic", "episodic", "procedural", "personal", "current_project", "private", "user:u2",
             "confirm", "supersede", "expire", "user_statement", "agent_inference", "system",
             "session_summary", "answer_style", "I prefer concise answers", "2026-01-01T00:00:00Z",
             "not a date", "", "   ", "Aditya prefers long answers."]
        ),
        st.lists(st.sampled_from(["concise answers", "Atlas", "  ", ""]), max_size=4),
        st.lists(ids, min_size=1, max_size=3),
        st.lists(
            st.fixed_dictionaries(
                {"kind": st.sampled_from(["person", "project", "robot"]),
                 "role": st.sampled_from(["about", "x"])},
                optional={"name": st.sampled_from(["Aditya", "Atlas", "", "Bea"]),
                          "entity_id": st.sampled_from(h.entity_ids or ["x"])},
            ),
            max_size=3,
        ),
        st.integers(min_value=-2, max_value=25),
        json_values,
    )  # fmt: skip


def templates(h: Harness, tool: str) -> st.SearchStrategy[dict[str, Any]]:
    """A valid call of ``tool`` to mutate from."""
    ids = st.sampled_from(h.ids)
    short = ids.map(lambda i: i[-12:])
    if tool == "memory_search":
        return st.fixed_dictionaries(
            {"queries": st.just(["concise answers"])},
            optional={
                "k": st.integers(1, 20),
                "types": st.just(["semantic"]),
                "include_history": st.booleans(),
                "entities": st.just(["Atlas"]),
                "since": st.just("2025-01-01T00:00:00Z"),
            },
        )
    if tool == "memory_get":
        return st.fixed_dictionaries({"ids": st.lists(ids | short, min_size=1, max_size=3)})
    if tool == "memory_write":
        return st.fixed_dictionaries(
            {
                "type": st.sampled_from(["semantic", "episodic"]),
                "content": st.sampled_from(["Aditya prefers concise answers.", "Atlas deploys on Fridays."]),
            },
            optional={
                "attribute": st.just("answer_style"),
                "source_kind": st.just("user_statement"),
                "evidence": st.just("I prefer concise answers"),
                "write_target": st.just("current_project"),
                "entities": st.just([{"kind": "project", "name": "Atlas", "role": "about"}]),
            },
        )
    if tool == "memory_revise":
        record = st.fixed_dictionaries(
            {
                "id": ids | short,
                "action": st.sampled_from(["confirm", "expire", "supersede"]),
                "reason": st.just("the user said so"),
            },
            optional={"content": st.just("Aditya prefers long answers.")},
        )
        entities = st.sampled_from(h.entity_ids or ["x"])
        merge = st.fixed_dictionaries(
            {"entity_id": entities, "merge_into": entities, "reason": st.just("dup")}
        )
        return record | merge
    return st.fixed_dictionaries({"id": ids | short, "reason": st.just("the user asked")})


def typed_values(h: Harness, key: str) -> st.SearchStrategy[Any]:
    """Right-typed values for one key, valid and invalid alike."""
    ids = st.sampled_from(h.ids)
    refs = ids | ids.map(lambda i: i[-12:]) | st.sampled_from(h.entity_ids or ["x"]) | st.text(max_size=14)
    texts = st.sampled_from(
        ["", "  ", "\n\t", "x" * 1001, "Aditya prefers concise answers.", "I prefer concise answers"]
    )
    dates = st.sampled_from(
        [
            "not a date",
            "2026-13-01T00:00:00Z",
            "2026-01-01",
            "2026-01-01T00:00:00+05:00",
            "2026-01-01T00:00:00",
        ]
    )
    by_key: dict[str, st.SearchStrategy[Any]] = {
        "queries": st.lists(texts | st.text(max_size=20), max_size=5),
        "types": st.lists(st.sampled_from(["semantic", "episodic", "procedural", "bogus"]), max_size=4),
        "entities": st.lists(st.text(max_size=10) | st.fixed_dictionaries({"kind": st.just("person")}),
                             max_size=3),
        "since": dates, "until": dates, "event_at": dates,
        "k": st.integers(-5, 30) | st.just("5"),
        "ids": st.lists(refs, max_size=25),
        "id": refs, "entity_id": refs, "merge_into": refs,
        "action": st.sampled_from(["confirm", "expire", "supersede", "merge", ""]),
        "source_kind": st.sampled_from(["user_statement", "tool_result", "agent_inference", "system", "x"]),
        "type": st.sampled_from(["semantic", "episodic", "procedural", "fact"]),
        "write_target": st.sampled_from(["personal", "current_project", "private", "user:u2", ""]),
        "content": texts, "evidence": texts, "reason": texts, "attribute": texts | st.just("!!"),
        "evidence_turn": st.integers(-1, 5),
        "tags": st.lists(texts, max_size=12),
    }  # fmt: skip
    return by_key.get(key, json_values)


@st.composite
def mutated(draw: st.DrawFn, h: Harness, tool: str) -> dict[str, Any]:
    """A valid call with a key or two dropped and a key or two given another value."""
    payload = dict(draw(templates(h, tool)))
    for key in draw(st.lists(st.sampled_from(sorted(payload)), max_size=2)):
        payload.pop(key, None)
    own = sorted(set(payload) | set(KEYS_BY_TOOL[tool]))
    for key in draw(st.lists(st.sampled_from(own) | st.sampled_from(KEYS), max_size=2)):
        payload[key] = draw(typed_values(h, key) | plausible_values(h))
    return payload


KEYS_BY_TOOL = {
    "memory_search": ["queries", "types", "entities", "since", "until", "k", "include_history"],
    "memory_get": ["ids"],
    "memory_write": ["type", "content", "attribute", "write_target", "source_kind", "evidence",
                     "evidence_turn", "event_at", "entities", "tags"],
    "memory_revise": ["id", "action", "reason", "content", "source_kind", "evidence", "evidence_turn",
                      "entity_id", "merge_into"],
    "memory_forget": ["id", "reason"],
}  # fmt: skip


@st.composite
def hostile(draw: st.DrawFn, h: Harness, tool: str) -> Any:
    """A valid call with one value (anywhere: top level, in a list, in an entity) or one key made hostile."""
    payload = json.loads(json.dumps(draw(templates(h, tool))))
    value = draw(hostile_values)
    spots = [(payload, key) for key in payload]
    for item in payload.values():
        if isinstance(item, list):
            spots += [(item, i) for i in range(len(item))]
            spots += [(entry, key) for entry in item if isinstance(entry, dict) for key in entry]
    where = draw(st.sampled_from(["value", "key", "new key"]))
    if where == "value" and spots:
        container, key = draw(st.sampled_from(spots))
        container[key] = value
    elif where == "key":
        payload[draw(hostile_text)] = value
    else:
        payload[draw(st.sampled_from(KEYS_BY_TOOL[tool]))] = value
    if draw(st.booleans()):
        try:
            return json.dumps(payload, allow_nan=True)  # the same payload as JSON text
        except (ValueError, RecursionError):
            return payload
    return payload


def payloads(h: Harness, tool: str) -> st.SearchStrategy[Any]:
    near_valid = st.dictionaries(st.sampled_from(KEYS), plausible_values(h), max_size=7)
    not_json = st.one_of(
        st.binary(max_size=20), st.text(max_size=40), st.just(object()), st.sets(st.integers())
    )
    weird = st.one_of(near_valid, json_values, not_json, near_valid.map(json.dumps))
    hostile_payloads = st.one_of(
        hostile(h, tool), hostile(h, tool), st.sampled_from(HOSTILE_TEXTS), st.sampled_from(HOSTILE_BLOBS)
    )
    return st.one_of(mutated(h, tool), mutated(h, tool), mutated(h, tool), weird, hostile_payloads)


def check(h: Harness, principal: Principal, tool: str, payload: Any) -> None:
    async def body() -> None:
        before = await h.snapshot()
        started = time.perf_counter()
        result = await h.world.rt.tools.call(principal, tool, payload)
        assert time.perf_counter() - started < SECONDS_PER_CALL, (tool, result)
        OUTCOMES.append(result.get("error") or "ok")
        assert isinstance(result, dict) and isinstance(result.get("ok"), bool), result
        json.dumps(result)
        json.dumps(result, ensure_ascii=False).encode("utf-8")  # what the adapters send on
        if not result["ok"]:
            assert result["error"] in ERROR_CODES, result
            assert isinstance(result["message"], str) and result["message"], result
            assert await h.snapshot() == before, (tool, payload, result)

    h.run(body())


@pytest.mark.parametrize("tool", TOOL_NAMES)
def test_no_payload_crashes_a_tool_or_changes_the_store_when_refused(harness: Harness, tool: str) -> None:
    @settings(
        max_examples=EXAMPLES, deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
    )  # fmt: skip
    @given(data=st.data())
    def run(data: st.DataObject) -> None:
        principal = data.draw(st.sampled_from(harness.principals))
        check(harness, principal, tool, data.draw(payloads(harness, tool)))

    run()


def test_the_harness_seeded_what_the_fuzz_relies_on(harness: Harness) -> None:
    """Guards the fuzz against silently exercising an empty store."""
    snapshot = harness.run(harness.snapshot())
    assert snapshot["records"] >= 6 and len(harness.ids) == 6
    assert harness.run(harness.world.rt.store.get_record(harness.ids[-1])).status == "deleted"
    assert USER in harness.run(harness.world.rt.tools.write_targets(harness.principals[0])).values()


def test_the_fuzz_reaches_successes_and_every_common_refusal(harness: Harness) -> None:
    """Runs after the fuzz: it must not have only bounced off the JSON-object check."""
    reached = set(OUTCOMES)
    assert {"ok", "invalid_input", "not_found"} <= reached, sorted(reached)
    assert len(reached) >= 4, sorted(reached)
    assert {"search", "write"} <= set(REACHED), sorted(set(REACHED))  # the bounds were exercised


@pytest.mark.parametrize("blob", range(len(HOSTILE_BLOBS)))
@pytest.mark.parametrize("tool", TOOL_NAMES)
def test_every_hostile_blob_is_refused_quickly_by_every_tool(harness: Harness, tool: str, blob: int) -> None:
    """The huge and deep values, deterministically, in the one field every tool has and as the payload."""
    field = {"memory_search": "queries", "memory_get": "ids", "memory_write": "content",
             "memory_revise": "reason", "memory_forget": "reason"}[tool]  # fmt: skip
    for payload in ({field: HOSTILE_BLOBS[blob]}, HOSTILE_BLOBS[blob], *HOSTILE_TEXTS):
        check(harness, harness.principals[0], tool, payload)
        assert OUTCOMES[-1] == "invalid_input"
