"""Claim parsing for the conservative judge: text in, a :class:`ParsedClaim` the rules can compare.

Why a module of its own: tokenising (contractions, compounds, British spellings, multi-word
phrases) and reading each token's role (negation cue, hedge, value kind, the speaker, a
be-verb, a preposition) is one job, separate from deciding what two parses mean together
(:mod:`retold.ingest.equivalence.claim_rules`) and from the word lists it reads
(:mod:`retold.ingest.equivalence.claim_lexicon`).

Everything here is deterministic and pure; :func:`parse_claim` is cached by
``functools.lru_cache``, which is thread-safe, so judges in worker threads share it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

from retold.ingest.equivalence.claim_lexicon import (
    AMBIGUOUS_MONTHS,
    ARTICLES,
    AUX,
    BE,
    BRITISH,
    CLAUSE_WORDS,
    COMPARATIVE,
    CONTRACTIONS,
    FILLERS,
    HEDGES,
    MAX_PHRASE,
    MONTHS,
    NEGATION_STEMS,
    NEGATIONS,
    NEGATIVE_VALENCE_STEMS,
    NUMBER_WORDS,
    PARTICIPLE_AFTER,
    PAST_FORMS,
    PHRASES,
    PREPOSITIONS,
    PRINCIPAL,
    PRONOUNS,
    RELATIONS,
    REQUEST_CUES,
    TOOL_ALIASES,
    TOOLS,
    VERBS,
    WEEKDAYS,
    canonical,
    stem_word,
)

__all__ = ["Clause", "ParsedClaim", "Token", "parse_claim"]

_TOKEN = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9_./:+#'-]*[A-Za-z0-9+#])?|[,;:.!?]")
_NUMBER = re.compile(r"^\d+(?:[.,:]\d+)*(?:st|nd|rd|th|am|pm|s|k|m|h|ms|gb|mb|tb|kb|%)?$", re.IGNORECASE)
_CLAUSE_PUNCT = frozenset(",;:.!?")

_CONTRACTIONS: tuple[tuple[re.Pattern[str], str], ...] = tuple(
    (re.compile(pattern, re.IGNORECASE), repl)
    for pattern, repl in (
        *CONTRACTIONS,
        (r"\b(\w+)'s\b", r"\1"),  # possessive (or "it's"): the owner stays, the 's carries nothing
        (r"(\d)\s+(am|pm)\b", r"\1\2"),
    )
)


@dataclass(frozen=True)
class Token:
    """One word of a claim as the rules see it: how it was written, and its normalised forms."""

    surface: str
    canon: str
    stem: str
    kind: str  # word | number | date | proper | ident | prep
    clause: int
    negated: bool  # inside the scope of a negation cue earlier in its clause


@dataclass(frozen=True)
class Clause:
    """One clause of a text (split at punctuation and "but"/"though"/...): its words and cues."""

    canons: frozenset[str]
    polarity: int
    hedged: bool
    request: bool


@dataclass(frozen=True)
class ParsedClaim:
    """A text reduced to what the rules compare: its frame of words, cues, clauses and tense."""

    frame: tuple[Token, ...]  # content words and prepositions; no articles, fillers, cues or be-verbs
    be_at: int | None  # frame length before the first be-verb (the copula position)
    markers: tuple[str, ...]  # negation cues and negative-valence words, as written
    clauses: tuple[Clause, ...]
    principal: bool  # the text speaks in the first person (I/my/we)
    relations: frozenset[str]  # relation nouns owned by the speaker ("my sister")
    past: bool  # a past-tense verb: "lived in Lisbon" is not "lives in Lisbon"

    @property
    def polarity(self) -> int:
        return len(self.markers) % 2

    @property
    def content(self) -> tuple[Token, ...]:
        return tuple(t for t in self.frame if t.kind != "prep")


def _kind(surface: str, sentence_start: bool) -> tuple[str, str]:
    """``(kind, canonical form)`` of one raw token."""
    low = surface.lower()
    if low in NUMBER_WORDS:
        return "number", NUMBER_WORDS[low]
    if _NUMBER.match(surface):
        value = re.sub(r":00(?=$|am|pm)", "", low)
        if re.fullmatch(r"(19|20)\d\d", value):
            return "date", value
        return "number", value
    if low in WEEKDAYS or (low.endswith("s") and low[:-1] in WEEKDAYS):
        return "date", WEEKDAYS.get(low, WEEKDAYS.get(low[:-1], low))
    if low in MONTHS and (low not in AMBIGUOUS_MONTHS or (surface[0].isupper() and not sentence_start)):
        return "date", MONTHS[low]
    if low in TOOLS:
        return "ident", TOOL_ALIASES.get(low, low)
    if any(ch.isdigit() for ch in surface) or any(ch in "_./:+#" for ch in surface):
        return "ident", low
    if surface[0].isupper():
        if surface.isupper() and len(surface) <= 5 and len(surface) > 1:
            return "word", canonical(surface)  # API, CI, TTL: ordinary nouns in records
        if any(ch.isupper() for ch in surface[1:]):
            return "ident", low  # PostgreSQL, GitHub, iOS-like names
        if not sentence_start:
            return "proper", low
        canon = canonical(surface)
        # A capitalised first word is usually the subject's name ("Priya works at Acme"), so it
        # counts as a specific value; it is stemmed so "Tickets are ..." still matches "tickets".
        return ("word" if canon == "user" else "proper"), canon
    return "word", canonical(surface)


def _raw_tokens(text: str) -> list[tuple[str, bool]]:
    """Split into ``(surface, sentence_start)`` tokens, expanding contractions and compounds."""
    text = text.replace("\u2019", "'").replace("\u2018", "'").replace("`", " ").replace('"', " ")
    for pattern, repl in _CONTRACTIONS:
        text = pattern.sub(repl, text)
    out: list[tuple[str, bool]] = []
    start = True
    for match in _TOKEN.finditer(text):
        tok = match.group(0).strip("'")
        if not tok:
            continue
        if tok in _CLAUSE_PUNCT:
            out.append((tok, False))
            start = tok in ".!?"
            continue
        low = tok.lower()
        if low in BRITISH:
            tok = BRITISH[low] if tok.islower() else BRITISH[low].capitalize()
            low = tok.lower()
        parts = [tok]
        if "-" in tok and low not in TOOLS and all(p.isalpha() for p in tok.split("-")):
            parts = tok.split("-")  # meat-eater, left-handed, bullet-point: ordinary words
        elif ("/" in tok or "_" in tok) and re.fullmatch(r"[a-z]+(?:[/_][a-z]+)+", tok):
            parts = re.split(r"[/_]", tok)  # requests/minute, rate_limit
        for part in parts:
            out.append((part, start))
            start = False
    return out


def _fold_phrases(tokens: list[tuple[str, bool]]) -> list[tuple[str, bool]]:
    out: list[tuple[str, bool]] = []
    i = 0
    lows = [t.lower() for t, _ in tokens]
    while i < len(tokens):
        for n in range(MAX_PHRASE, 1, -1):
            key = tuple(lows[i : i + n])
            if len(key) == n and key in PHRASES:
                if key == ("used", "to") and out and out[-1][0].lower() in BE:
                    continue  # "is used to deploy" is passive, not a past habit
                if PHRASES[key]:
                    out.append((PHRASES[key], tokens[i][1]))
                i += n
                break
        else:
            out.append(tokens[i])
            i += 1
    return out


@lru_cache(maxsize=8192)
def parse_claim(text: str) -> ParsedClaim:
    """Parse one claim or quote; cached, since the ingestor compares one text with many."""
    tokens = _fold_phrases(_raw_tokens(text))
    frame: list[Token] = []
    markers: list[str] = []
    clauses: list[Clause] = []
    clause_canons: set[str] = set()
    clause_markers = 0
    clause_hedged = False
    clause_request = False
    be_at: int | None = None
    principal = False
    relations: set[str] = set()
    clause = 0
    negated = False
    prev_low = ""
    prefer_seen = False
    speaker_included = False
    past = False

    clause_start = 0

    def close_clause() -> None:
        nonlocal clause_canons, clause_markers, clause_hedged, clause_request, clause, negated
        nonlocal clause_start
        if len(frame) > clause_start or clause_markers or clause_hedged or clause_request:
            clauses.append(
                Clause(frozenset(clause_canons), clause_markers % 2, clause_hedged, clause_request)
            )
            clause += 1
        clause_canons, clause_markers, clause_hedged, clause_request = set(), 0, False, False
        clause_start = len(frame)
        negated = False

    for index, (surface, sentence_start) in enumerate(tokens):
        low = surface.lower()
        if surface in _CLAUSE_PUNCT or low in CLAUSE_WORDS:
            close_clause()
            prev_low = low
            continue
        if surface == "HEDGE":
            clause_hedged = True
            prev_low = low
            continue
        stem = stem_word(low)
        is_zero = low in {"0", "zero"} and index + 1 < len(tokens) and tokens[index + 1][0].isalpha()
        if surface.startswith("NEG:") or low in NEGATIONS or is_zero or stem in NEGATION_STEMS:
            markers.append(surface.removeprefix("NEG:"))
            clause_markers += 1
            negated = True
            if low == "without":
                frame.append(Token("with", "with", "with", "prep", clause, negated))
            continue  # prev_low is kept: "is not allowed" is still a participle
        if low in PAST_FORMS or (low.endswith("ed") and low.isalpha() and canonical(low) in VERBS):
            # a past verb, not a participle ("is based", "has moved") or adjective ("detailed")
            past = past or prev_low not in PARTICIPLE_AFTER or low in {"was", "were", "had", "did"}
        if low in HEDGES and not (low == "might" and surface[0] == "M" and not sentence_start):
            clause_hedged = True
        if low in REQUEST_CUES or (low == "you" and prev_low in {"can", "could", "would"}):
            clause_request = True
        if low in PRINCIPAL:
            if prev_low == "and" or (index + 1 < len(tokens) and tokens[index + 1][0].lower() == "and"):
                speaker_included = True  # "my partner and I live in Leeds"
            principal = True
            if low in {"my", "our"} and index + 1 < len(tokens):
                nxt = stem_word(tokens[index + 1][0])
                if nxt in RELATIONS:
                    relations.add(nxt)
            frame.append(Token(surface, "user", "user", "word", clause, negated))
            clause_canons.add("user")
            prev_low = low
            continue
        if low in BE:
            if be_at is None:
                be_at = len(frame)
            prev_low = low
            continue
        if prev_low in BE and low in {"called", "named"}:
            continue  # "is called Sam" is "is Sam"; prev_low stays the be-verb
        following = tokens[index + 1][0].lower() if index + 1 < len(tokens) else "."
        if (
            prev_low in BE
            and low in {"on", "off"}
            and (following in PREPOSITIONS or following in _CLAUSE_PUNCT)
        ):
            low = surface = "enabled" if low == "on" else "disabled"  # "the flag is on (for beta users)"
        month_may = low == "may" and surface[0] == "M" and not sentence_start  # "12 May", not "may"
        if (
            low in ARTICLES
            or low in PRONOUNS
            or low in FILLERS
            or low in HEDGES
            or (low in AUX and not month_may)
        ):
            prev_low = low
            continue
        if low in PREPOSITIONS:
            canon = low
            if low in COMPARATIVE or (low == "to" and prefer_seen):
                canon = "over"
            frame.append(Token(surface, canon, low, "prep", clause, negated))
            prev_low = low
            continue
        kind, canon = _kind(surface, sentence_start)
        if stem in NEGATIVE_VALENCE_STEMS:
            markers.append(surface)
            clause_markers += 1
            negated = True
        if canon == "like":
            prefer_seen = True
        if canon in {"user", "users"}:
            canon = "user"
        frame.append(Token(surface, canon, stem if kind == "word" else canon, kind, clause, negated))
        clause_canons.add(canon)
        prev_low = low
    close_clause()
    if speaker_included:
        relations.clear()
    return ParsedClaim(
        tuple(frame), be_at, tuple(markers), tuple(clauses), principal, frozenset(relations), past
    )
