"""Whether a search's text asks something: the one query feature the auto gate reads.

A host-issued (auto) search runs on every user turn, and many turns ask nothing of memory
("Wow, that's great! I went hiking yesterday."). Calibrated on labelled turns
(docs/benchmarks.md), the auto gate keeps its floors for a turn that may ask and raises them
(``gate.auto.statements``) only for one that plainly states: no question mark, and every
sentence opening the way English statements and reactions open — a subject pronoun, a
determiner, an interjection ("I", "that's", "my", "wow", "thanks"). A request ("Book the
usual table", "Summarise the meeting") opens with a verb, and "I want / need / 'd like /
can't remember" is a request in statement form, so both still count as asking; so does
anything the rule cannot place, which keeps the usual floors.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

__all__ = ["asks"]

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
