"""Reading one claim for the activation policy: what it is about and how it is said.

:func:`read_claim` (and :func:`read_text`, with the extra signals the decision needs) find a
text's category (identity, communication, constraints, ...) and its form (a standing
default, or one-off, conditional, time-bound, past, hedged, a request, about someone else)
from cue phrases in :mod:`retold.policy.activation_lexicon`. A separate module from the
decision (:mod:`retold.policy.activation`) because reading English is one job and deciding
what the readings allow is another. Pure and deterministic; both readers are
``lru_cache``-d (thread-safe).

One job: reading a claim's category and form; it is long because each category and each
form is a small rule of its own over the cue phrases.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache
from typing import Literal

from retold.ingest.equivalence.claim_lexicon import CONTRACTIONS, stem_word
from retold.ingest.equivalence.claim_parser import parse_claim
from retold.policy import activation_lexicon as lx

__all__ = ["ClaimReading", "Form", "Reading", "read_claim", "read_text"]

Form = Literal[
    "standing", "one_off", "conditional", "time_bound", "hedged", "past", "request", "third_party",
    "unmarked",
]  # fmt: skip
"""How a text says what it says; everything but ``standing`` keeps a record out of the profile."""


@dataclass(frozen=True)
class ClaimReading:
    """What the rules read in one text: its category, its form and the cue phrases that decided."""

    category: str | None
    form: Form
    cues: tuple[str, ...]  # lexicon entries, never free text


_CONTRACTIONS: tuple[tuple[re.Pattern[str], str], ...] = tuple(
    (re.compile(pattern, re.IGNORECASE), repl)
    for pattern, repl in (
        (r"\bdont\b", "do not"),
        *CONTRACTIONS,
        (r"\b(\w+)'s\b", r"\1 's"),  # kept as a token: "user's" names an owner
        (r"\bpl(?:s|z)\b", "please"),
    )
)
_TOKEN = re.compile(r"'s\b|[A-Za-z0-9](?:[A-Za-z0-9_+#./-]*[A-Za-z0-9+#])?|[?,;:.!()]")
_PUNCT = frozenset("?,;:.!()")
_PARTS = re.compile(r"[-/+]")
_LEAD_INS = re.compile(r"\b(?:" + "|".join(map(re.escape, lx.LEAD_INS)) + r")\b", re.IGNORECASE)
_TLDR = re.compile(r"\btl;\s?dr\b", re.IGNORECASE)
_CLOCK = re.compile(r"\d{1,2}(?::\d\d)?(?:am|pm)")
_ORDINAL = re.compile(r"\d{1,2}(?:st|nd|rd|th)")


def _stem(word: str) -> str:
    return stem_word(word) if word.isalpha() else word.lower()


@dataclass(frozen=True)
class _Text:
    """A text as tokens: as written, lower-cased and stemmed, with its clause spans."""

    surface: tuple[str, ...]
    low: tuple[str, ...]
    stems: tuple[str, ...]
    parts: tuple[frozenset[str], ...]  # stems of a compound's parts ("gluten-free", "utc+2")
    clauses: tuple[tuple[int, int], ...]  # [start, end) of each clause's word tokens

    def word(self, i: int) -> str:
        return self.low[i] if 0 <= i < len(self.low) else "."

    @property
    def question(self) -> bool:
        return "?" in self.low


def _tokens(text: str) -> _Text:
    text = text.replace("\u2019", "'").replace("\u2018", "'").replace("\u2014", ",").replace(" - ", ", ")
    text = _LEAD_INS.sub(",", _TLDR.sub("tldr", text))
    for pattern, repl in _CONTRACTIONS:
        text = pattern.sub(repl, text)
    surface = tuple(m.group(0) for m in _TOKEN.finditer(text))
    low = tuple(s.lower() for s in surface)
    stems = tuple(_stem(w) for w in low)
    parts = tuple(
        frozenset(_stem(p) for p in _PARTS.split(w) if p) if _PARTS.search(w) else frozenset() for w in low
    )
    clauses: list[tuple[int, int]] = []
    start = 0
    for i, w in enumerate((*low, ".")):
        if w in _PUNCT or w in lx.CLAUSE_BREAKS:
            if i > start:
                clauses.append((start, i))
            start = i + 1
    return _Text(surface, low, stems, parts, tuple(clauses))


class _Lexicon:
    """Phrases matched on stems; :meth:`find` gives the first match's entry and position."""

    def __init__(self, phrases: Iterable[str]) -> None:
        self._by_first: dict[str, list[tuple[tuple[str, ...], str]]] = {}
        self._exact: dict[str, str] = {}  # "=mostly": this word only
        for phrase in phrases:
            if phrase.startswith("="):
                self._exact[phrase[1:]] = phrase[1:]
                continue
            key = tuple(_stem(w) for w in phrase.split())
            self._by_first.setdefault(key[0], []).append((key, phrase))
        for entries in self._by_first.values():
            entries.sort(key=lambda e: -len(e[0]))  # the longest phrase first

    def find_all(self, t: _Text, start: int = 0, end: int | None = None) -> list[tuple[str, int]]:
        """Every match starting in ``[start, end)``, a window clipped to the text: callers ask
        for "the next two words" without knowing the text has fewer ("Reply", ":text")."""
        end = len(t.stems) if end is None else min(end, len(t.stems))
        out: list[tuple[str, int]] = []
        for i in range(max(start, 0), end):
            if t.low[i] in self._exact:
                out.append((self._exact[t.low[i]], i))
                continue
            for key, phrase in self._by_first.get(t.stems[i], ()):
                if i + len(key) <= end and t.stems[i : i + len(key)] == key:
                    out.append((phrase, i))
                    break
            else:  # one word of a compound: "gluten" in "gluten-free"
                for part in t.parts[i]:
                    single = next((p for k, p in self._by_first.get(part, ()) if len(k) == 1), None)
                    if single is not None:
                        out.append((single, i))
                        break
        return out

    def find(self, t: _Text, start: int = 0, end: int | None = None) -> tuple[str, int] | None:
        found = self.find_all(t, start, end)
        return found[0] if found else None


