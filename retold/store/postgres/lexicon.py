"""The lexical index's rows on PostgreSQL: FTS5's tokens, written before the writer commits.

``records_fts`` holds each record's text as SQLite's FTS5 table does; a row written or
changed in a transaction is tokenized here, just before that transaction commits, by the
very tokenizer the query side uses (:func:`retold.store.fts.fts_tokens`, a replica
of FTS5's ``unicode61 remove_diacritics 2``). Each distinct token becomes one
``records_terms`` row — the inverted list BM25 reads — carrying what scoring needs without
another lookup: the record's scope (a search reads only its readable scopes' postings, from
one covering index), its per-column term frequencies and its length in tokens.
"""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

import anyio

from retold.store.fts import fts_tokens
from retold.store.postgres.database import PgDatabase

__all__ = [
    "RECOUNT", "STATISTICS", "STATISTICS_CHECKS", "TERMS_INDEXES", "WEIGHTED_COLUMN", "WEIGHTS",
    "essential_terms", "tokenize_pending",
]  # fmt: skip

# FTS5's column weights (content, subject, aliases); ``records_terms.weighted`` adds them up.
WEIGHTS = (1, 2, 3)

TERMS_INDEXES = (
    # Postings by term and scope, covering every column BM25 reads (an index-only scan), and
    # within one weighted frequency ordered by length: one word's best records come first.
    """CREATE INDEX IF NOT EXISTS records_terms_ranked
       ON records_terms(term, scope_kind, scope_id, weighted, ntokens, record_id)
       INCLUDE (content_tf, subject_tf, alias_tf, fts_rowid)""",
    # A record's own terms, covering the same: scoring a few candidates over every query word.
    """CREATE INDEX IF NOT EXISTS records_terms_doc ON records_terms(fts_rowid, term)
       INCLUDE (record_id, content_tf, subject_tf, alias_tf, ntokens)""",
)

WEIGHTED_COLUMN = (
    f"weighted INTEGER GENERATED ALWAYS AS "
    f"(content_tf * {WEIGHTS[0]} + subject_tf * {WEIGHTS[1]} + alias_tf * {WEIGHTS[2]}) STORED"
)

_BATCH = 2_000
_TERM_COLUMNS = (
    "term", "fts_rowid", "record_id", "content_tf", "subject_tf", "alias_tf",
    "ntokens", "scope_kind", "scope_id",
)  # fmt: skip


def _tokenize(rows: list[Any]) -> tuple[str, list[tuple[Any, ...]]]:
    """A batch's token columns (as the JSON the UPDATE reads) and its ``records_terms`` rows."""
    updates = []
    terms = []
    for rowid, record_id, content, subject, aliases, scope_kind, scope_id in rows:
        columns = [list(fts_tokens(text or "")) for text in (content, subject, aliases)]
        size = sum(len(c) for c in columns)
        updates.append(
            {"rowid": rowid, "c": columns[0], "s": columns[1], "a": columns[2], "n": size,
             "k": scope_kind, "i": scope_id}
        )  # fmt: skip
        counted = [Counter(c) for c in columns]
        terms.extend(
            (term, rowid, record_id, counted[0][term], counted[1][term], counted[2][term], size,
             scope_kind, scope_id)
            for term in sorted({t for c in columns for t in c})
        )  # fmt: skip
    return json.dumps(updates), terms


async def tokenize_pending(db: PgDatabase) -> None:
    """Tokenize every ``records_fts`` row written or changed in this transaction."""
    after = 0
    while True:
        # Onward from the last row done: the partial index keeps the entries of rows tokenized
        # earlier in this transaction until it commits, and rescanning them made loads quadratic.
        rows = await db.fetchall(
            f"""SELECT f.rowid, f.record_id, f.content, f.subject, f.aliases, r.scope_kind, r.scope_id
                  FROM records_fts f LEFT JOIN records r ON r.id = f.record_id
                 WHERE NOT f.tokenized AND f.rowid > ? ORDER BY f.rowid LIMIT {_BATCH}""",
            (after,),
        )
        if not rows:
            return
        after = rows[-1][0]
        # Tokenizing a batch takes milliseconds of CPU: off the event loop.
        updates, terms = await anyio.to_thread.run_sync(_tokenize, rows)
        stale = [r[0] for r in rows]
        await db.execute("DELETE FROM records_terms WHERE fts_rowid = ANY(?::bigint[])", (stale,))
        # One statement for the batch: the statistics triggers run once per statement.
        await db.execute(
            """UPDATE records_fts f SET content_tokens = v.c, subject_tokens = v.s, alias_tokens = v.a,
                      ntokens = v.n, scope_kind = v.k, scope_id = v.i, tokenized = true
                 FROM jsonb_to_recordset(?::jsonb)
                      AS v(rowid bigint, c text[], s text[], a text[], n int, k text, i text)
                WHERE f.rowid = v.rowid""",
            (updates,),
        )
        await db.copy_rows("records_terms", _TERM_COLUMNS, terms)


