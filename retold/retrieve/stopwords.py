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

__all__ = ["CHAT_WORDS", "STOPWORDS"]

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


_CHAT = """
    hey hi hello hiya bye goodbye cheers
    wow oh ah aw aww awww ooh oops ugh hmm oof phew yay woah whoa lol haha hahaha yikes
    thanks thank welcome congrats congratulations sorry appreciate appreciated
    awesome cool great good nice amazing wonderful fantastic incredible glad fun super sweet cute
    know see hear think feel guess mean bet hope wait sound sounds look looks looking talk tell like
    take keep gonna wanna gotta em ya kinda sorta
"""

CHAT_WORDS: frozenset[str] = frozenset(_CHAT.split())
"""The words of conversation itself, which the gate never counts as matched (``gate.chat_words``).

Greetings, interjections, thanks and congratulations, the adjectives a reaction is made of
("awesome", "cool", "great"), and the verbs of talking and perceiving that chat wraps around
its topic ("sounds like", "looks", "can't wait to hear", "take care", "gonna"). They still
rank, and a name as written ("Hope", "Will") is never one; but a turn that shares two of them
with a stored one ("Cool! What did it look like?") is chat, not a question about it. They stay
among the query's terms, so a turn that is mostly reactions needs more than one shared content
word to reach the term fraction. Unlike ``gate.common_word_share`` this needs no store
statistics, so it also holds in a small or new store, where no word is frequent enough yet.
Words of feeling and liking that a memory is about ("happy", "proud", "love") are not on the
list.
"""