_IDENTITY_NAME = _Lexicon(lx.IDENTITY_NAME)
_NAME_VERBS = _Lexicon(lx.NAME_VERBS)
_RELATIONSHIP = _Lexicon(lx.RELATIONSHIP)
_CONSTRAINTS = _Lexicon(lx.CONSTRAINTS)
_SCHEDULE = _Lexicon(lx.SCHEDULE)
_COMMUNICATION = _Lexicon(lx.COMMUNICATION)
_IDENTITY = _Lexicon(lx.IDENTITY)
_WORKFLOW = _Lexicon(lx.WORKFLOW)
_AFFECT = _Lexicon(lx.AFFECT)
_INTERESTS = _Lexicon(lx.INTERESTS)
_STANDING = _Lexicon(lx.STANDING_MARKERS)
_WEAK_STANDING = _Lexicon(lx.WEAK_STANDING)
_STANDING_VERBS = _Lexicon(lx.STANDING_VERBS)
_ONE_OFF = _Lexicon(lx.ONE_OFF)
_TIME_BOUND = _Lexicon(lx.TIME_BOUND)
_CONDITIONAL = _Lexicon(lx.CONDITIONAL)
_PAST = _Lexicon(lx.PAST)
_HEDGED = _Lexicon(lx.HEDGED)
_ASKING = _Lexicon(lx.ASKING)
_REQUEST = _Lexicon(lx.REQUEST_PHRASES)
_PEOPLE_STEMS = frozenset(_stem(w) for w in lx.PEOPLE) | lx.PEOPLE
_PEOPLE_WORD = {_stem(w): w for w in reversed(lx.PEOPLE_WORDS)}  # a stem's cue word, as listed
_STATEMENT_STEMS = frozenset(_stem(w) for w in lx.STATEMENT_VERBS)
_KNOWN = frozenset(
    w
    for group in (
        lx.IDENTITY_NAME, lx.COMMUNICATION, lx.CONSTRAINTS, lx.SCHEDULE, lx.IDENTITY, lx.WORKFLOW,
        lx.INTERESTS, lx.AFFECT, lx.STANDING_MARKERS, lx.LANGUAGES,
    )
    for phrase in group
    for w in phrase.split()
) | lx.TASK_VERBS | lx.MANNER_VERBS | lx.DISCOURSE | lx.QUESTION_OPENERS | lx.AUX_OPENERS  # fmt: skip
"""Words that open a sentence without being a person's name."""


