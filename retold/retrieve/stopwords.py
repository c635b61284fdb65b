"""The English stopword list lexical search and alias scanning drop from plain query words (spec §10.2).

A search for "what does Aditya prefer for coffee" should rank on "aditya", "prefer" and
"coffee": the function words match almost every record and would let a one-word
overlap pass the lexical gate. The list is frequency based: articles, pronouns,
auxiliaries (and the stems contractions reduce to: "don't" → "do", "I'm" → "i"),
prepositions, conjunctions, question words, quantifiers and the commonest light verbs
("do", "get", "make", "go"). It deliberately leaves out content words that merely
happen to be frequent ("work", "time", "people"), because those carry meaning in a
memory store.

The list applies only to plain lower-case words. Callers keep identifiers (``ERR42``,
``deploy.yml``) and proper nouns ("where does Will work" keeps "Will") whatever their
spelling; that decision is theirs, not this module's.
"""

from __future__ import annotations

__all__ = ["STOPWORDS"]

_WORDS = """
    a an the
    i me my mine myself we us our ours ourselves you your yours yourself yourselves
    he him his himself she her hers herself it its itself they them their theirs themselves
    one ones someone something anyone anything everyone everything nothing
    this that these those there here
    am is are was were be been being
    do does did doing done
    have has had having
    will would shall should can could may might must ought
    get gets got getting make makes made go goes went going gone
    say says said let lets
    what which who whom whose when where why how whatever whenever wherever
    and or but nor so yet if then else than because while although though unless until whether
    of in on at by for with without within about against between into through during before after
    above below to from up down out off over under again further once upon onto toward towards
    via per among across along around behind beside besides beyond near since
    not no yes yeah ok okay
    all any both each few more most other others some such only own same very too also just
    much many lot lots
    still even ever never always often now already
    cannot really please thanks thank
"""

STOPWORDS: frozenset[str] = frozenset(_WORDS.split())
