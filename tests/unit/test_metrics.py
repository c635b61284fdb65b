"""Operator metrics (issue 21): the figures against a hand-computed store, the command, the page.

The store-level test writes search_log rows, events and review items by hand, so every
figure below is worked out from them on paper; the runtime test checks that what a real
search logs (its explanations' budget lines) reads back as the tokens it returned. Both run
on each backend the suite runs.
"""

from __future__ import annotations

import asyncio
import json
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

import retold
from retold.cli import cli
from retold.cli.common import jsonable
from retold.models import Principal, Record, Scope, SearchRequest
from retold.policy import metrics as metrics_policy
from retold.policy.metrics import LatencyFigures, collect_metrics, percentile, tokens_returned
from retold.retrieve.budget import record_tokens
from retold.store import Store
from retold.testing import FakeClock, FakeEmbedder, FakeJudge, record_for_tests
from retold.util import new_id

from .factories import MakeRecord
from .ui_world import client, populate

USER = Scope("user", "u1")
T0 = FakeClock().now()  # 2026-01-01 12:00 UTC: the window is [T0, T0 + 1 day)


def _budget(position: int, of: int, used: int) -> dict[str, Any]:
    return {"budget": f"fit at position {position} of {of}, {used} tokens used"}


def _log_row(at: datetime, trigger: str, returned: list[str], explanations: list[Any], timings: dict) -> dict:
    return {
        "id": new_id(), "at": at, "agent_id": "planner", "user_id": "u1", "trigger": trigger,
        "request": {"queries": ["q"]}, "rewrite_status": "disabled", "readable_scopes": [str(USER)],
        "dense": [], "lexical": [], "entity": [], "fused": [], "freshness": [], "gated_out": [],
        "deduped_out": [], "budget_out": [], "returned": returned, "explanations": explanations,
        "config_flags": {}, "warm": True, "timings_ms": timings,
    }  # fmt: skip


async def _hand_made(store: Store, make_record: MakeRecord) -> dict[str, Any]:
    """Four searches, seven writes, four decisions, one skip and three review items in the window."""
    h = timedelta(hours=1)
    a, b, c = new_id(), new_id(), new_id()
    rows = [
        _log_row(T0 - h, "tool", [], [], {"embed": 500.0, "total": 1000.0}),  # before the window
        _log_row(T0 + h, "tool", [a, b], [_budget(1, 2, 40), _budget(2, 2, 95)],
                 {"embed": 2.0, "dense": 10.0, "total": 20.0}),
        _log_row(T0 + 2 * h, "tool", [], [{"empty_reason": "nothing relevant"}],
                 {"embed": 4.0, "dense": 30.0, "total": 40.0}),
        _log_row(T0 + 3 * h, "auto", [c], [], {"embed": 6.0, "dense": 20.0, "total": 60.0}),  # erased text
        _log_row(T0 + 4 * h, "tool", [a], [_budget(1, 1, 45)], {"embed": 8.0, "dense": 40.0, "total": 80.0}),
        _log_row(T0 + 25 * h, "tool", [a], [_budget(1, 1, 9)], {"embed": 9.0, "total": 9.0}),  # after it
    ]  # fmt: skip
    for row in rows:
        await store.insert_search_log(row)
    events: list[tuple[str, dict[str, Any], datetime]] = [
        ("record.created", {"outcome": "created"}, T0 - h),  # before the window
        ("record.created", {"outcome": "created"}, T0 + h),
        ("record.created", {"outcome": "created"}, T0 + h),
        ("record.created", {"outcome": f"superseded:{a}"}, T0 + h),
        ("record.created", {"outcome": f"conflict:{b}"}, T0 + h),
        ("record.reinforced", {"outcome": "reinforced"}, T0 + 2 * h),
        ("record.reinforced", {"outcome": "already_reinforced"}, T0 + 2 * h),
        ("record.created", {"erased": True}, T0 + 3 * h),
        ("record.activation_decided", {"activation": "ambient", "by": "policy"}, T0 - h),
        ("record.activation_decided", {"activation": "ambient", "by": "policy"}, T0 + h),
        ("record.activation_decided", {"activation": "ambient", "by": "policy"}, T0 + h),
        ("record.activation_decided", {"activation": "ambient", "by": "review"}, T0 + 2 * h),
        ("record.activation_decided", {"activation": "conditional", "by": "operator"}, T0 + 2 * h),
        ("record.activation_skipped", {"error": "RuntimeError"}, T0 + 2 * h),
        ("record.deleted", {"reason": "not a write"}, T0 + 2 * h),
    ]
    for kind, payload, at in events:
        await store.append_event(kind, "test", payload=payload, at=at)
    records: list[Record] = [make_record(content=f"fact {i}") for i in range(3)]
    for record in records:
        await store.insert_record(record)
    waiting, promoted, ended = records
    await store.open_activation_review(waiting, category="communication", reason="hedged", at=T0 + h)
    promoted_id = await store.open_activation_review(
        promoted, category="workflow", reason="hedged", at=T0 + 2 * h
    )
    await store.open_activation_review(ended, category="identity", reason="hedged", at=T0 - timedelta(days=2))
    assert promoted_id is not None
    await store.close_activation_review(
        promoted_id, resolution="promote", resolver="ops", note=None, at=T0 + 5 * h
    )
    await store.set_status(ended.id, "deleted")  # its open item is stale: not in the backlog
    return {"records": records}


