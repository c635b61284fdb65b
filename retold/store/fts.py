"""FTS5's tokens in Python: what ``unicode61 remove_diacritics 2`` indexes for a text.

The store's lexical index is SQLite's FTS5 table, and PostgreSQL's ``records_terms`` holds the
same tokens (:mod:`retold.store.postgres.lexicon` writes them with :func:`fts_tokens`), so the
tokenizer lives beside the store that indexes with it; the query side
(:mod:`retold.retrieve.query_terms`, which re-exports it) reads queries with the same one, and
the Python coverage check, PostgreSQL's postings and the index agree on what a token is.
"""

from __future__ import annotations

import functools
import re
import unicodedata

__all__ = ["fold_char", "fts_tokens"]


@functools.lru_cache(maxsize=8192)
def fold_char(ch: str) -> str | None:
    """One character as unicode61 folds it: None for a separator, "" for a dropped diacritic.

    unicode61 keeps letters, numbers and private-use characters (``L* N* Co``), lower-cases
    them, and with ``remove_diacritics 2`` strips accents from Latin letters only (Greek
    tonos survives). Combining marks U+0300..U+0331 are part of the token and vanish; other
    marks (Devanagari vowel signs, virama) separate tokens, exactly as SQLite does.
    """
    code = ord(ch)
    if 0x300 <= code <= 0x331:
        return ""
    category = unicodedata.category(ch)
    if not (category[0] in "LN" or category == "Co"):
        return None
    if code < 0x250 or 0x1E00 <= code <= 0x1EFF:
        decomposed = unicodedata.normalize("NFD", ch)
        if len(decomposed) > 1 and all(0x300 <= ord(c) <= 0x36F for c in decomposed[1:]):
            ch = decomposed[0]
    lowered = ch.lower()
    return lowered if len(lowered) == 1 else ch


_ASCII_TOKEN = re.compile(r"[a-z0-9]+")


def fts_tokens(text: str) -> tuple[str, ...]:
    """The tokens FTS5 ``unicode61 remove_diacritics 2`` indexes for ``text``, in order.

    >>> fts_tokens("Deploy bge-m3 to café.yml")
    ('deploy', 'bge', 'm3', 'to', 'cafe', 'yml')
    """
    if text.isascii():  # the common case, at C speed: ASCII letters and digits are the token characters
        return tuple(_ASCII_TOKEN.findall(text.lower()))
    tokens: list[str] = []
    current: list[str] = []
    for ch in text:
        folded = fold_char(ch)
        if folded is None:
            if current:
                tokens.append("".join(current))
                current = []
        elif folded:
            current.append(folded)
    if current:
        tokens.append("".join(current))
    return tuple(tokens)
