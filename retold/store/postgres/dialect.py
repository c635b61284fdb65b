"""SQLite-flavoured SQL as PostgreSQL runs it: one translation per statement text, cached.

The store's statements are written once, in the SQL both engines share, and run on either
backend. What differs is spelled here, not at every call site:

* ``?`` parameters become ``%s`` (and a literal ``%`` becomes ``%%``), outside quoted text;
* ``INSERT OR IGNORE INTO …`` becomes ``INSERT INTO … ON CONFLICT DO NOTHING``;
* ``temp.<name>`` (SQLite's temporary schema) becomes ``pg_temp.<name>``;
* ``:name`` parameters become ``%(name)s``;
* ``x IS ?`` (SQLite's null-safe equality) becomes ``x IS NOT DISTINCT FROM %s``;
* scalar ``max(a, b, …)`` / ``min(a, b, …)`` become ``greatest`` / ``least``;
* ``substr(x, -n)`` (the last n characters) becomes ``right(x, n)``;
* ``LIKE`` becomes ``ILIKE`` (SQLite's LIKE ignores ASCII case);
* ``CROSS JOIN … ON`` (SQLite's join-order hint) becomes ``JOIN … ON``.

Functions SQLite has and PostgreSQL lacks (``json_extract``, ``instr``, ``group_concat``)
are created by the PostgreSQL schema instead (:mod:`retold.store.postgres.schema`), so the
statement text needs no rewriting for them.
"""

from __future__ import annotations

import functools
import re

__all__ = ["translate"]

_INSERT_OR_IGNORE = re.compile(r"\bINSERT\s+OR\s+IGNORE\s+INTO\b", re.IGNORECASE)
_RETURNING = re.compile(r"\bRETURNING\b", re.IGNORECASE)
_TEMP_SCHEMA = re.compile(r"\btemp\.", re.IGNORECASE)
_IS_PARAM = re.compile(r"\bIS\s+(?=\?|:[A-Za-z_])", re.IGNORECASE)
_MAX_MIN = re.compile(r"\b(max|min)\(", re.IGNORECASE)
_SUBSTR_TAIL = re.compile(r"\bsubstr\(([A-Za-z_][A-Za-z_0-9.]*),\s*-(\d+)\)", re.IGNORECASE)
_CROSS_JOIN = re.compile(r"\bCROSS\s+JOIN\b(?=[^()]*?\bON\b)", re.IGNORECASE)
_LIKE = re.compile(r"(?<![A-Za-z_])LIKE\b", re.IGNORECASE)


@functools.lru_cache(maxsize=4096)
def translate(sql: str) -> str:
    """The PostgreSQL text of one SQLite-flavoured statement (see the module docstring)."""
    out = _IS_PARAM.sub("IS NOT DISTINCT FROM ", sql)
    out = _SUBSTR_TAIL.sub(r"right(\1, \2)", out)
    out = _scalar_extremes(out)
    out = _placeholders(out)
    if _INSERT_OR_IGNORE.search(out):
        out = _INSERT_OR_IGNORE.sub("INSERT INTO", out, count=1)
        returning = _RETURNING.search(out)
        if returning is None:
            out = out.rstrip().rstrip(";") + " ON CONFLICT DO NOTHING"
        else:
            out = f"{out[: returning.start()]}ON CONFLICT DO NOTHING {out[returning.start() :]}"
    out = _TEMP_SCHEMA.sub("pg_temp.", out)
    out = _CROSS_JOIN.sub("JOIN", out)
    return _LIKE.sub("ILIKE", out)


def _scalar_extremes(sql: str) -> str:
    """``max(a, b)`` → ``greatest(a, b)``: a ``max``/``min`` call with a top-level comma."""
    out: list[str] = []
    pos = 0
    for match in _MAX_MIN.finditer(sql):
        depth, i, comma = 1, match.end(), False
        while i < len(sql) and depth:
            ch = sql[i]
            if ch == "(":
                depth += 1
            elif ch == ")":
                depth -= 1
            elif ch == "," and depth == 1:
                comma = True
            i += 1
        if comma:
            out.append(sql[pos : match.start()])
            out.append("greatest(" if match.group(1).lower() == "max" else "least(")
            pos = match.end()
    out.append(sql[pos:])
    return "".join(out)


def _placeholders(sql: str) -> str:
    """``?`` → ``%s``, ``:name`` → ``%(name)s`` and ``%`` → ``%%``, outside quoted text."""
    out: list[str] = []
    quote: str | None = None
    i = 0
    while i < len(sql):
        ch = sql[i]
        i += 1
        if quote is None and ch == ":" and i < len(sql) and (sql[i].isalpha() or sql[i] == "_"):
            if out and out[-1] == ":":  # a PostgreSQL cast (::type), written by hand
                out.append(ch)
                continue
            j = i
            while j < len(sql) and (sql[j].isalnum() or sql[j] == "_"):
                j += 1
            out.append(f"%({sql[i:j]})s")
            i = j
            continue
        if quote is not None:
            if ch == quote:
                quote = None
            out.append("%%" if ch == "%" else ch)
        elif ch in ("'", '"'):
            quote = ch
            out.append(ch)
        elif ch == "?":
            out.append("%s")
        elif ch == "%":
            out.append("%%")
        else:
            out.append(ch)
    return "".join(out)