def _is_people(t: _Text, i: int) -> bool:
    return 0 <= i < len(t.low) and (t.low[i] in _PEOPLE_STEMS or t.stems[i] in _PEOPLE_STEMS)


def _speaker_included(t: _Text) -> bool:
    """Whether the speaker is one of the subjects ("my partner and I", "me and my sister")."""
    pairs = zip(t.low, t.low[1:], strict=False)
    return any((a == "and" and b in {"i", "me", "we"}) or (a in {"me", "i"} and b == "and") for a, b in pairs)


def _owned_people(t: _Text, start: int = 0, end: int | None = None) -> str | None:
    """A person the speaker or subject owns ("my sister", "user's boss"), as its lexicon word."""
    for i in range(start, len(t.low) if end is None else min(end, len(t.low))):
        w = t.low[i]
        if not (w in lx.POSSESSIVES or (w == "'s" and t.word(i - 1) == "user")):
            continue
        for j in (i + 1, i + 2):  # "my sister", "my older sister"
            if _is_people(t, j):
                return _people_word(t, j)
    return None


def _people_word(t: _Text, i: int) -> str:
    return t.low[i] if t.low[i] in lx.PEOPLE_WORDS else _PEOPLE_WORD.get(t.stems[i], "person")


def _had_people(t: _Text) -> str | None:
    """A relation the speaker has ("I have two kids", "has a dog")."""
    for i, w in enumerate(t.low):
        if w in {"have", "has"} and (t.word(i + 1) in lx.DURATION_COUNTS or t.word(i + 1).isdigit()):
            for j in (i + 2, i + 3):
                if _is_people(t, j):
                    return _people_word(t, j)
    return None


def _name_follows(t: _Text, lexicon: _Lexicon) -> str | None:
    """``call me``/``goes by`` followed by a capitalised word: a name."""
    for phrase, i in lexicon.find_all(t):
        after = i + len(phrase.split())
        if after < len(t.surface) and t.surface[after][:1].isupper():
            return phrase
    return None


def _self_named(t: _Text) -> str | None:
    """The speaker's name given as "I'm Ngozi": a capitalised unknown word ending the clause."""
    for i in range(len(t.low) - 2):
        if t.low[i] == "i" and t.low[i + 1] == "am":
            name = t.surface[i + 2]
            if (
                name[:1].isupper()
                and name.isalpha()
                and name.lower() not in _KNOWN
                and t.word(i + 3) in _PUNCT
            ):
                return "i am"
    return None


def _time_zone(t: _Text) -> str | None:
    for i in range(len(t.low) - 1):
        if t.low[i] in lx.TIME_REGIONS and t.low[i + 1] == "time":
            return "time zone"
    return None


def _role(t: _Text) -> str | None:
    """An occupation the user has: "I'm a nurse", "works as a data scientist"."""
    return next((w for w in t.low if w in lx.ROLES), None)


def _diet(t: _Text) -> tuple[str, int] | None:
    """A food the user refuses ("I never eat beef", "no pork"): a diet limit, not a taste."""
    if not any(w in lx.NEGATORS or t.parts[i] & lx.NEGATORS for i, w in enumerate(t.low)):
        return None
    for i, w in enumerate(t.low):
        if w in lx.DIET_FOODS or t.parts[i] & lx.DIET_FOODS:
            return "food refused", i
    return None


def _schedule(t: _Text) -> str | None:
    """An availability limit: a scheduling phrase, or a scheduling word beside a time word."""
    if found := _SCHEDULE.find(t):
        return found[0]
    times = any(w in lx.SCHEDULE_TIMES or _CLOCK.fullmatch(w) for w in t.low)
    return next((w for w in t.low if w in lx.SCHEDULE_CONTEXT), None) if times else None


