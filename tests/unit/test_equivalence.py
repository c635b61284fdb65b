"""The equivalence judges without a model: rules, fail-safe verdicts, NLI label handling, the factory.

Everything here runs on FakeEmbedder or stub cross-encoders, so no torch is imported.
"""

from __future__ import annotations

import json
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

from retold.config import Config
from retold.errors import ConfigError, MissingExtraError
from retold.ingest.equivalence.judge import (
    CONSERVATIVE_MODEL,
    ConservativeJudge,
    EquivalenceJudge,
    JudgeDecision,
    NLICrossEncoderJudge,
    build_judge,
    decide,
    judge_identity,
)
from retold.testing import FakeEmbedder, FakeJudge

FLOOR = Config().ingestion.evidence.entail_floor


@pytest.fixture
def judge() -> ConservativeJudge:
    return ConservativeJudge(FakeEmbedder())


class OrthogonalEmbedder:
    """Every distinct text gets its own axis: cosine 0 between any two different texts."""

    name = "orthogonal"

    def __init__(self) -> None:
        self.axes: dict[str, int] = {}

    def embed_documents(self, texts: list[str]) -> np.ndarray:
        out = np.zeros((len(texts), 64), dtype=np.float32)
        for row, text in enumerate(texts):
            out[row, self.axes.setdefault(text, len(self.axes) % 64)] = 1.0
        return out


# --- contradiction rules: each fires, and its reason names the rule and the differing words ---------


@pytest.mark.parametrize(
    ("a", "b", "reason"),
    [
        ("The user drinks coffee.", "The user doesn't drink coffee.", "negation: none vs 'not'"),
        (
            "Lena manages the data platform team.",
            "Lena no longer manages the data platform team.",
            "negation: none vs 'no longer'",
        ),
        ("The user smokes.", "The user quit smoking.", "negation: none vs 'quit'"),
        (
            "The user prefers concise answers.",
            "The user prefers detailed answers.",
            "antonyms: concise vs detailed",
        ),
        (
            "The user uses tabs for indentation.",
            "The user uses spaces for indentation.",
            "antonyms: tabs vs spaces",
        ),
        ("The user likes jazz.", "The user dislikes jazz.", "antonyms: likes vs dislikes"),
        (
            "Telemetry is enabled in production.",
            "Telemetry is disabled in production.",
            "antonyms: enabled vs disabled",
        ),
        ("The staging cluster has 3 nodes.", "The staging cluster has five nodes.", "numbers: 3 vs five"),
        ("The nightly job runs at 2am.", "The nightly job runs at 4am.", "numbers: 2am vs 4am"),
        (
            "The weekly sync is on Tuesdays.",
            "The weekly sync is on Thursdays.",
            "dates: Tuesdays vs Thursdays",
        ),
        ("The user was born in 1990.", "The user was born in 1987.", "dates: 1990 vs 1987"),
        ("The user lives in Lisbon.", "The user lives in Porto.", "proper nouns: Lisbon vs Porto"),
        (
            "The deploy target is bge-m3 on staging.",
            "The deploy target is minilm on staging.",
            "identifiers: bge-m3 vs minilm",
        ),
        ("The user's editor is vim.", "The user's editor is emacs.", "identifiers: vim vs emacs"),
        (
            "The repo's default branch is main.",
            "The repo's default branch is master.",
            "values: main vs master",
        ),
        (
            "The user prefers email over Slack.",
            "The user prefers Slack over email.",
            "reversed preference: email over slack vs slack over email",
        ),
    ],
)
def test_each_rule_contradicts_with_a_reason_naming_it(
    judge: ConservativeJudge, a: str, b: str, reason: str
) -> None:
    decision = judge.judge_with_reason(a, b)
    assert decision == JudgeDecision("contradicts", reason, {})
    assert judge.judge(b, a) == "contradicts"  # symmetric