EXPECTED: dict[str, Any] = {
    "searches": {
        "count": 4, "empty": 1, "empty_rate": 0.25, "mean_results": 1.0,
        "mean_tokens": 46.7, "tokens_known": 3,  # (95 + 0 + 45) / 3; the third search's were erased
        "by_trigger": {"auto": 1, "tool": 3},
        "latency_ms": {
            "embed": {"p50": 4.0, "p95": 8.0, "max": 8.0},
            "dense": {"p50": 20.0, "p95": 40.0, "max": 40.0},
            "total": {"p50": 40.0, "p95": 80.0, "max": 80.0},
        },
    },
    "writes": {
        "total": 7,
        "by_outcome": {"already_reinforced": 1, "conflict": 1, "created": 2, "erased": 1, "reinforced": 1,
                       "superseded": 1},
    },
    "activation": {
        "decisions": 4, "by_activation": {"ambient": 3, "conditional": 1},
        "by_decider": {"operator": 1, "policy": 2, "review": 1},
        "by_activation_and_decider": {"ambient": {"policy": 2, "review": 1}, "conditional": {"operator": 1}},
        "skipped": 1,
    },
    "reviews": {
        "opened": 2, "resolved": 1, "by_resolution": {"promote": 1},
        "backlog": {"open": 1, "oldest": (T0 + timedelta(hours=1)).isoformat(), "oldest_age_days": 0.958,
                    "open_stale": 1},
    },
}  # fmt: skip


def test_percentiles_are_nearest_rank_and_tokens_come_from_the_budget_line() -> None:
    assert percentile([], 0.5) == 0.0
    assert percentile([3.0], 0.95) == 3.0
    assert percentile([4.0, 1.0, 3.0, 2.0], 0.5) == 2.0 and percentile([4.0, 1.0, 3.0, 2.0], 0.95) == 4.0
    values = [float(v) for v in range(1, 101)]
    assert percentile(values, 0.5) == 50.0 and percentile(values, 0.95) == 95.0
    assert tokens_returned([], []) == 0
    assert tokens_returned(["a", "b"], [_budget(1, 2, 40), _budget(2, 2, 95)]) == 95
    assert tokens_returned(["a"], []) is None  # erased explanations: unknown, not zero
    assert tokens_returned(["a"], [{"budget": "no number here"}, "junk"]) is None