def _category(t: _Text, text: str) -> tuple[str | None, str | None]:
    """The category and its cue: people first (a claim about them is not the user's default),
    then names, tastes, and the promotable kinds from the most to the least specific."""
    relation = _RELATIONSHIP.find(t)
    if relation:
        return "relationships", relation[0]
    parsed = sorted(parse_claim(text).relations)  # the judge's reading: "my sister", not "my sister and I"
    if parsed:
        return "relationships", _PEOPLE_WORD.get(parsed[0], "person")
    if (owned := _owned_people(t) or _had_people(t)) and not _speaker_included(t):
        return "relationships", owned
    name = _IDENTITY_NAME.find(t)
    if name or (name_verb := _name_follows(t, _NAME_VERBS) or _self_named(t)):
        return "identity", name[0] if name else name_verb
    constraint, communication = _CONSTRAINTS.find(t) or _diet(t), _COMMUNICATION.find(t)
    affect = _AFFECT.find(t)
    if affect and not constraint and not communication:
        return "interests", affect[0]
    for category, found in (("constraints", constraint), ("communication", communication)):
        if found:
            return category, found[0]
    if hobby := _INTERESTS.find(t):
        return "interests", hobby[0]
    if schedule := _schedule(t):
        return "constraints", schedule
    if identity := _IDENTITY.find(t) or _time_zone(t) or _role(t):
        return "identity", identity if isinstance(identity, str) else identity[0]
    if work := _WORKFLOW.find(t):
        return "workflow", work[0]
    return None, None


# --------------------------------------------------------------------------- the form


def _main_clause(t: _Text) -> tuple[int, int]:
    """The first clause that is not an adverbial opener ("For this toast, ..."), discourse words
    skipped; the first clause when every clause opens with one."""
    if not t.clauses:
        return 0, 0
    chosen = t.clauses[0]
    for start, end in t.clauses:
        i = start
        while i < end and t.low[i] in lx.DISCOURSE:
            i += 1
        if t.word(end) == ":" and end - i <= 3:
            continue  # a lead-in: "One thing: ...", "Note: ..."
        if i < end and t.low[i] not in lx.SUBORDINATORS:
            return i, end
    start, end = chosen
    for i in range(start, end):  # "In this repo we use tabs": start at the subject
        if t.low[i] in {"i", "we", "my", "our", "user"}:
            return i, end
    while start < end and t.low[start] in lx.DISCOURSE:
        start += 1
    return start, end


def _is_third_person_verb(t: _Text, i: int) -> bool:
    w = t.word(i)
    return w in {"is", "has", "does"} or (
        w.endswith("s") and len(w) > 3 and t.stems[i] in _STATEMENT_STEMS and w not in lx.PEOPLE
    )


def _verb_form(t: _Text, i: int, end: int) -> tuple[Form, str] | None:
    """The form of a statement whose verb phrase starts at ``i``: standing when its verb is a plain
    present (or a copula), unmarked for progressives, modals and wanting; None when past
    (the past cues decide that)."""
    while i < end and (
        t.low[i] in lx.ADVERBS or (t.low[i] in {"do", "does", "can"} and t.word(i + 1) in {"not", "never"})
    ):
        i += 1
    if i >= end:
        return None
    w = t.low[i]
    if w in lx.BE:
        nxt = t.word(i + 1)
        if nxt.endswith("ing") and nxt not in lx.ING_ADJECTIVES:
            return "unmarked", "progressive"
        if nxt in lx.TRANSIENT or (nxt == "not" and t.word(i + 2) in lx.TRANSIENT):
            return "unmarked", "state"
        return "standing", "be"
    if w in {"have", "has"} and t.word(i + 1) == "been" and t.word(i + 2).endswith("ing"):
        return "unmarked", "progressive"  # "I've been learning ..."
    if w in lx.MODALS or w in lx.NOT_STANDING_VERBS:
        return "unmarked", w
    if w.endswith("ing") or (t.stems[i] == "keep" and t.word(i + 1).endswith("ing")):
        return "unmarked", "progressive"  # "keeps rejecting": an episode going on
    if w in lx.PAST_ANYWHERE or w in lx.PAST_AFTER_SUBJECT or _regular_past(w):
        return None
    verb = _STANDING_VERBS.find(t, i, i + 1)
    return "standing", verb[0] if verb else "statement"


