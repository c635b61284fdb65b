"""The lexical candidate generator (spec §10.2): exact terms, identifiers and phrases over FTS5.

Dense retrieval is weak on identifiers (``ERR42``, ``bge-m3``, ``deploy.yml``) and exact
wording; this generator catches them. Query text becomes :class:`QueryTerm` s, the union of
every query's terms becomes one FTS5 ``OR`` expression run against the eligible records
only, and each hit is then re-checked in Python so the relevance gate (§10.5) sees exactly
which terms of which query it matched.

Tokens are normalised the way FTS5's ``unicode61 remove_diacritics 2`` tokenizer does
(:func:`fts_tokens`), so the Python coverage check and the index agree on what a token is.
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
import re
import threading
import unicodedata
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from retold.models import LexicalMatch, LexicalTerm, Scope
from retold.retrieve.stopwords import CHAT_WORDS, STOPWORDS
from retold.util import normalize_alias

if TYPE_CHECKING:
    from retold.store import Store

__all__ = [
    "LexicalHit",
    "QueryTerm",
    "QueryWord",
    "chat_words",
    "fold_apostrophes",
    "fts_query",
    "fts_tokens",
    "is_identifier",
    "is_proper_noun",
    "lexical_search",
    "query_terms",
    "query_words",
    "rare_words",
    "selective_terms",
    "stem",
    "stem_of",
    "term_coverage",
    "with_variants",
]

# ---------------------------------------------------------------------------------------------
# FTS5-compatible tokenisation
# ---------------------------------------------------------------------------------------------


@functools.lru_cache(maxsize=8192)
def _fold_char(ch: str) -> str | None:
    """One character as unicode61 folds it: None for a separator, "" for a dropped diacritic.

    unicode61 keeps letters, numbers and private-use characters (``L* N* Co``), lower-cases
    them, and with ``remove_diacritics 2`` strips accents from Latin letters only (Greek
    tonos survives). Combining marks U+0300..U+0331 are part of the token and vanish; other
    marks (Devanagari vowel signs, virama) separate tokens, exactly as SQLite does.
    """
    code = ord(ch)
    if 0x300 <= code <= 0x331:
        return ""
    category = unicodedata.category(ch)
    if not (category[0] in "LN" or category == "Co"):
        return None
    if code < 0x250 or 0x1E00 <= code <= 0x1EFF:
        decomposed = unicodedata.normalize("NFD", ch)
        if len(decomposed) > 1 and all(0x300 <= ord(c) <= 0x36F for c in decomposed[1:]):
            ch = decomposed[0]
    lowered = ch.lower()
    return lowered if len(lowered) == 1 else ch


_ASCII_TOKEN = re.compile(r"[a-z0-9]+")


def fts_tokens(text: str) -> tuple[str, ...]:
    """The tokens FTS5 ``unicode61 remove_diacritics 2`` indexes for ``text``, in order.

    >>> fts_tokens("Deploy bge-m3 to café.yml")
    ('deploy', 'bge', 'm3', 'to', 'cafe', 'yml')
    """
    if text.isascii():  # the common case, at C speed: ASCII letters and digits are the token characters
        return tuple(_ASCII_TOKEN.findall(text.lower()))
    tokens: list[str] = []
    current: list[str] = []
    for ch in text:
        folded = _fold_char(ch)
        if folded is None:
            if current:
                tokens.append("".join(current))
                current = []
        elif folded:
            current.append(folded)
    if current:
        tokens.append("".join(current))
    return tuple(tokens)


def _fold_text(text: str) -> str:
    """Lower-case and Latin diacritics stripped, punctuation kept: a term's display value."""
    out = []
    for ch in text:
        folded = _fold_char(ch)
        out.append(ch.lower() if folded is None else folded)
    return "".join(out)


# ---------------------------------------------------------------------------------------------
# Query words: whitespace tokens with punctuation, contractions and possessives removed
# ---------------------------------------------------------------------------------------------

