"""Query text as the lexical channel reads it (spec §10.2): FTS5's tokens, query words and terms,
the FTS5 expression, and the inflections a plain word shares a Snowball stem with.

Tokens are normalised the way FTS5's ``unicode61 remove_diacritics 2`` tokenizer does
(:func:`fts_tokens`, which lives beside the index in :mod:`retold.store.fts` and is re-exported
here), so the Python coverage check, PostgreSQL's postings and the index agree on what a token
is. Identifiers (``ERR42``, ``bge-m3``, ``deploy.yml``), entity aliases and
names as written stay exact; plain words are matched with their inflections.
"""

from __future__ import annotations

import dataclasses
import itertools
import re
import threading
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from retold.models import LexicalTerm
from retold.retrieve.stopwords import STOPWORDS
from retold.store.fts import fold_char, fts_tokens
from retold.util import normalize_alias

__all__ = [
    "MAX_VARIANTS",
    "STEM_MIN_CHARS",
    "VARIANT_SCAN_MAX",
    "QueryTerm",
    "QueryWord",
    "fold_apostrophes",
    "fts_query",
    "fts_tokens",
    "is_identifier",
    "is_proper_noun",
    "query_terms",
    "query_words",
    "stem",
    "stem_of",
    "with_variants",
    "word_key",
]

# ---------------------------------------------------------------------------------------------
# FTS5-compatible tokenisation (:mod:`retold.store.fts`, beside the index that holds its tokens)
# ---------------------------------------------------------------------------------------------


def _fold_text(text: str) -> str:
    """Lower-case and Latin diacritics stripped, punctuation kept: a term's display value."""
    out = []
    for ch in text:
        folded = fold_char(ch)
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
