"""The lexical index's rows on PostgreSQL: FTS5's tokens, written before the writer commits.

``records_fts`` holds each record's text as SQLite's FTS5 table does; a row written or
changed in a transaction is tokenized here, just before that transaction commits, by the
very tokenizer the query side uses (:func:`retold.retrieve.lexical.fts_tokens`, a replica
of FTS5's ``unicode61 remove_diacritics 2``). Each distinct token becomes one
``records_terms`` row — the inverted list BM25 reads — carrying what scoring needs without
another lookup: the record's scope (a search reads only its readable scopes' postings, from
one covering index), its per-column term frequencies and its length in tokens.
"""

from __future__ import annotations

from collections import Counter

from retold.store.postgres.database import PgDatabase

__all__ = ["TERMS_INDEXES", "tokenize_pending"]

TERMS_INDEXES = (
    # Postings by term and scope, covering every column BM25 reads: an index-only scan.
    """CREATE INDEX IF NOT EXISTS records_terms_scoped ON records_terms(term, scope_kind, scope_id)
       INCLUDE (record_id, content_tf, subject_tf, alias_tf, ntokens)""",
    # A record's own terms, covering the same: scoring a few candidates over every query word.
    """CREATE INDEX IF NOT EXISTS records_terms_doc ON records_terms(fts_rowid, term)
       INCLUDE (record_id, content_tf, subject_tf, alias_tf, ntokens)""",
)

_BATCH = 2_000
_TERM_COLUMNS = (
    "term", "fts_rowid", "record_id", "content_tf", "subject_tf", "alias_tf",
    "ntokens", "scope_kind", "scope_id",
)  # fmt: skip


async def tokenize_pending(db: PgDatabase) -> None:
    """Tokenize every ``records_fts`` row written or changed in this transaction."""
    from retold.retrieve.lexical import fts_tokens

    while True:
        rows = await db.fetchall(
            f"""SELECT f.rowid, f.record_id, f.content, f.subject, f.aliases, r.scope_kind, r.scope_id
                  FROM records_fts f LEFT JOIN records r ON r.id = f.record_id
                 WHERE NOT f.tokenized LIMIT {_BATCH}"""
        )
        if not rows:
            return
        updates = []
        terms = []
        for rowid, record_id, content, subject, aliases, scope_kind, scope_id in rows:
            columns = [list(fts_tokens(text or "")) for text in (content, subject, aliases)]
            size = sum(len(c) for c in columns)
            updates.append((*columns, size, rowid))
            counted = [Counter(c) for c in columns]
            terms.extend(
                (term, rowid, record_id, counted[0][term], counted[1][term], counted[2][term], size,
                 scope_kind, scope_id)
                for term in sorted({t for c in columns for t in c})
            )  # fmt: skip
        stale = [r[0] for r in rows]
        await db.execute("DELETE FROM records_terms WHERE fts_rowid = ANY(?::bigint[])", (stale,))
        await db.executemany(
            """UPDATE records_fts SET content_tokens = ?, subject_tokens = ?, alias_tokens = ?,
                      ntokens = ?, tokenized = true WHERE rowid = ?""",
            updates,
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