_APOSTROPHES = str.maketrans({"\u2019": "'", "\u2018": "'", "\u02bc": "'", "\u2032": "'", "`": "'"})
_LEAD_KEEP = "._/"  # a leading dot, underscore or slash is part of .env, _private, /etc/hosts
_TRAIL_KEEP = "_/"
_SENTENCE_END = ".!?"
_IRREGULAR_NEGATIONS = {"can't": "can", "won't": "will", "shan't": "shall", "ain't": "is"}
_CLITICS = ("n't", "'s", "'re", "'ve", "'ll", "'d", "'m")
_ABBREVIATION = re.compile(r"(?:[^\W\d_]\.)+[^\W\d_]?")  # e.g, i.e, U.S: dotted letters


def fold_apostrophes(text: str) -> str:
    """Typographic apostrophes (’ ‘ ʼ ′ `) become ``'`` so "Aditya’s" and "Aditya's" agree."""
    return text.translate(_APOSTROPHES)


def _strip_edges(token: str) -> str:
    start, end = 0, len(token)
    while start < end and not (token[start].isalnum() or token[start] in _LEAD_KEEP):
        start += 1
    while end > start and not (token[end - 1].isalnum() or token[end - 1] in _TRAIL_KEEP):
        end -= 1
    return token[start:end]


def _strip_clitic(token: str) -> str:
    """Reduce a contraction or possessive to its stem: don't → do, I'm → I, aditya's → aditya."""
    lowered = token.lower()
    if lowered in _IRREGULAR_NEGATIONS:
        stem = _IRREGULAR_NEGATIONS[lowered]
        return stem.capitalize() if token[:1].isupper() else stem
    for clitic in _CLITICS:
        if lowered.endswith(clitic) and len(token) > len(clitic):
            return token[: -len(clitic)]
    return token


def word_key(raw: str) -> str:
    """A whitespace-split token as alias lookups see it: edges, clitic and case folded away."""
    return normalize_alias(_strip_clitic(_strip_edges(fold_apostrophes(raw))))


@dataclass(frozen=True)
class QueryWord:
    """One whitespace token of a query after punctuation, contraction and possessive removal.

    ``text`` keeps its case (identifier and proper-noun detection need it);
    ``sentence_initial`` marks the first word of the query or of a sentence inside it,
    where capitalisation says nothing about a proper noun.
    """

    text: str
    sentence_initial: bool


def query_words(query: str) -> list[QueryWord]:
    """Split on whitespace first, so ``bge-m3`` and ``deploy.yml`` survive as one word each."""
    words: list[QueryWord] = []
    initial = True
    for raw in fold_apostrophes(query).split():
        text = _strip_clitic(_strip_edges(raw))
        if text:
            words.append(QueryWord(text, initial))
            initial = raw.rstrip("\"')]}").endswith(tuple(_SENTENCE_END))
        elif raw.endswith(tuple(_SENTENCE_END)):
            initial = True
    return words


def is_identifier(word: str) -> bool:
    """True for tokens precise enough to pass the lexical gate alone (spec §10.5 step 1).

    A digit, underscore, dot or slash, or a lower-to-upper case change inside the token
    (``camelCase``, ``iPhone``) qualifies. A hyphen alone does not (follow-up, e-mail), nor
    does a slash between function words (and/or, he/she), nor a dotted abbreviation (e.g).
    """
    if any(ch.isdigit() or ch == "_" for ch in word):
        return True
    if any(a.islower() and b.isupper() for a, b in itertools.pairwise(word)):
        return True
    has_dot, has_slash = "." in word, "/" in word
    if has_dot and not _ABBREVIATION.fullmatch(word):
        return True
    if has_slash:
        parts = [p for p in word.replace(".", "/").split("/") if p]
        return not parts or not all(p.lower() in STOPWORDS for p in parts)
    return False


