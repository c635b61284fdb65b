"""A long record's dense score is its best passage's when that beats its own vector's.

The passages (retold.index.passages) are embedded when the record is written; a search asks
the dense service for the best passage cosines of the records it already has in hand (the
three channels' candidates, then the context pass's) and lifts their cosines here, before
fusion, so the dense ranking, the gate, the search log and every replay see one dense score
per record.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

__all__ = ["lift", "ranked"]


def lift(pairs: Iterable[tuple[str, float]], best: Mapping[str, float]) -> list[tuple[str, float]]:
    """``(record_id, cosine)`` with each cosine raised to the record's best passage's, order kept."""
    return [(rid, max(cos, best.get(rid, cos))) for rid, cos in pairs]


def ranked(
    pairs: Sequence[tuple[str, float]], best: Mapping[str, float], k: int, admit: Iterable[str] = ()
) -> list[tuple[str, float]]:
    """A dense list re-ranked on lifted cosines: the list's records, plus the ``admit`` records
    (candidates of the other channels, which the list lacked) that have passages, best first
    (ties keep the list's order), the first ``k``."""
    lifted = lift(pairs, best)
    present = {rid for rid, _ in lifted}
    lifted += [(rid, best[rid]) for rid in dict.fromkeys(admit) if rid in best and rid not in present]
    order = sorted(range(len(lifted)), key=lambda i: (-lifted[i][1], i))
    return [lifted[i] for i in order[:k]]
