"""Whether a search's text asks something, and whether it asks about the searcher: the query
features the gate reads.

A host-issued (auto) search runs on every user turn, and many turns ask nothing of memory
("Wow, that's great! I went hiking yesterday."). Calibrated on labelled turns
(docs/benchmarks.md), the auto gate keeps its floors for a turn that may ask and raises them
(``gate.auto.statements``) only for one that plainly states: no question mark, and every
sentence opening the way English statements and reactions open — a subject pronoun, a
determiner, an interjection ("I", "that's", "my", "wow", "thanks"). A request ("Book the
usual table", "Summarise the meeting") opens with a verb, and "I want / need / 'd like /
can't remember" is a request in statement form, so both still count as asking; so does
anything the rule cannot place, which keeps the usual floors.

A question the searcher asks about themselves ("When did I go to the museum?", "What are my
hobbies?"): a sentence ending in a question mark that speaks in the first person singular
and addresses no one ("you"). Memory is where its answer lives, so the gate lets a match
that stands out answer it at a smaller margin (``gate.self_question_margin``). A turn of
conversation rarely has that form (8 of LoCoMo's 800 ordinary turns): a question put to
someone else says "you" ("Can I help you?", "What did you think?").
"""

from __future__ import annotations

import re
from collections.abc import Iterable

__all__ = ["about_self", "asks"]

_OPENER_WORDS = """
    i i'm i've i'd i'll im ive we we're we've we'd we'll you you're you've you'd you'll he he's
    she she's it it's its they they're they've that that's this these those there there's here
    here's my our your his her their the a an
    wow oh ooh ah aw aww haha hahaha lol yeah yep yes no nope nah thanks thank hey hi hello
    great awesome cool nice sounds so well sure ok okay congrats congratulations glad good sorry
    same totally absolutely exactly definitely agreed true
"""
_STATEMENT_OPENERS = frozenset(_OPENER_WORDS.split())
# "I want...", "we'd like...", "I can't remember...": a statement in form, a request in fact.
_REQUEST = re.compile(
    r"^\s*(?:i|we)(?:'d| would)? +(?:really +|just +|still +)?"
    r"(?:want|wanna|need|like|wonder|was wondering|forgot|forget|can't remember|don't remember|"
    r"remember|wish)\b",
    re.IGNORECASE,
)
_SENTENCES = re.compile(r"[^.!;\n]+")
_QUESTIONS = re.compile(r"[^.!?;\n]*\?")
_FIRST_PERSON = re.compile(r"\b(?:i|me|my|mine|myself)\b", re.IGNORECASE)
_SECOND_PERSON = re.compile(r"\b(?:you|your|yours|yourself|yourselves|ya|u)\b", re.IGNORECASE)
_FIRST_WORD = re.compile(r"[A-Za-z][A-Za-z']*")


def _states(text: str) -> bool:
    sentences = [s for s in _SENTENCES.findall(text.replace("’", "'")) if _FIRST_WORD.search(s)]
    if not sentences:
        return False
    for sentence in sentences:
        first = _FIRST_WORD.search(sentence)
        assert first is not None
        if first.group(0).lower() not in _STATEMENT_OPENERS or _REQUEST.match(sentence):
            return False
    return True


def asks(queries: Iterable[str]) -> bool:
    """False only when every query plainly states (see the module docstring); True otherwise."""
    texts = list(queries)
    return not texts or any("?" in q or not _states(q) for q in texts)


def about_self(queries: Iterable[str]) -> bool:
    """True when some query holds a question the searcher asks about themselves (see the module
    docstring): first person singular, no second person, a question mark."""
    for query in queries:
        for question in _QUESTIONS.findall(query.replace("’", "'")):
            if _FIRST_PERSON.search(question) and not _SECOND_PERSON.search(question):
                return True
    return False
