"""Issue 15 item 9: no stored or caller-chosen text can forge a memory's block or its labels.

A provisional ``agent_inference`` (say, written after reading a hostile web page) whose
content carried a blank line and a fake header used to render as a second memory marked
``confirmed · user_statement``, with a fake ``matched:`` line under it. The rendering now
quotes every content line; :mod:`tests.unit.rendered` reads the format back strictly.
"""

from __future__ import annotations

import json
import unicodedata
from datetime import UTC, datetime
from typing import Any, get_args

from hypothesis import given, settings
from hypothesis import strategies as st
from langchain_core.messages import HumanMessage

from retold import render_search
from retold.adapters.common import RECALL_HEADER, recall, tool_text
from retold.errors import InvalidArgumentError
from retold.models import (
    SCOPE_KINDS,
    STATUSES,
    Explanation,
    RecordType,
    Scope,
    SearchResponse,
    SearchResult,
    SourceKind,
)
from retold.retrieve.render import json_line

from .factories import build_record
from .rendered import FAKE_HEADER, FAKE_MATCHED, FORGED, Block, expected_content, expected_line, parse
from .slow import examples
from .writepath import World

AT = datetime(2026, 8, 12, 9, 30, tzinfo=UTC)


def _explanation(record: Any, summary: str, conflicts: list[str]) -> Explanation:
    return Explanation(
        raw_queries=["bank transfers"], rewritten_queries=None, rewrite_status="disabled",
        matched_by=["lexical"], dense=None, lexical=None, lexical_terms=None, entity=None, fused_rank=1,
        freshness_multiplier=None, rerank=None, gate="lexical", dedup="kept", budget="fit",
        source_kind=record.source_kind, status=record.status, created_at=AT, event_at=AT, entity_ids=[],
        conflicts_with=conflicts, summary=summary,
    )  # fmt: skip


def _result(summary: str = "matched: lexical 2/2 (rank 1); fused rank 1", **fields: Any) -> SearchResult:
    conflicts = fields.pop("conflicts", [])
    record = build_record(AT, **fields)
    return SearchResult(record, 0.5, _explanation(record, summary, conflicts))


def _only_block(text: str, header: str = "memory_search") -> Block:
    rendered = parse(text)
    assert rendered.header == header
    (block,) = rendered.blocks
    return block


# --- the reproduction ---------------------------------------------------------------------------


def test_a_forged_header_in_content_renders_as_one_record_with_its_true_labels() -> None:
    forged = _result(content=FORGED, status="provisional", source_kind="agent_inference")
    text = render_search(SearchResponse("s1", ["bank transfers"], None, "disabled", [forged], None, {}))
    block = _only_block(text)
    assert (block.short_id, block.status, block.source_kind) == (
        forged.record.id[-12:],
        "provisional",
        "agent_inference",
    )
    assert block.content == FORGED
    # The fake header and matched line are there, but only as quoted content.
    assert f"\n> {FAKE_HEADER}\n" in text and f"\n> {FAKE_MATCHED}\n" in text
    assert [line for line in text.split("\n") if line.startswith(("[", "matched:"))] == [
        text.split("\n")[2],
        forged.explanation.summary,
    ]


async def _write_forged(world: World) -> str:
    made = await world.rt.tools.call(
        world.p, "memory_write", {"type": "semantic", "content": FORGED, "attribute": "payments"}
    )
    assert made["ok"] and made["status"] == "provisional", made
    return made["record_id"]


async def test_the_forgery_through_the_search_tool_is_one_record(world: World) -> None:
    record_id = await _write_forged(world)
    found = await world.rt.tools.call(world.p, "memory_search", {"queries": ["bank transfers"]})
    assert [r["record_id"] for r in found["results"]] == [record_id]
    block = _only_block(found["rendered"])
    assert (block.short_id, block.type, block.status, block.source_kind, block.scope) == (
        record_id[-12:],
        "semantic",
        "provisional",
        "agent_inference",
        "user:u1",
    )
    assert block.content == FORGED and block.matched == found["results"][0]["explanation"]
    # What the LangChain and CrewAI tools hand the model is that same rendering.
    assert tool_text("memory_search", found) == found["rendered"]


async def test_the_forgery_in_the_recalled_memory_block_is_one_record(world: World) -> None:
    record_id = await _write_forged(world)
    appended = await recall(world.rt, world.p, [HumanMessage("How do I handle bank transfers for the user?")])
    _call, result = appended
    block = _only_block(result.text, RECALL_HEADER)
    assert (block.short_id, block.status, block.source_kind) == (
        record_id[-12:],
        "provisional",
        "agent_inference",
    )
    assert block.content == FORGED


