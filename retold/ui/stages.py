"""One logged search, stage by stage, and its gate replayed under other floors.

The ``search_log`` row holds everything a search decided: each channel's ranks and scores,
the fused order, the freshness multipliers, every gate, dedup, rerank and budget decision
with its reason, the explanations of what was returned, and the timings. This module
turns the row into one table per stage and, for the replay form, runs
:func:`retold.retrieve.replay.replay_gate` (offline: no embedding, no search) with the
floors the form gave, beside what the search decided.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from retold.config import Config
from retold.errors import NotFoundError
from retold.models import RECORD_TYPES, Principal, SearchRequest
from retold.retrieve.fusion import read_flags
from retold.retrieve.replay import replay_gate
from retold.store import Store
from retold.ui import plots
from retold.ui.views import HIDDEN, Viewer, masker

__all__ = ["FLOOR_FIELDS", "Floors", "floors_form", "run_search", "search_page"]

DENSE_TYPES = (*RECORD_TYPES, "session_summary")
FLOOR_FIELDS: tuple[tuple[str, str], ...] = (
    *((f"dense.{t}", f"dense floor, {t.replace('_', ' ')}") for t in DENSE_TYPES),
    ("lexical_min_term_fraction", "lexical: least fraction of query terms matched"),
    ("lexical_min_matched_terms", "lexical: least matched terms"),
    ("relative_floor", "relative floor (share of the best score)"),
    ("context_floor", "context floor (cosine beside a survivor)"),
    ("companion_floor", "companion floor (cosine near the top of an answered search)"),
    ("companion_beside_floor", "companion floor beside the best matches or inside the query's dates"),
    ("companion_rank", "companion rank (how deep the companion floor reaches)"),
    ("window_floor", "window floor (cosine inside the query's dates)"),
    ("standout_floor", "standout floor (cosine of a match that stands out of the others)"),
    ("standout_margin", "standout margin (above the mean of the other dense matches)"),
    ("self_question_margin", 'standout margin for a question about the searcher ("when did I...?")'),
)
"""The replay form's fields: ``(name, label)``; names are config keys under the trigger's gate block."""


@dataclass(frozen=True)
class Floors:
    """Floors a person typed into the replay form, as config keys of the trigger's gate block."""

    values: Mapping[str, float | int]

    def config_for(self, config: Config, trigger: str) -> Config:
        """``config`` with these floors for ``trigger``; a value out of range raises ConfigError naming it."""
        block = "retrieval.gate.auto" if trigger == "auto" else "retrieval.gate"
        changes = {}
        for name, value in self.values.items():
            key = name.replace("dense.", "dense_floor.")
            changes[f"{block}.{key}"] = value
        return config.override(changes)


def floors_form(config: Config, trigger: str) -> dict[str, float | int]:
    """The replay form's starting values: the floors this process's config gives the trigger."""
    gate = config.retrieval.gate.auto if trigger == "auto" else config.retrieval.gate
    values: dict[str, float | int] = {f"dense.{t}": getattr(gate.dense_floor, t) for t in DENSE_TYPES}
    for name, _ in FLOOR_FIELDS:
        if not name.startswith("dense."):
            values[name] = getattr(gate, name)
    return values


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _ids(row: Mapping[str, Any]) -> set[str]:
    """Every record id the row names."""
    found: set[str] = set()
    for column in ("dense", "lexical", "entity", "fused", "gated_out", "reranked", "reranked_out"):
        found.update(str(item[0]) for item in _list(row.get(column)) if isinstance(item, list) and item)
    for dropped, kept, *_ in (
        i for i in _list(row.get("deduped_out")) if isinstance(i, list) and len(i) >= 2
    ):
        found.update((str(dropped), str(kept)))
    found.update(str(i) for i in _list(row.get("budget_out")) + _list(row.get("returned")))
    for explanation in _list(row.get("explanations")):
        if isinstance(explanation, dict):
            found.update(str(i) for i in _list(explanation.get("conflicts_with")))
    return found


