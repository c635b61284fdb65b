"""`locomo_retrieval.py --hosted`: skipped without a key; with models, extracted facts and
rewritten questions are scored by the same harness (fake models, real embedder and SQLite)."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from benchmark_module import load_benchmark

from retold.models import CandidateRecord, EntityMention, ExtractionContext, ExtractionOutput, Turn
from retold.testing import FakeExtractor, FakeReviewer, FakeRewriter

pytestmark = pytest.mark.integration

SESSIONS = {
    1: [
        ("Ann", "Hi Bo! How have you been lately?"),
        ("Bo", "Good! I adopted a grey rescue greyhound named Pixel last weekend."),
        ("Ann", "That is lovely, congratulations."),
    ],
    2: [
        ("Bo", "Pixel and I walked along the river this morning."),
        ("Ann", "I started a pottery class at the community centre on Tuesdays."),
        ("Bo", "Pottery sounds fun, send me a picture of your first bowl."),
    ],
}


def _locomo(path: Path) -> Path:
    conversation: dict[str, Any] = {"speaker_a": "Ann", "speaker_b": "Bo"}
    for s, turns in SESSIONS.items():
        conversation[f"session_{s}_date_time"] = f"1:56 pm on {s} May, 2023"
        conversation[f"session_{s}"] = [
            {"speaker": who, "dia_id": f"D{s}:{i + 1}", "text": text} for i, (who, text) in enumerate(turns)
        ]
    qa = [
        {
            "question": "What kind of dog does Bo have?",
            "answer": "greyhound",
            "evidence": ["D1:2"],
            "category": 4,
        },
        {"question": "What class did Ann take up?", "answer": "pottery", "evidence": ["D2:2"], "category": 4},
    ]
    path.write_text(json.dumps([{"sample_id": "conv-t", "conversation": conversation, "qa": qa}]))
    return path


def _facts(transcript: list[Turn], context: ExtractionContext) -> ExtractionOutput:
    """One fact per session, quoting its second turn, as a hosted extractor would."""
    turn = transcript[1]
    quote = turn.content.split(": ", 1)[1]
    who = turn.content.split(": ", 1)[0]
    fact = f"{who} adopted a greyhound." if "greyhound" in quote else f"{who} goes to a pottery class."
    candidate = CandidateRecord(
        type="semantic",
        content=fact,
        attribute="pet" if "greyhound" in quote else "hobby",
        source_kind="user_statement",
        evidence=quote,
        evidence_turn=turn.turn,
        entity_mentions=[EntityMention(kind="person", text=who, role="about")],
    )
    return ExtractionOutput([candidate], None)


def test_without_the_key_the_hosted_run_is_skipped_with_a_message(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    bench = load_benchmark("locomo_retrieval")
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    out = tmp_path / "hosted.json"
    argv = ["--hosted", "anthropic:claude-haiku-4-5", "--data", str(_locomo(tmp_path / "l.json"))]
    assert bench.main([*argv, "--json", str(out), "--check"]) == 0
    printed = capsys.readouterr().out
    assert "skipped" in printed and "ANTHROPIC_API_KEY" in printed
    assert not out.exists()  # nothing measured, nothing written
    with pytest.raises(SystemExit):
        bench.parse_args(["--hosted", "nobody:model"])
    with pytest.raises(SystemExit):
        bench.parse_args(["--hosted", "anthropic:m", "--turns-per-record", "3"])


async def test_extracted_facts_and_rewritten_questions_are_scored_by_the_same_harness(tmp_path: Path) -> None:
    bench = load_benchmark("locomo_retrieval")
    dump = tmp_path / "dump.jsonl"
    argv = ["--hosted", "anthropic:claude-haiku-4-5", "--data", str(_locomo(tmp_path / "l.json"))]
    args = bench.parse_args([*argv, "--dump", str(dump)])
    rewriter = FakeRewriter({"What class did Ann take up?": "Ann pottery class"})
    extractor = FakeExtractor(_facts)
    models = {"extractor": extractor, "reviewer": FakeReviewer("accept"), "rewriter": rewriter}
    store = tmp_path / "hosted.sqlite"
    result = await bench.run(args, store, models)

    assert result["hosted"]["extraction"] == {"sessions": 2, "records": 2}
    assert result["hosted"]["rewrite_status"] == {"unchanged": 1, "applied": 1}
    assert len(extractor.calls) == 2
    # Each session's transcript reached the extractor at that session's date, as the user's turns.
    first = extractor.calls[0][0]
    assert [t.role for t in first] == ["user"] * 3 and first[1].content.startswith("Bo: Good!")
    assert first[0].at.year == 2023
    # Six turn records and two facts; each fact stands for the turn it quotes.
    assert result["records"] == 8
    # The dump names records by the turns they stand for: each question's gold turn is found
    # twice, as the turn's own record and as the fact quoting it; the BM25 baseline sees both.
    rows = {row["question"]: row for row in map(json.loads, dump.read_text().splitlines())}
    for question, gold in (
        ("What kind of dog does Bo have?", ["D1:2"]),
        ("What class did Ann take up?", ["D2:2"]),
    ):
        assert rows[question]["rankings"]["hybrid, gate off"].count(gold) == 2
        assert rows[question]["rankings"]["bm25"].count(gold) == 2
    assert ["What class did Ann take up?"] in [queries for queries, _ in rewriter.calls]
    # The facts were written while the clock read each session's date; the searches read today.
    with sqlite3.connect(store) as db:
        facts = db.execute(
            "SELECT event_at, source_ref FROM records WHERE type = 'semantic' ORDER BY event_at"
        )
        rows = list(facts)
    assert [at[:10] for at, _ in rows] == ["2023-05-01", "2023-05-02"]
    assert all(ref.endswith("<turn:1>") or "<turn:" in ref for _, ref in rows)


async def test_a_session_whose_extraction_fails_is_counted_and_stands_for_nothing(tmp_path: Path) -> None:
    bench = load_benchmark("locomo_retrieval")
    args = bench.parse_args(["--hosted", "openai:gpt-x", "--data", str(_locomo(tmp_path / "l.json"))])
    models = {
        "extractor": FakeExtractor(RuntimeError("the provider is down")),
        "reviewer": FakeReviewer("accept"),
        "rewriter": FakeRewriter(RuntimeError("the provider is down")),
    }
    result = await bench.run(args, tmp_path / "failed.sqlite", models)
    assert result["hosted"]["extraction"] == {"sessions": 2, "not_extracted": 2}
    assert result["hosted"]["rewrite_status"] == {"failed": 2}  # the raw questions were searched
    assert result["records"] == 6 and result["metrics"]["hybrid, gate off"]["1-4"]["recall@10"] == 1.0