def essential_terms(
    words: list[str], idf: list[float], df: list[int], *, saturation: float, budget: int
) -> tuple[list[str], float]:
    """Which words' postings to read for candidates, and the most any other record can score.

    A word adds at most ``idf * saturation`` to a record's BM25 score (its term-frequency
    factor saturates below ``k1 + 1``). Taking the words that can add the most first, while
    their postings fit ``budget`` (at least one word), every record containing none of them
    scores below the sum of the others' maxima, returned as the bound. If the ``k``-th best
    candidate scores at least that, no other record can enter the top ``k`` (MaxScore).
    """
    order = sorted(range(len(words)), key=lambda i: (-idf[i], df[i], words[i]))
    chosen: list[int] = []
    postings = 0
    for i in order:
        if chosen and postings + df[i] > budget:
            break
        chosen.append(i)
        postings += df[i]
    rest = set(range(len(words))) - set(chosen)
    return [words[i] for i in chosen], sum(idf[i] * saturation for i in rest)


# Counting the statistics afresh (a new layout, ``check --repair``).
RECOUNT = (
    "TRUNCATE records_fts_stats, records_term_counts",
    """INSERT INTO records_fts_stats(scope_kind, scope_id, rows, tokens)
       SELECT coalesce(scope_kind, ''), coalesce(scope_id, ''), count(*), sum(ntokens)
         FROM records_fts WHERE tokenized GROUP BY 1, 2""",
    """INSERT INTO records_term_counts(term, scope_kind, scope_id, n)
       SELECT term, coalesce(scope_kind, ''), coalesce(scope_id, ''), count(*)
         FROM records_terms GROUP BY 1, 2, 3""",
)

