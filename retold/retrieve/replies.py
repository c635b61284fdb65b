"""The reply to a question like the searcher's.

In a conversation the answer to a question often follows the same question asked by someone
else: "How long have you had them?" / "I've had them for 3 years now!", "Where did you go?" /
"Rome, for the weekend". The stored question matches the searcher's words; the reply that
answers it may share none of them, so no channel finds it. For a query that asks
(:func:`retold.retrieve.query_kind.asks`), the best ``retrieval.reply_depth`` candidates that
hold a question bring the record written just after them (same scope, same event day:
:meth:`retold.retrieve.context.AnchorDays.replies`), and the replies fuse as one more list, in
their askers' order, at ``retrieval.reply_weight``. They carry their real cosine as the
neighbours do, so the gate judges them by the same floors and a replay reproduces the search.
For a question that asks when, a reply that tells a time also joins the time answers after its
asker (:mod:`retold.retrieve.time_answers`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

__all__ = ["SCAN_CHARS", "holds_question", "reply_list"]

SCAN_CHARS = 1000
"""Only a text's head is read: no stored text may make a search slow."""

# A question mark that ends a sentence, not one inside a link ("/?q=1") or an identifier.
_QUESTION_MARK = re.compile(r"\?+(?=[\s\"')\]]|$)")


def holds_question(text: str) -> bool:
    """True when a sentence of the text's head ends in a question mark ("Awww! How long have you
    had them?")."""
    head = text[:SCAN_CHARS]
    return "?" in head and _QUESTION_MARK.search(head) is not None


def reply_list(askers: Sequence[str], replies: Mapping[str, str]) -> list[str]:
    """The replies in their askers' order, each once."""
    out: list[str] = []
    for asker in askers:
        reply = replies.get(asker)
        if reply is not None and reply not in out:
            out.append(reply)
    return out
