"""Source authority, initial status, reinforcement and expiry (spec §6.2–§6.5)."""

from __future__ import annotations

from datetime import timedelta

import pytest

from retold.config import Config
from retold.policy.lifecycle import (
    has_authority,
    initial_confidence,
    initial_expiry,
    initial_status,
    is_expired,
    needs_expiry,
    reinforce,
    source_rank,
)
from retold.testing import FakeClock

from .factories import MakeRecord

# spec §6.2: source kind, rank, initial status, initial confidence, expiry (None or the TTL key)
SOURCE_TABLE = [
    ("user_statement", 4, "confirmed", 0.95, None),
    ("system", 3, "confirmed", 0.90, None),
    ("tool_result", 2, "confirmed", 0.85, None),
    ("session_summary", 2, "confirmed", 0.80, "summary_ttl_days"),
    ("agent_inference", 1, "provisional", 0.60, "provisional_ttl_days"),
]


@pytest.mark.parametrize(("kind", "rank", "status", "confidence", "ttl"), SOURCE_TABLE)
def test_initial_values_per_source_kind(
    config: Config, clock: FakeClock, kind: str, rank: int, status: str, confidence: float, ttl: str | None
) -> None:
    now = clock.now()
    assert source_rank(kind, config) == rank
    assert initial_status(kind) == status
    assert initial_confidence(kind) == pytest.approx(confidence)
    expected = None if ttl is None else now + timedelta(days=getattr(config.ingestion, ttl))
    assert initial_expiry(kind, now, config) == expected


def test_initial_expiry_follows_the_configured_ttls(clock: FakeClock) -> None:
    config = Config().override({"ingestion.provisional_ttl_days": 3, "ingestion.summary_ttl_days": 9})
    now = clock.now()
    assert initial_expiry("agent_inference", now, config) == now + timedelta(days=3)
    assert initial_expiry("session_summary", now, config) == now + timedelta(days=9)


def test_source_rank_refuses_an_unknown_kind(config: Config) -> None:
    with pytest.raises(ValueError):
        source_rank("rumour", config)


# --------------------------------------------------------------------------- authority


def test_higher_rank_wins_regardless_of_time(
    config: Config, make_record: MakeRecord, clock: FakeClock
) -> None:
    now = clock.now()
    user = make_record(source_kind="user_statement", event_at=now - timedelta(days=30))
    tool = make_record(source_kind="tool_result", event_at=now)
    assert has_authority(user, tool, config)
    assert not has_authority(tool, user, config)


def test_equal_rank_later_event_wins(config: Config, make_record: MakeRecord, clock: FakeClock) -> None:
    now = clock.now()
    # tool_result and session_summary share rank 2
    early = make_record(source_kind="tool_result", event_at=now - timedelta(days=1), created_at=now)
    late = make_record(source_kind="session_summary", event_at=now, created_at=now - timedelta(days=5))
    assert has_authority(late, early, config)
    assert not has_authority(early, late, config)


def test_same_event_time_later_write_wins(config: Config, make_record: MakeRecord, clock: FakeClock) -> None:
    now = clock.now()
    first = make_record(created_at=now)
    second = make_record(created_at=now + timedelta(seconds=1))
    assert has_authority(second, first, config)
    assert not has_authority(first, second, config)
    assert has_authority(first, make_record(created_at=now), config)  # a tie goes to the newcomer


def test_authority_uses_the_configured_ranks(make_record: MakeRecord) -> None:
    config = Config().override(
        {"policy.source_rank": {"user_statement": 1, "system": 1, "tool_result": 5, "session_summary": 1,
                                "agent_inference": 1}}
    )  # fmt: skip
    assert has_authority(make_record(source_kind="tool_result"), make_record(), config)


# --------------------------------------------------------------------------- reinforcement


def test_reinforce_counts_and_raises_confidence_capped(
    config: Config, make_record: MakeRecord, clock: FakeClock
) -> None:
    record = make_record(confidence=0.85)
    once = reinforce(record, clock.advance(days=1), config)
    assert once.reinforcements == 1
    assert once.last_reinforced_at == clock.now()
    assert once.confidence == pytest.approx(0.95)
    assert once is not record and record.reinforcements == 0  # the input is not mutated
    twice = reinforce(once, clock.advance(days=1), config)
    assert twice.confidence == 0.99
    assert reinforce(twice, clock.now(), config).confidence == 0.99
    assert twice.status == "confirmed" and twice.expires_at is None


