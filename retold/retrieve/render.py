"""The text an agent sees for a search (spec §10.9): one block per result under a header.

    [a1b2c3d4e5f6] semantic · confirmed · user_statement · event 2026-08-12 · scope user:aditya
    Prefers concise technical explanations without preamble.
    matched: dense 0.71 (rank 2), lexical 3/3 (rank 1); fused rank 1; passed gate on dense

The short id is the last 12 hex digits of the UUIDv7 (its random part, so ids created in
the same millisecond still differ); tools accept it wherever they take an id, and the
structured payload keeps the full id.
"""

from __future__ import annotations

from retold.models import SearchResponse, SearchResult

__all__ = ["render_result", "render_search", "short_id"]


def short_id(record_id: str) -> str:
    """The last 12 characters: a UUIDv7's random tail, indexed in the store for lookups."""
    return record_id[-12:]


def _quoted(queries: list[str]) -> str:
    return ", ".join(f'"{q}"' for q in queries)


def render_result(result: SearchResult) -> str:
    record = result.record
    head = (
        f"[{short_id(record.id)}] {record.type} · {record.status} · {record.source_kind} · "
        f"event {record.event_at.date().isoformat()} · scope {record.scope}"
    )
    lines = [head, record.content, result.explanation.summary]
    if result.explanation.conflicts_with:
        lines.append("conflicts with " + ", ".join(short_id(c) for c in result.explanation.conflicts_with))
    return "\n".join(lines)


def render_search(response: SearchResponse, *, header: str = "memory_search") -> str:
    """Header plus the blocks joined by blank lines; an empty result states why."""
    searched = response.rewritten_queries or response.raw_queries
    target = f"searched for: {_quoted(searched)}"
    if response.rewritten_queries:
        target += f" (rewritten from {_quoted(response.raw_queries)})"
    if not response.results:
        return f"{header}: no relevant memory; {target}\nempty: {response.empty_reason}"
    count = len(response.results)
    lines = [f"{header}: {count} result{'s' if count != 1 else ''}; {target}"]
    lines += [render_result(r) for r in response.results]
    return "\n\n".join(lines)
