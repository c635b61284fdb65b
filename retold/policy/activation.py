"""Which semantic records the agent always knows: the ambient/conditional policy (spec §8.2, §11).

A record enters the profile (``ambient``) only when every check passes, and fails closed
otherwise: it is an active, confirmed semantic record; its evidence is the user's own words,
verified by the host in that user's turn and not material the user quoted, pasted or
forwarded there (:mod:`retold.ingest.write.voice`; the evidence alone is read again here);
its category is promotable; and its form is a standing default in the record content or the
evidence, with no one-off, conditional, time-bound, past, request or third-party cue in either,
and no hedge. A promotable claim
whose form is merely unmarked or hedged goes to a person (the review queue).

Why rules and not a model: the profile is read on every turn, so what enters it must be
explainable and reproducible. Each decision names the fixed cue phrases that made it
(:mod:`retold.policy.activation_lexicon`), never free text of the claim, so a reason can be
logged and shown without leaking content. Everything here is pure and deterministic; reading
a text (category and form) is :mod:`retold.policy.claim_reading`, deciding what the readings
allow is here.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Literal

from retold.config.policy import ACTIVATION_CATEGORIES, ActivationConfig
from retold.ingest.write.voice import read_voice
from retold.models import ACTIVE_STATUSES
from retold.policy.claim_reading import ClaimReading, Form, read_claim, read_text

__all__ = [
    "DISQUALIFYING",
    "EVIDENCE_REASONS",
    "ActivationDecision",
    "ActivationFacts",
    "ClaimReading",
    "Form",
    "decide_activation",
    "eligibility",
    "read_claim",
]

DISQUALIFYING: frozenset[str] = frozenset(
    {"one_off", "conditional", "time_bound", "past", "request", "third_party"}
)
"""Forms that keep a record conditional outright; ``hedged`` and ``unmarked`` go to review."""

NOT_SEMANTIC = "conditional: only semantic records can be ambient"
NOT_USER_STATEMENT = "the source is not the user's own statement"
NO_EVIDENCE = "no evidence"
NOT_VERIFIED = "the evidence is not verified in the user's own turn"
QUOTED_EVIDENCE = "the evidence is quoted material, not the user's own words"
EVIDENCE_REASONS: frozenset[str] = frozenset({NOT_USER_STATEMENT, NO_EVIDENCE, NOT_VERIFIED, QUOTED_EVIDENCE})
"""The eligibility answers about the evidence itself (whose words, verified where)."""
_FORM_WORDS: dict[str, str] = {
    "one_off": "one-off", "conditional": "conditional", "time_bound": "time-bound", "past": "past",
    "request": "a request", "third_party": "about someone else", "hedged": "hedged",
    "unmarked": "no standing-default form", "standing": "standing default",
}  # fmt: skip


@dataclass(frozen=True)
class ActivationFacts:
    """A committed record as the policy sees it."""

    type: str
    status: str
    content: str
    evidence: str | None
    source_kind: str
    evidence_verified: bool  # the host found the evidence in the owner's own user turn
    valid_until: datetime | None = None  # set => time-bound
    expires_at: datetime | None = None  # set => time-bound


@dataclass(frozen=True)
class ActivationDecision:
    """The policy's answer; ``reason`` is content-free (fixed wording plus lexicon cues)."""

    activation: Literal["ambient", "conditional"]
    review: bool  # open a review item (the record stays conditional)
    category: str | None
    reason: str


# --------------------------------------------------------------------------- the decision


def _category_of(facts: ActivationFacts) -> str | None:
    return read_text(facts.content).category or (
        read_text(facts.evidence).category if facts.evidence else None
    )


