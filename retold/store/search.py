"""SQL for the lexical and entity candidate generators (spec §10.2): FTS5 and alias lookups.

Every method joins the caller's eligible set through a temporary table (``Database.temp_ids``)
and applies its limit after that join: an ``IN (?, ...)`` list would run out of bound
parameters on a large store, and a limit applied before the join would let ineligible
rows take the slots. The FTS5 index the queries read, and its caches, are
:mod:`retold.store.lexical_index`'s.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable, Sequence
from contextlib import asynccontextmanager
from typing import Any

from retold.models import Scope
from retold.store.eligible import EligibleSet
from retold.store.lexical_index import LexicalIndex, LexicalIndexMixin, TermStatistics

__all__ = ["LexicalIndex", "SearchMixin", "TermStatistics"]

# BM25 column weights in records_fts column order: record_id (unindexed), content, subject, aliases.
_WEIGHTS = "0.0, 1.0, 2.0, 3.0"


class SearchMixin(LexicalIndexMixin):
    async def scopes_of(self, record_ids: Iterable[str]) -> list[Scope]:
        """The scopes the given records live in (for a caller that has ids but not the scopes)."""
        if isinstance(record_ids, EligibleSet) and record_ids.where is not None:
            rows = await self.db.fetchall(
                f"SELECT DISTINCT r.scope_kind, r.scope_id FROM records r WHERE {record_ids.where}",
                record_ids.params,
            )
        else:
            async with self.db.temp_ids(record_ids) as table:
                rows = await self.db.fetchall(
                    f"SELECT DISTINCT r.scope_kind, r.scope_id FROM records r JOIN {table} t ON t.id = r.id"
                )
        return [Scope(r[0], r[1]) for r in rows]

    # --- FTS5 --------------------------------------------------------------------------------------

    async def fts_search(
        self,
        match: str,
        eligible: Iterable[str],
        k: int,
        *,
        index: LexicalIndex | None = None,
        scan_limit: int | None = None,
    ) -> list[tuple[str, float, str, str, str]]:
        """(record_id, score, content, subject, aliases) of the best ``k`` eligible FTS matches.

        ``match`` is an FTS5 expression built by ``retrieve.query_terms.fts_query`` and is bound
        as a parameter. ``score`` is ``-bm25(...)`` with weights 1 content, 2 subject,
        3 aliases, so higher is better; rows come best first, ties by record id. ``index``
        comes from :meth:`lexical_index`; without one the store's whole ``records_fts`` is
        searched, and its statistics cover every scope. ``scan_limit``: score only that many
        matches, the newest indexed first (``retrieve.word_counts.scan_limit``; a query of common
        words alone), so the cost stops growing with the store.
        """
        if not match or k <= 0:
            return []
        name, schema = ("records_fts", "main") if index is None else (index.name, index.schema)
        # FTS5 walks a word's matches in rowid order, so the newest come first without a sort.
        bounded = scan_limit is not None and scan_limit > 0
        newest, bound = ("ORDER BY rowid DESC LIMIT ?", (scan_limit,)) if bounded else ("", ())
        # FTS5 reads a row's stored columns together, and a sort on one of them would carry every
        # match's row; for a word in most records that costs more than scoring them. So FTS5
        # only scores (bm25 once, named), and the columns come from its content table by rowid.
        query = f"""SELECT c.c0, -f.score, c.c1, c.c2, c.c3
                      FROM (SELECT rowid, bm25({name}, {_WEIGHTS}) AS score
                              FROM {schema}.{name} WHERE {name} MATCH ? {newest}) f
                      JOIN {schema}.{name}_content c ON c.id = f.rowid {{join}}
                     ORDER BY f.score, c.c0
                     LIMIT ?"""
        column = "c.c0"
        if isinstance(eligible, EligibleSet) and eligible.join_clause(column) is not None:
            # A large eligible set usually admits most matches: read the best matches from FTS5
            # alone (no per-row join) and keep the eligible ones. The order (score, id) is
            # total, so when the probe holds k eligible rows, or every match, this is exactly
            # the join's answer; otherwise the join below runs and eligibility still applies
            # before the limit.
            probe = max(4 * k, 64)
            rows = await self.db.fetchall(query.format(join=""), (match, *bound, probe))
            kept = [r for r in rows if r[0] in eligible]
            if len(kept) >= k or len(rows) < probe:
                return [(r[0], float(r[1]), r[2] or "", r[3] or "", r[4] or "") for r in kept[:k]]
        async with self._eligible_records(eligible, column) as (join, params):
            rows = await self.db.fetchall(query.format(join=join), (match, *bound, *params, k))
        return [(r[0], float(r[1]), r[2] or "", r[3] or "", r[4] or "") for r in rows]

    async def term_statistics(
        self, tokens: Sequence[str], stems: Sequence[str] = (), *, index: LexicalIndex, limit: int = 256
    ) -> TermStatistics:
        """What the lexical channel asks of ``index``'s vocabulary (see :meth:`lexical_index`).

        ``counts``: records containing each token (a term in most records is not worth an OR
        query). ``variants``: for each stem, the indexed terms starting with it and their
        counts, at most ``limit`` per stem in term order; the lexical channel keeps those that
        share the stem, so it matches inflections ("painted" for "paint") while the index
        keeps the spec's unstemmed ``unicode61`` tokens. Counting walks posting lists, so the
        answers are kept on the index entry, which lives only as long as the store state it
        was read from. The vocabulary is a per-connection ``temp`` fts5vocab over the index.
        """
        cache = index.vocabulary
        if len(cache.counts) + len(cache.variants) > 20_000:  # a long read-only run sees endless words
            cache.counts.clear()
            cache.variants.clear()
        missing_stems = [s for s in dict.fromkeys(stems) if s not in cache.variants]
        if missing_stems or any(t not in cache.counts for t in tokens):
            await self.db.execute(
                f"CREATE VIRTUAL TABLE IF NOT EXISTS {index.vocab} "
                f"USING fts5vocab({index.schema}, {index.name}, row)"
            )
        for start in range(0, len(missing_stems), 100):  # one statement per 100 stems
            chunk = missing_stems[start : start + 100]
            ranges = " UNION ALL ".join(
                f"SELECT {i} AS n, * FROM (SELECT term, doc FROM {index.vocab} "
                "WHERE term >= ? AND term < ? LIMIT ?)"
                for i in range(len(chunk))
            )
            params = [p for stem in chunk for p in (stem, stem + "\U0010ffff", limit)]
            cache.limit = max(cache.limit, limit)
            for stem in chunk:
                cache.variants[stem] = []
            for n, term, doc in await self.db.fetchall(ranges, params):
                cache.variants[chunk[n]].append((term, int(doc)))
                cache.counts[term] = int(doc)
        missing = [t for t in dict.fromkeys(tokens) if t not in cache.counts]
        if missing:
            marks = ", ".join("?" for _ in missing)
            rows = await self.db.fetchall(
                f"SELECT term, doc FROM {index.vocab} WHERE term IN ({marks})", missing
            )
            found = {r[0]: int(r[1]) for r in rows}
            for term in missing:
                cache.counts[term] = found.get(term, 0)
        return TermStatistics(
            index.rows,
            {t: cache.counts.get(t, 0) for t in tokens},
            {s: cache.variants.get(s, []) for s in stems},
            index.tokens,
        )

    # --- aliases and entities ---------------------------------------------------------------------

    async def resolve_aliases(self, aliases: Sequence[str], scopes: Sequence[Scope]) -> dict[str, list[str]]:
        """Map each normalised alias to the live entities in ``scopes`` that own it, in one query.

        Merges are followed to the survivor (a recursive step per hop), and both the aliased
        entity and its survivor must be in ``scopes`` with status provisional or confirmed.
        An alias stored with a typographic apostrophe (’) also matches a folded ``'``
        candidate. Aliases without a match are absent; ids are sorted per alias.
        """
        if not aliases or not scopes:
            return {}
        readable = {(s.kind, s.id) for s in scopes}
        async with self.db.temp_ids(aliases) as table:
            rows = await self.db.fetchall(
                f"""WITH RECURSIVE
                    hop(alias, start_kind, start_id, alias_kind, alias_id, entity_id, depth) AS (
                        SELECT t.id, e.scope_kind, e.scope_id, a.scope_kind, a.scope_id, e.id, 0
                          FROM {table} t
                          JOIN entity_aliases a ON a.alias_norm IN (t.id, replace(t.id, '''', ?))
                          JOIN entities e ON e.id = a.entity_id
                        UNION
                        SELECT h.alias, h.start_kind, h.start_id, h.alias_kind, h.alias_id, e.merged_into,
                               h.depth + 1
                          FROM hop h JOIN entities e ON e.id = h.entity_id
                         WHERE e.status = 'merged' AND e.merged_into IS NOT NULL AND h.depth < 32
                    )
                    SELECT DISTINCT h.alias, h.start_kind, h.start_id, h.alias_kind, h.alias_id,
                                    e.id, e.scope_kind, e.scope_id
                      FROM hop h JOIN entities e ON e.id = h.entity_id
                     WHERE e.status IN ('provisional', 'confirmed')
                     ORDER BY h.alias, e.id""",
                ("\u2019",),
            )
        order = {alias: i for i, alias in enumerate(aliases)}
        found: dict[str, list[str]] = {}
        for alias, start_kind, start_id, alias_kind, alias_id, entity_id, kind, scope_id in rows:
            # The alias row carries a scope too: a name given where the caller cannot read
            # (a user's private nickname) does not resolve for them.
            if all(s in readable for s in ((start_kind, start_id), (alias_kind, alias_id), (kind, scope_id))):
                ids = found.setdefault(alias, [])
                if entity_id not in ids:
                    ids.append(entity_id)
        return dict(sorted(found.items(), key=lambda item: order.get(item[0], len(order))))

    async def entity_link_counts(self, entity_ids: Iterable[str], eligible: Iterable[str]) -> dict[str, int]:
        """How many eligible records link to each entity; entities with none are absent."""
        query = """SELECT l.entity_id, count(DISTINCT l.record_id) FROM {wanted} w
                     CROSS JOIN record_entities l ON l.entity_id = w.id {join}
                    GROUP BY l.entity_id"""
        restricted = self._eligible_records(eligible, "l.record_id")
        async with self.db.temp_ids(entity_ids) as wanted, restricted as (join, params):
            rows = await self.db.fetchall(query.format(wanted=wanted, join=join), params)
        return {r[0]: r[1] for r in rows}

    @asynccontextmanager
    async def _eligible_records(
        self, eligible: Iterable[str], column: str
    ) -> AsyncIterator[tuple[str, tuple[Any, ...]]]:
        """``JOIN records r`` on ``column`` restricted to the eligible ids, and its parameters.

        A large :class:`EligibleSet` joins by the predicate that selected it; a small or
        plain set goes through a temporary table. Either way the join comes before any LIMIT.
        """
        by_predicate = eligible.join_clause(column) if isinstance(eligible, EligibleSet) else None
        if by_predicate is not None:
            yield by_predicate
            return
        async with self.db.temp_ids(eligible) as allowed:
            yield f"JOIN {allowed} a ON a.id = {column} JOIN records r ON r.id = {column}", ()

    async def records_for_entities(
        self, entity_ids: Iterable[str], eligible: Iterable[str], k: int
    ) -> list[tuple[str, str, str]]:
        """(record_id, entity_id, role) for up to ``k`` eligible records linked to the entities.

        One row per record, under its best link (``about`` before ``mentions``, then entity
        id); records with an ``about`` link come first, then the most recent by event time.
        The CROSS JOIN makes SQLite start from the few matched entities and use
        ``record_entities_by_entity`` instead of scanning every link.
        """
        if k <= 0:
            return []
        query = """SELECT record_id, entity_id, role FROM (
                        SELECT l.record_id, l.entity_id, l.role, r.event_at, r.created_at,
                               row_number() OVER (PARTITION BY l.record_id
                                                  ORDER BY l.role = 'mentions', l.entity_id) AS pick
                          FROM {wanted} w
                          CROSS JOIN record_entities l ON l.entity_id = w.id
                          {join})
                     WHERE pick = 1
                     ORDER BY role = 'mentions', event_at DESC, created_at DESC, record_id DESC
                     LIMIT ?"""
        restricted = self._eligible_records(eligible, "l.record_id")
        async with self.db.temp_ids(entity_ids) as wanted, restricted as (join, params):
            rows = await self.db.fetchall(query.format(wanted=wanted, join=join), (*params, k))
        return [(r[0], r[1], r[2]) for r in rows]