async def test_the_figures_match_a_hand_computed_store(
    store: Store, make_record: MakeRecord, monkeypatch: pytest.MonkeyPatch
) -> None:
    await _hand_made(store, make_record)
    monkeypatch.setattr(metrics_policy, "_PAGE", 2)  # the search log is read page by page
    report = await collect_metrics(store, now=T0 + timedelta(days=1), since=T0, until=T0 + timedelta(days=1))
    got = jsonable(report)
    for section, expected in EXPECTED.items():
        assert got[section] == expected, section
    assert list(report.searches.latency_ms) == ["embed", "dense", "total"]  # the log's order, total last
    assert report.searches.latency_ms["embed"] == LatencyFigures(4.0, 8.0, 8.0)

    everything = await collect_metrics(store, now=T0 + timedelta(days=1))  # no window: the whole log
    assert everything.searches.count == 6 and everything.writes.total == 8
    assert everything.activation.decisions == 5 and everything.reviews.opened == 3


async def test_operator_commands_find_records_by_full_or_short_id(
    store: Store, make_record: MakeRecord
) -> None:
    record = make_record()
    await store.insert_record(record)
    assert await store.record_ids_named(record.id) == [record.id]
    assert await store.record_ids_named(record.id[-12:]) == [record.id]
    assert await store.record_ids_named("000000000000") == []
    assert await store.record_ids_named(record.id[-11:]) == []  # only the 12-character tail


def _invoke(*args: str | Path, code: int = 0) -> Result:
    result = CliRunner().invoke(cli, [str(a) for a in args])
    assert result.exit_code == code, (result.exit_code, result.stdout, result.stderr, result.exception)
    return result


@pytest.fixture
def fake_models(monkeypatch: pytest.MonkeyPatch) -> None:
    """The command opens its runtime with the fake embedder (no model loads)."""
    monkeypatch.setattr("retold.index.embedding_backend.build_embedder", lambda config: FakeEmbedder())


def test_the_command_prints_the_same_figures_as_text_and_as_one_json_object(
    store_location: Any, clock: FakeClock, fake_models: None
) -> None:
    location = store_location("metrics.sqlite")

    async def seed() -> None:
        opened = await Store.open(location, clock=clock)
        try:
            await _hand_made(opened, lambda **kw: record_for_tests(clock.now(), **kw))
        finally:
            await opened.close()

    asyncio.run(seed())
    window = ["--since", T0.isoformat(), "--until", "2026-01-02T12:00:00Z"]
    shown = _invoke("metrics", "--store", location, *window, "--json")
    report = json.loads(shown.stdout)  # exactly one object: anything else fails to parse
    assert isinstance(report, dict) and report["ok"] is True
    for section in ("searches", "writes", "activation"):
        assert report[section] == EXPECTED[section], section
    assert report["reviews"]["opened"] == 2 and report["reviews"]["by_resolution"] == {"promote": 1}
    assert report["since"] == T0.isoformat()

    text = _invoke("metrics", "--store", location, *window).stdout
    assert (
        "searches: 4 (auto 1, tool 3); 1 empty (25.0%); mean 1 result(s) and 46.7 token(s) returned" in text
    )
    assert "(tokens known for 3)" in text
    assert (
        "writes: 7 (already_reinforced 1, conflict 1, created 2, erased 1, reinforced 1, superseded 1)"
        in text
    )
    assert (
        "activation decisions: 4 (ambient 3 (policy 2, review 1); conditional 1 (operator 1)), 1 skipped"
        in text
    )
    assert "reviews: 2 opened, 1 resolved (promote 1); backlog now 1 open" in text
    assert any(line.split()[:3] == ["dense", "20.00", "40.00"] for line in text.splitlines())

    bad = _invoke("metrics", "--store", location, "--since", "yesterday-ish", code=2)
    assert "neither an ISO 8601 time nor a span" in bad.stderr
    _invoke("metrics", "--store", location, "--since", "2026-01-02", "--until", "2026-01-01", code=2)
    recent = json.loads(_invoke("metrics", "--store", location, "--since", "7d", "--json").stdout)
    assert recent["searches"]["count"] == 0  # the hand-made log is dated 2026-01-01, long before


