"""The lexical pruning thresholds are config keys, and the configured values decide what is searched."""

from __future__ import annotations

import pytest

from retold.config import Config
from retold.errors import ConfigError
from retold.retrieve.lexical import lexical_search
from retold.retrieve.query_terms import query_terms
from retold.retrieve.word_counts import scan_limit
from retold.store import Store

from .factories import MakeRecord


async def _add(store: Store, make_record: MakeRecord, content: str) -> str:
    record = make_record(content=content)
    await store.insert_record(record, links=())
    return record.id


def test_pruning_keys_default_to_2000_records_and_a_tenth_and_are_strict() -> None:
    cfg = Config.from_mapping({})
    assert (cfg.retrieval.common_term_min_records, cfg.retrieval.common_term_share) == (2000, 0.1)
    tuned = cfg.override({"retrieval.common_term_min_records": 5, "retrieval.common_term_share": 0.5})
    assert (tuned.retrieval.common_term_min_records, tuned.retrieval.common_term_share) == (5, 0.5)
    for bad in ({"retrieval.common_term_min_records": 0}, {"retrieval.common_term_min_records": "10"},
                {"retrieval.common_term_share": 1.5}, {"retrieval.common_term_share": "0.1"}):  # fmt: skip
        with pytest.raises(ConfigError):
            cfg.override(bad)


async def test_configured_thresholds_decide_whether_a_common_term_is_searched(
    store: Store, make_record: MakeRecord
) -> None:
    common = [await _add(store, make_record, f"status update number {i}") for i in range(4)]
    rare = await _add(store, make_record, "status update about the billing migration")
    everyone = set(common) | {rare}

    async def found(**pruning: float) -> set[str]:
        return {h.record_id for h in await lexical_search(store, ["status billing"], everyone, 10, **pruning)}

    # 5 records: under the default 2,000 nothing is pruned, so "status" selects every record.
    assert await found() == everyone
    # Pruning from 5 records: "status" (5/5) is over a 10 % share and is left out; billing alone.
    assert await found(common_term_min_records=5, common_term_share=0.1) == {rare}
    # A share of 1 keeps every word, whatever the store's size.
    assert await found(common_term_min_records=5, common_term_share=1.0) == everyone
    # One record short of the configured minimum: no pruning.
    assert await found(common_term_min_records=6, common_term_share=0.1) == everyone


def test_the_scan_key_defaults_to_2000_records_is_strict_and_zero_turns_it_off() -> None:
    cfg = Config.from_mapping({})
    assert cfg.retrieval.common_term_scan_records == 2000
    assert cfg.override({"retrieval.common_term_scan_records": 0}).retrieval.common_term_scan_records == 0
    for bad in (-1, "10", 1.5):
        with pytest.raises(ConfigError):
            cfg.override({"retrieval.common_term_scan_records": bad})


def test_only_a_query_of_common_words_alone_is_bounded() -> None:
    counts = {"status": 900, "update": 800, "billing": 3, "migration": 150}
    bounded = {"min_records": 1000, "share": 0.1, "scan_records": 200}
    # Every searched word is in more than a tenth of 1,000 records and more than 200: bounded.
    assert scan_limit(query_terms("status update"), 1000, counts, **bounded) == 200
    # One word that is not common keeps the whole scan: an old record holding it is found.
    assert scan_limit(query_terms("status billing"), 1000, counts, **bounded) is None
    # Common by share but in fewer records than the bound: scoring them all costs no more.
    assert scan_limit(query_terms("migration"), 1000, counts, **{**bounded, "scan_records": 500}) is None
    # Under the pruning minimum nothing is common; 0 turns the bound off.
    assert scan_limit(query_terms("status"), 999, counts, **bounded) is None
    assert scan_limit(query_terms("status"), 1000, counts, **{**bounded, "scan_records": 0}) is None
    # An identifier is never bounded, nor is an empty query.
    assert scan_limit(query_terms("PR-4411"), 1000, {"pr": 900, "4411": 900}, **bounded) is None
    assert scan_limit([], 1000, counts, **bounded) is None


@pytest.mark.sqlite_only("PostgreSQL reads one word's postings best first and stays exact")
async def test_a_query_of_common_words_scores_only_their_newest_records(
    store: Store, make_record: MakeRecord
) -> None:
    ids = [await _add(store, make_record, "status update about the billing migration")]
    for i in range(1, 8):  # inserted in order: the last are the newest indexed
        ids.append(await _add(store, make_record, f"status update {'status ' * (i % 3)}number {i}"))
    pruning = {"common_term_min_records": 5, "common_term_share": 0.1}

    async def found(query: str, scan: int) -> list[str]:
        hits = await lexical_search(store, [query], set(ids), 10, **pruning, common_term_scan_records=scan)
        return [h.record_id for h in hits]

    # "status" is in all 8: with a bound of 3 only the three newest are scored, best first.
    bounded = await found("status update", 3)
    assert set(bounded) == set(ids[-3:])
    unbounded = await found("status update", 0)
    assert set(unbounded) == set(ids)
    assert bounded == [rid for rid in unbounded if rid in ids[-3:]]  # the same order among them
    # A word that is not common is searched in full, however old its record.
    assert await found("status billing", 3) == [ids[0]]
