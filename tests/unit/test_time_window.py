"""Dates a query names become event-time windows the dense channel prefers (time_window)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import retold
from retold.ingest.write.request import WriteRequest
from retold.models import SearchRequest
from retold.retrieve.replay import replay_gate
from retold.retrieve.time_window import interleave, query_windows, told_within

from .writepath import World, make_world

NOW = datetime(2026, 12, 4, 15, tzinfo=UTC)
ASKED = "What did I do on February 11, 2023?"  # day 40 of _dated_world


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


def test_a_part_of_a_month_is_its_own_window_not_a_relative_period() -> None:
    # "the last week of October 2023" once also read as "last week" before the searcher's clock.
    (week,) = query_windows(["Where was Calvin in the last week of October 2023?"], NOW, slack_days=0)
    assert (week.start, week.end) == (datetime(2023, 10, 25, tzinfo=UTC), datetime(2023, 11, 1, tzinfo=UTC))
    (mid,) = query_windows(["Which classes did Evan join in mid-August 2023?"], NOW, slack_days=0)
    assert (mid.start, mid.end) == (datetime(2023, 8, 11, tzinfo=UTC), datetime(2023, 8, 22, tzinfo=UTC))
    (weekend,) = query_windows(["What did Dave do the first weekend of October 2023?"], NOW, slack_days=0)
    assert (weekend.start, weekend.end) == (
        datetime(2023, 10, 7, tzinfo=UTC),
        datetime(2023, 10, 9, tzinfo=UTC),
    )


def test_as_of_in_a_question_is_the_period_itself_not_everything_since() -> None:
    (as_of,) = query_windows(["How many pets did Andrew have, as of September 2023?"], NOW, slack_days=0)
    assert (as_of.start, as_of.end) == (datetime(2023, 9, 1, tzinfo=UTC), datetime(2023, 10, 1, tzinfo=UTC))


def test_a_text_told_later_about_a_time_inside_the_window() -> None:
    (window,) = query_windows(["What did Dave do the first weekend of October 2023?"], NOW, slack_days=0)
    thursday, sunday = datetime(2023, 10, 12, 15, tzinfo=UTC), datetime(2023, 10, 15, 15, tzinfo=UTC)
    assert told_within("Last Saturday I went to the car show!", thursday, [window])
    assert told_within("Hey! Eight days ago I went to the car show.", sunday, [window])
    assert not told_within("Yesterday I went to the car show.", sunday, [window])  # the 14th
    assert not told_within("I went to the car show, it was great.", sunday, [window])
    # A plan made before the window is not a report of it, even when it names the day.
    assert not told_within("On October 7 I go to the car show.", datetime(2023, 9, 30, tzinfo=UTC), [window])


async def test_a_record_told_after_the_dates_about_them_joins_the_window(store_location: Any) -> None:
    world, days = await _dated_world(store_location("told.sqlite"), enabled=True)
    try:
        rt, p = world.rt, world.p
        told: dict[str, str] = {}
        for content, at in [
            ("Three days ago I went to the car show downtown.", datetime(2023, 2, 14, 12, tzinfo=UTC)),
            ("In three days I go to the car show downtown.", datetime(2023, 2, 14, 13, tzinfo=UTC)),
            ("Three days ago we sailed round the bay.", datetime(2023, 3, 20, 12, tzinfo=UTC)),
        ]:
            written = await rt.host.ingest(p, WriteRequest(
                type="episodic", content=content, scope=p.user_scope, source_kind="user_statement",
                event_at=at, trusted=True,
            ))  # fmt: skip
            assert written.ok, written
            told[f"{content[:5]} {at:%m-%d}"] = str(written.record_id)
        response = await rt.search(p, SearchRequest(queries=[ASKED], gate=False))
        log = await rt.store.search_log(response.search_id)
        assert log is not None
        in_window = {row[0] for row in json.loads(log["fused"]) if len(row) > 3 and row[3] & 2}
        # The days themselves, and the record stored on the 14th that says it was the 11th.
        assert told["Three 02-14"] in in_window
        assert told["In th 02-14"] not in in_window and told["Three 03-20"] not in in_window
        assert set(days[39:42]) <= in_window
    finally:
        await world.rt.close()
    world, _ = await _dated_world(
        store_location("untold.sqlite"), enabled=True, **{"retrieval.time_window_report_days": 0}
    )
    try:
        rt, p = world.rt, world.p
        written = await rt.host.ingest(p, WriteRequest(
            type="episodic", content="Three days ago I went to the car show downtown.", scope=p.user_scope,
            source_kind="user_statement", event_at=datetime(2023, 2, 14, 12, tzinfo=UTC), trusted=True,
        ))  # fmt: skip
        response = await rt.search(p, SearchRequest(queries=[ASKED], gate=False))
        log = await rt.store.search_log(response.search_id)
        assert log is not None
        flagged = {row[0] for row in json.loads(log["fused"]) if len(row) > 3 and row[3] & 2}
        assert str(written.record_id) not in flagged
    finally:
        await world.rt.close()
