"""Duplicate collapse (spec §10.6): near-identical memories reach the agent once.

Walks survivors in ranked order and drops one whose vector is within ``dedup_cosine`` of a
record already kept. Cosines come from ``VectorIndex.cosine``, which compares two rows
under the index lock without copying the matrix.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from retold.models import Candidate

__all__ = ["collapse_duplicates"]


def collapse_duplicates(
    candidates: Sequence[Candidate], cosine: Callable[[str, str], float], threshold: float
) -> tuple[list[Candidate], list[tuple[str, str, float]]]:
    """Return the kept candidates and ``(dropped_id, kept_id, cosine)`` for the rest."""
    kept: list[Candidate] = []
    dropped: list[tuple[str, str, float]] = []
    for candidate in candidates:
        duplicate_of = None
        for accepted in kept:
            try:
                similarity = cosine(candidate.record_id, accepted.record_id)
            except KeyError:  # no vector for one of them: cannot be a near-duplicate by embedding
                continue
            if similarity >= threshold:
                duplicate_of = (accepted.record_id, similarity)
                break
        if duplicate_of is None:
            kept.append(candidate)
        else:
            dropped.append((candidate.record_id, duplicate_of[0], round(duplicate_of[1], 4)))
    return kept, dropped
