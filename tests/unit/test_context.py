"""Same-day context: a second dense pass over the days of the best candidates (retrieve.context)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

import retold
from retold.ingest.write.request import WriteRequest
from retold.models import SearchRequest
from retold.retrieve.context import anchor_days, read_anchor_days
from retold.retrieve.fusion import fuse
from retold.retrieve.replay import replay_gate
from retold.tools.payloads import search_payload

from .writepath import World, make_world

START = datetime(2024, 3, 1, 9, tzinfo=UTC)


def test_anchor_days_are_distinct_utc_days_in_order() -> None:
    late = datetime(2024, 3, 1, 23, 30, tzinfo=UTC)
    days = anchor_days([late, None, START, START + timedelta(days=2)])
    assert days == [
        (datetime(2024, 3, 1, tzinfo=UTC), datetime(2024, 3, 2, tzinfo=UTC)),
        (datetime(2024, 3, 3, tzinfo=UTC), datetime(2024, 3, 4, tzinfo=UTC)),
    ]


def test_context_hits_fuse_at_their_weight_and_rank_after_the_dense_list() -> None:
    fused = fuse([("a", 0.9)], [], [], 10, context=[("b", 0.2), ("a", 0.9)], context_weight=0.5)
    by_id = {c.record_id: c for c in fused}
    assert by_id["a"].rrf_score == 1 / 11 + 0.5 / 12 and by_id["b"].rrf_score == 0.5 / 11
    assert by_id["b"].dense is not None and by_id["b"].dense.rank == 2  # after the dense list's own


def test_neighbours_fuse_at_their_weight_in_anchor_order_after_the_context_hits() -> None:
    fused = fuse(
        [("a", 0.9)], [], [], 10, context=[("b", 0.2)], context_weight=0.5,
        neighbours=[("n", 0.1), ("b", 0.2)], neighbour_weight=0.25,
    )  # fmt: skip
    by_id = {c.record_id: c for c in fused}
    assert by_id["n"].rrf_score == 0.25 / 11 and by_id["b"].rrf_score == 0.5 / 11 + 0.25 / 12
    assert by_id["b"].dense.rank == 2 and by_id["n"].dense.rank == 3  # type: ignore[union-attr]
    assert by_id["n"].in_context and not by_id["a"].in_context


async def _diary(
    path: Any, *, anchors: int, neighbours: int = 0, busy: int = 300
) -> tuple[World, dict[str, str]]:
    config = retold.Config().override({
        "retrieval.per_generator_k": 5, "retrieval.context_anchors": anchors,
        "retrieval.neighbour_anchors": neighbours, "retrieval.context_max_records": busy,
    })  # fmt: skip
    world = await make_world(path, config=config)
    rt, p = world.rt, world.p
    ids: dict[str, str] = {}
    entries = [(day, f"Errands and chores, list {day}.") for day in range(30)]
    entries += [(20, "We hiked up Ben Nevis in the fog."), (20, "Fish and chips afterwards in Fort William.")]
    for day, text in entries:
        written = await rt.host.ingest(p, WriteRequest(
            type="episodic", content=text, scope=p.user_scope, source_kind="user_statement",
            event_at=START + timedelta(days=day), trusted=True,
        ))  # fmt: skip
        assert written.ok, written
        ids[text] = str(written.record_id)
    return world, ids


async def test_a_match_brings_its_days_other_records_into_fusion(store_location: Any) -> None:
    world, ids = await _diary(store_location("diary.sqlite"), anchors=3)
    try:
        rt, p = world.rt, world.p
        response = await rt.search(p, SearchRequest(queries=["Where did we hike up Ben Nevis?"], gate=False))
        log = await rt.store.search_log(response.search_id)
        assert log is not None
        dense = {row[0]: row[1] for row in json.loads(log["dense"])}
        sibling = ids["Fish and chips afterwards in Fort William."]
        assert dense[sibling] > 5  # found by the context pass, ranked after the dense channel's 5
        assert sibling in {row[0] for row in json.loads(log["fused"])}
        assert sibling in [r.record.id for r in response.results]  # gate off: it reaches the caller
        # Context hits are logged as dense hits, so a replay judges them as the live gate did.
        gated = await rt.search(p, SearchRequest(queries=["Where did we hike up Ben Nevis?"]))
        replayed = await replay_gate(rt.store, gated.search_id, rt.config)
        assert [r.record.id for r in gated.results] == [r for r in replayed.kept][: len(gated.results)]
    finally:
        await world.rt.close()


async def test_a_full_explanation_adds_up_every_list_a_result_was_fused_from(store_location: Any) -> None:
    world, ids = await _diary(store_location("explained.sqlite"), anchors=3, neighbours=1)
    try:
        rt, p = world.rt, world.p
        response = await rt.search(p, SearchRequest(queries=["Where did we hike up Ben Nevis?"], gate=False))
        payload = search_payload(response, "full", rt.config.retrieval.rrf_k)
        by_id = {r["record_id"]: r for r in payload["results"]}
        sibling = by_id[ids["Fish and chips afterwards in Fort William."]]["explanation_full"]
        # Found beside the match, not by the dense channel's own list: its score says so.
        assert {"context", "neighbours"} & set(sibling["rrf"]["contributions"])
        assert "dense" not in sibling["rrf"]["contributions"]
        assert "(found beside a best match)" in sibling["summary"] and "rank 6)" not in sibling["summary"]
        for result in payload["results"]:
            rrf = result["explanation_full"]["rrf"]
            assert rrf["score"] == pytest.approx(sum(rrf["contributions"].values()), abs=1e-6)
            freshness = result["explanation_full"]["freshness_multiplier"] or 1.0
            assert result["score"] == pytest.approx(rrf["score"] * freshness, abs=1e-5)
    finally:
        await world.rt.close()


async def test_with_no_anchors_the_dense_list_is_the_channels_own(store_location: Any) -> None:
    world, _ = await _diary(store_location("plain.sqlite"), anchors=0)
    try:
        rt, p = world.rt, world.p
        response = await rt.search(p, SearchRequest(queries=["Where did we hike up Ben Nevis?"], gate=False))
        log = await rt.store.search_log(response.search_id)
        assert log is not None and len(json.loads(log["dense"])) == 5
    finally:
        await world.rt.close()


async def test_neighbours_are_the_records_beside_an_anchor_in_its_scope_and_day(store_location: Any) -> None:
    world, ids = await _diary(store_location("neighbours.sqlite"), anchors=0)
    try:
        rt, p = world.rt, world.p
        other = await rt.host.ingest(p, WriteRequest(  # the same day, another scope: never adjacent
            type="episodic", content="Agent note about the trip.", scope=p.private_scope,
            source_kind="agent_inference", event_at=START + timedelta(days=20, hours=1), trusted=True,
        ))  # fmt: skip
        assert other.ok, other
        hike, before = ids["We hiked up Ben Nevis in the fog."], ids["Errands and chores, list 20."]
        fish = ids["Fish and chips afterwards in Fort William."]
        everything = set(ids.values()) | {str(other.record_id)}
        scopes = [p.user_scope, p.private_scope]

        async def around(anchor_ids: list[str], eligible: set[str], max_records: int = 300) -> list[str]:
            days = await read_anchor_days(
                rt.store, anchor_days([START + timedelta(days=20)]), scopes=scopes, eligible=eligible,
                request=SearchRequest(queries=["q"]), now=START + timedelta(days=40), exclude_source_kinds=(),
                max_records=max_records,
            )  # fmt: skip
            return [] if days is None else days.neighbours(anchor_ids)

        assert await around([hike], everything) == [fish, before]  # after first, then before
        assert await around([fish], everything) == [hike]  # the day's last record of its scope
        assert await around([hike, fish], everything) == [before]  # never an anchor itself
        assert await around([hike], everything - {fish}) == [before]  # only what the caller may read
        assert await around([hike], everything, max_records=2) == []  # a day that busy gives none
        one_day = await read_anchor_days(
            rt.store, anchor_days([START + timedelta(days=20)]), scopes=[p.user_scope], eligible=everything,
            request=SearchRequest(queries=["q"]), now=START + timedelta(days=40), exclude_source_kinds=(),
            max_records=300,
        )  # fmt: skip
        assert one_day is not None
        assert one_day.on(anchor_days([START + timedelta(days=20)])) == {before, hike, fish}
        # The reply to each: the record just after it, none after the day's last.
        assert one_day.replies([before, hike, fish]) == {before: hike, hike: fish}
    finally:
        await world.rt.close()


async def test_the_records_beside_an_anchor_are_read_one_lookup_each_however_busy_the_day(
    store_location: Any,
) -> None:
    world, ids = await _diary(store_location("beside.sqlite"), anchors=0)
    try:
        rt, p = world.rt, world.p
        other = await rt.host.ingest(p, WriteRequest(  # the same day and time, another scope
            type="episodic", content="Agent note about the trip.", scope=p.private_scope,
            source_kind="agent_inference", event_at=START + timedelta(days=20), trusted=True,
        ))  # fmt: skip
        assert other.ok, other
        hike, before = ids["We hiked up Ben Nevis in the fog."], ids["Errands and chores, list 20."]
        fish = ids["Fish and chips afterwards in Fort William."]
        now = START + timedelta(days=40)

        async def beside(anchors: list[str], scopes: list[Any]) -> dict[str, tuple[str | None, str | None]]:
            return await rt.store.eligible_beside(anchors, scopes, now=now)

        both = [p.user_scope, p.private_scope]
        # One event time for all three (a bulk import's): the order is the writes' (UUIDv7 ids).
        assert await beside([hike, fish, before], both) == {
            hike: (before, fish),
            fish: (hike, None),
            before: (None, hike),  # never across a day
        }
        assert await beside([str(other.record_id)], both) == {str(other.record_id): (None, None)}
        # Only what the caller may read: an anchor outside its scopes, or an unknown id, is left out.
        assert await beside([str(other.record_id), "no-such-record"], [p.user_scope]) == {}
        assert await beside([], both) == {}
        await rt.reviser.expire(fish, reason="gone", actor="ops")  # no longer eligible: skipped
        assert (await beside([hike], both))[hike] == (before, None)
    finally:
        await world.rt.close()


@pytest.mark.parametrize("busy", [300, 2], ids=["day-read", "day-too-busy"])
async def test_a_search_fuses_the_neighbours_of_its_best_match_and_logs_them(
    store_location: Any, busy: int
) -> None:
    # With the day too busy to read whole (3 records over a bound of 2, as a bulk import's
    # would be), the neighbours are read one lookup each and found all the same.
    world, ids = await _diary(store_location("fused.sqlite"), anchors=0, neighbours=1, busy=busy)
    try:
        rt, p = world.rt, world.p
        response = await rt.search(p, SearchRequest(queries=["Where did we hike up Ben Nevis?"], gate=False))
        log = await rt.store.search_log(response.search_id)
        assert log is not None
        fused = {row[0]: row for row in json.loads(log["fused"])}
        fish = ids["Fish and chips afterwards in Fort William."]
        assert fish in fused and len(fused[fish]) > 3 and fused[fish][3] & 1  # flagged as context
        assert fish in {row[0] for row in json.loads(log["dense"])}  # with its real cosine
        gated = await rt.search(p, SearchRequest(queries=["Where did we hike up Ben Nevis?"]))
        replayed = await replay_gate(rt.store, gated.search_id, rt.config)
        assert [r.record.id for r in gated.results] == replayed.kept[: len(gated.results)]
    finally:
        await world.rt.close()
