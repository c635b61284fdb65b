"""The lexical pruning thresholds are config keys, and the configured values decide what is searched."""

from __future__ import annotations

import pytest

from retold.config import Config
from retold.errors import ConfigError
from retold.retrieve.lexical import lexical_search
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