def test_reinforce_refreshes_provisional_expiry_then_promotes(
    config: Config, make_record: MakeRecord, clock: FakeClock
) -> None:
    ttl = timedelta(days=config.ingestion.provisional_ttl_days)
    assert config.ingestion.reinforcements_to_confirm == 2
    inference = make_record(
        source_kind="agent_inference", status="provisional", confidence=0.6, expires_at=clock.now() + ttl
    )
    later = clock.advance(days=10)
    once = reinforce(inference, later, config)
    assert once.status == "provisional"
    assert once.expires_at == later + ttl
    promoted = reinforce(once, clock.advance(days=1), config)
    assert promoted.reinforcements == 2
    assert promoted.status == "confirmed"
    assert promoted.expires_at is None
    assert promoted.confidence == pytest.approx(0.8)


def test_reinforce_promotes_at_the_configured_count(make_record: MakeRecord, clock: FakeClock) -> None:
    config = Config().override({"ingestion.reinforcements_to_confirm": 1})
    record = make_record(source_kind="agent_inference", status="provisional", confidence=0.6)
    assert reinforce(record, clock.now(), config).status == "confirmed"


def test_reinforce_does_not_touch_a_confirmed_records_expiry(
    config: Config, make_record: MakeRecord, clock: FakeClock
) -> None:
    summary_expiry = clock.now() + timedelta(days=180)
    summary = make_record(source_kind="session_summary", expires_at=summary_expiry)
    assert reinforce(summary, clock.advance(days=1), config).expires_at == summary_expiry


def test_higher_rank_observation_upgrades_provenance(
    config: Config, make_record: MakeRecord, clock: FakeClock
) -> None:
    inference = make_record(
        source_kind="agent_inference", status="provisional", source_ref=None, evidence=None, confidence=0.6
    )
    upgraded = reinforce(
        inference, clock.now(), config, source_kind="user_statement", source_ref="session:s1<turn:2>",
        evidence="I use vim",
    )  # fmt: skip
    assert (upgraded.source_kind, upgraded.source_ref, upgraded.evidence) == (
        "user_statement",
        "session:s1<turn:2>",
        "I use vim",
    )


@pytest.mark.parametrize("incoming", ["tool_result", "user_statement"])
def test_lower_or_equal_rank_observation_keeps_provenance(
    config: Config, make_record: MakeRecord, clock: FakeClock, incoming: str
) -> None:
    record = make_record(source_kind="user_statement", source_ref="session:s1<turn:1>", evidence="I use vim")
    kept = reinforce(
        record, clock.now(), config, source_kind=incoming, source_ref="tool:call-9", evidence="vim 9.1"
    )
    assert (kept.source_kind, kept.source_ref, kept.evidence) == (
        "user_statement",
        "session:s1<turn:1>",
        "I use vim",
    )
    assert kept.reinforcements == 1


# --------------------------------------------------------------------------- expiry


def test_is_expired_and_needs_expiry(make_record: MakeRecord, clock: FakeClock) -> None:
    now = clock.now()
    never = make_record(expires_at=None)
    future = make_record(status="provisional", expires_at=now + timedelta(seconds=1))
    past = make_record(status="provisional", expires_at=now - timedelta(seconds=1))
    at_now = make_record(status="provisional", expires_at=now)
    already = make_record(status="expired", expires_at=now - timedelta(days=1))
    superseded = make_record(status="superseded", expires_at=now - timedelta(days=1))

    assert not is_expired(never, now)
    assert not is_expired(future, now)
    assert is_expired(past, now)
    assert is_expired(at_now, now)
    assert is_expired(already, now)

    assert needs_expiry(past, now)
    assert not needs_expiry(future, now)
    assert not needs_expiry(never, now)
    assert not needs_expiry(already, now)
    assert not needs_expiry(superseded, now)
    assert needs_expiry(future, now + timedelta(seconds=2))