# The statistics BM25 reads, kept by triggers as postings come and go, so a search never
# counts a long posting list: rows and tokens per scope (N and the average length), and
# records per word and scope (document frequencies, inflection ranges).
STATISTICS = (
    'ALTER TABLE records_fts ADD COLUMN IF NOT EXISTS scope_kind TEXT COLLATE "C"',
    'ALTER TABLE records_fts ADD COLUMN IF NOT EXISTS scope_id TEXT COLLATE "C"',
    """CREATE TABLE records_fts_stats (
      scope_kind TEXT COLLATE "C" NOT NULL,
      scope_id   TEXT COLLATE "C" NOT NULL,
      rows       BIGINT NOT NULL,
      tokens     BIGINT NOT NULL,
      PRIMARY KEY (scope_kind, scope_id)
    )""",
    """CREATE TABLE records_term_counts (
      term       TEXT COLLATE "C" NOT NULL,
      scope_kind TEXT COLLATE "C" NOT NULL,
      scope_id   TEXT COLLATE "C" NOT NULL,
      n          BIGINT NOT NULL,
      PRIMARY KEY (term, scope_kind, scope_id)
    )""",
    """CREATE FUNCTION retold_fts_added() RETURNS trigger LANGUAGE plpgsql AS $$
       BEGIN
         INSERT INTO records_fts_stats AS s (scope_kind, scope_id, rows, tokens)
         SELECT coalesce(scope_kind, ''), coalesce(scope_id, ''), count(*), sum(ntokens)
           FROM added WHERE tokenized GROUP BY 1, 2
         ON CONFLICT (scope_kind, scope_id)
         DO UPDATE SET rows = s.rows + excluded.rows, tokens = s.tokens + excluded.tokens;
         RETURN NULL;
       END $$""",
    """CREATE FUNCTION retold_fts_removed() RETURNS trigger LANGUAGE plpgsql AS $$
       BEGIN
         UPDATE records_fts_stats s SET rows = s.rows - d.rows, tokens = s.tokens - d.tokens
           FROM (SELECT coalesce(scope_kind, '') AS scope_kind, coalesce(scope_id, '') AS scope_id,
                        count(*) AS rows, sum(ntokens) AS tokens
                   FROM removed WHERE tokenized GROUP BY 1, 2) d
          WHERE s.scope_kind = d.scope_kind AND s.scope_id = d.scope_id;
         DELETE FROM records_fts_stats WHERE rows <= 0;
         RETURN NULL;
       END $$""",
    """CREATE FUNCTION retold_terms_added() RETURNS trigger LANGUAGE plpgsql AS $$
       BEGIN
         INSERT INTO records_term_counts AS c (term, scope_kind, scope_id, n)
         SELECT term, coalesce(scope_kind, ''), coalesce(scope_id, ''), count(*) FROM added GROUP BY 1, 2, 3
         ON CONFLICT (term, scope_kind, scope_id) DO UPDATE SET n = c.n + excluded.n;
         RETURN NULL;
       END $$""",
    """CREATE FUNCTION retold_terms_removed() RETURNS trigger LANGUAGE plpgsql AS $$
       BEGIN
         WITH d AS (SELECT term, coalesce(scope_kind, '') AS scope_kind, coalesce(scope_id, '') AS scope_id,
                           count(*) AS n
                      FROM removed GROUP BY 1, 2, 3)
         UPDATE records_term_counts c SET n = c.n - d.n FROM d
          WHERE c.term = d.term AND c.scope_kind = d.scope_kind AND c.scope_id = d.scope_id;
         DELETE FROM records_term_counts c USING (SELECT DISTINCT term FROM removed) d
          WHERE c.term = d.term AND c.n <= 0;
         RETURN NULL;
       END $$""",
    # Only tokenized rows count (a new row is counted when it is tokenized, before its
    # transaction commits); an UPDATE counts as the old rows leaving and the new arriving.
    """CREATE TRIGGER records_fts_updated_new AFTER UPDATE ON records_fts
       REFERENCING NEW TABLE AS added FOR EACH STATEMENT EXECUTE FUNCTION retold_fts_added()""",
    """CREATE TRIGGER records_fts_updated_old AFTER UPDATE ON records_fts
       REFERENCING OLD TABLE AS removed FOR EACH STATEMENT EXECUTE FUNCTION retold_fts_removed()""",
    """CREATE TRIGGER records_fts_removed AFTER DELETE ON records_fts
       REFERENCING OLD TABLE AS removed FOR EACH STATEMENT EXECUTE FUNCTION retold_fts_removed()""",
    """CREATE TRIGGER records_terms_added AFTER INSERT ON records_terms
       REFERENCING NEW TABLE AS added FOR EACH STATEMENT EXECUTE FUNCTION retold_terms_added()""",
    """CREATE TRIGGER records_terms_updated_new AFTER UPDATE ON records_terms
       REFERENCING NEW TABLE AS added FOR EACH STATEMENT EXECUTE FUNCTION retold_terms_added()""",
    """CREATE TRIGGER records_terms_updated_old AFTER UPDATE ON records_terms
       REFERENCING OLD TABLE AS removed FOR EACH STATEMENT EXECUTE FUNCTION retold_terms_removed()""",
    """CREATE TRIGGER records_terms_removed AFTER DELETE ON records_terms
       REFERENCING OLD TABLE AS removed FOR EACH STATEMENT EXECUTE FUNCTION retold_terms_removed()""",
    # Rows from before the triggers (the triggers above already hold the tables' locks).
    """UPDATE records_fts f SET scope_kind = r.scope_kind, scope_id = r.scope_id
         FROM records r WHERE r.id = f.record_id AND f.scope_kind IS DISTINCT FROM r.scope_kind""",
    *RECOUNT,
)

_RECOUNT = {
    "records_fts_stats": (
        "SELECT scope_kind, scope_id, rows, tokens FROM records_fts_stats",
        """SELECT coalesce(scope_kind, ''), coalesce(scope_id, ''), count(*), sum(ntokens)
             FROM records_fts WHERE tokenized GROUP BY 1, 2""",
    ),
    "records_term_counts": (
        "SELECT term, scope_kind, scope_id, n FROM records_term_counts",
        """SELECT term, coalesce(scope_kind, ''), coalesce(scope_id, ''), count(*)
             FROM records_terms GROUP BY 1, 2, 3""",
    ),
}
# For ``retold check``: how many rows of each kept statistic differ from a recount.
STATISTICS_CHECKS = {
    table: f"SELECT count(*) FROM (({kept}) EXCEPT ({recount}) UNION ALL (({recount}) EXCEPT ({kept}))) x"
    for table, (kept, recount) in _RECOUNT.items()
}