def _regular_past(word: str) -> bool:
    return word.isalpha() and len(word) >= 4 and word.endswith("ed") and not word.endswith("eed")


@dataclass(frozen=True)
class _Opening:
    """How the main clause opens: who speaks of whom, and whether it asks for work."""

    kind: str  # user | named | other | third_party | imperative | fragment | question
    cue: str | None
    form: tuple[Form, str] | None = None  # a statement's verb form
    task: bool = False  # an imperative asking for a piece of work (or about "it"/"this")


def _imperative(t: _Text, v: int, end: int) -> _Opening:
    """An imperative at ``v``: a task verb, or any verb on a deictic object, asks for work."""
    verb = t.low[v]
    if _NAME_VERBS.find(t, v, v + 2) and v + 2 < len(t.surface) and t.surface[v + 2][:1].isupper():
        return _Opening("imperative", "call me")  # "Call me Bea": a name, not a task
    j = v + 1
    while j < end and t.low[j] in {"me", "us"}:
        j += 1
    obj = t.word(j) if j < end else "."
    if obj in lx.OBJECT_DEICTICS:
        return _Opening("imperative", obj, task=True)
    if obj == lx.DEFINITE and not t.word(j + 1).endswith("s"):
        return _Opening("imperative", lx.DEFINITE, task=True)
    if verb in lx.TASK_VERBS:
        return _Opening("imperative", verb, task=True)
    for k in range(j, end):  # "use metric for the report", "be more formal in the next reply"
        if t.low[k] in lx.COMPARATIVES:
            return _Opening("imperative", t.low[k], task=True)
        if (
            t.low[k] in lx.PREPOSITIONS
            and t.word(k + 1) in lx.ARTIFACT_DETERMINERS
            and not t.word(k + 2 + (t.word(k + 2) in lx.ADJECTIVE_SKIP)).endswith("s")
        ):
            return _Opening("imperative", t.word(k + 1), task=True)
    return _Opening("imperative", verb)


def _opening(t: _Text) -> _Opening:
    start, end = _main_clause(t)
    if start >= end:
        return _Opening("fragment", None)
    w, nxt = t.low[start], t.word(start + 1)
    if w in lx.QUESTION_OPENERS:
        return _Opening("question", w)
    asking = _ASKING.find(t, start, min(end, start + 2))
    if asking:
        v = start + 2
        while v < end and t.low[v] in lx.ADVERBS | lx.DISCOURSE:
            v += 1
        return _imperative(t, v, end) if v < end else _Opening("question", asking[0])
    if w in lx.AUX_OPENERS and (nxt in lx.SPEAKER or nxt in lx.QUESTION_SUBJECTS):
        return _Opening("question", w)
    if w in lx.PERSON_SUBJECTS:
        return _Opening("third_party", w)
    if (w == lx.DEFINITE and _is_people(t, start + 1)) or (_is_people(t, start) and w not in lx.SPEAKER):
        return _Opening("third_party", _people_word(t, start + 1 if w == lx.DEFINITE else start))
    if w in {"i", "we"}:
        return _Opening("user", w, _verb_form(t, start + 1, end))
    if w in {"my", "our"} or (w == "user" and nxt == "'s") or (w == lx.DEFINITE and nxt == "user"):
        first = start + (2 if w == lx.DEFINITE else 1)
        if w != lx.DEFINITE and (people := _owned_people(t, start, first + 2)) and not _speaker_included(t):
            return _Opening("third_party", people)
        return _Opening("user", w, _statement_verb(t, first, end))
    if w == "user":
        return _Opening("user", w, _verb_form(t, start + 1, end))
    if w == "does" and nxt == "not":
        return _Opening("user", w, _verb_form(t, start, end))  # "Doesn't drink alcohol"
    if w == "do" and nxt == "not" and start + 2 < end:
        v = start + 2 + (t.word(start + 2) == "ever")
        return _imperative(t, v, end) if v < end else _Opening("fragment", None)  # "Don't ..."
    v = start
    while v < end and (t.low[v] in lx.ADVERBS or t.low[v] in {"do", "not", "please", "ever"}):
        v += 1  # "never schedule", "don't ever call", "always reply"
    if v < end and t.low[v] in lx.TASK_VERBS | lx.MANNER_VERBS:
        return _imperative(t, v, end)
    if v < end and _is_third_person_verb(t, v):
        return _Opening("user", "statement", _verb_form(t, v, end))  # "Prefers ...", "Never uses ..."
    if _named(t, start, end):
        return _Opening("named", "named person", _verb_form(t, start + 1, end))
    for i in range(start, end):
        if t.low[i] in lx.BE or _is_third_person_verb(t, i) or t.low[i] in lx.MODALS:
            # a thing as the subject: only "X is my Y" states something of the user; an action
            # ("Git keeps rejecting my push") is an event
            form = _verb_form(t, i, end) if t.low[i] in lx.BE else ("unmarked", "statement")
            return _Opening("other", "statement", form)
    return _Opening("fragment", None)