async def test_a_real_search_logs_what_the_metrics_read_back(store_location: Any) -> None:
    clock = FakeClock()
    location = store_location("real.sqlite")
    async with retold.open_runtime(location, embedder=FakeEmbedder(), judge=FakeJudge(), clock=clock) as rt:
        await rt.host.provision_user("u1", aliases=["Aditya"])
        await rt.host.grant("planner", USER, read=True, write=True)
        p = await rt.hooks.on_session_start(Principal("planner", "u1", "s1"))
        p = await rt.hooks.on_turn(p, "user", "I prefer concise answers, and I live in Lisbon.")
        for content, attribute, quote in (
            ("Aditya prefers concise answers.", "answer_style", "I prefer concise answers"),
            ("Aditya lives in Lisbon.", "home_city", "I live in Lisbon"),
        ):
            written = await rt.tools.call(p, "memory_write", {
                "type": "semantic", "content": content, "attribute": attribute,
                "source_kind": "user_statement", "evidence": quote,
            })  # fmt: skip
            assert written["ok"], written
        again = await rt.tools.call(p, "memory_write", {
            "type": "semantic", "content": "Aditya prefers concise answers.", "attribute": "answer_style",
            "source_kind": "user_statement", "evidence": "I prefer concise answers",
        })  # fmt: skip
        assert again["ok"] and again["outcome"] == "already_reinforced", again
        found = await rt.search(p, SearchRequest(queries=["concise answers Aditya prefers"]))
        empty = await rt.search(p, SearchRequest(queries=["password of the staging database"]))
        assert found.results and not empty.results
        report = await collect_metrics(rt.store, now=clock.now())
    expected_tokens = sum(record_tokens(r.record) for r in found.results)
    s = report.searches
    assert (s.count, s.empty, s.tokens_known) == (2, 1, 2)
    assert s.mean_results == len(found.results) / 2 and s.mean_tokens == round(expected_tokens / 2, 1)
    assert {"embed", "dense", "lexical", "fuse", "gate", "budget", "total"} <= set(s.latency_ms)
    assert "log" not in s.latency_ms  # the log row is written before its own stage ends
    assert report.writes.by_outcome == {"already_reinforced": 1, "created": 2}


# --- the inspector's page -------------------------------------------------------------------------


def test_the_metrics_page_draws_the_figures_for_the_operator_only(store_location: Any) -> None:
    path = store_location("ui.sqlite")
    populate(path)
    with client(path) as c:
        page = c.get("/metrics")
        assert page.status_code == 200
        html = page.text
        assert "<h1>Metrics</h1>" in html and html.count("<svg") == 3
        # The UI world logs three searches (one of them empty) and no review items.
        assert '<tr><th>searches</th><td class="num">3</td></tr>' in html
        assert '<tr><th>empty</th><td class="num">1 (33.3%)</td></tr>' in html
        assert '<tr><th>open now (backlog)</th><td class="num">0</td></tr>' in html
        assert "<script" not in html and 'href="/metrics?days=30"' in html
        plots = c.get("/plots")
        assert page.headers["content-security-policy"] == plots.headers["content-security-policy"]
        assert 'href="/metrics"' in plots.text  # linked from every page's header

        acting = c.get("/metrics?as=planner/u1")
        assert acting.status_code == 200
        assert "operator view" in acting.text and "nothing is read for this page" in acting.text
        assert "<svg" not in acting.text and "searches</th>" not in acting.text
        assert 'href="/metrics?days=7"' in acting.text  # the way back, without ?as=

        assert c.get("/metrics?days=0").status_code == 400
        assert c.get("/metrics?days=abc").status_code == 400
        assert c.get("/metrics?days=1").status_code == 200