# --- fail-safe: a second fact about the same person is distinct, never a contradiction ------------


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("Aditya works at Acme on the billing team.", "Aditya lives in Berlin."),  # another attribute
        ("Aditya works at Acme.", "Priya works at Acme."),  # another subject
        ("Release 2.4 shipped in March.", "Release 2.5 shipped in March."),  # the number names the subject
        ("The user speaks French.", "The user speaks German."),  # several values can hold
        ("The user has visited Japan.", "The user has visited Peru."),
        ("The user works with Dana.", "The user works with Raj."),  # not a single-valued slot
        ("The user's daughter is 7 years old.", "The user's son is 9 years old."),  # two things changed
        ("The user lives in Lisbon.", "The user works in Porto."),
        ("The user worked at Acme.", "The user works at Globex."),  # past and present can both hold
        ("The old laptop runs Windows.", "The new laptop runs Windows."),  # antonym picks another subject
        ("The user has a meeting in the morning.", "The user has a meeting in the evening."),
        (
            "The user is not a morning person.",
            "The user is an evening person.",
        ),  # negation and antonym cancel
        ("The user prefers light mode in the morning.", "The user prefers dark mode in the evening."),
        ("The user is vegetarian.", "The user is left-handed."),
        ("The user's wife is a nurse.", "The user's wife is Canadian."),
        ("Dana reports to Raj.", "Raj reports to Dana."),
        ("The user moved to Berlin.", "The user moved from Berlin."),
        ("The project uses PostgreSQL.", "The project uses Redis."),  # tools of different kinds
    ],
)
def test_claims_the_rules_cannot_prove_incompatible_are_distinct(
    judge: ConservativeJudge, a: str, b: str
) -> None:
    assert judge.judge(a, b) == "distinct"
    assert judge.judge(b, a) == "distinct"


def test_same_tool_category_under_uses_contradicts(judge: ConservativeJudge) -> None:
    decision = judge.judge_with_reason("The user uses vim.", "The user uses emacs.")
    assert decision.verdict == "contradicts"
    assert decision.reason == "identifiers: vim vs emacs"


# --- same: only when provable -------------------------------------------------------------------


def test_identical_text_is_same_whatever_the_spacing_or_case(judge: ConservativeJudge) -> None:
    assert judge.judge("The user prefers concise answers.", "The user prefers concise answers.") == "same"
    decision = judge.judge_with_reason(
        "The user  prefers concise answers.", "the user prefers CONCISE answers."
    )
    assert decision.verdict == "same"
    assert decision.reason == "identical text"


@pytest.mark.parametrize(
    ("a", "b", "reason"),
    [
        ("The user prefers email over Slack for updates.", "For updates, the user prefers email over Slack.",
         "same words, reordered"),
        ("Ben is the user's brother.", "The user's brother is Ben.", "same words, reordered"),
        ("The user works remotely from Nairobi.", "The user works remotely, from Nairobi.",
         "same words after normalisation"),
    ],
)  # fmt: skip
def test_rewordings_with_the_same_words_are_same(
    judge: ConservativeJudge, a: str, b: str, reason: str
) -> None:
    decision = judge.judge_with_reason(a, b)
    assert decision.verdict == "same"
    assert decision.reason is not None and decision.reason.startswith(reason)
    assert decision.scores["cosine"] >= judge.same_cosine


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("Marco is allergic to peanuts.", "Marco has a peanut allergy."),
        ("Aditya works at Acme on the billing team.", "Aditya is on the billing team at Acme."),
        ("The user's name is Aditya.", "The user is called Aditya."),
    ],
)
def test_a_paraphrase_the_rules_cannot_prove_is_distinct(judge: ConservativeJudge, a: str, b: str) -> None:
    assert judge.judge(a, b) == "distinct"


def test_same_words_need_the_cosine_too() -> None:
    judge = ConservativeJudge(OrthogonalEmbedder())
    decision = judge.judge_with_reason("The user likes jazz.", "The user loves jazz.")
    assert decision.verdict == "distinct"
    assert decision.scores == {"cosine": 0.0}
    assert decision.reason is not None and "cosine 0.00 < 0.85" in decision.reason
    loose = ConservativeJudge(OrthogonalEmbedder(), same_cosine=0.0)
    assert loose.judge("The user likes jazz.", "The user loves jazz.") == "same"


def test_the_configured_same_cosine_reaches_the_conservative_judge() -> None:
    config = Config().override({"ingestion": {"equivalence": {"same_cosine": 0.0}}})
    loose = build_judge(config, OrthogonalEmbedder())
    assert isinstance(loose, ConservativeJudge) and loose.same_cosine == 0.0
    assert loose.judge("The user likes jazz.", "The user loves jazz.") == "same"
    strict = build_judge(Config(), OrthogonalEmbedder())
    assert strict.judge("The user likes jazz.", "The user loves jazz.") == "distinct"


def test_a_tense_change_is_not_the_same_claim(judge: ConservativeJudge) -> None:
    assert judge.judge("The user lived in Berlin.", "The user lives in Berlin.") == "distinct"


# --- identity, decide() ---------------------------------------------------------------------------


def test_conservative_judge_names_itself_and_its_embedder() -> None:
    judge = ConservativeJudge(FakeEmbedder(name="mini"))
    assert judge.name == "conservative"
    assert judge.model == f"{CONSERVATIVE_MODEL}+mini"
    assert isinstance(judge, EquivalenceJudge)
    assert judge_identity(judge) == {"judge": "conservative", "model": "retold/conservative-judge-v1+mini"}


