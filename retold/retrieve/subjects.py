"""Records about someone else: a query that names its subject prefers records about it.

"What exercises has John done?" asked of a store where John and Maria talk: John's name is in
every other record, too broad to select (``entity_max_share``), so query focus leaves it out
and the channels rank Maria's "Wow, John, glad you liked the class!" beside John's own
account. Yet each record says whom it is ``about``. A record about an entity of the same kind
as one the query names (a person for a person), but about none of the query's entities nor
the searcher, is about someone else: in fusion what similarity gave it (the dense channel,
the context pass, the neighbours) counts ``retrieval.subject_weight`` times, so it ranks after
the records about the named subject unless it matches far better; the words it shares with
the query still count in full ("the hand-painted bowl" names the thing, whoever spoke of it).
Records about nobody, or only about things of another kind ("other" is no kind), are never
weighed down.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence

__all__ = ["about_someone_else"]

NO_KIND = "other"  # an entity of kind "other" is no evidence of being about someone else


def about_someone_else(
    about: Mapping[str, Sequence[tuple[str, str]]],
    named: Mapping[str, str],
    own: Collection[str],
) -> set[str]:
    """The records of ``about`` (record id -> its (entity id, kind) ``about`` links) that are
    about someone else than the query's ``named`` entities (entity id -> kind) and the searcher
    (``own`` entity ids): an ``about`` link of a named kind, and none to a named or own entity."""
    kinds = {kind for kind in named.values() if kind != NO_KIND}
    if not kinds:
        return set()
    subjects = set(named) | set(own)
    return {
        record_id
        for record_id, links in about.items()
        if links
        and subjects.isdisjoint(entity_id for entity_id, _ in links)
        and any(kind in kinds for _, kind in links)
    }
