"""memory_search's ``explain``: compact by default, every explanation field on request (issue 20)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from retold.config import Config
from retold.tools.payloads import search_payload
from retold.tools.schemas import for_dialect, search_schema

from .writepath import World, make_world

QUOTE = "I prefer concise answers"
COMPACT_KEYS = {
    "record_id", "short_id", "type", "status", "source_kind", "scope", "event_at", "content", "score",
    "explanation", "matched_by", "conflicts_with",
}  # fmt: skip


async def fact(w: World) -> str:
    await w.say("user", f"{QUOTE}, please.")
    payload = {"type": "semantic", "content": "Aditya prefers concise answers.", "attribute": "answer_style",
               "source_kind": "user_statement", "evidence": QUOTE}  # fmt: skip
    result = await w.rt.tools.call(w.p, "memory_write", payload)
    assert result["ok"], result
    return str(result["record_id"])


def without_run(payload: dict[str, Any]) -> dict[str, Any]:
    """What stays equal between two runs of one search: not its id or timings."""
    rendered = str(payload["rendered"]).replace(str(payload["search_id"]), "<id>")
    return {**payload, "search_id": None, "timings_ms": None, "rendered": rendered}


async def search(w: World, **extra: Any) -> dict[str, Any]:
    return await w.rt.tools.call(w.p, "memory_search", {"queries": ["concise answers"], "k": 3, **extra})


@pytest.fixture(params=[1.0, 1.5], ids=["even", "similarity-weighed"])
async def weighed(request: pytest.FixtureRequest, store_path: Path | str) -> AsyncIterator[World]:
    """A world whose searches count the dense list 1 or 1.5 times the word lists."""
    config = Config().override({"retrieval.similarity_weight": request.param})
    w = await make_world(store_path, config=config)
    try:
        yield w
    finally:
        await w.rt.close()


async def test_full_explanation_carries_channels_fusion_and_gate(weighed: World) -> None:
    world = weighed
    made = await fact(world)
    full = await search(world, explain="full")
    assert full["ok"] and [r["record_id"] for r in full["results"]] == [made]
    result = full["results"][0]
    detail = result["explanation_full"]
    json.dumps(full, allow_nan=False)  # JSON as it is, no NaN or datetime
    assert detail["summary"] == result["explanation"]
    assert set(detail["matched_by"]) == set(result["matched_by"]) and detail["matched_by"]
    k, weight = world.rt.config.retrieval.rrf_k, world.rt.config.retrieval.similarity_weight
    assert detail["rrf"]["k"] == k and detail["rrf"]["similarity_weight"] == weight
    for channel in ("dense", "lexical", "entity"):
        hit = detail["channels"][channel]
        assert (hit is not None) == (channel in detail["rrf"]["contributions"])
        if channel in detail["matched_by"]:
            assert hit["rank"] >= 1 and isinstance(hit["score"], float)
        if hit is not None:
            share = weight if channel == "dense" else 1.0
            assert detail["rrf"]["contributions"][channel] == pytest.approx(
                share / (k + hit["rank"]), abs=1e-6
            )
    assert detail["rrf"]["score"] == pytest.approx(sum(detail["rrf"]["contributions"].values()), abs=1e-6)
    # ... and they are the score fusion gave: the result's score is it times freshness.
    fused = detail["rrf"]["score"] * (detail["freshness_multiplier"] or 1.0)
    assert result["score"] == pytest.approx(fused, abs=1e-5)
    assert detail["channels"]["lexical"] and detail["lexical_terms"]["terms"]
    assert detail["fused_rank"] == 1
    assert isinstance(detail["gate"], str) and detail["gate"]
    assert detail["dedup"].startswith("kept") and detail["budget"]
    assert detail["raw_queries"] == ["concise answers"] and detail["status"] == result["status"]
    assert detail["source_kind"] == "user_statement" and detail["created_at"].endswith("Z")


async def test_compact_is_the_default_and_carries_none_of_it(world: World) -> None:
    await fact(world)
    default = await search(world)
    compact = await search(world, explain="compact")
    full = await search(world, explain="full")
    assert set(default["results"][0]) == COMPACT_KEYS and isinstance(
        default["results"][0]["explanation"], str
    )
    assert without_run(default) == without_run(compact)
    # full only adds: every compact field and the rendered text are the same.
    stripped = [{k: v for k, v in r.items() if k != "explanation_full"} for r in full["results"]]
    assert without_run({**full, "results": stripped}) == without_run(default)


async def test_full_explanation_shows_an_entity_hit(world: World) -> None:
    entity = {"kind": "person", "name": "Bob", "role": "about"}
    made = await world.rt.tools.call(
        world.p, "memory_write",
        {"type": "episodic", "content": "Met him for the quarterly review.", "entities": [entity]},
    )  # fmt: skip
    found = await world.rt.tools.call(
        world.p, "memory_search", {"queries": ["what did Bob do"], "explain": "full"}
    )
    assert [r["record_id"] for r in found["results"]] == [made["record_id"]]
    detail = found["results"][0]["explanation_full"]
    assert detail["channels"]["entity"]["rank"] == 1 and "entity" in detail["rrf"]["contributions"]
    assert detail["entity_ids"]


@pytest.mark.parametrize("value", ["verbose", "FULL", "", 1, True, ["full"], {"mode": "full"}])
async def test_an_unknown_explain_value_is_invalid_input(world: World, value: Any) -> None:
    await fact(world)
    answer = await search(world, explain=value)
    assert answer["ok"] is False and answer["error"] == "invalid_input"
    assert "explain" in answer["message"]


async def test_null_explain_reads_as_compact_for_strict_callers(world: World) -> None:
    await fact(world)
    assert without_run(await search(world, explain=None)) == without_run(await search(world))


def test_the_schema_offers_an_optional_string_enum_in_both_dialects() -> None:
    portable = search_schema()
    assert portable["properties"]["explain"]["enum"] == ["compact", "full"]
    assert portable["properties"]["explain"]["default"] == "compact"
    assert "explain" not in portable["required"]
    strict = for_dialect(portable, "openai_strict")
    assert strict["properties"]["explain"]["enum"] == ["compact", "full", None]
    assert "explain" in strict["required"]


def test_search_payload_refuses_unknown_modes_and_full_without_rrf_k() -> None:
    from retold.models import SearchResponse

    response = SearchResponse("s", ["q"], None, "disabled", [], "nothing", {})
    with pytest.raises(ValueError):
        search_payload(response, explain="verbose")
    with pytest.raises(ValueError):
        search_payload(response, explain="full")
    assert search_payload(response, explain="full", rrf_k=10) == search_payload(response)
