"""Answers that tell a time, for questions that ask one.

"When did you adopt Pepper?" is answered by "I've had her for 3 years!" or "I bought it a year
ago in Paris": a turn that says *when*, often while naming little of what the question names
(the thing was named a turn earlier). Among the best candidates of a question that asks for a
time, those whose text tells a time join fusion as one more list, in their fused order
(``retrieval.time_answer_depth``, ``time_answer_weight``): the classic answer-type match of
question answering, read from English alone: no lexicon of topics or people.

A question asks for a time when it opens with "when", "since when", "how long", "what / which
year / month / date / day / week / time" or "how many days / weeks / months / years". A text
tells a time when the write path's temporal grammar finds an expression in it
(:func:`retold.ingest.write.temporal.mentions_time`: "last month", "on May 8", "two years
ago") or it carries a duration or a vague recency ("for 3 years", "a month now", "recently",
"the other day", "last night") in its first ``SCAN_CHARS`` characters. "since" alone is not
enough: "since you asked" is a reason. The reply to a candidate that asks a question ("How
long have you had them?" / "For 3 years now!", :mod:`retold.retrieve.replies`) joins the list
after it when it tells a time.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence

from retold.ingest.write.temporal import mentions_time

__all__ = ["SCAN_CHARS", "asks_when", "tells_time", "time_answers"]

SCAN_CHARS = 1000

_ASKS_WHEN = re.compile(
    r"^\W*(?:when\b|since when\b|how long\b|(?:in |during |on |by )?(?:what|which) "
    r"(?:year|month|date|day|week|time)s?\b|how many (?:days|weeks|months|years)\b)",
    re.IGNORECASE,
)
_COUNT = (
    r"(?:\d+|a|an|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|a few|a couple of|"
    r"several|many)"
)
_UNIT = r"(?:minute|hour|day|night|week|month|year)s?"
_TELLS_TIME = re.compile(
    rf"\b(?:ago|recently|lately|the other day|last night|this (?:morning|afternoon|evening)|"
    rf"earlier today|for {_COUNT} {_UNIT}|{_UNIT} now)\b",
    re.IGNORECASE,
)


def asks_when(queries: Iterable[str]) -> bool:
    """True when any query asks for a time (see the module docstring)."""
    return any(_ASKS_WHEN.match(q) for q in queries)


def tells_time(text: str) -> bool:
    """True when the text says when something happened or how long it has lasted.

    Only the first ``SCAN_CHARS`` characters are read: the grammar costs a few microseconds a
    character at worst, and no stored text may make a search slow (20 records of digits would
    otherwise cost seconds).
    """
    head = text[:SCAN_CHARS]
    return bool(_TELLS_TIME.search(head)) or mentions_time(head)


def time_answers(
    ranked: Sequence[str],
    texts: Mapping[str, str],
    depth: int,
    max_share: float = 1.0,
    replies: Mapping[str, str] | None = None,
) -> list[str]:
    """The first ``depth`` of ``ranked`` whose text tells a time, in their ranked order, each
    followed by the reply to it (``replies``, :mod:`retold.retrieve.replies`) when that tells a
    time; none when more than ``max_share`` of the examined tell one (long records nearly all
    tell some time, and a feature every candidate has tells them apart no better than chance)."""
    examined = ranked[:depth]
    telling = [rid for rid in examined if tells_time(texts.get(rid, ""))]
    if len(telling) > max_share * len(examined):
        return []
    out: list[str] = []
    for rid in examined:
        for answer in (rid, (replies or {}).get(rid)):
            if answer is not None and answer not in out and tells_time(texts.get(answer, "")):
                out.append(answer)
    return out
