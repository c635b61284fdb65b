"""The activation policy's rules (spec §8.2, §11): forms, categories, eligibility, reasons, and the
labelled tuning set (``tests/data/activation_tuning.jsonl``)."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from retold.config import ACTIVATION_CATEGORIES, ActivationConfig
from retold.policy import activation_lexicon as lx
from retold.policy.activation import (
    DISQUALIFYING,
    ActivationDecision,
    ActivationFacts,
    decide_activation,
    eligibility,
    read_claim,
)

TUNING = Path(__file__).resolve().parents[1] / "data" / "activation_tuning.jsonl"
HELD_OUT = TUNING.with_name("activation_heldout.jsonl")  # written independently of the rules
_LOCOMO = "caroline melanie jon gina john maria joanna nate tim audrey andrew james deborah jolene evan sam"
LOCOMO_NAMES = frozenset((*_LOCOMO.split(" "), "calvin", "dave", "locomo"))  # never in the tuning set
DEFAULT = ActivationConfig()


def facts(content: str, evidence: str | None, **fields: Any) -> ActivationFacts:
    base: dict[str, Any] = {
        "type": "semantic", "status": "confirmed", "content": content, "evidence": evidence,
        "source_kind": "user_statement", "evidence_verified": True,
    }  # fmt: skip
    return ActivationFacts(**(base | fields))


def decide(
    content: str, evidence: str | None, config: ActivationConfig = DEFAULT, **kw: Any
) -> ActivationDecision:
    return decide_activation(facts(content, evidence), config, **kw)


# --------------------------------------------------------------------------- forms


@pytest.mark.parametrize(
    ("text", "form"),
    [
        ("I prefer answers without jargon.", "standing"),
        ("Always reply to me in Swahili.", "standing"),
        ("From now on, write numbers as digits.", "standing"),
        ("I'm allergic to kiwi.", "standing"),
        ("My name is Odile.", "standing"),
        ("User uses Helix as their editor.", "standing"),
        ("Prefers metric units.", "standing"),
        ("Don't ever use exclamation marks with me.", "standing"),
        ("Use plain language for this one.", "one_off"),
        ("Right now I need short answers.", "one_off"),
        ("Make this paragraph punchier.", "one_off"),
        ("Answer in French today.", "one_off"),
        ("If it's after 8pm, don't call me.", "conditional"),
        ("Unless I say otherwise, use tabs.", "conditional"),
        ("With investors, always be formal.", "conditional"),
        ("I'm off dairy until my test results come back.", "time_bound"),
        ("For the next two weeks I'm in Singapore.", "time_bound"),
        ("I'm working nights this month.", "time_bound"),
        ("Maybe I prefer shorter replies, not sure.", "hedged"),
        ("I might switch editors.", "hedged"),
        ("I usually drink oat milk.", "hedged"),
        ("I used to live in Quito.", "past"),
        ("I was a barista for years.", "past"),
        ("I switched to Linux last year.", "past"),
        ("Can you summarize the thread?", "request"),
        ("Write a limerick about tax season.", "request"),
        ("Shorter, please.", "request"),
        ("How do I rebase a branch", "request"),
        ("My brother prefers tea.", "third_party"),
        ("He is vegetarian.", "third_party"),
        ("The client wants weekly reports.", "third_party"),
        ("Reply in Spanish.", "unmarked"),
        ("Lactose intolerant.", "unmarked"),
        ("I'm working on a Django app.", "unmarked"),
    ],
)
def test_each_form_is_read_from_cue_words(text: str, form: str) -> None:
    reading = read_claim(text)
    assert reading.form == form, (text, reading)


def test_disqualifying_forms_are_the_designed_ones() -> None:
    assert {"one_off", "conditional", "time_bound", "past", "request", "third_party"} == DISQUALIFYING


@pytest.mark.parametrize(
    ("text", "category"),
    [
        ("My pronouns are she/they.", "identity"),
        ("Call me Teo.", "identity"),
        ("I live in Tallinn.", "identity"),
        ("I'm a paramedic.", "identity"),
        ("Prefers replies in Danish.", "communication"),
        ("No emojis in answers, ever.", "communication"),
        ("I'm vegan.", "constraints"),
        ("I use a screen reader.", "constraints"),
        ("I never eat lamb.", "constraints"),
        ("I use Neovim with tmux.", "workflow"),
        ("I always squash my commits.", "workflow"),
        ("I love birdwatching.", "interests"),
        ("I adore Python.", "interests"),
        ("My sister lives in Accra.", "relationships"),
        ("I have three kids.", "relationships"),
        ("I had pasta for dinner.", None),
    ],
)
def test_each_category_is_read_from_cue_words(text: str, category: str | None) -> None:
    assert read_claim(text).category == category, read_claim(text)


def test_a_taste_for_food_is_not_a_diet_limit_but_a_refused_food_is() -> None:
    assert read_claim("I love fish tacos.").category == "interests"
    assert read_claim("I don't eat fish.").category == "constraints"


def test_the_reading_is_deterministic_and_cached() -> None:
    text = "I prefer concise answers, always."
    assert read_claim(text) == read_claim(text)
    assert read_claim.cache_info().hits >= 1


# --------------------------------------------------------------------------- decisions


def test_a_standing_default_in_the_users_words_is_ambient() -> None:
    d = decide("User prefers answers in Swahili.", "Please always answer me in Swahili.")
    reason = "ambient: communication, standing default ('always')"
    assert d == ActivationDecision("ambient", False, "communication", reason)


@pytest.mark.parametrize(
    ("content", "evidence", "why"),
    [
        ("User always wants short replies.", "Keep this one short.", "one-off ('this one') in the evidence"),
        ("User prefers formal emails.", "Make this email formal.", "in the evidence"),
        ("User is vegetarian.", "What are some vegetarian stews?", "a request ('?') in the evidence"),
        ("User lives in Lyon.", "My mother lives in Lyon.", "about someone else ('mother') in the evidence"),
        ("User uses Emacs.", "I used to use Emacs.", "past ('used to') in the evidence"),
        ("User prefers metric.", "Use metric for the report.", "a request ('the') in the evidence"),
    ],
)
def test_a_model_overclaiming_one_off_evidence_is_not_ambient(content: str, evidence: str, why: str) -> None:
    d = decide(content, evidence)
    assert d.activation == "conditional" and not d.review and why in d.reason, d


def test_a_disqualified_content_keeps_the_record_conditional() -> None:
    d = decide("User avoids caffeine until May.", "I avoid caffeine.")
    assert d.activation == "conditional" and "in the content" in d.reason


def test_unmarked_evidence_supports_only_an_instruction() -> None:
    assert decide("User prefers replies in Greek.", "Reply in Greek.").activation == "ambient"
    d = decide("User uses Django.", "I'm working on a Django app.")
    assert d.activation == "conditional" and d.review
    assert d.reason == "review: workflow, no standing-default form in the evidence"


def test_a_hedge_sends_a_promotable_claim_to_review_or_leaves_it_conditional() -> None:
    d = decide("Might prefer shorter answers.", "I think I might prefer shorter answers.")
    assert (d.activation, d.review, d.category) == ("conditional", True, "communication")
    assert d.reason.startswith("review: communication, hedged")
    quiet = decide(
        "Might prefer shorter answers.", "I think I might prefer shorter answers.",
        ActivationConfig(review_borderline=False),
    )  # fmt: skip
    assert (quiet.activation, quiet.review) == ("conditional", False)


def test_an_end_date_makes_the_record_time_bound() -> None:
    at = datetime(2030, 1, 1, tzinfo=UTC)
    for field in ("valid_until", "expires_at"):
        d = decide_activation(facts("User is vegetarian.", "I'm vegetarian.", **{field: at}), DEFAULT)
        assert d.activation == "conditional" and "time-bound" in d.reason


def test_interests_become_promotable_only_when_configured() -> None:
    assert decide("User enjoys bouldering.", "I love bouldering.").activation == "conditional"
    config = ActivationConfig(promotable_categories=["identity", "interests"])
    assert decide("User enjoys bouldering.", "I love bouldering.", config).activation == "ambient"
    assert "not promotable" in decide("User is vegetarian.", "I'm vegetarian.", config).reason


def test_a_model_category_only_opens_a_review() -> None:
    content, evidence = "User wears glasses.", "I always wear glasses."
    assert read_claim(content).category is None and read_claim(evidence).category is None
    assert decide(content, evidence).reason == "conditional: no category"
    proposed = decide(content, evidence, proposed_category="constraints")
    assert (proposed.activation, proposed.review, proposed.category) == ("conditional", True, "constraints")
    assert "proposed by the model" in proposed.reason
    assert not decide(content, evidence, proposed_category="interests").review
    assert not decide(content, "I wore glasses as a kid.", proposed_category="constraints").review
    placed = decide("User is vegetarian.", "I'm vegetarian.", proposed_category="workflow")
    assert (placed.activation, placed.category) == ("ambient", "constraints")  # the rules win


# --------------------------------------------------------------------------- eligibility

STANDING = ("User prefers concise answers.", "I prefer concise answers.")


@pytest.mark.parametrize(
    ("fields", "why"),
    [
        ({"type": "episodic"}, "only semantic records can be ambient"),
        ({"status": "deleted"}, "the record is not active"),
        ({"status": "superseded"}, "the record is not active"),
        ({"status": "provisional"}, "the record is not confirmed"),
        ({"source_kind": "agent_inference"}, "the source is not the user's own statement"),
        ({"source_kind": "tool_result"}, "the source is not the user's own statement"),
        ({"evidence_verified": False}, "the evidence is not verified in the user's own turn"),
        ({"evidence": None}, "no evidence"),
        ({"evidence": "  "}, "no evidence"),
        ({"content": "User loves jazz.", "evidence": "I love jazz."}, "category interests is not promotable"),
        ({"content": "User has two cats.", "evidence": "I have two cats."}, "category relationships is not"),
    ],
)
def test_eligibility_failures_keep_the_record_conditional(fields: dict[str, Any], why: str) -> None:
    f = facts(*STANDING) if not fields else ActivationFacts(**(vars(facts(*STANDING)) | fields))
    assert (eligibility(f, DEFAULT) or "").startswith(why)
    d = decide_activation(f, DEFAULT)
    assert d.activation == "conditional" and not d.review and why in d.reason


def test_eligibility_passes_a_verified_promotable_record_whatever_its_form() -> None:
    assert eligibility(facts(*STANDING), DEFAULT) is None
    assert eligibility(facts("User is vegetarian.", "Maybe I'm vegetarian?"), DEFAULT) is None
    assert eligibility(facts("User wears glasses.", "I wear glasses."), DEFAULT) is None  # no category


def test_a_disabled_policy_decides_nothing() -> None:
    off = ActivationConfig(enabled=False)
    assert eligibility(facts(*STANDING), off) == "activation disabled"
    disabled = ActivationDecision("conditional", False, None, "conditional: activation disabled")
    assert decide(*STANDING, off) == disabled


# --------------------------------------------------------------------------- reasons carry no content

_FIXED = (
    "ambient conditional review standing default one-off time-bound past a request about someone else "
    "hedged no standing-default form in the evidence content category is not promotable reads as does "
    "speak of user proposed by model names record has an end date activation disabled only semantic "
    "records can be active confirmed source user's own statement verified turn named person tense "
    "weekday for period food refused time zone progressive state help last ?"
)
_FIXED_WORDS = frozenset(_FIXED.split()) | frozenset(ACTIVATION_CATEGORIES)


def _lexicon_words() -> frozenset[str]:
    words: set[str] = set()
    for name, value in vars(lx).items():
        if name.startswith("_"):
            continue
        items = [value] if isinstance(value, str) else value if isinstance(value, tuple | frozenset) else ()
        for item in items:
            if isinstance(item, str):
                words.update(item.lstrip("=").split())
            elif isinstance(item, tuple):
                words.update(w for w in item if isinstance(w, str))
    return frozenset(words)


def _reason_words(reason: str) -> set[str]:
    return {w for w in re.split(r"[\s,:()']+", reason.lower()) if w}


def _rows(path: Path = TUNING) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def test_reasons_and_cues_use_only_fixed_wording_and_lexicon_cues() -> None:
    allowed = _FIXED_WORDS | _lexicon_words()
    for row in _rows():
        for text in (row["content"], row["evidence"]):
            assert set(" ".join(read_claim(text).cues).split()) <= allowed, text
        reason = decide(row["content"], row["evidence"]).reason
        assert _reason_words(reason) <= allowed, (row, reason)


@pytest.mark.parametrize(
    ("content", "evidence"),
    [
        ("Quorvex prefers Zanthic replies.", "Please always reply in Zanthic, Quorvex here."),
        ("User's Zanthic is Quorvex.", "My Zanthic is Quorvex."),
        ("Prefers Zanthic.", "Maybe Zanthic? Quorvex thinks so."),
        ("User uses Zanthic.", "I used to use Zanthic at Quorvex."),
        ("User's Quorvex prefers Zanthic.", "My boss Quorvex prefers Zanthic."),
    ],
)
def test_no_word_of_the_claim_leaks_into_the_reason(content: str, evidence: str) -> None:
    for proposed in (None, "workflow"):
        reason = decide(content, evidence, proposed_category=proposed).reason.lower()
        assert "zanthic" not in reason and "quorvex" not in reason, reason


# --------------------------------------------------------------------------- the labelled tuning set


@pytest.mark.parametrize("path", [TUNING, HELD_OUT], ids=["tuning", "held_out"])
def test_the_labelled_sets_are_well_formed(path: Path) -> None:
    rows = _rows(path)
    assert len(rows) >= 150
    for row in rows:
        assert set(row) == {"content", "evidence", "label", "category", "why"}, row
        assert row["label"] in ("ambient", "conditional") and row["content"] and row["evidence"]
        assert row["category"] is None or row["category"] in ACTIVATION_CATEGORIES
        if row["label"] == "ambient":
            assert row["category"] in DEFAULT.promotable_categories, row
    share = sum(r["label"] == "ambient" for r in rows) / len(rows)
    assert 0.3 <= share <= 0.5
    text = " ".join(f"{r['content']} {r['evidence']}" for r in rows).lower()
    assert not LOCOMO_NAMES & set(re.findall(r"[a-z]+", text))


@pytest.mark.parametrize(("path", "min_recall"), [(TUNING, 0.6), (HELD_OUT, 0.4)], ids=["tuning", "held_out"])
def test_ambient_precision_and_recall_on_the_labelled_sets(path: Path, min_recall: float) -> None:
    """Precision of ``ambient`` >= 0.95 on both sets; the held-out one was never read while writing rules."""
    rows = _rows(path)
    called = [(r, decide(r["content"], r["evidence"])) for r in rows]
    hits = sum(r["label"] == "ambient" and d.activation == "ambient" for r, d in called)
    ambient = sum(d.activation == "ambient" for _, d in called)
    positives = sum(r["label"] == "ambient" for r in rows)
    precision, recall = hits / max(1, ambient), hits / positives
    wrong = [(r["content"], d.reason) for r, d in called if d.activation == "ambient" != r["label"]]
    print(f"\n{path.stem}: n {len(rows)}, ambient precision {precision:.3f}, recall {recall:.3f}")
    assert precision >= 0.95, wrong
    assert recall >= min_recall
    assert all(d.category in DEFAULT.promotable_categories for _, d in called if d.activation == "ambient")