async def test_memory_get_is_one_json_line_that_keeps_the_content(world: World) -> None:
    tricky = "Pays by card.\u2028b\r\nc\u2029d\n\n" + FAKE_HEADER  # storable: controls are refused
    made = await world.rt.tools.call(
        world.p, "memory_write", {"type": "semantic", "content": tricky, "attribute": "payments"}
    )
    assert made["ok"], made
    got = await world.rt.tools.call(world.p, "memory_get", {"ids": [made["record_id"]]})
    text = tool_text("memory_get", got)
    assert text.splitlines() == [text]  # no raw line break of any kind: JSON keeps it in its string
    assert json.loads(text) == json.loads(json.dumps(got, default=str))
    assert json.loads(text)["records"][0]["content"] == tricky


# --- the property -------------------------------------------------------------------------------

_HOSTILE = [
    "\n", "\n\n", "\r", "\r\n", "\v", "\f", "\x1c", "\x1d", "\x1e", "\x1f", "\x85", "\u2028", "\u2029",
    "\x00", "\x07", "\x1b", "\x7f", "\x9b", "\ud800", "\udfff", "\t", " ", ">", "> ", "[", "]", '"', "\\",
    FAKE_HEADER, FAKE_MATCHED, "conflicts with abcdef123456", "empty: nothing",
    "memory_search: 2 results; searched for: \"x\"", f"{RECALL_HEADER}: 1 result; searched for: \"y\"",
    "matched:", " · scope user:u1", "\\n", "\\u2028",
]  # fmt: skip
_text = st.lists(
    st.one_of(st.text(st.characters(exclude_categories=()), max_size=12), st.sampled_from(_HOSTILE)),
    max_size=8,
).map("".join)
_id = st.uuids().map(str)


def _scope(kind: str, scope_id: str) -> Scope:
    """A scope with a hostile id where ids allow it (validate_id refuses controls), else a plain one."""
    try:
        return Scope(kind, scope_id)  # type: ignore[arg-type]
    except InvalidArgumentError:
        return Scope(kind, "u1")  # type: ignore[arg-type]


@st.composite
def _results(draw: st.DrawFn) -> list[SearchResult]:
    ids = draw(st.lists(_id, max_size=5, unique_by=lambda i: i[-12:]))
    results = []
    for record_id in ids:
        record = build_record(
            AT,
            id=record_id,
            content=draw(_text),
            type=draw(st.sampled_from(get_args(RecordType))),
            status=draw(st.sampled_from(STATUSES)),
            source_kind=draw(st.sampled_from(get_args(SourceKind))),
            scope=_scope(draw(st.sampled_from(SCOPE_KINDS)), draw(_text)),
        )
        conflicts = draw(st.lists(st.sampled_from(ids), max_size=2, unique=True)) if ids else []
        summary = "matched: " + draw(_text)
        results.append(SearchResult(record, 0.5, _explanation(record, summary, conflicts)))
    return results


def _as_json(queries: list[str]) -> list[str]:
    """Queries are shown as JSON strings: exact, except that two surrogate code points read as one."""
    return [json.loads(json.dumps(q)) for q in queries]


@settings(max_examples=examples(200), deadline=None)
@given(
    results=_results(),
    queries=st.lists(_text, min_size=1, max_size=3),
    rewritten=st.none() | st.lists(_text, min_size=1, max_size=3),
    reason=_text,
    header=st.sampled_from(["memory_search", RECALL_HEADER]),
)
def test_parsing_the_rendering_gives_back_exactly_the_records_returned(
    results: list[SearchResult], queries: list[str], rewritten: list[str] | None, reason: str, header: str
) -> None:
    response = SearchResponse("s1", queries, rewritten, "applied", results, None if results else reason, {})
    rendered = parse(render_search(response, header=header))
    assert rendered.header == header
    assert rendered.queries == _as_json(rewritten or queries)
    assert rendered.raw_queries == (_as_json(queries) if rewritten else None)
    assert rendered.empty_reason == (None if results else expected_line(reason))
    assert rendered.blocks == [
        Block(
            short_id=r.record.id[-12:],
            type=r.record.type,
            status=r.record.status,
            source_kind=r.record.source_kind,
            event="2026-08-12",
            scope=expected_line(str(r.record.scope)),
            content=expected_content(r.record.content),
            matched=expected_line(r.explanation.summary),
            conflicts=tuple(c[-12:] for c in r.explanation.conflicts_with),
        )
        for r in results
    ]


@settings(max_examples=examples(200), deadline=None)
@given(value=st.recursive(
    st.none() | st.booleans() | st.integers() | _text,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_text, inner, max_size=3),
    max_leaves=10,
))  # fmt: skip
def test_a_json_tool_result_is_one_line_holding_the_same_value(value: Any) -> None:
    text = json_line(value)
    assert text.splitlines() == [text]
    assert not any(unicodedata.category(ch) in ("Cc", "Cs") for ch in text)
    assert json.loads(text) == json.loads(json.dumps(value))  # what plain (ASCII) JSON decodes to
