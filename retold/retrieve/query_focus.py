"""The words of a query that can tell records apart, for the dense and lexical channels.

A name linked to most of the searchable records (the user, a conversation partner in every
other turn) cannot choose between them, yet in a small embedding model it dominates the
query vector: "what state did Nate visit?" lands nearest "Nate: See ya!". The entity stage
already knows which named entities are that broad (:func:`~retold.retrieve.entity_search.
selective_aliases`); here their mentions are taken out of the text the dense channel embeds
and out of the lexical channel's full-text query. Both still read the whole query for what
they report (matched terms, gate coverage); when nothing but names and stopwords would be
left, the query is used as written.
"""

from __future__ import annotations

from collections.abc import Collection

from retold.retrieve.query_terms import word_key
from retold.retrieve.stopwords import STOPWORDS

__all__ = ["without_mentions"]


def without_mentions(query: str, aliases: Collection[str], max_alias_tokens: int) -> str:
    """``query`` with every whole-word mention of ``aliases`` (normalised alias forms) removed.

    Longest match first, possessives included ("Nate's" is a mention of "nate"). Returns the
    query unchanged when no alias is mentioned or when no content word would remain.
    """
    if not aliases:
        return query
    raw = query.split()
    keys = [word_key(token) for token in raw]
    keep = [True] * len(raw)
    i = 0
    while i < len(raw):
        for n in range(min(max_alias_tokens, len(raw) - i), 0, -1):
            if keys[i] and " ".join(keys[i : i + n]) in aliases:
                keep[i : i + n] = [False] * n
                i += n
                break
        else:
            i += 1
    if all(keep):
        return query
    remaining = [(token, key) for token, key, kept in zip(raw, keys, keep, strict=True) if kept]
    if not any(key and key not in STOPWORDS for _, key in remaining):
        return query
    return " ".join(token for token, _ in remaining)
