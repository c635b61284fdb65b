"""The lexical candidate generator (spec §10.2): exact terms, identifiers and phrases over FTS5.

Dense retrieval is weak on identifiers (``ERR42``, ``bge-m3``, ``deploy.yml``) and exact
wording; this generator catches them. Query text becomes :class:`QueryTerm` s, the union of
every query's terms becomes one FTS5 ``OR`` expression run against the eligible records
only, and each hit is then re-checked in Python so the relevance gate (§10.5) sees exactly
which terms of which query it matched.

How query text becomes terms is :mod:`retold.retrieve.query_terms`; what the searcher's word
counts make of them (searched or not, common, rare, chat or date words) is
:mod:`retold.retrieve.word_counts`.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from retold.models import LexicalMatch, Scope
from retold.retrieve.query_terms import (
    VARIANT_SCAN_MAX,
    QueryTerm,
    fts_query,
    fts_tokens,
    query_terms,
    stem_of,
    with_variants,
)
from retold.retrieve.word_counts import (
    chat_words,
    common_words,
    date_words,
    rare_words,
    scan_limit,
    selective_terms,
)

if TYPE_CHECKING:
    from retold.store import Store

__all__ = ["LexicalHit", "lexical_search", "term_coverage"]

# ---------------------------------------------------------------------------------------------
# Coverage and search
# ---------------------------------------------------------------------------------------------


def _contains(field: Sequence[str], phrase: tuple[str, ...]) -> bool:
    n = len(phrase)
    return any(tuple(field[i : i + n]) == phrase for i in range(len(field) - n + 1))


def term_coverage(
    terms: Sequence[QueryTerm], fields: Sequence[str], *, tokenized: Sequence[tuple[str, ...]] | None = None
) -> list[QueryTerm]:
    """The terms that occur in any of ``fields``; a phrase must be contiguous within one field.

    A record that says "follow the plan ... up" contains both tokens of ``follow-up`` but not
    the phrase, so it does not cover the term. ``tokenized`` lets a caller that checks several
    queries against one record tokenise its fields once.
    """
    if tokenized is None:
        tokenized = [fts_tokens(f) for f in fields if f]
    every = {t for field in tokenized for t in field}
    matched = []
    for term in terms:
        if len(term.tokens) == 1:
            hit = term.tokens[0] in every or any(v in every for v in term.variants)
        else:
            hit = any(_contains(field, term.tokens) for field in tokenized)
        if hit:
            matched.append(term)
    return matched


@dataclass(frozen=True)
class LexicalHit:
    """One lexical candidate.

    ``bm25`` is SQLite's ``bm25()`` negated, so higher is better (SQLite orders lower first);
    ``match`` carries the winning query's matched terms and term count for the gate.
    """

    record_id: str
    rank: int  # 1-based, in bm25 order
    bm25: float
    match: LexicalMatch


def _best_match(
    per_query: Sequence[Sequence[QueryTerm]],
    fields: Sequence[str],
    common: Collection[tuple[str, ...]] = frozenset(),
    rare: Collection[tuple[str, ...]] = frozenset(),
    unmatched: Collection[tuple[str, ...]] | None = None,
) -> LexicalMatch | None:
    """The query whose terms this record covers best, as the gate counts them (common words
    aside; ``unmatched``, common words and chat words, worked out once per search, are never
    counted as matched): highest fraction, then most terms, then first."""
    if unmatched is None:
        unmatched = common
    best: tuple[float, int, float, int] | None = None
    answer: LexicalMatch | None = None
    tokenized = [fts_tokens(f) for f in fields if f]
    for terms in per_query:
        if not terms:
            continue
        matched = term_coverage(terms, fields, tokenized=tokenized)
        if not matched:
            continue
        match = LexicalMatch(
            tuple(t.as_lexical_term(t.tokens in unmatched, t.tokens in rare) for t in matched),
            len(terms),
            sum(1 for t in terms if t.tokens in common),
        )
        counted, total = match.counted
        key = (counted / total if total else 0.0, counted, len(matched) / len(terms), len(matched))
        if best is None or key > best:
            best = key
            answer = match
    return answer


async def lexical_search(
    store: Store,
    queries: list[str],
    eligible: set[str],
    k: int,
    *,
    entity_aliases: Collection[str] = frozenset(),
    scopes: Sequence[Scope] | None = None,
    common_term_min_records: int | None = None,
    common_term_share: float | None = None,
    common_term_scan_records: int | None = None,
    common_word_share: float = 1.0,
    common_word_min_records: int = 0,
    rare_word_records: int = 0,
    rare_word_min_records: int = 0,
    chat: bool = False,
    dated: Sequence[str] = (),
    unselective: Collection[str] = frozenset(),
) -> list[LexicalHit]:
    """Up to ``k`` eligible records matching any query's terms, best BM25 first (spec §10.2).

    One FTS5 query covers the union of all queries' terms; the eligibility join happens
    before the limit, so ineligible rows can never crowd eligible ones out. Hits whose
    fields contain no complete term of any query (FTS matched part of a phrase only in a
    way Python's contiguity check rejects) are dropped and ranks renumbered.

    ``scopes`` are the searcher's readable scopes (default: those of the eligible records).
    Everything the channel derives from the index — inflections, term counts, BM25's
    document frequencies and average length — comes from those scopes' rows alone
    (``Store.lexical_index``), so another tenant's words cannot change this search.
    ``common_term_*`` are the retrieval config's pruning keys (default: the module's); a query
    left with common words alone scores only the newest of their matches (:func:`scan_limit`).
    ``unselective`` are aliases of names that cannot tell records apart (query_focus): their
    words stay out of the full-text query, as common words do, unless nothing else is left.
    ``common_word_*``, ``rare_word_*`` and ``chat`` are the gate's (:func:`common_words`,
    :func:`rare_words`, :func:`chat_words`); the defaults flag nothing. ``dated`` are the
    texts of the dates the queries name (retold.retrieve.time_window): their words are the
    time windows' evidence, so the gate counts them as it counts common words, not at all.
    """
    if not eligible or k <= 0:
        return []
    per_query = [query_terms(q, entity_aliases) for q in queries]
    if not any(per_query):
        return []
    if scopes is None:
        scopes = await store.scopes_of(eligible)
    common: set[tuple[str, ...]] = set()
    rare: set[tuple[str, ...]] = set()
    chatter: set[tuple[str, ...]] = set()
    scan: int | None = None
    async with store.lexical_index(scopes) as index:
        plain = [t for terms in per_query for t in terms if t.stemmable]
        if plain:  # one vocabulary read: inflections to add, then which words are worth searching
            stems = {root for t in plain if (root := stem_of(t)) is not None}
            stats = await store.term_statistics(
                [t.tokens[0] for t in plain], sorted(stems), index=index, limit=VARIANT_SCAN_MAX
            )
            per_query = with_variants(per_query, stats.variants)
            counts = dict(stats.counts)
            for indexed in stats.variants.values():
                counts.update(indexed)  # (term, records) pairs: the inflections' own counts
            every = [t for q in per_query for t in q]
            common = common_words(
                every,
                stats.total,
                counts,
                share=common_word_share,
                min_records=common_word_min_records,
                average_tokens=stats.average_tokens,
            )
            rare = rare_words(
                every, stats.total, counts, max_records=rare_word_records, min_records=rare_word_min_records
            )
            if chat:
                chatter = chat_words(every)
            terms = selective_terms(
                every,
                stats.total,
                counts,
                min_records=common_term_min_records,
                share=common_term_share,
            )
        else:
            terms = [t for q in per_query for t in q]
        common |= date_words((t for q in per_query for t in q), dated)  # "06/16/2023" has no plain word
        if unselective:
            names = {word for alias in unselective for word in alias.split()}
            terms = [t for t in terms if not (t.stemmable and t.value in names)] or terms
        if plain:
            scan = scan_limit(
                terms,
                stats.total,
                counts,
                min_records=common_term_min_records,
                share=common_term_share,
                scan_records=common_term_scan_records,
            )
        match = fts_query(terms)
        if not match:
            return []
        rows = await store.fts_search(match, eligible, k, index=index, scan_limit=scan)
    hits: list[LexicalHit] = []
    unmatched = common | chatter  # chat words stay among the query's terms, never matched
    for record_id, score, content, subject, aliases in rows:
        found = _best_match(per_query, (content, subject, aliases), common, rare, unmatched)
        if found is not None:
            hits.append(LexicalHit(record_id, len(hits) + 1, score, found))
    return hits