def eligibility(facts: ActivationFacts, config: ActivationConfig) -> str | None:
    """None when the record may be ambient as far as type, status, evidence and category go (the
    checks a person's promotion must pass too), else why not, content-free. The form is not
    checked: a person resolving a review vouches for it."""
    if not config.enabled:
        return "activation disabled"
    if facts.type != "semantic":
        return "only semantic records can be ambient"
    if facts.status not in ACTIVE_STATUSES:
        return "the record is not active"
    if facts.status != "confirmed":
        return "the record is not confirmed"
    if facts.source_kind != "user_statement":
        return NOT_USER_STATEMENT
    if not facts.evidence or not facts.evidence.strip():
        return NO_EVIDENCE
    if not facts.evidence_verified:
        return NOT_VERIFIED
    if not read_voice(facts.evidence, facts.evidence).own:
        return QUOTED_EVIDENCE
    category = _category_of(facts)
    if category is not None and category not in config.promotable_categories:
        return f"category {category} is not promotable"
    return None


def _conditional_decision(category: str | None, reason: str) -> ActivationDecision:
    return ActivationDecision("conditional", False, category, f"conditional: {reason}")


def _form_reason(form: str, cue: str | None, where: str) -> str:
    return f"{_FORM_WORDS[form]} ('{cue}') in the {where}" if cue else f"{_FORM_WORDS[form]} in the {where}"


def decide_activation(
    facts: ActivationFacts, config: ActivationConfig, *, proposed_category: str | None = None
) -> ActivationDecision:
    """The policy: ambient only when every check passes; borderline promotable claims to review.

    ``proposed_category`` is a model classifier's category for a claim the rules could not
    place; it can open a review item, never make a record ambient on its own.
    """
    if not config.enabled:
        return _conditional_decision(None, "activation disabled")
    if facts.type != "semantic":
        return ActivationDecision("conditional", False, None, NOT_SEMANTIC)
    category = _category_of(facts)
    if why := eligibility(facts, config):
        return _conditional_decision(category, why)
    assert facts.evidence is not None  # eligibility requires it
    content, evidence = read_text(facts.content), read_text(facts.evidence)
    by_model = False
    if category is None and proposed_category in ACTIVATION_CATEGORIES:
        category, by_model = proposed_category, True
    if category is None:
        return _conditional_decision(None, "no category")
    if category not in config.promotable_categories:
        return _conditional_decision(category, f"category {category} is not promotable")
    if facts.valid_until is not None or facts.expires_at is not None:
        return _conditional_decision(category, "time-bound (the record has an end date)")
    for reading, where in ((evidence, "evidence"), (content, "content")):
        if reading.form in DISQUALIFYING:
            return _conditional_decision(category, _form_reason(reading.form, reading.form_cue, where))
    if evidence.named_subject:
        return _conditional_decision(category, _form_reason("third_party", "named person", "evidence"))
    if not evidence.about_user:
        return _conditional_decision(category, "the evidence does not speak of the user")
    if evidence.category is not None and evidence.category not in config.promotable_categories:
        return _conditional_decision(category, f"the evidence reads as {evidence.category}")
    # The user's words must state the default, or instruct the agent how to behave; a model's
    # standing paraphrase of an unmarked statement ("I'm working on a Django app") is not enough.
    supported = evidence.form == "standing" or (evidence.form == "unmarked" and evidence.instruction)
    standing = next((r for r in (evidence, content) if r.form == "standing"), None)
    hedged = next(
        ((r, w) for r, w in ((evidence, "evidence"), (content, "content")) if r.form == "hedged"), None
    )
    if (
        standing is not None
        and supported
        and hedged is None
        and not by_model
        and evidence.category is not None
    ):
        return ActivationDecision(
            "ambient", False, category, f"ambient: {category}, standing default ('{standing.form_cue}')"
        )
    if hedged is not None:
        why = _form_reason("hedged", hedged[0].form_cue, hedged[1])
    elif by_model:
        why = "category proposed by the model"
    elif standing is not None and not supported:
        why = _form_reason(evidence.form, evidence.form_cue, "evidence")
    elif standing is not None:
        why = "the evidence names no category"
    else:
        why = "no standing-default form"
    if config.review_borderline:
        return ActivationDecision("conditional", True, category, f"review: {category}, {why}")
    return _conditional_decision(category, f"{category}, {why}")
