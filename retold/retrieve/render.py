"""The text an agent sees for a search (spec §10.9): one block per result under a header.

    memory_search: 1 result; searched for: "answer style"

    [a1b2c3d4e5f6] semantic · confirmed · user_statement · event 2026-08-12 · scope user:aditya
    > Prefers concise technical explanations without preamble.
    matched: dense 0.71 (rank 2), lexical 3/3 (rank 1); fused rank 1; passed gate on dense

The short id is the last 12 hex digits of the UUIDv7 (its random part, so ids created in
the same millisecond still differ); tools accept it wherever they take an id, and the
structured payload keeps the full id.

**Stored text never shapes the block.** A record's status and source label are what the
agent's trust rests on, and its content is whatever someone managed to get stored (an
agent that read a hostile page, say). So every content line is quoted: it starts with
``> `` (an empty line is a bare ``>``), and nothing else in the text starts with ``>``.
Every line break content may carry (LF, CR, CRLF, VT, FF, the file/group/record
separators, NEL, U+2028, U+2029) starts a new quoted line; any other control character
or lone surrogate becomes a visible escape (``\\x07``, ``\\u0085``, ``\\ud800``). Every other
field is forced onto its one line the same way (line breaks escaped as ``\\n`` etc.), and
queries are written as JSON strings. So a rendered search is deterministic and parses
back exactly: a line that starts with ``[`` is a result header, ``>`` its content,
``matched:`` its explanation, ``conflicts with`` its conflicts, and a blank line ends a
block — no stored or caller-chosen text can produce any of them.
"""

from __future__ import annotations

import json
import re
from typing import Any

from retold.models import SearchResponse, SearchResult

__all__ = ["QUOTE", "json_line", "one_line", "quote_content", "render_result", "render_search", "short_id"]

QUOTE = ">"
"""The marker that starts every quoted content line, and nothing else."""

_BREAK = re.compile("\r\n|[\n\r\v\f\x1c\x1d\x1e\x85\u2028\u2029]")
"""What ``str.splitlines`` splits on: every character a viewer or a model may read as a line break."""
_UNSAFE = re.compile("[\x00-\x08\x0e-\x1b\x1f\x7f-\x84\x86-\x9f\ud800-\udfff]")
"""Other control characters (tab kept) and lone surrogates: shown, never passed through."""
_NAMED = {"\n": "\\n", "\r": "\\r", "\v": "\\v", "\f": "\\f"}


def _code(ch: str) -> str:
    """One character as a visible escape: ``\\n``, ``\\x07``, ``\\u2028``."""
    code = ord(ch)
    return _NAMED.get(ch) or (f"\\x{code:02x}" if code < 0x80 else f"\\u{code:04x}")


def _escaped(match: re.Match[str]) -> str:
    return "".join(_code(ch) for ch in match.group())


def _json_escaped(match: re.Match[str]) -> str:
    return "".join(f"\\u{ord(ch):04x}" for ch in match.group())


def _visible(text: str) -> str:
    """``text`` with control characters other than tab and line breaks, and lone surrogates, escaped."""
    return _UNSAFE.sub(_escaped, text)


def one_line(text: str) -> str:
    """``text`` on one line: its line breaks escaped as well."""
    return _BREAK.sub(_escaped, _visible(text))


def json_line(value: Any) -> str:
    """``value`` as JSON on one line, with no raw line break, control character or lone surrogate.

    ``json.dumps`` escapes C0 controls but leaves NEL, C1, U+2028/9 and lone surrogates raw.
    Those can only sit inside string literals, so ``\\uXXXX`` escapes keep the same JSON
    value while no stored string can break the line a tool result is shown on.
    """
    text = json.dumps(value, ensure_ascii=False, default=str)
    return _UNSAFE.sub(_json_escaped, _BREAK.sub(_json_escaped, text))


def quote_content(content: str) -> list[str]:
    """Each content line behind :data:`QUOTE`: stored text cannot start a line of its own."""
    return [f"{QUOTE} {line}" if line else QUOTE for line in _BREAK.split(_visible(content))]


def short_id(record_id: str) -> str:
    """The last 12 characters: a UUIDv7's random tail, indexed in the store for lookups."""
    return record_id[-12:]


def _queries(queries: list[str]) -> str:
    return ", ".join(json_line(q) for q in queries)


def render_result(result: SearchResult) -> str:
    """One block: header, quoted content, ``matched:`` line, ``conflicts with`` line if any."""
    record = result.record
    head = (
        f"[{one_line(short_id(record.id))}] {one_line(record.type)} · {one_line(record.status)} · "
        f"{one_line(record.source_kind)} · event {record.event_at.date().isoformat()} · "
        f"scope {one_line(str(record.scope))}"
    )
    lines = [head, *quote_content(record.content), one_line(result.explanation.summary) or "matched:"]
    if result.explanation.conflicts_with:
        ids = ", ".join(one_line(short_id(c)) for c in result.explanation.conflicts_with)
        lines.append(f"conflicts with {ids}")
    return "\n".join(lines)


def render_search(response: SearchResponse, *, header: str = "memory_search") -> str:
    """Header plus the blocks joined by blank lines; an empty result states why."""
    header = one_line(header)
    searched = response.rewritten_queries or response.raw_queries
    target = f"searched for: {_queries(searched)}"
    if response.rewritten_queries:
        target += f" (rewritten from {_queries(response.raw_queries)})"
    if not response.results:
        reason = one_line(str(response.empty_reason))
        return f"{header}: no relevant memory; {target}\nempty: {reason}"
    count = len(response.results)
    lines = [f"{header}: {count} result{'s' if count != 1 else ''}; {target}"]
    lines += [render_result(r) for r in response.results]
    return "\n\n".join(lines)