def _statement_verb(t: _Text, start: int, end: int) -> tuple[Form, str] | None:
    """The verb form of "my X is ...", "user's X are ...": the first verb after the subject."""
    for i in range(start, end):
        if t.low[i] in lx.BE or t.low[i] in lx.MODALS or _is_third_person_verb(t, i):
            return _verb_form(t, i, end)
        if t.low[i] in lx.PAST_ANYWHERE:
            return None
    return None


def _named(t: _Text, start: int, end: int) -> bool:
    """A capitalised unknown word followed by a verb: a person's name as the subject."""
    first = t.surface[start]
    return (
        first[:1].isupper()
        and first.isalpha()
        and not first.lower().endswith("ing")
        and t.low[start] not in _KNOWN
        and t.stems[start] not in _KNOWN
        and start + 1 < end
        and (
            t.low[start + 1] in lx.BE | {"has", "was", "asked", "said", "told", "wants"}
            or _is_third_person_verb(t, start + 1)
            or t.low[start + 1] in {"on", "from", "at", "in", "with"}
        )
    )


def _past(t: _Text) -> str | None:
    for phrase, i in _PAST.find_all(t):
        if phrase == "used to" and t.word(i - 1) in lx.HAVE_BE:
            continue  # "I'm used to it" is not a past habit
        return phrase
    for i, w in enumerate(t.low):
        if w == "last" and t.word(i + 1) in lx.LAST_UNITS:
            return "last " + t.word(i + 1)
        if w in lx.PAST_ANYWHERE and t.word(i - 1) not in lx.HAVE_BE and t.word(i + 1) != "born":
            return w
    subjects = lx.SUBJECT_PRONOUNS
    for i, w in enumerate(t.low):
        if w not in subjects:
            continue
        j = i + 1 + (t.word(i + 1) in lx.ADVERBS)
        nxt = t.word(j)
        if nxt in lx.PAST_AFTER_SUBJECT or (_regular_past(nxt) and nxt not in lx.PAST_EXCEPTIONS):
            return "past tense"
    return None


def _time_bound(t: _Text) -> str | None:
    for phrase, i in _TIME_BOUND.find_all(t):
        if phrase == "during" and any(t.word(j) in lx.RECURRING for j in range(i + 1, i + 5)):
            continue  # "during lunch" recurs every day
        return phrase
    for i, w in enumerate(t.low):
        if w in lx.MONTHS and t.word(i - 1) in {"for", "through", "throughout"}:
            return "for a period"  # "for January", "for Lent"
    if "been" in t.low or "since" in t.low:
        return None  # "I've been vegan for six years": a duration so far
    for i, w in enumerate(t.low):
        if w != "for":
            continue
        j = i + 1
        while t.word(j) in lx.DURATION_COUNTS or t.word(j).isdigit() or t.word(j) == "of":
            j += 1
        if j > i + 1 and t.word(j) in lx.DURATION_UNITS:
            return "for a period"
    return None


