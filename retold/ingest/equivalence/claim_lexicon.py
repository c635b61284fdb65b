"""The English the conservative judge reads: word lists, curated synonyms and antonyms, and a stemmer.

Why a module of its own: the claim parser (:mod:`retold.ingest.equivalence.claim_parser`) and the rules
(:mod:`retold.ingest.equivalence.claim_rules`) both look words up here, and the tables are data that
grows on its own schedule (a new antonym pair, a tool name, a British spelling) while the
code that reads them stays put. Keeping them apart keeps each module reviewable.

Everything here is built once at import and never mutated afterwards, so it is safe to read
from any thread. Words are compared in canonical form: :func:`stem_word` (Snowball's English
stemmer, one instance per thread) maps inflections of one word to one stem, and
:func:`canonical` further maps a stem onto its synonym group, so "prefers", "likes" and
"loves" all become ``like``. The derived tables (``ANTONYMS``, ``VERBS``, ``GENERIC`` ...)
hold canonical forms or stems, as their comments say, and are all computed through
:func:`stem_word` at import, so a stemmer change cannot leave a hard-coded stem behind.
"""

from __future__ import annotations

from retold.retrieve.query_terms import stem

__all__ = [
    "ADDITIVE_NAMES",
    "AMBIGUOUS_MONTHS",
    "ANTONYMS",
    "ARTICLES",
    "AUX",
    "BE",
    "BRITISH",
    "CLAUSE_WORDS",
    "COMPARATIVE",
    "CONTRACTIONS",
    "EVENT",
    "FILLERS",
    "GENERIC",
    "HAVE",
    "HEDGES",
    "MAX_PHRASE",
    "MONTHS",
    "NEGATIONS",
    "NEGATION_STEMS",
    "NEGATIVE_VALENCE_STEMS",
    "NUMBER_WORDS",
    "PARTICIPLE_AFTER",
    "PAST_FORMS",
    "PHRASES",
    "PREPOSITIONS",
    "PRINCIPAL",
    "PRONOUNS",
    "RELATIONS",
    "REQUEST_CUES",
    "SEMI_ADDITIVE",
    "SLOT_PREPOSITIONS",
    "SPECIFIC_KINDS",
    "TOOLS",
    "TOOL_ALIASES",
    "VERBS",
    "WEEKDAYS",
    "canonical",
    "stem_word",
]


def _split(text: str) -> list[str]:
    """Whitespace-separated words: keeps the long word tables below readable."""
    return text.split()


CLAUSE_WORDS = frozenset({"but", "though", "although", "however", "whereas", "while", "yet"})

# Negation cues. Each flips a clause's polarity once; "no longer" and "used to" count once.
NEGATIONS = frozenset({"not", "no", "never", "none", "nobody", "nothing", "without"})
_NEGATION_VERBS = ("stop", "quit")  # "stopped using vim", "quit smoking"
# Negative-valence verbs: "dislikes X" is "does not like X" for polarity purposes.
_NEGATIVE_VALENCE = ("dislike", "hate", "detest", "loathe", "despise", "avoid")
HEDGES = frozenset({"maybe", "might", "perhaps", "possibly", "probably", "unsure", "considering",
                    "wondering", "whether", "if"})  # fmt: skip
REQUEST_CUES = frozenset({"please", "let"})  # "please reply in X" => the user wants X

ARTICLES = frozenset({"a", "an", "the", "this", "that", "these", "those", "every", "each", "all",
                      "some", "any", "another", "other", "such"})  # fmt: skip
PRONOUNS = frozenset({"you", "your", "yours", "he", "him", "his", "she", "her", "hers", "they", "them",
                      "their", "theirs", "it", "its", "itself", "themselves", "who", "whom", "whose",
                      "which", "what", "there", "here"})  # fmt: skip
PRINCIPAL = frozenset({"i", "me", "my", "mine", "myself", "we", "us", "our", "ours", "ourselves"})
AUX = frozenset({"do", "does", "did", "done", "doing", "will", "would", "shall", "should", "can",
                 "could", "must", "may", "might", "ought", "let", "going", "gonna"})  # fmt: skip
