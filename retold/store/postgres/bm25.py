"""FTS5's ``bm25()`` on PostgreSQL, over ``records_terms`` (see :mod:`retold.store.postgres.lexicon`).

The same formula as SQLite's FTS5 (k1, b, column weights, IDF floor) over the searcher's
readable scopes' statistics, so the lexical channel ranks identically on both backends;
what differs is how little of each posting list a search reads:

* one word: its postings grouped by weighted frequency, shortest records first;
* several words: exact MaxScore pruning, else every readable posting;
* phrases: the candidates holding every word, checked for contiguity in Python.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Sequence, Set
from typing import Any

from retold.models import Scope
from retold.store.lexical_index import LexicalIndex
from retold.store.postgres.lexicon import WEIGHTS, essential_terms
from retold.store.rows import scope_clause

__all__ = ["Bm25Mixin"]

# FTS5's bm25() constants; retold's column weights (content, subject, aliases) are lexicon's.
_K1 = 1.2
_B = 0.75
_WEIGHTS = tuple(float(w) for w in WEIGHTS)
# MaxScore's candidate budget: postings read to find the records that can reach the top k.
_CANDIDATE_POSTINGS = 5_000
_PHRASE = re.compile(r'"((?:[^"]|"")*)"')


def _phrases(match: str) -> list[tuple[str, ...]]:
    """The phrases of an expression built by ``retrieve.query_terms.fts_query`` (quoted, OR-joined)."""
    phrases: dict[tuple[str, ...], None] = {}
    for quoted in _PHRASE.findall(match):
        tokens = tuple(quoted.replace('""', '"').split())
        if tokens:
            phrases.setdefault(tokens, None)
    return list(phrases)


def _occurrences(tokens: Sequence[str], phrase: tuple[str, ...]) -> int:
    n = len(phrase)
    if n == 1:
        return sum(1 for t in tokens if t == phrase[0])
    return sum(1 for i in range(len(tokens) - n + 1) if tuple(tokens[i : i + n]) == phrase)


class Bm25Mixin:
    """The lexical channel's scoring for :class:`~retold.store.postgres.store.PgStore`."""

    db: Any

    async def fts_search(
        self,
        match: str,
        eligible: Iterable[str],
        k: int,
        *,
        index: LexicalIndex | None = None,
        scan_limit: int | None = None,
    ) -> list[tuple[str, float, str, str, str]]:
        """The best ``k`` eligible rows by FTS5's ``bm25()``, computed over the readable rows.

        ``scan_limit`` is SQLite's bound for a word in most records; here one word's postings
        are read best first by group, so the answer stays exact at no such cost.
        """
        phrases = _phrases(match) if match else []
        if not phrases or k <= 0:
            return []
        if index is None:
            async with self.lexical_index(await self._all_scopes()) as whole:
                index = whole
        total, length = index.rows, index.tokens
        if total == 0:
            return []
        if all(len(p) == 1 for p in phrases):
            return await self._bm25_words([p[0] for p in phrases], eligible, k, index)
        where, params = await self._scoped_terms(index)
        words = sorted({t for p in phrases for t in p})
        marks = ", ".join("?" for _ in words)
        # Every readable row holding any word: candidates, and what document frequencies need.
        rows = await self.db.fetchall(
            f"""SELECT f.record_id, f.content, f.subject, f.aliases, f.content_tokens, f.subject_tokens,
                       f.alias_tokens, f.ntokens
                  FROM records_fts f
                 WHERE f.rowid IN (SELECT DISTINCT v.fts_rowid FROM records_terms v {where}
                                     AND v.term IN ({marks}))""",
            (*params, *words),
        )
        frequencies: list[tuple[Any, list[list[int]]]] = []
        hits = [0] * len(phrases)
        for row in rows:
            columns = [row[4] or [], row[5] or [], row[6] or []]
            per_phrase = [[_occurrences(c, p) for c in columns] for p in phrases]
            if not any(any(f) for f in per_phrase):
                continue
            for i, f in enumerate(per_phrase):
                if any(f):
                    hits[i] += 1
            frequencies.append((row, per_phrase))
        idf = []
        for n in hits:
            value = math.log((total - n + 0.5) / (n + 0.5))
            idf.append(value if value > 0 else 1e-6)
        average = length / total if total else 1.0
        allowed = self._eligible_subset([row[0] for row, _ in frequencies], eligible)
        scored = []
        for row, per_phrase in frequencies:
            if row[0] not in allowed:
                continue
            size = row[7] or 0
            score = 0.0
            for i, f in enumerate(per_phrase):
                weighted = sum(w * n for w, n in zip(_WEIGHTS, f, strict=True))
                score += idf[i] * weighted * (_K1 + 1) / (weighted + _K1 * (1 - _B + _B * size / average))
            scored.append((row[0], score, row[1] or "", row[2] or "", row[3] or ""))
        scored.sort(key=lambda r: (-r[1], r[0]))
        return scored[:k]

    async def _bm25_words(
        self, words: list[str], eligible: Iterable[str], k: int, index: LexicalIndex
    ) -> list[tuple[str, float, str, str, str]]:
        """FTS5's bm25() for single-word phrases, summed in SQL over the words' posting lists.

        For a one-word phrase FTS5's phrase frequency in a column is the word's frequency
        there, so the whole score is a sum over ``records_terms`` rows; only the ``k`` best
        eligible rows come back. Document frequencies are the readable rows' (cached on
        ``index`` by :meth:`term_statistics`).
        """
        stats = await self.term_statistics(words, index=index)
        total, average = index.rows, index.tokens / index.rows
        idf = []
        for word in words:
            n = stats.counts.get(word, 0)
            value = math.log((total - n + 0.5) / (n + 0.5))
            idf.append(value if value > 0 else 1e-6)
        weighted = (
            f"(v.content_tf * {_WEIGHTS[0]} + v.subject_tf * {_WEIGHTS[1]} + v.alias_tf * {_WEIGHTS[2]})"
        )
        # A posting's share before its word's idf (the average length is the parameter).
        saturated = f"{weighted} * {_K1 + 1} / ({weighted} + {_K1} * (1 - {_B} + {_B} * v.ntokens / ?))"
        score = f"sum(q.idf * {saturated})"
        scope_sql, scope_params = scope_clause(index.scopes, "v.")
        wanted = eligible if isinstance(eligible, Set) else set(eligible)
        df = [stats.counts.get(w, 0) for w in words]
        essential, bound = essential_terms(words, idf, df, saturation=_K1 + 1, budget=_CANDIDATE_POSTINGS)
        if bound > 0:
            best = await self._maxscore(
                words, idf, essential, bound, score, scope_sql, scope_params, average, wanted, k
            )
            if best is not None:
                return await self._with_texts(best)
        if len(words) == 1:
            best = await self._bm25_one_word(words[0], idf[0], saturated, index.scopes, average, wanted, k)
            return await self._with_texts(best)
        # Every readable posting of every word (one covering index, no join).
        query = f"""SELECT v.record_id, {score} AS score
                      FROM unnest(?::text[], ?::float8[]) AS q(term, idf)
                      JOIN records_terms v ON v.term = q.term AND {scope_sql}
                     GROUP BY v.record_id
                     ORDER BY score DESC, v.record_id
                     LIMIT ?"""
        best = await self._best_eligible(query, (average, words, idf, *scope_params), wanted, k)
        return await self._with_texts(best)

    async def _bm25_one_word(
        self,
        word: str,
        idf: float,
        saturated: str,
        scopes: Sequence[Scope],
        average: float,
        wanted: Set[str],
        k: int,
    ) -> list[tuple[str, float]]:
        """One word's best records without scoring every record that holds it.

        Among the postings of one word, scope and weighted frequency, the score falls as
        the record grows, so the index ``(term, scope, weighted, ntokens, record_id)`` lists
        each group best first. Reading the first ``limit`` of every group is exact once every
        group cut short ends below the k-th best eligible record; otherwise read further.
        """
        if not scopes:
            return []
        pairs = ", ".join("(?::text, ?::text)" for _ in scopes)
        query = f"""SELECT c.record_id, c.score, c.level, s.kind, s.id
                      FROM (VALUES {pairs}) AS s(kind, id)
                      CROSS JOIN LATERAL generate_series(
                          1, (SELECT max(m.weighted) FROM records_terms m
                               WHERE m.term = ? AND m.scope_kind = s.kind AND m.scope_id = s.id)) AS w(level)
                      CROSS JOIN LATERAL (
                          SELECT v.record_id, ?::float8 * {saturated} AS score, w.level
                            FROM records_terms v
                           WHERE v.term = ? AND v.scope_kind = s.kind AND v.scope_id = s.id
                                 AND v.weighted = w.level
                           ORDER BY v.ntokens, v.record_id
                           LIMIT ?) AS c"""
        scope_params = [part for scope in scopes for part in (scope.kind, scope.id)]
        limit = max(4 * k, 32)
        while True:
            rows = await self.db.fetchall(query, (*scope_params, word, idf, average, word, limit))
            ranked = sorted(((r[0], float(r[1])) for r in rows), key=lambda hit: (-hit[1], hit[0]))
            best = [hit for hit in ranked if hit[0] in wanted][:k]
            groups: dict[tuple[Any, ...], list[tuple[str, float]]] = {}
            for r in rows:
                groups.setdefault((r[2], r[3], r[4]), []).append((r[0], float(r[1])))
            # The last-ranked row of each group that was cut short; unread rows rank below it.
            cut = [max(g, key=lambda hit: (-hit[1], hit[0])) for g in groups.values() if len(g) >= limit]
            if not cut:
                return best
            if len(best) == k and all((-last[1], last[0]) > (-best[-1][1], best[-1][0]) for last in cut):
                return best
            limit *= 8

    async def _maxscore(
        self,
        words: list[str],
        idf: list[float],
        essential: list[str],
        bound: float,
        score: str,
        scope_sql: str,
        scope_params: list[Any],
        average: float,
        wanted: Set[str],
        k: int,
    ) -> list[tuple[str, float]] | None:
        """The top ``k`` from the essential words' postings, or None when they cannot decide it.

        1. Score the records holding an essential word over those words only: a lower bound
           of each one's score (every other record scores below ``bound``).
        2. With the k-th best eligible lower bound as a threshold, only the candidates whose
           bound plus the other words' maxima reaches it can still be in the top k: their
           other words are added from their own postings (a handful of index probes).
        3. The k-th best full score must reach ``bound``, or a record holding none of the
           essential words might beat it: then the caller scans every posting instead.
        """
        rest = [(w, f) for w, f in zip(words, idf, strict=True) if w not in set(essential)]
        weights = dict(zip(words, idf, strict=True))
        partial_sql = f"""SELECT v.record_id, v.fts_rowid, {score} AS score
                            FROM unnest(?::text[], ?::float8[]) AS q(term, idf)
                            JOIN records_terms v ON v.term = q.term AND {scope_sql}
                           GROUP BY v.record_id, v.fts_rowid"""
        rows = await self.db.fetchall(
            partial_sql, (average, essential, [weights[w] for w in essential], *scope_params)
        )
        partial = {r[0]: (int(r[1]), float(r[2])) for r in rows if r[0] in wanted}
        if len(partial) < k:
            return None
        threshold = sorted((s for _, s in partial.values()), reverse=True)[k - 1]
        open_ids = [rid for rid, (_, s) in partial.items() if s + bound >= threshold]
        full = {rid: partial[rid][1] for rid in open_ids}
        if rest and open_ids:
            added = await self.db.fetchall(
                f"""SELECT v.record_id, {score} AS score
                      FROM unnest(?::text[], ?::float8[]) AS q(term, idf)
                      JOIN records_terms v ON v.term = q.term AND v.fts_rowid = ANY(?::bigint[])
                     GROUP BY v.record_id""",
                (average, [w for w, _ in rest], [f for _, f in rest], [partial[r][0] for r in open_ids]),
            )
            for rid, extra in added:
                full[rid] += float(extra)
        best = sorted(full.items(), key=lambda hit: (-hit[1], hit[0]))[:k]
        return best if best[-1][1] >= bound else None

    async def _best_eligible(
        self, query: str, params: tuple[Any, ...], wanted: Set[str], k: int
    ) -> list[tuple[str, float]]:
        """The ``k`` best eligible rows of a ranking (its last parameter is its LIMIT).

        The search's filter (status, expiry, type, time) is applied to the best rows in
        order, reading further down the ranking only when too many are filtered out.
        """
        limit = max(4 * k, 64)
        while True:
            rows = await self.db.fetchall(query, (*params, limit))
            best = [(r[0], float(r[1])) for r in rows if r[0] in wanted][:k]
            if len(best) >= k or len(rows) < limit:
                return best
            limit *= 8

    async def _with_texts(self, best: list[tuple[str, float]]) -> list[tuple[str, float, str, str, str]]:
        texts = await self._fts_texts([rid for rid, _ in best])
        return [(rid, score, *texts.get(rid, ("", "", ""))) for rid, score in best]

    async def _fts_texts(self, record_ids: list[str]) -> dict[str, tuple[str, str, str]]:
        if not record_ids:
            return {}
        rows = await self.db.fetchall(
            "SELECT record_id, content, subject, aliases FROM records_fts WHERE record_id = ANY(?::text[])",
            (record_ids,),
        )
        return {r[0]: (r[1] or "", r[2] or "", r[3] or "") for r in rows}

    @staticmethod
    def _eligible_subset(ids: list[str], eligible: Iterable[str]) -> set[str]:
        wanted = eligible if isinstance(eligible, Set) else set(eligible)
        return {i for i in ids if i in wanted}

    async def _all_scopes(self) -> list[Scope]:
        rows = await self.db.fetchall("SELECT DISTINCT scope_kind, scope_id FROM records")
        return [Scope(r[0], r[1]) for r in rows]
