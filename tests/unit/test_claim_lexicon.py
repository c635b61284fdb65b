"""The claim lexicon's stemmer: Snowball's, with the few words it would fold onto another word held apart."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import pytest

from retold.config import Config
from retold.ingest.equivalence.claim_lexicon import ANTONYMS, NEGATION_STEMS, canonical, stem_word
from retold.ingest.equivalence.judge import ConservativeJudge
from retold.retrieve import query_terms
from retold.testing import FakeEmbedder


@pytest.fixture
def judge() -> ConservativeJudge:
    return ConservativeJudge(FakeEmbedder())


@pytest.mark.parametrize(
    "forms",
    [
        ("use", "uses", "used", "using"),
        ("prefer", "prefers", "preferred", "preferring"),
        ("have", "has", "had", "having"),
        ("go", "goes", "went", "gone"),
        ("meeting", "meetings"),
        ("like", "likes", "liked", "liking"),
    ],
)
def test_inflections_of_one_word_share_a_stem(forms: tuple[str, ...]) -> None:
    assert len({stem_word(f) for f in forms}) == 1


@pytest.mark.parametrize(
    ("word", "other"),
    [
        ("meeting", "meet"),  # the event verb
        ("likely", "like"),
        ("friendly", "friend"),  # a relation noun
        ("department", "depart"),
        ("information", "informal"),
        ("options", "optional"),
        ("lately", "late"),
        ("responsible", "response"),
        ("active", "activate"),
        ("state", "stateful"),
    ],
)
def test_snowball_never_folds_a_word_onto_one_the_tables_give_a_meaning(word: str, other: str) -> None:
    assert canonical(word) != canonical(other)


def test_the_verb_like_and_its_synonym_group_keep_apart() -> None:
    assert canonical("likes") == canonical("prefers") == "like"
    assert stem_word("likes") != "like" != stem_word("prefers")


def test_stem_tables_are_built_through_the_stemmer() -> None:
    assert {stem_word("stopped"), stem_word("quits")} == NEGATION_STEMS
    assert canonical("optional") in ANTONYMS[canonical("required")]


@pytest.mark.parametrize(
    ("a", "b", "verdict"),
    [
        ("The user prefers vim.", "The user prefers emacs.", "contradicts"),  # one preferred editor
        ("The user likes vim.", "The user likes emacs.", "distinct"),  # liking both can hold
        ("The user stopped using vim.", "The user uses vim.", "contradicts"),
        ("The meeting is at 3pm.", "The meeting is at 4pm.", "contradicts"),  # a meeting is no event verb
        ("The user wears hats.", "The user wears caps.", "distinct"),  # "hats" is not "hates"
    ],
)
def test_stems_reach_the_rules(judge: ConservativeJudge, a: str, b: str, verdict: str) -> None:
    assert judge.judge(a, b) == verdict


def test_information_is_not_informal(judge: ConservativeJudge) -> None:
    floor = Config().ingestion.evidence.entail_floor
    assert judge.entails("The information is formal.", "The information is casual.") < floor


def test_each_thread_stems_with_its_own_stemmer() -> None:
    """Snowball stemmers keep state mid-word: a shared instance would mix two threads' words."""
    barrier = threading.Barrier(4)

    def own() -> int:
        barrier.wait()
        return id(query_terms._stemmer())

    with ThreadPoolExecutor(max_workers=4) as pool:
        assert len(set(pool.map(lambda _: own(), range(4)))) == 4
    words = ["preferences", "organisations", "running", "happily", "activities"] * 200
    with ThreadPoolExecutor(max_workers=8) as pool:
        assert list(pool.map(stem_word, words)) == [stem_word(w) for w in words]
