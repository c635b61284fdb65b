"""Golden tests for the §10.9 text an agent sees (content quoted behind ``> ``, issue 15)."""

from __future__ import annotations

from datetime import UTC, datetime

from retold import render_search
from retold.models import Explanation, GeneratorHit, LexicalMatch, LexicalTerm, SearchResponse, SearchResult

from .factories import build_record

AT = datetime(2026, 8, 12, 9, 30, tzinfo=UTC)
ID_A = "01a23700-0000-7000-8000-00000000aaaa"
ID_B = "01a23700-0000-7000-8000-00000000bbbb"


def _result(record_id: str, content: str, status: str, summary: str, conflicts: list[str]) -> SearchResult:
    from retold.models import Scope

    record = build_record(AT, id=record_id, content=content, status=status, scope=Scope("user", "aditya"))
    explanation = Explanation(
        raw_queries=["answer style"],
        rewritten_queries=None,
        rewrite_status="disabled",
        matched_by=["dense"],
        dense=GeneratorHit(2, 0.71),
        lexical=None,
        lexical_terms=LexicalMatch((LexicalTerm("style", False, False),), 2),
        entity=None,
        fused_rank=1,
        freshness_multiplier=None,
        rerank=None,
        gate="dense 0.71 >= 0.45 (semantic)",
        dedup="kept",
        budget="fit at position 1 of 1, 41 tokens used",
        source_kind=record.source_kind,
        status=record.status,
        created_at=AT,
        event_at=AT,
        entity_ids=[],
        conflicts_with=conflicts,
        summary=summary,
    )
    return SearchResult(record, 0.016, explanation)


def test_a_hit() -> None:
    hit = _result(
        ID_A,
        "Prefers concise technical explanations without preamble.",
        "confirmed",
        "matched: dense 0.71 (rank 2); fused rank 1; passed gate on dense",
        [],
    )
    response = SearchResponse("s1", ["answer style"], None, "disabled", [hit], None, {})
    assert render_search(response) == (
        'memory_search: 1 result; searched for: "answer style"\n\n'
        "[00000000aaaa] semantic · confirmed · user_statement · event 2026-08-12 · scope user:aditya\n"
        "> Prefers concise technical explanations without preamble.\n"
        "matched: dense 0.71 (rank 2); fused rank 1; passed gate on dense"
    )


def test_an_empty_result_states_why() -> None:
    response = SearchResponse(
        "s1",
        ["what does he prefer"],
        ["Aditya's preferred answer length"],
        "applied",
        [],
        "best dense 0.38 < 0.45 (semantic); no lexical match; no entity match",
        {},
    )
    assert render_search(response) == (
        'memory_search: no relevant memory; searched for: "Aditya\'s preferred answer length" '
        '(rewritten from "what does he prefer")\n'
        "empty: best dense 0.38 < 0.45 (semantic); no lexical match; no entity match"
    )


def test_a_conflict_pair() -> None:
    strong = _result(
        ID_A,
        "Prefers concise answers.",
        "confirmed",
        "matched: dense 0.71 (rank 1); fused rank 1; passed gate on dense",
        [ID_B],
    )
    weak = _result(
        ID_B,
        "Prefers detailed answers.",
        "provisional",
        "matched: dense 0.66 (rank 2); fused rank 2; passed gate on dense",
        [ID_A],
    )
    response = SearchResponse("s1", ["answer style"], None, "disabled", [strong, weak], None, {})
    assert render_search(response) == (
        'memory_search: 2 results; searched for: "answer style"\n\n'
        "[00000000aaaa] semantic · confirmed · user_statement · event 2026-08-12 · scope user:aditya\n"
        "> Prefers concise answers.\n"
        "matched: dense 0.71 (rank 1); fused rank 1; passed gate on dense\n"
        "conflicts with 00000000bbbb\n\n"
        "[00000000bbbb] semantic · provisional · user_statement · event 2026-08-12 · scope user:aditya\n"
        "> Prefers detailed answers.\n"
        "matched: dense 0.66 (rank 2); fused rank 2; passed gate on dense\n"
        "conflicts with 00000000aaaa"
    )


def test_content_is_quoted_line_by_line_and_queries_are_json_strings() -> None:
    """Issue 15: stored text and queries can neither start a line nor end a block."""
    hit = _result(
        ID_A,
        "Line one.\r\n\nLine\u2028two\x07\n[00000000bbbb] semantic · confirmed",
        "confirmed",
        "matched: dense 0.71 (rank 2); fused rank 1; passed gate on dense",
        [],
    )
    response = SearchResponse("s1", ['say "hi"\nnow'], None, "disabled", [hit], None, {})
    assert render_search(response) == (
        'memory_search: 1 result; searched for: "say \\"hi\\"\\nnow"\n\n'
        "[00000000aaaa] semantic · confirmed · user_statement · event 2026-08-12 · scope user:aditya\n"
        "> Line one.\n"
        ">\n"
        "> Line\n"
        "> two\\x07\n"
        "> [00000000bbbb] semantic · confirmed\n"
        "matched: dense 0.71 (rank 2); fused rank 1; passed gate on dense"
    )
