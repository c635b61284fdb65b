"""Dates a query names become event-time windows the dense channel prefers (time_window)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import retold
from retold.ingest.write.request import WriteRequest
from retold.models import SearchRequest
from retold.retrieve.replay import replay_gate
from retold.retrieve.time_window import interleave, query_windows

from .writepath import World, make_world

NOW = datetime(2026, 12, 4, 15, tzinfo=UTC)


def test_a_named_day_is_a_window_with_slack_either_side() -> None:
    (window,) = query_windows(["What was Sam doing on December 4, 2023?"], NOW, slack_days=1)
    assert window.start == datetime(2023, 12, 3, tzinfo=UTC)
    assert window.end == datetime(2023, 12, 6, tzinfo=UTC)
    assert "December 4, 2023" in window.text


def test_months_relative_periods_and_since() -> None:
    (month,) = query_windows(["what happened in October 2023"], NOW, slack_days=0)
    assert (month.start, month.end) == (datetime(2023, 10, 1, tzinfo=UTC), datetime(2023, 11, 1, tzinfo=UTC))
    (since,) = query_windows(["what changed since March 2026"], NOW, slack_days=0)
    assert since.start == datetime(2026, 3, 1, tzinfo=UTC) and since.end == NOW
    assert query_windows(["what is due by Friday"], NOW, slack_days=0) == []  # a deadline, not an event
    assert query_windows(["what does Sam like to cook"], NOW, slack_days=1) == []


def test_interleave_alternates_window_first_and_keeps_each_record_once() -> None:
    best = [("a", 0.9), ("b", 0.8), ("c", 0.7)]
    windowed = [("w1", 0.5), ("b", 0.8), ("w2", 0.4)]
    assert [r for r, _ in interleave(best, windowed, k=10)] == ["w1", "a", "b", "w2", "c"]
    assert [r for r, _ in interleave(best, windowed, k=3)] == ["w1", "a", "b"]
    assert interleave(best, [], k=2) == best[:2]


async def _dated_world(path: Any, *, enabled: bool, **keys: Any) -> tuple[World, list[str]]:
    config = retold.Config().override({"retrieval.time_windows": enabled, **keys})
    world = await make_world(path, config=config)
    rt, p = world.rt, world.p
    start = datetime(2023, 1, 2, 12, tzinfo=UTC)
    days: list[str] = []
    for day in range(60):
        written = await rt.host.ingest(p, WriteRequest(
            type="episodic", content=f"Spent the day on errands, number {day}.", scope=p.user_scope,
            source_kind="user_statement", event_at=start + timedelta(days=day), trusted=True,
        ))  # fmt: skip
        assert written.ok, written
        days.append(str(written.record_id))
    return world, days


async def test_a_dated_question_reaches_records_of_that_day(store_location: Any) -> None:
    world, days = await _dated_world(store_location("dated.sqlite"), enabled=True)
    try:
        rt, p = world.rt, world.p
        day = (datetime(2023, 1, 2, tzinfo=UTC) + timedelta(days=40)).strftime("%B %-d, %Y")
        response = await rt.search(p, SearchRequest(queries=[f"What did I do on {day}?"], k=5, gate=False))
        log = await rt.store.search_log(response.search_id)
        assert log is not None
        dense = json.loads(log["dense"])
        # The window (day 40, a day either side) alternates with the global best, window first.
        assert {dense[0][0], dense[2][0], dense[4][0]} == set(days[39:42])
        windows = json.loads(log["request"])["time_windows"]
        assert windows and day in windows[0][0]
    finally:
        await world.rt.close()


async def test_with_time_windows_off_the_date_is_only_words(store_location: Any) -> None:
    world, _ = await _dated_world(store_location("undated.sqlite"), enabled=False)
    try:
        rt, p = world.rt, world.p
        response = await rt.search(
            p, SearchRequest(queries=["What did I do on February 11, 2023?"], gate=False)
        )
        log = await rt.store.search_log(response.search_id)
        assert log is not None and json.loads(log["request"])["time_windows"] is None
    finally:
        await world.rt.close()


async def test_the_gate_passes_the_querys_dates_at_the_window_floor_and_replays_it(
    store_location: Any,
) -> None:
    # Floors out of reach but the window's: only a record inside the dates can answer.
    world, days = await _dated_world(
        store_location("gated.sqlite"), enabled=True,
        **{"retrieval.gate.dense_floor.episodic": 1.0, "retrieval.gate.lexical_min_term_fraction": 1.0,
           "retrieval.gate.window_floor": 0.0, "retrieval.gate.companion_floor": 1.0,
           "retrieval.gate.context_floor": 1.0},
    )  # fmt: skip
    try:
        rt, p = world.rt, world.p
        response = await rt.search(p, SearchRequest(queries=["What did I do on February 11, 2023?"], k=10))
        returned = [r.record.id for r in response.results]
        assert returned and set(returned) <= set(days[39:42])  # 11 February is day 40
        assert all(r.explanation.gate.startswith("dated: dense ") for r in response.results)
        log = await rt.store.search_log(response.search_id)
        assert log is not None
        flags = {row[0]: row[3] for row in json.loads(log["fused"]) if len(row) > 3}
        assert {rid for rid, f in flags.items() if f & 2} == set(days[39:42])
        replayed = await replay_gate(rt.store, response.search_id, rt.config)
        assert replayed.kept[: len(returned)] == returned
        # Undated, the same floors answer nothing.
        undated = await rt.search(p, SearchRequest(queries=["What did I do on errands?"], k=10))
        assert undated.results == []
    finally:
        await world.rt.close()