# ---------------------------------------------------------------------------------------------
# Query terms
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class QueryTerm:
    """One search term: ``tokens`` with more than one entry is a phrase matched contiguously.

    ``value`` is the folded word as written (``bge-m3``, ``deploy.yml``, ``aditya``,
    ``aditya kumar`` for a multi-word alias) and is what explanations and the gate see.
    """

    value: str
    tokens: tuple[str, ...]
    is_identifier: bool
    is_entity_alias: bool
    variants: tuple[str, ...] = ()  # indexed inflections that also count as this term
    is_name: bool = False  # written as a name (capitalised inside a sentence): never a common word

    @property
    def stemmable(self) -> bool:
        """A plain word: identifiers, aliases and phrases are matched exactly as written."""
        return len(self.tokens) == 1 and not (self.is_identifier or self.is_entity_alias)

    def as_lexical_term(self, common: bool = False, rare: bool = False) -> LexicalTerm:
        return LexicalTerm(self.value, self.is_identifier, self.is_entity_alias, common, rare)


def is_proper_noun(word: QueryWord) -> bool:
    """Capitalised, not the first word of a sentence, and not "I": "where does Will work"."""
    return word.text[:1].isupper() and not word.sentence_initial and word.text != "I"


def _word_term(word: QueryWord, aliases: Collection[str]) -> QueryTerm | None:
    tokens = fts_tokens(word.text)
    if len(" ".join(tokens)) < 2:  # also drops words with no token characters at all
        return None
    identifier = is_identifier(word.text)
    value = _fold_text(word.text)
    if not identifier:
        if all(len(t) < 2 for t in tokens):  # e.g, U.S: initials, not words
            return None
        if not is_proper_noun(word) and all(t in STOPWORDS for t in tokens):
            return None
    alias = value in aliases or " ".join(tokens) in aliases
    return QueryTerm(value, tokens, identifier, alias, is_name=is_proper_noun(word))


def _max_alias_words(aliases: Collection[str]) -> int:
    return max((len(a.split()) for a in aliases), default=1)


def query_terms(query: str, entity_aliases: Collection[str] = frozenset()) -> list[QueryTerm]:
    """The de-duplicated search terms of one query, in query order.

    ``entity_aliases`` holds normalised alias strings (``normalize_alias``); a dict keyed
    by them (``resolve_query_aliases``'s answer) works too. A run of consecutive words equal
    to a multi-word alias ("Aditya Kumar") becomes one phrase term flagged as an alias.

    >>> [t.value for t in query_terms("What's the bge-m3 follow-up for Aditya's ERR42?")]
    ['bge-m3', 'follow-up', 'aditya', 'err42']
    """
    words = query_words(query)
    longest = min(_max_alias_words(entity_aliases), len(words))
    normalized = [normalize_alias(w.text) for w in words] if longest > 1 else []
    terms: dict[tuple[str, ...], QueryTerm] = {}

    def add(term: QueryTerm | None) -> None:
        if term is None:
            return
        seen = terms.get(term.tokens)
        if seen is None:
            terms[term.tokens] = term
        else:  # the same tokens written twice: keep the first value, either spelling's flags
            terms[term.tokens] = QueryTerm(
                seen.value,
                seen.tokens,
                seen.is_identifier or term.is_identifier,
                seen.is_entity_alias or term.is_entity_alias,
                is_name=seen.is_name or term.is_name,
            )

    i = 0
    while i < len(words):
        for n in range(min(longest, len(words) - i), 1, -1):
            candidate = " ".join(normalized[i : i + n])
            if candidate in entity_aliases:
                run = words[i : i + n]
                identifier = any(is_identifier(w.text) for w in run)
                add(QueryTerm(candidate, fts_tokens(candidate), identifier, True))
                i += n
                break
        else:
            add(_word_term(words[i], entity_aliases))
            i += 1
    return list(terms.values())