async def search_page(
    store: Store, viewer: Viewer, config: Config, search_id: str, floors: Floors | None
) -> dict[str, Any]:
    """The stage view of one logged search; with ``floors``, its gate replayed under them."""
    row = await store.search_log_of(search_id, viewer.owner)
    if row is None:
        raise NotFoundError(f"no logged search {search_id!r}")
    ids = _ids(row)
    readable = await store.readable_record_ids(ids, None if viewer.scopes is None else list(viewer.scopes))
    facts = await store.record_facts(readable)
    mask = await masker(store, viewer, row["explanations"], row["request"])

    def shown(record_id: Any) -> str | None:
        return str(record_id) if str(record_id) in readable else None

    gated = {str(r[0]): r[1] for r in _list(row["gated_out"]) if isinstance(r, list) and len(r) >= 2}
    deduped = {
        str(r[0]): (str(r[1]), r[2]) for r in _list(row["deduped_out"]) if isinstance(r, list) and len(r) >= 3
    }
    budget = {str(i) for i in _list(row["budget_out"])}
    reranked_out = {
        str(r[0]): r[1] for r in _list(row.get("reranked_out")) if isinstance(r, list) and len(r) >= 2
    }
    returned = [str(i) for i in _list(row["returned"])]
    explanations = [e for e in _list(row["explanations"]) if isinstance(e, dict) and "empty_reason" not in e]
    explained = dict(zip(returned, explanations, strict=False))
    channels = {
        "dense": {str(r[0]): r for r in _list(row["dense"]) if isinstance(r, list)},
        "lexical": {str(r[0]): r for r in _list(row["lexical"]) if isinstance(r, list)},
        "entity": {str(r[0]): r for r in _list(row["entity"]) if isinstance(r, list)},
    }
    freshness = {str(r[0]): r[1] for r in _list(row["freshness"]) if isinstance(r, list) and len(r) >= 2}
    candidates = []
    for item in _list(row["fused"]):
        rid = str(item[0])
        if rid in returned:
            fate, reason = "returned", (explained.get(rid) or {}).get("gate", "")
        elif rid in gated:
            fate, reason = "gated out", gated[rid]
        elif rid in deduped:
            kept, cosine = deduped[rid]
            fate, reason = "deduplicated", f"kept {kept if shown(kept) else HIDDEN} at cosine {cosine}"
        elif rid in reranked_out:
            fate, reason = "reranked out", str(reranked_out[rid])
        elif rid in budget:
            fate, reason = "over budget", "did not fit the token budget or k"
        else:
            fate, reason = "passed", ""
        flags = read_flags(item)
        candidates.append({
            "id": shown(rid), "rank": item[1], "score": item[2], "in_context": flags.in_context,
            "in_window": flags.in_window, "from_passage": flags.from_passage,
            "other_subject": flags.other_subject, "tells_time": flags.tells_time,
            "is_reply": flags.is_reply,
            "dense": channels["dense"].get(rid), "lexical": channels["lexical"].get(rid),
            "entity": channels["entity"].get(rid), "freshness": freshness.get(rid),
            "fate": fate, "reason": mask(str(reason)), "facts": facts.get(rid),
        })  # fmt: skip
    timings = row["timings_ms"] if isinstance(row["timings_ms"], dict) else {}
    stage_times = [(k, float(v)) for k, v in timings.items() if k != "total" and isinstance(v, int | float)]
    via = await _entities_shown(store, viewer, [r[2] for r in channels["entity"].values() if len(r) > 2])
    empty = next(
        (
            e["empty_reason"]
            for e in _list(row["explanations"])
            if isinstance(e, dict) and "empty_reason" in e
        ),
        None,
    )
    page = {
        "row": row,
        "query": mask(row["request"]) if isinstance(row["request"], dict) else {},
        "channels": {
            name: [{"id": shown(rid), "row": r} for rid, r in rows.items()] for name, rows in channels.items()
        },
        "via": via,
        "candidates": candidates,
        "deduped": [{"dropped": shown(d), "kept": shown(k), "cosine": c} for d, (k, c) in deduped.items()],
        "budget_out": [shown(i) for i in budget],
        "reranked": _list(row.get("reranked")),
        "results": [
            {"id": shown(rid), "facts": facts.get(rid), "explanation": mask(explained.get(rid, {}))}
            for rid in returned
        ],
        "empty_reason": empty,
        "gate": (row["config_flags"] or {}).get("gate", {}) if isinstance(row["config_flags"], dict) else {},
        "timing_plot": plots.hbars(stage_times, title="Time per stage", unit="ms"),
        "total_ms": timings.get("total"),
        "floor_fields": FLOOR_FIELDS,
        "floor_values": dict(floors.values) if floors else floors_form(config, str(row["trigger"])),
        "replay": None,
    }
    if floors is not None:
        page["replay"] = await _replay(store, config, row, floors, shown, set(gated), facts)
    return page


async def _entities_shown(store: Store, viewer: Viewer, entity_ids: list[Any]) -> dict[str, str]:
    """Entity id -> its canonical name, for the entities the viewer may read."""
    ids = [str(e) for e in entity_ids if e]
    allowed = set(ids) if viewer.scopes is None else await store.readable_entity_ids(ids, list(viewer.scopes))
    found = {}
    for entity_id in allowed:
        entity = await store.get_entity(entity_id)
        if entity is not None:
            found[entity_id] = entity.canonical
    return found


async def _replay(
    store: Store,
    config: Config,
    row: Mapping[str, Any],
    floors: Floors,
    shown: Any,
    logged_out: set[str],
    facts: Mapping[str, Any],
) -> dict[str, Any]:
    result = await replay_gate(store, str(row["id"]), floors.config_for(config, str(row["trigger"])))
    now_out = {rid: reason for rid, reason in result.gated_out}
    rows = []
    for item in _list(row["fused"]):
        rid = str(item[0])
        before = "gated out" if rid in logged_out else "passed"
        after = "gated out" if rid in now_out else ("passed" if rid in result.kept else "not replayed")
        rows.append({
            "id": shown(rid), "rank": item[1], "before": before, "after": after, "facts": facts.get(rid),
            "reason": now_out.get(rid, ""), "changed": before != after,
        })  # fmt: skip
    return {
        "rows": rows,
        "kept": len(result.kept),
        "empty_reason": result.empty_reason,
        "changed": sum(r["changed"] for r in rows),
    }


async def run_search(rt: Any, principal: Principal, request: SearchRequest) -> str:
    """Run one live search as ``principal`` through the runtime; return its ``search_log`` id."""
    response = await rt.search(principal, request)
    return str(response.search_id)