def test_decide_wraps_a_judge_without_reasons() -> None:
    fake = FakeJudge({("a claim", "another claim"): "contradicts"})
    assert decide(fake, "a claim", "another claim") == JudgeDecision("contradicts", None, {})
    assert decide(fake, "x", "y") == JudgeDecision("distinct", None, {})
    assert fake.calls == [("judge", "a claim", "another claim"), ("judge", "x", "y")]
    assert judge_identity(fake) == {"judge": "fake-judge", "model": "fake"}


def test_decide_uses_judge_with_reason_when_present(judge: ConservativeJudge) -> None:
    decision = decide(judge, "The user prefers dark mode.", "The user prefers light mode.")
    assert decision == JudgeDecision("contradicts", "antonyms: dark vs light", {})


def test_decide_accepts_a_verdict_reason_pair() -> None:
    class PairJudge:
        def judge_with_reason(self, a: str, b: str) -> tuple[str, str]:
            return "same", "told so"

    assert decide(PairJudge(), "a", "b") == JudgeDecision("same", "told so")
    assert judge_identity(PairJudge()) == {"judge": "PairJudge", "model": "unknown"}


# --- entailment -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("premise", "hypothesis"),
    [
        ("I really prefer concise answers, no fluff.", "The user prefers concise answers."),
        ("I live in Lisbon these days.", "The user lives in Lisbon."),
        ("I hate long answers, keep them short.", "The user prefers short answers."),  # two flips cancel
        ("Please reply in British English.", "The user wants replies in British English."),
        ("I don't drink coffee at all.", "The user does not drink coffee."),
    ],
)
def test_a_supporting_quote_clears_the_evidence_floor(
    judge: ConservativeJudge, premise: str, hypothesis: str
) -> None:
    score, reason = judge.entailment(premise, hypothesis)
    assert score >= FLOOR
    assert reason is None
    assert judge.entails(premise, hypothesis) == score


@pytest.mark.parametrize(
    ("premise", "hypothesis", "reason"),
    [
        ("I don't use vim anymore.", "The user uses vim.", "quote contradicts the claim on: vim"),
        ("I prefer dark mode.", "The user prefers light mode.",
         "quote contradicts the claim on: light, mode"),
        ("I live in Porto now.", "The user lives in Lisbon.", "claim adds a value: Lisbon"),
        ("My sister is a vegetarian.", "The user is vegetarian.",
         "quote is about the speaker's sister, not the speaker"),
        ("Maybe I should switch to emacs.", "The user uses emacs.", "quote is hedged"),
        ("I prefer pytest over unittest.", "The user prefers unittest over pytest.",
         "quote states the reverse preference"),
        ("I work at Acme.", "The user works at Acme on the billing team.", None),  # the claim adds facts
        ("Thanks, that worked!", "The user prefers Python.", "claim adds a value: Python"),
    ],
)  # fmt: skip
def test_an_unsupporting_quote_falls_below_the_floor(
    judge: ConservativeJudge, premise: str, hypothesis: str, reason: str | None
) -> None:
    score, why = judge.entailment(premise, hypothesis)
    assert 0.0 <= score < FLOOR
    assert why == reason


def test_entails_is_zero_for_empty_text(judge: ConservativeJudge) -> None:
    assert judge.entails("", "The user prefers Python.") == 0.0
    assert judge.entails("I prefer Python.", "   ") == 0.0


# --- threads and the cache -----------------------------------------------------------------------


def test_concurrent_calls_agree_with_sequential_ones_and_the_cache_stays_bounded() -> None:
    pairs = [(f"The user has {n} cats.", f"The user has {n + 1} cats.") for n in range(30)]
    pairs += [("The user prefers dark mode.", "The user prefers light mode.")] * 10
    sequential = [ConservativeJudge(FakeEmbedder()).judge_with_reason(a, b) for a, b in pairs]
    judge = ConservativeJudge(FakeEmbedder(), cache_size=8)
    with ThreadPoolExecutor(max_workers=8) as pool:
        concurrent = list(pool.map(lambda p: judge.judge_with_reason(*p), pairs))
        scores = list(pool.map(lambda p: judge.entails(*p), pairs))
    assert concurrent == sequential
    assert all(0.0 <= s <= 1.0 for s in scores)
    assert len(judge._cache) <= 8


# --- the NLI judge, with stub cross-encoders ------------------------------------------------------