def _quote(token: str) -> str:
    return '"' + token.replace('"', '""') + '"'


def fts_query(terms: Iterable[QueryTerm]) -> str:
    """An FTS5 MATCH expression: every term quoted, OR-joined; "" when there is nothing to match.

    Quoting every token makes user text inert: ``NEAR``, ``AND``, ``*``, ``:`` and ``(``
    inside quotes are just characters for the tokenizer. A multi-token term becomes one
    phrase (``"bge m3"``), which FTS5 matches only where the tokens are adjacent. A term's
    inflections join the OR as words of their own.
    """
    seen: dict[tuple[str, ...], None] = {}
    for term in terms:
        if term.tokens:
            seen.setdefault(term.tokens, None)
        for variant in term.variants:
            seen.setdefault((variant,), None)
    return " OR ".join(_quote(" ".join(tokens)) for tokens in seen)


MAX_VARIANTS = 8
"""Inflections per word, the most frequent first: bounds the FTS query of a 300-word paste."""

STEM_MIN_CHARS = 3
"""Stems shorter than this ("go", "us") would gather unrelated words; such terms match exactly."""

VARIANT_SCAN_MAX = 256
"""Indexed terms read per stem, in term order, when looking for its inflections.

The vocabulary read is the searcher's own (``Store.lexical_index``): only words the searcher
may read can take these slots, so another tenant's ``connect000``… cannot push "connected" out.
"""


_STEMMERS = threading.local()


def _stemmer() -> Any:
    """This thread's Snowball English stemmer.

    A stemmer instance keeps its state in the middle of a word (both snowballstemmer's pure
    Python one and PyStemmer's C one say so), so threads never share one: searches and the
    claim parser (:mod:`retold.ingest.equivalence.claim_lexicon`) stem from any thread.
    """
    stemmer = getattr(_STEMMERS, "english", None)
    if stemmer is None:
        import snowballstemmer  # the Snowball English stemmer; uses PyStemmer's C code when installed

        stemmer = snowballstemmer.stemmer("english")
        if hasattr(stemmer, "maxCacheSize"):
            # PyStemmer keeps the last 10,000 words it saw: stored and queried words, erased ones
            # included. Stemming costs a fraction of a microsecond, so nothing is cached.
            stemmer.maxCacheSize = 0
        _STEMMERS.english = stemmer
    return stemmer


def stem(token: str) -> str:
    """The Snowball English stem; deliberately uncached (no word outlives the search that used it)."""
    return str(_stemmer().stemWord(token))


def stem_of(term: QueryTerm) -> str | None:
    """The Snowball stem a plain word's inflections share, or None when it matches exactly."""
    if not term.stemmable:
        return None
    root = stem(term.tokens[0])
    return root if len(root) >= STEM_MIN_CHARS else None


def with_variants(
    per_query: list[list[QueryTerm]], indexed: Mapping[str, list[tuple[str, int]]]
) -> list[list[QueryTerm]]:
    """Each plain word with the indexed words sharing its Snowball stem ("painted" for "paint").

    ``indexed`` maps each stem to the vocabulary's terms starting with it and their record
    counts (``Store.term_statistics``). The index keeps the spec's unstemmed ``unicode61``
    tokens; asking for the vocabulary's inflections gives the lexical channel a stemmer's
    recall without re-tokenising stored text, and a candidate must share the stem exactly
    (not merely the prefix). The most frequent :data:`MAX_VARIANTS` are kept.
    """

    def expand(term: QueryTerm) -> QueryTerm:
        root = stem_of(term)
        if root is None:
            return term
        same = [(doc, v) for v, doc in indexed.get(root, []) if v != term.tokens[0] and stem(v) == root]
        variants = tuple(v for _, v in sorted(same, key=lambda dv: (-dv[0], dv[1]))[:MAX_VARIANTS])
        return dataclasses.replace(term, variants=variants)

    return [[expand(t) for t in terms] for terms in per_query]


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