def _one_off(t: _Text) -> str | None:
    if found := _ONE_OFF.find(t):
        return found[0]
    for i, w in enumerate(t.low):
        nxt = t.word(i + 1)
        if w in lx.WEEKDAYS and t.word(i - 1) in lx.BEFORE_WEEKDAY:
            return "a weekday"
        if _ORDINAL.fullmatch(w) or (
            w in lx.MONTHS and (t.word(i + 1).isdigit() or t.word(i - 1) == "starting")
        ):
            return "a date"
        if w not in lx.DEMONSTRATIVES or not nxt.isalpha() or nxt in lx.NOT_NOUNS:
            continue
        if w == "that" and not (i == 0 or t.word(i - 1) in lx.PREPOSITIONS or t.word(i - 1) in _PUNCT):
            continue  # "that" as a conjunction ("I know that ...")
        if w == "these" and nxt == "days":
            continue
        return w
    return None


def _conditional(t: _Text) -> str | None:
    for phrase, i in _CONDITIONAL.find_all(t):
        if phrase in {"when", "whenever"} and t.word(i - 1) != "only" and _names_domain(t, i + 1):
            continue
        if t.word(i - 1) == "even":
            continue  # "even if I write in Swedish": concessive, the default holds regardless
        return phrase
    return _scope(t)


def _scope(t: _Text) -> str | None:
    """A main clause led by a scope ("With clients, always ...", "On Fridays I ..."): it holds
    there only. Not a standing marker ("In general, ...") nor the user ("For me, ...")."""
    if not t.clauses:
        return None
    start, end = t.clauses[0]
    while start < end and t.low[start] in lx.DISCOURSE:
        start += 1
    if start >= end or t.low[start] not in lx.SCOPE_PREPOSITIONS:
        return None
    subject = next((i for i in range(start + 1, end) if t.low[i] in {"i", "we"}), end)
    phrase = range(start, subject)
    if any(t.low[i] in lx.SPEAKER for i in phrase) or _STANDING.find(t, start, subject):
        return None
    if _WEAK_STANDING.find(t, start, subject):
        return None
    if subject == end and not any(_has_verb(t, a, b) for a, b in t.clauses[1:]):
        return None  # "In Spanish, please.": a fragment, not a scoped default
    return t.low[start]


def _has_verb(t: _Text, start: int, end: int) -> bool:
    return any(
        t.low[i] in lx.BE | lx.MODALS | lx.TASK_VERBS | lx.MANNER_VERBS | lx.SPEAKER
        or _is_third_person_verb(t, i)
        for i in range(start, end)
    )


def _names_domain(t: _Text, i: int) -> bool:
    """Whether a when-clause spans the whole domain and ends there ("when you talk to me")."""
    if t.word(i) not in {"you", "i", "we"} or t.stems[i + 1 : i + 2] == () or i + 1 >= len(t.low):
        return False
    if t.low[i + 1] not in lx.DOMAIN_VERBS and t.stems[i + 1] not in lx.DOMAIN_VERBS:
        return False
    j = i + 2
    if t.word(j) in lx.DOMAIN_OBJECTS:
        j += 1
    if t.word(j) in {"to", "with"} and t.word(j + 1) in {"me", "us"}:
        j += 2
    return t.word(j) in _PUNCT


def _request(t: _Text, opening: _Opening, strong: bool) -> str | None:
    """Work asked for now; a standing marker makes a task verb a default ("always send me the
    agenda"), never an instruction about "it" or "this"."""
    if opening.kind == "imperative" and opening.task and (opening.cue in lx.OBJECT_DEICTICS or not strong):
        return opening.cue
    if strong:
        return None
    if found := _REQUEST.find(t):
        return found[0]
    if any(t.low[a:b] in lx.PLEAS for a, b in t.clauses):
        return "help"
    if opening.kind == "fragment" and not _IDENTITY_NAME.find(t):  # "she/her pronouns, please"
        start, _ = _main_clause(t)
        if lx.PLEASE in t.low:
            return lx.PLEASE
        if t.word(start) in lx.COMPARATIVES:
            return t.word(start)
    return None