NLI_ORDERS = [
    {0: "contradiction", 1: "entailment", 2: "neutral"},  # cross-encoder/nli-deberta-v3-*
    {0: "neutral", 1: "contradiction", 2: "entailment"},  # a shuffled order
    {"0": "ENTAILMENT", "1": "NEUTRAL", "2": "CONTRADICTION"},  # string keys, upper case
]


class StubCrossEncoder:
    """Returns per-pair probabilities, laid out in the order its ``config.id2label`` declares."""

    def __init__(self, id2label: dict[Any, str], table: dict[tuple[str, str], dict[str, float]],
                 logits: bool = False) -> None:  # fmt: skip
        self.config = SimpleNamespace(id2label=id2label)
        self.table = table
        self.logits = logits
        self.calls: list[list[tuple[str, str]]] = []

    def predict(self, pairs: list[tuple[str, str]], **kwargs: Any) -> np.ndarray:
        self.calls.append(list(pairs))
        out = np.zeros((len(pairs), len(self.config.id2label)))
        for row, pair in enumerate(pairs):
            probs = self.table.get(pair, {"entailment": 0.1, "neutral": 0.8, "contradiction": 0.1})
            for index, label in self.config.id2label.items():
                value = probs[label.lower()]
                out[row, int(index)] = np.log(value) + 3.0 if self.logits else value
        return out


def _probs(entailment: float, contradiction: float) -> dict[str, float]:
    return {
        "entailment": entailment,
        "contradiction": contradiction,
        "neutral": 1 - entailment - contradiction,
    }


TABLE = {
    ("A", "A2"): _probs(0.92, 0.02),
    ("A2", "A"): _probs(0.85, 0.05),
    ("A", "B"): _probs(0.05, 0.90),
    ("B", "A"): _probs(0.10, 0.60),
    ("A", "C"): _probs(0.90, 0.02),  # one direction only: C says more than A
    ("C", "A"): _probs(0.30, 0.05),
    ("A", "D"): _probs(0.50, 0.45),  # with floors of 0.4: entailed both ways and contradicted
    ("D", "A"): _probs(0.50, 0.10),
    ("edge", "edge2"): _probs(0.70, 0.01),
    ("edge2", "edge"): _probs(0.70, 0.01),
}


def _nli(
    order: dict[Any, str], *, logits: bool = False, **kwargs: Any
) -> tuple[NLICrossEncoderJudge, list[Any]]:
    loaded: list[Any] = []

    def loader(model: str, device: str | None) -> StubCrossEncoder:
        encoder = StubCrossEncoder(order, TABLE, logits=logits)
        loaded.append((model, device, encoder))
        return encoder

    return NLICrossEncoderJudge("stub/nli", loader=loader, **kwargs), loaded


@pytest.mark.parametrize("order", NLI_ORDERS)
@pytest.mark.parametrize("logits", [False, True])
def test_nli_judge_reads_the_label_order_from_the_config(order: dict[Any, str], logits: bool) -> None:
    judge, _ = _nli(order, logits=logits)
    assert judge.judge("A", "A2") == "same"
    assert judge.judge("A", "B") == "contradicts"
    assert judge.judge("A", "C") == "distinct"
    assert judge.judge("A", "unknown") == "distinct"
    assert judge.entails("A", "C") == pytest.approx(0.90)
    assert judge.entails("C", "A") == pytest.approx(0.30)


def test_nli_judge_reports_scores_and_the_direction() -> None:
    judge, _ = _nli(NLI_ORDERS[1])
    decision = judge.judge_with_reason("A", "B")
    assert decision.verdict == "contradicts"
    assert decision.reason == "nli contradiction 0.90 (a->b)"
    assert decision.scores == {
        "entail_ab": 0.05,
        "entail_ba": 0.1,
        "contradict_ab": 0.9,
        "contradict_ba": 0.6,
    }
    same = judge.judge_with_reason("A", "A2")
    assert same.reason == "nli entailment 0.85 both ways"


def test_nli_contradiction_wins_over_entailment_both_ways() -> None:
    judge, _ = _nli(NLI_ORDERS[1], entail_floor=0.4, contradict_floor=0.4)
    decision = judge.judge_with_reason("A", "D")
    assert decision.verdict == "contradicts"
    assert min(decision.scores["entail_ab"], decision.scores["entail_ba"]) >= 0.4


def test_nli_judge_floors_are_inclusive_and_configurable() -> None:
    judge, _ = _nli(NLI_ORDERS[0], entail_floor=0.7)
    assert judge.judge("edge", "edge2") == "same"
    strict, _ = _nli(NLI_ORDERS[0], entail_floor=0.95, contradict_floor=0.95)
    assert strict.judge("A", "A2") == "distinct"
    assert strict.judge("A", "B") == "distinct"