BE = frozenset({"is", "are", "was", "were", "be", "been", "being", "am"})
FILLERS = frozenset({"really", "very", "strongly", "generally", "usually", "typically", "always",
                     "just", "also", "still", "currently", "actually", "definitely", "honestly",
                     "please", "quite", "pretty", "so", "too", "much", "lot", "now", "anymore",
                     "and", "or", "as", "then", "well", "already", "even", "fyi", "ok", "okay",
                     "thanks", "thank", "yes", "yeah", "sure", "both", "either", "ever",
                     "everything", "everywhere", "anything", "something", "rather", "instead",
                     "these", "days", "kind", "sort", "certain", "certainly"})  # fmt: skip
PREPOSITIONS = frozenset({"in", "on", "at", "to", "from", "for", "with", "by", "over", "under",
                          "about", "into", "onto", "of", "per", "via", "until", "since", "during",
                          "than", "across", "through", "between", "within", "around", "near", "off",
                          "towards", "toward", "against", "among", "inside", "outside"})  # fmt: skip
COMPARATIVE = frozenset({"over", "than"})  # "prefers X over Y"; "to" joins them after a prefer-word

WEEKDAYS = {d: d for d in ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")}
WEEKDAYS.update({"tues": "tuesday", "thurs": "thursday"})
MONTHS = {m: m for m in ("january", "february", "march", "april", "may", "june", "july", "august",
                         "september", "october", "november", "december")}  # fmt: skip
MONTHS.update({"jan": "january", "feb": "february", "apr": "april", "jun": "june", "jul": "july",
               "aug": "august", "sep": "september", "sept": "september", "oct": "october",
               "nov": "november", "dec": "december"})  # fmt: skip
AMBIGUOUS_MONTHS = frozenset({"may", "march", "jan", "jun", "jul", "aug", "sep", "oct", "nov", "dec"})

NUMBER_WORDS = {
    w: str(i)
    for i, w in enumerate(
        _split(
            "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen "
            "fifteen sixteen seventeen eighteen nineteen twenty"
        )
    )
}
NUMBER_WORDS.update({"thirty": "30", "forty": "40", "fifty": "50", "sixty": "60", "seventy": "70",
                     "eighty": "80", "ninety": "90", "hundred": "100", "dozen": "12"})  # fmt: skip
del NUMBER_WORDS["zero"]  # "zero" is a negation cue ("0 failed"), handled there

# Tools people name in lower case; two of one category in the same slot are exclusive values
# ("uses vim" vs "uses emacs"). Names that are also everyday words (go, rust, java, ruby, black,
# windows, chrome, yarn, poetry, brew ...) are left out: capitalised, they are proper nouns anyway.
TOOLS: dict[str, str] = {}
for _category, _names in {
    "editor": "vim neovim nvim emacs vscode sublime nano intellij pycharm helix zed notepad++ xcode",
    "shell": "bash zsh powershell tcsh ksh nushell",
    "language": "python javascript typescript golang kotlin scala haskell clojure php c++ c# lua perl "
    "ocaml erlang fortran cobol",
    "database": "postgresql postgres mysql sqlite mariadb mongodb mssql dynamodb cassandra",
    "cache": "redis memcached valkey",
    "os": "linux ubuntu debian fedora macos freebsd centos",
    "test": "pytest unittest vitest rspec junit",
    "package": "pip conda npm pnpm",
    "vcs": "git mercurial svn",
    "cloud": "aws gcp azure",
    "browser": "firefox chromium",
    "lint": "ruff flake8 pylint prettier eslint mypy pyright",
    "embedding": "minilm bge-m3 e5 gte",
}.items():
    for _name in _names.split():
        TOOLS[_name] = _category

# Other spellings of one tool name.
TOOL_ALIASES = {"postgres": "postgresql", "nvim": "neovim", "golang": "go", "js": "javascript",
                "ts": "typescript", "py": "python", "k8s": "kubernetes"}  # fmt: skip

# Forms Snowball cannot relate to their base word (irregular verbs and plurals, "goes", and
# abbreviations): each becomes its base word, which is then stemmed like any other word.
_IRREGULAR = {
    "has": "have", "had": "have", "goes": "go", "went": "go", "gone": "go", "ran": "run", "met": "meet",
    "led": "lead", "spoke": "speak", "spoken": "speak", "wrote": "write", "written": "write",
    "began": "begin", "begun": "begin", "ate": "eat", "eaten": "eat", "drank": "drink",
    "drunk": "drink", "drove": "drive", "driven": "drive", "took": "take", "taken": "take",
    "forbidden": "forbid", "forbade": "forbid", "grew": "grow", "grown": "grow", "knew": "know",
    "known": "know", "children": "child", "people": "person", "made": "make", "got": "get",
    "gotten": "get", "gave": "give", "given": "give", "kept": "keep", "slept": "sleep", "woke": "wake",
    "chose": "choose", "chosen": "choose", "built": "build", "bought": "buy", "sold": "sell",
    "taught": "teach", "thought": "think", "felt": "feel", "found": "find", "lost": "lose",
    "won": "win", "paid": "pay", "said": "say", "sent": "send", "spent": "spend", "stood": "stand",
    "became": "become", "came": "come", "req": "request", "reqs": "request", "min": "minute",
    "mins": "minute", "sec": "second", "secs": "second", "hr": "hour", "hrs": "hour",
    "repo": "repository", "repos": "repository", "prs": "pr", "config": "configuration",
    "dept": "department", "flew": "fly", "flown": "fly",
}  # fmt: skip
BRITISH = {"colour": "color", "colours": "colors", "favourite": "favorite", "favourites": "favorites",
           "behaviour": "behavior", "organise": "organize", "organised": "organized", "centre": "center",
           "grey": "gray", "theatre": "theater", "licence": "license", "analyse": "analyze",
           "catalogue": "catalog", "utilise": "utilize", "favour": "favor", "mum": "mom",
           "neighbour": "neighbor", "programme": "program", "e-mail": "email", "emails": "email",
           "travelling": "traveling", "cancelled": "canceled", "extravert": "extrovert"}  # fmt: skip
PAST_FORMS = frozenset({"was", "were", "had", "did", "went", "ran", "met", "led", "spoke", "wrote",
                       "began", "ate", "drank", "drove", "took", "forbade", "grew", "knew", "made",
                       "got", "gave", "kept", "slept", "woke", "chose", "built", "bought", "sold",
                       "taught", "thought", "felt", "found", "lost", "won", "paid", "said", "sent",
                       "spent", "stood", "became", "came", "flew"})  # fmt: skip
PARTICIPLE_AFTER = frozenset({"is", "are", "am", "be", "been", "being", "was", "were", "has", "have",
                              "had", "get", "gets", "got"})  # fmt: skip
# Stems set here, not by Snowball, which would fold these words onto another word the tables
# give a meaning: "meeting" is not the event verb "meet", "likely" not "like", "friendly" not the
# relation "friend", "department" not the verb "depart", "informal" not "information", "optional"
# not "options", "stateful" not "state", "lately" not the antonym "late", "response" not
# "responsible" and "activate" not "active". The verb "like" keeps a stem apart from its synonym
# group's name ``like``: the rules read stems and canonical forms together, and liking two things
# is additive where preferring two is not ("likes vim" and "likes emacs" can both hold; "prefers
# vim" and "prefers emacs" cannot).
_OWN_STEM: dict[str, str] = {
    "meeting": "meeting", "meetings": "meeting", "likely": "likely", "friendly": "friendly",
    "department": "department", "departments": "department", "informal": "informal",
    "optional": "optional", "stateful": "stateful", "lately": "lately", "response": "response",
    "responses": "response", "activate": "activate", "activated": "activate",
    "activates": "activate", "activating": "activate", "like": "lik", "likes": "lik",
    "liked": "lik", "liking": "lik",
}  # fmt: skip

# Multi-word expressions folded into one token before any rule looks at the words.
PHRASES: dict[tuple[str, ...], str] = {
    ("no", "longer"): "NEG:no longer",
    ("used", "to"): "NEG:used to",  # "I used to live in Lisbon": it no longer holds (not after a be-verb)
    ("turned", "off"): "disabled", ("turn", "off"): "disabled", ("switched", "off"): "disabled",
    ("switch", "off"): "disabled", ("turned", "on"): "enabled", ("turn", "on"): "enabled",
    ("switched", "on"): "enabled", ("switch", "on"): "enabled",
    ("rather", "than"): "over", ("instead", "of"): "over",
    ("meat", "eater"): "meateater", ("meat", "eaters"): "meateater",
    ("on", "site"): "onsite", ("in", "office"): "onsite", ("in", "person"): "onsite",
    ("vs", "code"): "vscode", ("visual", "studio", "code"): "vscode",
    ("not", "sure"): "HEDGE", ("thinking", "about"): "HEDGE", ("thinking", "of"): "HEDGE",
    ("should", "i"): "HEDGE", ("should", "we"): "HEDGE", ("at", "all"): "", ("from", "now", "on"): "",
    ("can", "not", "stand"): "hate", ("night", "owl"): "evening", ("morning", "person"): "morning",
    ("evening", "person"): "evening",
}  # fmt: skip
MAX_PHRASE = max(len(k) for k in PHRASES)


def stem_word(word: str) -> str:
    """Snowball's English stem (:func:`retold.retrieve.query_terms.stem`, one stemmer per thread).

    Irregular forms are first mapped to their base word and a few words keep their own form
    (``_OWN_STEM``). Over-stemming is otherwise harmless here (both sides of every comparison
    go through it); what matters is that "uses", "used" and "using" agree, and that "user"
    stays "user".
    """
    w = word.lower()
    w = _IRREGULAR.get(w, w)
    if w in _OWN_STEM:
        return _OWN_STEM[w]
    return stem(w) if w.isalpha() else w


NEGATION_STEMS = frozenset(stem_word(w) for w in _NEGATION_VERBS)


# Synonym groups: every word's stem maps to the group's name ("prefers"/"likes" -> like).
_SYNONYMS: dict[str, str] = {}
for _group, _words in {
    "like": "like love enjoy prefer favor adore fond",
    "want": "want wish",
    "answer": "answer response reply",
    "concise": "concise short brief terse succinct compact",
    "detail": "detail detailed long lengthy verbose",
    "big": "big large huge",
    "small": "small little tiny",
    "live": "live reside based located",
    "have": "have own possess",
    "begin": "begin start commence",
    "learn": "learn study",
    "enable": "enable enabled activate activated",
    "disable": "disable disabled deactivate deactivated",
    "allow": "allow allowed permit permitted",
    "forbid": "forbid forbidden prohibit prohibited ban banned disallow disallowed",
    "meateater": "meateater carnivore omnivore",
    "use": "use utilize",
    "pass": "pass passed succeed succeeded success",
    "fail": "fail failed failure",
    "remote": "remote remotely",
    "child": "child kid",
    "asynchronous": "asynchronous async",
    "casual": "casual informal",
    "evening": "evening",
}.items():
    for _word in _words.split():
        _SYNONYMS[stem_word(_word)] = _group
for _word in _NEGATIVE_VALENCE:
    _SYNONYMS[stem_word(_word)] = "like"
NEGATIVE_VALENCE_STEMS = frozenset(stem_word(w) for w in _NEGATIVE_VALENCE)

# Curated antonym pairs, on canonical forms. A clause and its antonym flip polarity once.
_ANTONYM_PAIRS: tuple[tuple[str, str], ...] = (
    ("concise", "detail"), ("dark", "light"), ("morning", "evening"), ("early", "late"),
    ("tab", "space"), ("enable", "disable"), ("allow", "forbid"), ("vegetarian", "meateater"),
    ("vegan", "meateater"), ("left", "right"), ("married", "single"), ("introvert", "extrovert"),
    ("stateless", "stateful"), ("big", "small"), ("more", "less"), ("more", "fewer"),
    ("increase", "decrease"), ("before", "after"), ("above", "below"), ("pass", "fail"),
    ("accept", "reject"), ("approve", "reject"), ("include", "exclude"), ("public", "private"),
    ("formal", "casual"), ("synchronous", "asynchronous"), ("manual", "automatic"),
    ("online", "offline"), ("open", "closed"), ("true", "false"), ("required", "optional"),
    ("mandatory", "optional"), ("home", "office"), ("remote", "onsite"), ("weekday", "weekend"),
    ("summer", "winter"), ("hot", "cold"), ("warm", "cold"), ("fast", "slow"), ("cheap", "expensive"),
    ("simple", "complex"), ("easy", "hard"), ("new", "old"), ("old", "young"), ("first", "last"),
    ("upper", "lower"), ("uppercase", "lowercase"), ("ascending", "descending"), ("beginner", "expert"),
    ("junior", "senior"), ("agree", "disagree"), ("support", "oppose"), ("spicy", "mild"),
    ("sweet", "savory"), ("loud", "quiet"), ("metric", "imperial"), ("celsius", "fahrenheit"),
    ("portrait", "landscape"), ("horizontal", "vertical"), ("inbound", "outbound"),
    ("minimum", "maximum"), ("strict", "lenient"), ("visible", "hidden"), ("available", "unavailable"),
    ("present", "absent"), ("win", "lose"), ("buy", "sell"), ("happy", "sad"), ("north", "south"),
    ("east", "west"), ("light", "heavy"), ("wired", "wireless"),
    ("optimistic", "pessimistic"), ("dynamic", "static"), ("mutable", "immutable"),
)  # fmt: skip


def canonical(word: str) -> str:
    """A word's stem, mapped onto its synonym group's name ("prefers", "likes" -> ``like``)."""
    stem = stem_word(word)
    return _SYNONYMS.get(stem, stem)


ANTONYMS: dict[str, frozenset[str]] = {}
for _x, _y in _ANTONYM_PAIRS:
    _cx, _cy = canonical(_x), canonical(_y)
    ANTONYMS[_cx] = ANTONYMS.get(_cx, frozenset()) | {_cy}
    ANTONYMS[_cy] = ANTONYMS.get(_cy, frozenset()) | {_cx}

# Verbs under which different values can all be true ("speaks French"/"speaks German").
ADDITIVE_NAMES = frozenset(
    stem_word(w)
    for w in _split(
        "know speak learn study like love enjoy have own visit meet attend read watch play follow "
        "teach collaborate contribute support travel try mentor date hire"
    )
)
HAVE = frozenset(stem_word(w) for w in ("have", "own", "has"))
EVENT = frozenset(stem_word(w) for w in _split("visit meet attend read watch play travel go fly"))
# A name or identifier fills a single-valued slot only after one of these (or a be-verb):
# "lives in Lisbon", "works at Acme", "is from Brazil", "reports to Dana". Not after "with".
SLOT_PREPOSITIONS = frozenset({"in", "at", "from", "for", "to", "on"})
SEMI_ADDITIVE = frozenset({stem_word("use")})  # exclusive only between tools of one category
# Verbs that end the subject ("Release 2.4 | shipped ..."), with be-verbs and prepositions.
VERBS = frozenset(
    canonical(w)
    for w in _split(
        "work live use run ship have own like want need lead manage report deploy speak know learn "
        "drink eat drive commute take go come move join leave visit read write watch play meet "
        "start begin end finish stop quit smoke expire land arrive depart happen change refresh log "
        "allow make get give keep build test release launch merge push plan schedule book call name "
        "mentor teach attend follow support host store cost wear sleep wake rise grow marry hate "
        "dislike avoid indent type code develop design train prefer love enjoy favor limit freeze "
        "lives runs uses"
    )
)
RELATIONS = frozenset(
    stem_word(w)
    for w in _split(
        "wife husband partner spouse girlfriend boyfriend mom mother dad father parent son daughter "
        "kid child baby brother sister sibling friend boss manager colleague coworker cousin aunt "
        "uncle grandma grandpa grandmother grandfather niece nephew roommate flatmate neighbor dog "
        "cat pet mentor lead"
    )
)
GENERIC = frozenset(
    canonical(w) for w in _split("user like want have use name call get make thing go keep need person")
)
SPECIFIC_KINDS = frozenset({"number", "date", "proper", "ident"})


CONTRACTIONS: tuple[tuple[str, str], ...] = (
    (r"\bcan'?t\b", "can not"),
    (r"\bcannot\b", "can not"),
    (r"\bwon'?t\b", "will not"),
    (r"\bshan't\b", "shall not"),
    (r"\b(\w+)n't\b", r"\1 not"),
    (r"\b(i)'m\b", r"\1 am"),
    (r"\b(\w+)'re\b", r"\1 are"),
    (r"\b(\w+)'ve\b", r"\1 have"),
    (r"\b(\w+)'ll\b", r"\1 will"),
    (r"\b(\w+)'d\b", r"\1 would"),
)
"""Contractions spelled out (regex, replacement; case-insensitive), in order: the claim parser
and the activation reader add their own reading of ``'s`` and a few informal spellings."""