def _third_party(t: _Text, opening: _Opening) -> str | None:
    if opening.kind == "third_party":
        return opening.cue
    start, _ = _main_clause(t)
    if (
        opening.kind == "named"
        and t.word(start + 1) in {"on", "from", "at", "in", "with"}
        and t.word(start + 2) in {"my", "our"}
    ):
        return "named person"  # "Dana on my team ..."
    return None


def _standing(t: _Text, opening: _Opening) -> str | None:
    """A standing-default cue: a marker, a name, or a plain-present statement by or about the user."""
    if marker := _STANDING.find(t) or _WEAK_STANDING.find(t):
        return marker[0]
    if name := _IDENTITY_NAME.find(t):
        return name[0]
    if name_verb := _name_follows(t, _NAME_VERBS) or _self_named(t):
        return name_verb
    if opening.kind in {"user", "named", "other"} and opening.form and opening.form[0] == "standing":
        return opening.form[1]
    for start, end in t.clauses:  # a later clause in the speaker's voice: "..., I prefer X"
        i = start
        while i < end and t.low[i] in lx.DISCOURSE:
            i += 1
        if i < end and t.low[i] in {"i", "we"}:
            form = _verb_form(t, i + 1, end)
            if form and form[0] == "standing":
                return form[1]
    return None


def _hedged(t: _Text) -> str | None:
    for phrase, i in _HEDGED.find_all(t):
        if phrase in lx.INTENTIONS and t.word(i - 1) == "not":
            continue  # "does not want to be called ...": a refusal, not an intention
        return phrase
    return None


@dataclass(frozen=True)
class Reading:
    """What the decision reads in one text: :class:`ClaimReading` and who and what it speaks of."""

    category: str | None
    category_cue: str | None
    form: Form
    form_cue: str | None
    about_user: bool  # speaks of the user (first person, "user", or an instruction to the agent)
    named_subject: bool  # opens with a person's name as its subject
    instruction: bool  # an instruction on how to behave ("Reply in Spanish"), not a piece of work


@lru_cache(maxsize=8192)
def read_text(text: str) -> Reading:
    t = _tokens(text)
    category, category_cue = _category(t, text)
    opening = _opening(t)
    strong = _STANDING.find(t)
    form: Form
    cue: str | None
    checks: tuple[tuple[Form, str | None], ...] = (
        ("third_party", _third_party(t, opening)),
        ("request", "?" if t.question and not (strong and _ASKING.find(t)) else None),
        ("request", opening.cue if opening.kind == "question" else None),
        ("past", _past(t)),
        ("time_bound", _time_bound(t)),
        ("one_off", _one_off(t)),
        ("conditional", _conditional(t)),
        ("request", _request(t, opening, strong is not None)),
        ("hedged", _hedged(t)),
        ("standing", _standing(t, opening)),
    )
    form, cue = next(((f, c) for f, c in checks if c is not None), ("unmarked", None))
    about_user = (
        any(w in lx.SPEAKER for w in t.low)
        or "user" in t.low
        or opening.kind in {"imperative", "user"}
        or (opening.kind == "fragment" and (_IDENTITY_NAME.find(t) or strong) is not None)
    )  # a fragment with a name or a marker: "she/her pronouns, please", "metric, always"
    instruction = opening.kind == "imperative" and not opening.task
    return Reading(category, category_cue, form, cue, about_user, opening.kind == "named", instruction)


@lru_cache(maxsize=8192)
def read_claim(text: str) -> ClaimReading:
    """The category and form the rules read in ``text`` (pure, deterministic, cached)."""
    r = read_text(text)
    cues = tuple(dict.fromkeys(c for c in (r.category_cue, r.form_cue) if c))
    return ClaimReading(r.category, r.form, cues)
