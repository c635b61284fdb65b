"""What the searcher's own word counts say about a query's words (spec §10.2, §10.5).

The lexical index's vocabulary (``Store.term_statistics``, the searcher's readable rows only)
tells how many records hold each word. From those counts: which words are worth a full-text
query at all (:func:`selective_terms`) and how many of a query's matches need scoring
(:func:`scan_limit`); and, for the gate, which words are too common to count
(:func:`common_words`), which are rare enough to be evidence alone (:func:`rare_words`), and
which are words of conversation or of a date the query names (:func:`chat_words`,
:func:`date_words`). Pure functions over :class:`~retold.retrieve.query_terms.QueryTerm` s.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping, Sequence

from retold.retrieve.query_terms import QueryTerm, fts_tokens, stem
from retold.retrieve.stopwords import CHAT_WORDS

__all__ = [
    "COMMON_TERM_MIN_RECORDS",
    "COMMON_TERM_SCAN_RECORDS",
    "COMMON_TERM_SHARE",
    "chat_words",
    "common_share",
    "common_words",
    "date_words",
    "rare_words",
    "records_with",
    "scan_limit",
    "selective_terms",
]


COMMON_TERM_SHARE = 0.1
COMMON_TERM_MIN_RECORDS = 2000
COMMON_TERM_SCAN_RECORDS = 2000
"""The defaults of retrieval.common_term_min_records, common_term_share and common_term_scan_records: with
at least that many indexed records, a plain term in more than that share of them is left
out of the FTS query.

