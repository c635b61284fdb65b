"""Temporal support (spec §8.3) and the time-driven review worker (spec §8.4)."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from retold.config import Config
from retold.ingest.write.temporal import find_expressions, mentions_time, unsupported_fields
from retold.ingest.write.temporal_review import REVIEW_ACTOR, review_due
from retold.store import Store
from retold.testing import FakeClock, record_for_tests
from retold.util import parse_ts

TURN = datetime(2026, 3, 4, 10, 30, tzinfo=UTC)  # a Wednesday


def at(*parts: int) -> datetime:
    return datetime(*parts, tzinfo=UTC)  # type: ignore[misc]


@pytest.mark.parametrize(
    ("quote", "text", "role", "days"),
    [
        ("I'm in Lisbon until Friday", "until Friday", "until", [date(2026, 3, 6)]),
        ("since March 2024 I work at Acme", "since March 2024", "from", [date(2024, 3, 1)]),
        ("my trial ends on March 30", "ends on March 30", "until", [date(2026, 3, 30)]),
        ("we ship in two weeks", "in two weeks", "point", [date(2026, 3, 18)]),
        ("I started 3 days ago", "3 days ago", "point", [date(2026, 3, 1)]),
        ("from now on use tabs", "from now on", "from", [date(2026, 3, 4)]),
        ("the launch is 2026-04-01", "2026-04-01", "point", [date(2026, 4, 1)]),
        ("by the end of next month", "by the end of next month", "until", [date(2026, 4, 30)]),
        ("in May I move", "in May", "point", [date(2026, 5, 1)]),
        ("on the 15th of April, 2026 we go live", "on the 15th of April, 2026", "point", [date(2026, 4, 15)]),
        ("tomorrow I fly", "tomorrow", "point", [date(2026, 3, 5)]),
        ("next Friday we demo", "next Friday", "point", [date(2026, 3, 6), date(2026, 3, 13)]),
    ],
)
def test_expressions_resolve_against_the_turn_timestamp(
    quote: str, text: str, role: str, days: list[date]
) -> None:
    [expr] = find_expressions(quote, TURN)
    assert (expr.text, expr.role) == (text, role)
    assert [start for start, _ in expr.spans] == days


@pytest.mark.parametrize(
    "quote", ["I may go later", "we have 2000 users", "I sat on the sun deck", "I like tea"]
)
def test_ordinary_words_are_not_dates(quote: str) -> None:
    assert find_expressions(quote, TURN) == []


@pytest.mark.parametrize("quote", ["I moved in March 0000", "on 5 March 0000", "by February 0th"])
def test_impossible_dates_in_a_quote_resolve_to_nothing(quote: str) -> None:
    assert find_expressions(quote, TURN) == []


# Words the grammar is built from, and ordinary ones; no impossible date can be put together.
FRAGMENTS = [
    "in", "on", "by", "since", "until", "from", "the", "of", "end", "early", "mid-", "late", "last",
    "next", "this", "coming", "a", "few", "two", "3", "8", "12", "2022", "May", "March", "September",
    "Sept.", "Friday", "Sunday", "day", "days", "week", "weekend", "weeks", "fortnight", "month",
    "months", "year", "years", "ago", "now", "today", "tonight", "tomorrow", "yesterday", "after",
    "before", "starting", "going", "forward", "here", "within", "I", "went", "sat", "users", "tea",
    "03/04/2026", "2026-03-04", ",", ".",
]  # fmt: skip


@settings(max_examples=400, deadline=None)
@given(st.lists(st.sampled_from(FRAGMENTS), max_size=14), st.sampled_from([" ", "  ", "\n", " \t "]))
def test_mentions_time_agrees_with_find_expressions(words: list[str], space: str) -> None:
    quote = space.join(words)
    # Runs of spaces count as one ("going  forward"; find_expressions' open-ended phrases want one).
    assert mentions_time(quote) == bool(find_expressions(" ".join(quote.split()), TURN))


@pytest.mark.parametrize(
    "quote",
    ["I may go later", "we have 2000 users", "I like tea", "", "I'm in Lisbon until Friday", "3 days ago"],
)
def test_mentions_time_on_examples(quote: str) -> None:
    assert mentions_time(quote) == bool(find_expressions(quote, TURN))


def test_support_depends_on_the_expression_and_its_role() -> None:
    quote = "I'm in Lisbon until Friday"
    friday = at(2026, 3, 6)
    assert unsupported_fields(quote, TURN, valid_until=friday) == []
    assert unsupported_fields(quote, TURN, valid_until=at(2026, 3, 7)) == []  # the instant after Friday
    assert unsupported_fields(quote, TURN, review_at=friday) == []
    assert unsupported_fields(quote, TURN, valid_from=friday) == ["valid_from"]  # "until" is not a start
    assert unsupported_fields(quote, TURN, valid_until=at(2026, 3, 13)) == ["valid_until"]  # a guessed date
    assert unsupported_fields("I like tea", TURN, review_at=friday) == ["review_at"]
    assert unsupported_fields(None, TURN, valid_from=friday) == ["valid_from"]


def test_relative_expressions_resolve_against_the_turn_not_today() -> None:
    quote = "we ship in two weeks"
    assert unsupported_fields(quote, TURN, review_at=at(2026, 3, 18, 9)) == []
    assert unsupported_fields(quote, TURN + timedelta(days=1), review_at=at(2026, 3, 18, 9)) == ["review_at"]


def test_review_at_must_not_lie_entirely_in_the_turns_past() -> None:
    assert unsupported_fields("I started 3 days ago", TURN, review_at=at(2026, 3, 1)) == ["review_at"]
    assert unsupported_fields("I started 3 days ago", TURN, valid_from=at(2026, 3, 1)) == []


def test_a_period_supports_both_bounds_and_their_order_is_checked() -> None:
    quote = "I'm on vacation next week"
    assert unsupported_fields(quote, TURN, valid_from=at(2026, 3, 9), valid_until=at(2026, 3, 15)) == []
    assert sorted(
        unsupported_fields(quote, TURN, valid_from=at(2026, 3, 15), valid_until=at(2026, 3, 9))
    ) == [
        "valid_from",
        "valid_until",
    ]


async def test_review_due_flags_a_bounded_batch_and_emits_one_event_each(
    store: Store, clock: FakeClock
) -> None:
    now = clock.now()
    due = [
        record_for_tests(now, review_at=now - timedelta(days=i), valid_until=now + timedelta(days=1))
        for i in range(1, 4)
    ]
    later = record_for_tests(now, review_at=now + timedelta(days=1))
    gone = record_for_tests(now, review_at=now - timedelta(days=1), status="superseded")
    async with store.transaction():
        for record in [*due, later, gone]:
            await store.insert_record(record)
    before = {r.id: r for r in await store.get_records([r.id for r in due])}
    version = await store.records_version()

    config = Config().override({"ingestion.temporal_review_batch_size": 2})
    first = await review_due(store, config, clock)
    assert [f.record_id for f in first] == [due[2].id, due[1].id]  # oldest review_at first
    second = await review_due(store, config, clock)
    assert [f.record_id for f in second] == [due[0].id]
    assert await review_due(store, config, clock) == []

    events = await store.events(kind="record.review_due")
    assert sorted(e["record_id"] for e in events) == sorted(r.id for r in due)
    assert {e["actor"] for e in events} == {REVIEW_ACTOR}
    payload = next(e["payload"] for e in events if e["record_id"] == due[0].id)
    assert parse_ts(payload["valid_until"]) == now + timedelta(days=1)
    assert parse_ts(payload["scheduled_at"]) == due[0].review_at and payload["record_id"] == due[0].id
    assert payload["actor"] == REVIEW_ACTOR
    for record in await store.get_records([r.id for r in due]):
        old = before[record.id]
        assert record.review_flagged_at == now
        assert (record.content, record.status, record.evidence, record.source_kind, record.version) == (
            old.content,
            old.status,
            old.evidence,
            old.source_kind,
            old.version,
        )
    assert await store.records_version() == version  # a flag is not an edit: the index is untouched
    assert (await store.get_record(later.id)).review_flagged_at is None  # type: ignore[union-attr]
    assert (await store.get_record(gone.id)).review_flagged_at is None  # type: ignore[union-attr]
