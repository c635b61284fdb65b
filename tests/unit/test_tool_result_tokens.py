"""What a model pays for in each tool result (issue 47 item 6c): no stage timings, a stated bound.

Spec §8.1 step 9 puts ``timings_ms`` (twelve stages and the total: thirteen numbers) in
memory_write's response, and benchmarks read write latency there, so the structured result of
``rt.tools.call`` keeps it. What the model reads is built by ``retold.tools.payloads.model_view``
(``tool_text`` in every adapter, and MCP's text and ``structuredContent``): the same result
without timings, which were half of every write result's tokens. The timings stay where the
spec records them: the write event's payload and ``search_log.timings_ms``.

Tokens are approximated as ``ceil(len(text) / 4)`` (no tokenizer is a dependency). Measured on
this fixture (FakeEmbedder, eight user statements, one conflicting guess): a memory_write result
the model reads is 58-79 tokens, down from 127-148 with the timings; a memory_search rendering
is 122-132 tokens for two results (15 of header, 54-59 a result: a conflict adds a line) and 49
for an empty answer with its reason, where the whole structured result is 208-515. The bounds
below leave room for longer notes and contents without letting a 13-number object (about 70
tokens) back in.
"""

from __future__ import annotations

import json
import math
from typing import Any

from retold.adapters.common import tool_text
from retold.ingest.write.request import WRITE_STAGES
from retold.tools.payloads import MODEL_HIDDEN_KEYS, model_view

from .writepath import World

WRITE_TOKENS_MAX = 100
"""A memory_write (or memory_revise supersede) result as the model reads it: measured at most 79."""
SEARCH_HEADER_TOKENS = 60
SEARCH_RESULT_TOKENS = 75
"""A memory_search rendering: measured 54-59 tokens a result; the header is 15 tokens over
results and 49 for an empty answer with its reason."""

FACTS = (
    ("Aditya prefers concise answers.", "answer_style", "I prefer concise answers"),
    ("Aditya's timezone is CET.", "timezone", "my timezone is CET"),
    ("Aditya uses vim as his editor.", "editor", "I use vim"),
    ("Aditya drinks oat milk flat whites.", "coffee_order", "oat milk flat whites"),
    ("Aditya works on the Atlas project.", "project", "I work on Atlas"),
    ("Aditya prefers answers in English.", "language", "answer in English"),
    ("Aditya's manager is Priya.", "manager", "my manager is Priya"),
    ("Aditya deploys on Fridays.", "deploy_day", "we deploy on Fridays"),
)


def tokens(text: str) -> int:
    return math.ceil(len(text) / 4)


def no_timing_keys(text: str) -> None:
    """No timing object and no stage key (``activation`` is also the result's own field)."""
    assert "timings" not in text and "_ms" not in text, text
    shown = json.loads(text)
    assert not {"total", *WRITE_STAGES} - {"activation"} & set(shown), shown
    assert not any(isinstance(v, dict) and "total" in v for v in shown.values()), shown


async def _writes(world: World) -> list[dict[str, Any]]:
    await world.say("user", " ".join(f"{quote}." for _, _, quote in FACTS))
    results = []
    for content, attribute, quote in FACTS:
        payload = {"type": "semantic", "content": content, "attribute": attribute,
                   "source_kind": "user_statement", "evidence": quote}  # fmt: skip
        results.append(await world.rt.tools.call(world.p, "memory_write", payload))
    guess = {"type": "semantic", "content": "Aditya's timezone is PST.", "attribute": "timezone"}
    results.append(await world.rt.tools.call(world.p, "memory_write", guess))  # a conflict, with a note
    assert all(r["ok"] for r in results), results
    assert results[-1]["outcome"].startswith("conflict:")
    return results


async def test_write_results_the_model_reads_carry_no_timings_and_stay_small(world: World) -> None:
    for result in await _writes(world):
        # The structured result keeps the spec's complete timing sequence (§8.1 step 9) ...
        assert list(result["timings_ms"]) == [*WRITE_STAGES, "total"] and len(result["timings_ms"]) == 13
        # ... and the model reads everything else, without it.
        text = tool_text("memory_write", result)
        no_timing_keys(text)
        assert json.loads(text) == {k: v for k, v in result.items() if k != "timings_ms"}
        assert tokens(text) <= WRITE_TOKENS_MAX, (tokens(text), text)
        assert tokens(json.dumps(result)) - tokens(text) >= 50  # what the timings cost on every call
        event = (await world.events("record.created", result["record_id"]))[0]
        assert {"evidence", "embed", "persistence"} <= set(event["payload"]["timings_ms"])  # still audited


async def test_a_supersede_reads_without_timings_too(world: World) -> None:
    first = (await _writes(world))[0]
    await world.say("user", "Actually I now prefer detailed answers with examples.")
    revised = await world.rt.tools.call(world.p, "memory_revise", {
        "id": first["record_id"], "action": "supersede", "reason": "the user changed their mind",
        "content": "Aditya prefers detailed answers with examples.", "source_kind": "user_statement",
        "evidence": "I now prefer detailed answers with examples",
    })  # fmt: skip
    assert revised["ok"] and "total" in revised["timings_ms"], revised
    text = tool_text("memory_revise", revised)
    no_timing_keys(text)
    assert tokens(text) <= WRITE_TOKENS_MAX, (tokens(text), text)


async def test_search_results_the_model_reads_carry_no_timings_and_stay_small(world: World) -> None:
    await _writes(world)
    for queries in (["Aditya preferences"], ["Aditya's timezone"], ["password of the staging database"]):
        found = await world.rt.tools.call(world.p, "memory_search", {"queries": queries, "k": 8})
        assert found["ok"] and "total" in found["timings_ms"]  # the host's copy keeps them
        text = tool_text("memory_search", found)
        assert text == found["rendered"] and "timings" not in text and " ms" not in text
        bound = SEARCH_HEADER_TOKENS + SEARCH_RESULT_TOKENS * len(found["results"])
        assert tokens(text) <= bound, (tokens(text), bound, text)
        row = await world.rt.store.search_log(found["search_id"])
        assert row is not None and "total" in json.loads(row["timings_ms"])  # still logged


def test_the_model_view_only_drops_the_hidden_keys() -> None:
    result = {"ok": True, "record_id": "r1", "timings_ms": {"total": 1.0}, "note": None}
    assert MODEL_HIDDEN_KEYS == ("timings_ms",)
    assert model_view(result) == {"ok": True, "record_id": "r1", "note": None}
    assert "timings_ms" in result  # the caller's dict is not changed
    refused = {"ok": False, "error": "invalid_input", "message": "m"}
    assert tool_text("memory_write", refused) == json.dumps(refused)