Such a term barely ranks (BM25 IDF at most ln 9 ≈ 2.2, against 4.6 and more for a term
in under 1 % of records), but an OR query on it makes SQLite score every row containing
it: at 50K records a term in half of them cost more than the rest of a search. It still
counts toward coverage for the gate, computed on the returned rows, and dense retrieval
still sees the whole query. Identifiers, entity aliases and phrases are always searched;
when every term is a common plain word, the rarest one is searched alone. Then only the newest
``retrieval.common_term_scan_records`` records holding it are scored (:func:`scan_limit`).
"""


def selective_terms(
    terms: list[QueryTerm],
    total: int,
    counts: Mapping[str, int],
    *,
    min_records: int | None = None,
    share: float | None = None,
) -> list[QueryTerm]:
    """The terms worth an OR query: plain words in at most ``share`` of the records."""
    min_records = COMMON_TERM_MIN_RECORDS if min_records is None else min_records
    share = COMMON_TERM_SHARE if share is None else share
    if total < min_records:  # small stores: scanning is cheap and every term counts
        return terms
    kept = [t for t in terms if not t.stemmable or records_with(t, counts) <= share * total]
    if kept:
        return kept
    return [min(terms, key=lambda t: records_with(t, counts))]


def scan_limit(
    terms: list[QueryTerm],
    total: int,
    counts: Mapping[str, int],
    *,
    min_records: int | None = None,
    share: float | None = None,
    scan_records: int | None = None,
) -> int | None:
    """How many of the matches the full-text query need score, newest first; None for all.

    Only when pruning left nothing but common words (:func:`selective_terms` then searches the
    rarest alone) and they are in more than ``scan_records`` records: such a list barely ranks
    (BM25 IDF under ln 9) and the gate mostly counts none of its words, yet scoring every record
    holding a word in most of 50K cost more than the rest of a search. A query with one word
    that is not common is never bounded, so an old record holding it is always found.
    """
    min_records = COMMON_TERM_MIN_RECORDS if min_records is None else min_records
    share = COMMON_TERM_SHARE if share is None else share
    scan_records = COMMON_TERM_SCAN_RECORDS if scan_records is None else scan_records
    if scan_records <= 0 or total < min_records or not terms:
        return None
    widest = max(scan_records, share * total)
    if all(t.stemmable and records_with(t, counts) > widest for t in terms):
        return scan_records
    return None


def records_with(term: QueryTerm, counts: Mapping[str, int]) -> int:
    """Records holding the word or an inflection: an upper bound when inflections share records."""
    return counts.get(term.tokens[0], 0) + sum(counts.get(v, 0) for v in term.variants)


def date_words(terms: Iterable[QueryTerm], dated: Sequence[str]) -> set[tuple[str, ...]]:
    """The terms that are words of a date the query names ("16", "june", "2023" of "on 16
    June, 2023"): stored text rarely repeats the date it happened on, its event time does."""
    words = {token for text in dated for token in fts_tokens(text)}
    return {t.tokens for t in terms if not t.is_entity_alias and words.issuperset(t.tokens)}


COMMON_WORD_REFERENCE_TOKENS = 20
"""The record length (tokens: a sentence or two) at which ``gate.common_word_share`` applies."""


def common_share(share: float, average_tokens: float) -> float:
    """``share`` for records of ``average_tokens``: a word as frequent per token is in more of
    longer records (``1 - (1 - share) ** (length / reference)``); never below ``share``."""
    if average_tokens <= COMMON_WORD_REFERENCE_TOKENS:
        return share
    return 1.0 - (1.0 - share) ** (average_tokens / COMMON_WORD_REFERENCE_TOKENS)


def common_words(
    terms: Iterable[QueryTerm],
    total: int,
    counts: Mapping[str, int],
    *,
    share: float,
    min_records: int,
    average_tokens: float = 0.0,
) -> set[tuple[str, ...]]:
    """The plain words in more than ``share`` of the searcher's ``total`` records.

    In a chat history "awesome", "great" or "sounds" sit in one record in ten; a turn that
    shares two of them with a stored one is not about it, so the gate counts such words
    neither as matched nor as the query's (they still rank). Names as written, identifiers,
    aliases and phrases are never common: how often a person is mentioned says nothing about
    filler. Under ``min_records`` a share says little and nothing is common. Records longer
    than a sentence or two hold more words each, so the share rises with their average
    length (:func:`common_share`): "family" in a fifth of long diary entries is not filler.
    """
    if total < min_records or share >= 1.0:
        return set()
    common = common_share(share, average_tokens) * total
    return {t.tokens for t in terms if t.stemmable and not t.is_name and records_with(t, counts) > common}


@functools.cache
def _chat_stems() -> frozenset[str]:
    return frozenset(stem(word) for word in CHAT_WORDS)


def chat_words(terms: Iterable[QueryTerm]) -> set[tuple[str, ...]]:
    """The plain words of conversation itself (:data:`~retold.retrieve.stopwords.CHAT_WORDS`)
    and their inflections ("looked", "waiting"), whatever the store holds; names as written
    never. The gate counts them among the query's terms but never as matched: a chat turn's
    words share nothing, and its reactions still dilute what little it shares."""
    stems = _chat_stems()
    return {
        t.tokens
        for t in terms
        if t.stemmable and not t.is_name and len(t.tokens) == 1 and stem(t.tokens[0]) in stems
    }


def rare_words(
    terms: Iterable[QueryTerm], total: int, counts: Mapping[str, int], *, max_records: int, min_records: int
) -> set[tuple[str, ...]]:
    """The plain words in at most ``max_records`` of the searcher's records (``gate.rare_word_records``).

    The spec's two-term floor stops a one-word query ("deployment") from admitting every record
    that mentions the word; a word in three records cannot flood, and in a question with one
    content word ("Where have I camped?") it is all the evidence there is. The count is an
    upper bound (inflections may share records), so a word is never called rarer than it is.
    Under ``min_records`` (``gate.rare_word_min_records``) nothing is rare: in a handful of
    records every word is in few of them, and one word is no evidence.
    """
    if max_records <= 0 or total < min_records:
        return set()
    return {t.tokens for t in terms if t.stemmable and records_with(t, counts) <= max_records}
