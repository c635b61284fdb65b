"""Passages of a long record: the pieces its dense score can come from (spec §7, issue 18).

One vector for a long, many-topic record averages its topics away: a question about one
sentence of a 900-character message scores a cosine far under the floors calibrated on short
turns. A record longer than ``embedding.passage_chars`` is therefore also embedded in
passages of whole sentences, packed up to that length, and its dense score in a search is
the best of its own vector's and its passages' (retold.retrieve.retriever). The passages are
derived from the content alone, so they are recomputed, never stored as text.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence

import numpy as np

__all__ = ["best_passage_cosines", "split_passages"]

_SENTENCE_END = re.compile(r"(?<=[.!?…])[\"'”’)\]]*\s+|\s*\n\s*")


def _sentences(text: str) -> list[str]:
    return [s.strip() for s in _SENTENCE_END.split(text) if s and s.strip()]


def _pack(pieces: Iterable[str], max_chars: int) -> list[str]:
    """Pieces of at most ``max_chars`` joined by spaces, in order, greedily into runs of at most
    ``max_chars``."""
    packed: list[str] = []
    current = ""
    for piece in pieces:
        if current and len(current) + 1 + len(piece) > max_chars:
            packed.append(current)
            current = piece
        else:
            current = f"{current} {piece}" if current else piece
    if current:
        packed.append(current)
    return packed


def _words(sentence: str, max_chars: int) -> list[str]:
    """A sentence longer than ``max_chars`` in pieces cut between words (a word longer than
    that on its own is cut where it must be)."""
    cut = (word[i : i + max_chars] for word in sentence.split() for i in range(0, len(word), max_chars))
    return _pack(cut, max_chars)


def _merge_short(passages: list[str], min_chars: int) -> list[str]:
    """Each passage shorter than ``min_chars`` joined to its shorter neighbour, shortest first.

    A greeting or a sign-off left alone at the end of a packing ("Thanks, Mel!", "Any plans?")
    would score the whole record against every chat turn that says the same; joined to its
    neighbour it is scored in context. A passage may so grow past the packing limit by at most
    one short piece from each side.
    """
    out = list(passages)
    while len(out) > 1:
        i = min(range(len(out)), key=lambda j: len(out[j]))
        if len(out[i]) >= min_chars:
            break
        if i == 0 or (i < len(out) - 1 and len(out[i + 1]) < len(out[i - 1])):
            out[i : i + 2] = [f"{out[i]} {out[i + 1]}"]
        else:
            out[i - 1 : i + 1] = [f"{out[i - 1]} {out[i]}"]
    return out


def split_passages(text: str, max_chars: int) -> list[str]:
    """Whole sentences packed in order into passages of at most ``max_chars`` characters, a
    piece under a third of that then joined to its neighbour (so at most ``max_chars`` plus
    two such pieces).

    Empty when the text fits in one passage (its own vector already is that passage) or when
    ``max_chars`` is 0 (passages off); otherwise at least two passages.
    """
    text = text.strip()
    if max_chars <= 0 or len(text) <= max_chars:
        return []
    pieces = (p for s in _sentences(text) for p in ([s] if len(s) <= max_chars else _words(s, max_chars)))
    passages = _merge_short(_pack(pieces, max_chars), max_chars // 3)
    return passages if len(passages) > 1 else []


def best_passage_cosines(
    blobs: Mapping[str, Sequence[bytes]], qvecs: np.ndarray, dims: int
) -> dict[str, float]:
    """Each record's best cosine over its passages and the queries (L2-normalised vectors),
    rounded as the vector index rounds."""
    best: dict[str, float] = {}
    queries = np.asarray(qvecs, dtype=np.float32).reshape(-1, dims)
    for record_id, rows in blobs.items():
        if not rows:
            continue
        matrix = np.frombuffer(b"".join(rows), dtype=np.float32).reshape(len(rows), dims)
        best[record_id] = round(float((matrix @ queries.T).max()), 6) + 0.0
    return best