def test_nli_judge_loads_lazily_once_across_threads() -> None:
    judge, loaded = _nli(NLI_ORDERS[0], device="cuda")
    assert not judge.is_loaded and loaded == []
    with ThreadPoolExecutor(max_workers=8) as pool:
        verdicts = list(pool.map(lambda _: judge.judge("A", "B"), range(32)))
    assert set(verdicts) == {"contradicts"}
    assert len(loaded) == 1 and loaded[0][:2] == ("stub/nli", "cuda")
    assert judge.is_loaded
    assert judge.name == "nli-cross-encoder" and judge.model == "stub/nli"


def test_nli_judge_refuses_a_model_without_nli_labels() -> None:
    judge = NLICrossEncoderJudge(
        "stub/reranker", loader=lambda m, d: StubCrossEncoder({0: "LABEL_0", 1: "LABEL_1"}, {})
    )
    with pytest.raises(ConfigError, match="does not look like an NLI model") as info:
        judge.judge("a", "b")
    assert info.value.key == "ingestion.equivalence.model"


def test_nli_judge_names_the_extra_when_sentence_transformers_is_missing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "sentence_transformers", None)  # makes the import fail
    judge = NLICrossEncoderJudge("cross-encoder/nli-deberta-v3-small")
    with pytest.raises(MissingExtraError, match=r"retold\[local\]") as info:
        judge.entails("a", "b")
    assert info.value.extra == "local"


# --- the factory ----------------------------------------------------------------------------------


def test_build_judge_defaults_to_the_conservative_judge() -> None:
    embedder = FakeEmbedder()
    judge = build_judge(Config(), embedder)
    assert isinstance(judge, ConservativeJudge)
    assert judge.embedder is embedder


def test_build_judge_builds_an_nli_judge_for_any_other_model_without_loading_it() -> None:
    config = Config().override(
        {
            "ingestion.equivalence.model": "cross-encoder/nli-deberta-v3-small",
            "ingestion.equivalence.entail_floor": 0.8,
            "ingestion.equivalence.contradict_floor": 0.6,
            "embedding.device": "cpu",
        }
    )
    judge = build_judge(config, FakeEmbedder())
    assert isinstance(judge, NLICrossEncoderJudge)
    assert (judge.model, judge.entail_floor, judge.contradict_floor, judge.device) == (
        "cross-encoder/nli-deberta-v3-small",
        0.8,
        0.6,
        "cpu",
    )
    assert not judge.is_loaded
    auto = build_judge(config.override({"embedding.device": "auto"}), FakeEmbedder())
    assert isinstance(auto, NLICrossEncoderJudge) and auto.device is None


def test_importing_the_judges_loads_no_model_library() -> None:
    code = (
        "import json, sys, retold.ingest.equivalence.judge; "
        "print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in "
        "('torch', 'sentence_transformers', 'transformers'))))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert json.loads(out.stdout) == []


# --- the labelled data the benchmark and the integration tests read --------------------------------

DATA = Path(__file__).resolve().parents[1] / "data"


def _jsonl(name: str) -> list[dict[str, Any]]:
    lines = (DATA / name).read_text(encoding="utf-8").splitlines()
    return [json.loads(line) for line in lines if line.strip()]


def test_judge_pairs_are_well_formed_and_balanced() -> None:
    rows = _jsonl("judge_pairs.jsonl")
    assert all(set(r) == {"a", "b", "label", "note"} for r in rows)
    assert all(isinstance(r[k], str) and r[k].strip() for r in rows for k in ("a", "b", "note"))
    counts = {label: sum(r["label"] == label for r in rows) for label in ("same", "contradicts", "distinct")}
    assert sum(counts.values()) == len(rows) >= 150
    assert min(counts.values()) >= 45, counts
    assert len({(r["a"], r["b"]) for r in rows}) == len(rows), "duplicate pair"
    hard = [r for r in rows if r["note"].startswith("same subject, different attribute")]
    assert len(hard) >= 20 and {r["label"] for r in hard} == {"distinct"}


def test_entailment_pairs_are_well_formed_and_balanced() -> None:
    rows = _jsonl("entailment_pairs.jsonl")
    assert all(set(r) == {"premise", "hypothesis", "label"} for r in rows)
    entails = sum(r["label"] == "entails" for r in rows)
    assert {r["label"] for r in rows} == {"entails", "not_entails"}
    assert len(rows) >= 60 and abs(entails - (len(rows) - entails)) <= 0.1 * len(rows)
    assert len({(r["premise"], r["hypothesis"]) for r in rows}) == len(rows), "duplicate pair"
