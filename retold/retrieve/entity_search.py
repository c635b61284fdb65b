"""The entity candidate generator (spec §10.2, entity paragraph): records about named subjects.

A query that names a known person, project or repo ("what does Aditya's team use?") should
find records linked to that entity even when their wording shares nothing with the query,
including records whose content says "he" and carries the name only through the link. The
query is scanned for every n-gram that could be an alias, all of them are resolved in one
batched store call, and the linked records come back ``about`` links first.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from retold.models import Principal, Scope
from retold.retrieve.query_terms import is_proper_noun, query_words
from retold.retrieve.stopwords import STOPWORDS
from retold.util import normalize_alias

if TYPE_CHECKING:
    from retold.store import Store

__all__ = [
    "EntityHit",
    "QueryEntities",
    "alias_candidates",
    "broad_entities",
    "entity_search",
    "resolve_query_aliases",
    "selective_aliases",
    "without_entities",
]


def alias_candidates(queries: Iterable[str], hints: Iterable[str] | None, max_alias_tokens: int) -> list[str]:
    """Every normalised n-gram (1..``max_alias_tokens`` words) of the queries, plus each hint whole.

    Apostrophes are folded and possessives and contractions removed first, so "Aditya's"
    offers "aditya". Lower-case stopword unigrams ("what", "do") are left out; a capitalised
    one inside a sentence stays, so "where does Will work" still offers "will". The list
    is bounded by words × ``max_alias_tokens`` plus the hints, in first-seen order.
    """
    seen: dict[str, None] = {}
    n_max = max(1, max_alias_tokens)
    for query in queries:
        words = query_words(query)
        normalized = [normalize_alias(w.text) for w in words]
        for i, word in enumerate(words):
            for n in range(1, min(n_max, len(words) - i) + 1):
                gram = " ".join(normalized[i : i + n])
                if not gram:
                    continue
                if n == 1 and gram in STOPWORDS and not is_proper_noun(word):
                    continue
                seen.setdefault(gram, None)
    for hint in hints or ():
        gram = normalize_alias(hint)
        if gram:
            seen.setdefault(gram, None)
    return list(seen)


async def resolve_query_aliases(
    store: Store, candidates: Iterable[str], scopes: Iterable[Scope]
) -> dict[str, list[str]]:
    """alias → surviving live entity ids in ``scopes``, for the candidates that name one.

    One store call resolves every candidate (spec §17.4: "entity alias lookup batches all
    query n-grams into one store call"); merges are followed to their survivor, and both the
    aliased entity and its survivor must sit in a readable scope.
    """
    wanted = list(dict.fromkeys(c for c in candidates if c))
    scope_list = list(dict.fromkeys(scopes))
    if not wanted or not scope_list:
        return {}
    return await store.resolve_aliases(wanted, scope_list)


def without_entities(alias_matches: dict[str, list[str]], dropped: Iterable[str]) -> dict[str, list[str]]:
    """The matches minus ``dropped`` entity ids; aliases left with no entity disappear.

    The searcher's own person entity is dropped: every personal record is about the user,
    so naming them ("what is Aditya's favourite club?") selects nothing, and as an
    entity hit it would pass the gate for every record in their scope, making an
    honest empty answer impossible for any query that mentions them.
    """
    drop = set(dropped)
    if not drop:
        return alias_matches
    kept = {alias: [e for e in ids if e not in drop] for alias, ids in alias_matches.items()}
    return {alias: ids for alias, ids in kept.items() if ids}


def broad_entities(counts: dict[str, int], eligible: int, k: int, max_share: float) -> set[str]:
    """Entities linked to too many eligible records to select anything.

    An entity with at most ``k`` eligible records hands fusion all of them, so it always
    selects. Above that, one linked to more than ``max_share`` of the eligible records (a
    conversation partner in every other turn) would hand fusion ``k`` arbitrary records,
    newest first, each exempt from the gate: the query's other words must choose instead.
    """
    bar = max(k, max_share * eligible)
    return {entity_id for entity_id, count in counts.items() if count > bar}


@dataclass(frozen=True)
class QueryEntities:
    """What the query's names resolved to, for the channels that read them."""

    selective: dict[str, list[str]]  # alias -> entity ids that select records (the entity channel)
    broad: set[str]  # entity ids named but linked to too many eligible records to select
    unselective: frozenset[str] = frozenset()  # aliases naming only the searcher or broad entities
    named: frozenset[str] = frozenset()  # every entity id the query names, but the searcher's own
    own: frozenset[str] = frozenset()  # the searcher's own person entities


async def selective_aliases(
    store: Store,
    candidates: Iterable[str],
    principal: Principal,
    scopes: Iterable[Scope],
    eligible: Collection[str],
    *,
    k: int,
    max_share: float,
) -> QueryEntities:
    """The query's aliases that select records, the named entities too broad to, and the
    aliases that name nothing else (:mod:`retold.retrieve.query_focus` leaves those out).

    The searcher's own person entity never selects (every personal record is about them);
    others are dropped by :func:`broad_entities`. Dropped aliases stay plain query words.
    """
    scope_list = list(scopes)
    resolved = await resolve_query_aliases(store, candidates, scope_list)
    if not resolved:
        return QueryEntities({}, set())
    user = principal.user_scope
    named_user = await store.entities_by_alias(normalize_alias(user.id), scopes=[user], kinds=["person"])
    own = {e.id for e in named_user}
    aliases = without_entities(resolved, own)
    broad: set[str] = set()
    if aliases:
        counts = await store.entity_link_counts({e for ids in aliases.values() for e in ids}, eligible)
        broad = broad_entities(counts, len(eligible), k, max_share)
    dropped = own | broad
    unselective = frozenset(a for a, ids in resolved.items() if ids and all(e in dropped for e in ids))
    named = frozenset(e for ids in aliases.values() for e in ids)
    return QueryEntities(without_entities(aliases, broad), broad, unselective, named, frozenset(own))


@dataclass(frozen=True)
class EntityHit:
    """One entity candidate: the record, its 1-based rank, and the matched entity it links to."""

    record_id: str
    rank: int
    entity_id: str
    role: str = "about"  # the link's role: 'about' or 'mentions'


async def entity_search(
    store: Store, alias_matches: dict[str, list[str]], eligible: set[str], k: int
) -> list[EntityHit]:
    """Up to ``k`` eligible records linked to any matched entity: ``about`` links first, newest first.

    Both the entity ids and the eligible set enter temporary tables and the limit applies
    after the join, so ineligible records cannot take the slots. A record linked to several
    matched entities appears once, under its ``about`` entity when it has one.
    """
    entity_ids = list(dict.fromkeys(e for ids in alias_matches.values() for e in ids))
    if not entity_ids or not eligible or k <= 0:
        return []
    rows = await store.records_for_entities(entity_ids, eligible, k)
    return [
        EntityHit(record_id, rank, entity_id, role)
        for rank, (record_id, entity_id, role) in enumerate(rows, start=1)
    ]
