"""The LoCoMo benchmark's own scoring and id handling: pure, no LoCoMo data needed."""

from __future__ import annotations

import sys

import pytest
from benchmark_module import load_benchmark

pytestmark = pytest.mark.integration


def test_scoring_counts_a_merged_record_for_every_dia_id() -> None:
    bench = load_benchmark("locomo_retrieval")
    question = bench.Question("conv", "q?", "a", ("D1:1", "D2:5"), 4)
    asked = bench.Asked(question, {"D1:1", "D2:5"})
    absorbed = {"r1": ["D1:1", "D2:5"], "r2": ["D1:2"]}
    m = bench.score(asked, ["r2", "r1"], absorbed)
    assert m["recall@5"] == 1.0 and m["all@5"] == 1.0 and m["session@5"] == 1.0 and m["mrr"] == 0.5
    m = bench.score(asked, ["r2"], absorbed)
    assert m["recall@5"] == 0.0 and m["any@5"] == 0.0 and m["mrr"] == 0.0


def test_evidence_ids_are_normalised() -> None:
    load_benchmark("locomo_retrieval")
    locomo_data = sys.modules["locomo_data"]  # on sys.path once the benchmark is loaded
    assert locomo_data.evidence_ids(["D8:6; D9:17", "D30:05", "D", "D1:3", "D1:3"]) == (
        "D8:6", "D9:17", "D30:5", "D", "D1:3",
    )  # fmt: skip


def test_first_person_stores_hold_one_speakers_words_and_ask_in_their_voice() -> None:
    load_benchmark("locomo_retrieval")
    data = sys.modules["locomo_data"]
    at = data.parse_session_date("1:56 pm on 8 May, 2023")
    turns = [
        data.Turn("D1:1", 1, 0, "Ann", "I went camping by the lake.", at),
        data.Turn("D1:2", 1, 1, "Bo", "Sounds lovely!", at),
        data.Turn("D1:3", 1, 2, "Ann", "My sister came too.", at),
    ]
    questions = [
        data.Question("c", "When did Ann go camping?", "May", ("D1:1",), 2),
        data.Question("c", "Who went camping with Ann and Ann's sister?", "-", ("D1:1", "D1:3"), 1),
        data.Question("c", "What did Bo say?", "-", ("D1:2",), 4),  # Bo's words: Bo's store
        data.Question("c", "Is Ann a camper?", "-", ("D1:1", "D1:2"), 3),  # evidence of both
        data.Question("c", "Did Ann lie?", "-", ("D1:1",), 5),  # adversarial: left out
    ]
    ann, bo = data.first_person(data.Conversation("c", ("Ann", "Bo"), turns, questions))
    assert (ann.sample_id, ann.origin, bo.sample_id) == ("c-1", "c", "c-2")
    assert [t.content for t in ann.turns] == ["I went camping by the lake.", "My sister came too."]
    assert data.turn_request(ann, ann.turns[0]).entities == []  # the user's own words, unattributed
    assert [q.question for q in ann.questions] == [
        "When did I go camping?",
        "Who went camping with me and my sister?",
    ]
    assert [q.sample_id for q in ann.questions] == ["c-1", "c-1"]
    assert [q.question for q in bo.questions] == ["What did I say?"]
    assert data.in_first_person("What does Ann's dog like?", "Bo") is None
