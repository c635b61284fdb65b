"""The activation policy's claim reader never raises, whatever the text (issue 45, item 6).

Evidence is whatever a user typed: SQL casts ("ids with ::text"), one-word imperatives
("Reply"), punctuation runs, any script, words thousands of characters long. The reader
used to look past the end of a short text ("the next two words" of a one-word clause) and
raise ``IndexError``, which crashed ``retold activation``. Each hypothesis example draws a
list of tokens and reads many texts made from it (its joins, each token, each neighbouring
pair), so one run reads more than ten thousand texts in a few seconds.
"""

from __future__ import annotations

from itertools import pairwise

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from retold.config.policy import ActivationConfig
from retold.policy import activation_lexicon as lx
from retold.policy.activation import ActivationFacts, decide_activation, eligibility
from retold.policy.claim_reading import read_claim, read_text

from .slow import examples

REPORTED = (
    "In our SQL we always cast ids with ::text",
    "In our SQL we always cast ids with :text",
    "a::text",
    ":text",
    "::text",
)
"""The texts the issue reported, each of which raised ``IndexError``."""
SHORT = ("Reply", "text", "Use", "call", "Text me", "my", "My?", "hey\x91?My", "Call me", "(", "")
"""One- and two-word texts whose readers looked one or two words past the end."""

_WORDS = sorted(
    {
        w
        for group in (
            lx.COMMUNICATION, lx.STANDING_MARKERS, lx.HEDGED, lx.CONDITIONAL, lx.TIME_BOUND, lx.PAST,
            lx.ONE_OFF, lx.IDENTITY_NAME, lx.NAME_VERBS, lx.ASKING, lx.REQUEST_PHRASES, lx.LEAD_INS,
        )
        for phrase in group
        for w in phrase.split()
    }
    | lx.TASK_VERBS | lx.MANNER_VERBS | lx.DISCOURSE | lx.SPEAKER | lx.POSSESSIVES | lx.BE | lx.MODALS
    | lx.WEEKDAYS | lx.MONTHS | frozenset(lx.PEOPLE_WORDS)
)  # fmt: skip
"""The lexicon's own words, so the rules past the first lookup run too."""
_ODD = (
    "::text", ":text", "a::text", "'s", "tl;dr", "9am", "3rd", " - ", "I'm", "don't", "user's", "pls",
    "\u0130", "\u0301", "\u200b", "\u202e", "\ufb01", "\u00df", "\u01c5", "\U0001f600", "\u2019s",
    "\u2014", "\u3002", "\uff1f", "\x00", "\n\n", "\t",
)  # fmt: skip
"""Punctuation the tokenizer treats specially, and characters whose case mapping changes length."""
_PUNCT = st.text(alphabet="?,;:.!()'-/+#_\"`~@$%^&*[]{}<>|\\= \u2019\u2018\u2014", min_size=1, max_size=6)
_TOKEN = st.one_of(
    st.sampled_from(_WORDS),
    st.sampled_from(_WORDS).map(str.capitalize),
    st.sampled_from(_ODD),
    _PUNCT,
    st.text(max_size=4),  # any unicode
)
_LONG_WORD = st.text(alphabet="aZ9-/_", min_size=200, max_size=1_500)
_TOKENS = st.lists(st.one_of(*[_TOKEN] * 6, _LONG_WORD), min_size=4, max_size=12)
"""One long word in seven tokens, so most texts stay short (the run stays a few seconds)."""

TEXTS_PER_RUN = 10_000
_read = [0]


def _texts(tokens: list[str]) -> list[str]:
    """Every text one draw yields: its joins, each token alone, each neighbouring pair."""
    joined = [" ".join(tokens), "".join(tokens), ", ".join(tokens), "I always " + " ".join(tokens)]
    return joined + tokens + [f"{a} {b}" for a, b in pairwise(tokens)]


def _read_all(texts: list[str]) -> None:
    for text in texts:
        reading = read_claim(text)
        assert reading.form in {
            "standing", "one_off", "conditional", "time_bound", "hedged", "past", "request",
            "third_party", "unmarked",
        }  # fmt: skip
        read_text(text)
        _read[0] += 1


@settings(
    max_examples=examples(700), deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow]
)
@given(tokens=_TOKENS)
def _never_raises(tokens: list[str]) -> None:
    _read_all(_texts(tokens))


def test_the_claim_reader_never_raises_on_ten_thousand_texts() -> None:
    _read[0] = 0
    _never_raises()
    assert _read[0] >= TEXTS_PER_RUN, _read[0]


def test_the_reported_texts_and_short_imperatives_read_without_raising() -> None:
    for text in REPORTED + SHORT:
        read_claim(text)
    sql = read_text(REPORTED[0])
    assert sql.category == "workflow" and sql.form == "standing" and sql.form_cue == "always"
    assert read_text("Reply").instruction  # an instruction about how to behave, as before


@settings(max_examples=examples(150), deadline=None, database=None)
@given(
    content=st.one_of(st.sampled_from(REPORTED + SHORT), _TOKENS.map(" ".join)), evidence=_TOKENS.map("".join)
)
def test_the_whole_decision_never_raises(content: str, evidence: str) -> None:
    facts = ActivationFacts(
        type="semantic", status="confirmed", content=content, evidence=evidence,
        source_kind="user_statement", evidence_verified=True,
    )  # fmt: skip
    config = ActivationConfig()
    eligibility(facts, config)
    decision = decide_activation(facts, config)
    assert decision.activation in {"ambient", "conditional"}
