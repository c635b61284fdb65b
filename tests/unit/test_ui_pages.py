"""`retold ui` over HTTP: every page renders for a populated store and shows what it promises."""

from __future__ import annotations

import re
import subprocess
import sys
from html import unescape
from pathlib import Path
from typing import Any

import pytest

from retold.retrieve.render import short_id
from retold.ui import UiSettings, plots

from .ui_world import Facts, client, populate

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def world(store_location: Any) -> tuple[Path | str, Facts]:
    path = store_location("ui.sqlite")
    return path, populate(path)


def links_in(html: str) -> list[str]:
    return [unescape(h) for h in re.findall(r'href="(/[^"]*)"', html)]


def crawl(test_client: Any, start: list[str], *, keep: str | None = None, limit: int = 400) -> dict[str, str]:
    """Every page reachable from ``start`` by following links (those containing ``keep``, if given)."""
    pages: dict[str, str] = {}
    todo = list(start)
    while todo and len(pages) < limit:
        url = todo.pop(0)
        if url in pages:
            continue
        response = test_client.get(url)
        assert response.status_code == 200, (url, response.status_code, response.text[-500:])
        pages[url] = response.text
        todo += [h for h in links_in(response.text) if h not in pages and (keep is None or keep in h)]
    return pages


def test_every_page_renders_for_a_populated_store(world: tuple[Path | str, Facts]) -> None:
    path, facts = world
    with client(path) as c:
        pages = crawl(c, ["/", "/search", "/plots", "/audit", "/sessions", "/entities", "/searches"])
        kinds = {"/" + url.split("?")[0].split("/")[1] for url in pages}
        assert {
            "/",
            "/scopes",
            "/records",
            "/entities",
            "/sessions",
            "/searches",
            "/audit",
            "/plots",
        } <= kinds
        for record_id in facts.ids.values():
            assert f"/records/{record_id}" in pages
        home = pages["/"]
        assert "user:u1" in home and "project:apollo" in home and "Most recent records" in home
        assert all(page.count("<script") == 0 for page in pages.values())  # no script, no CDN
        assert not any(re.search(r'(src|href)="https?://', page) for page in pages.values())


def test_the_record_page_shows_evidence_lineage_conflicts_links_and_events(
    world: tuple[Path | str, Facts],
) -> None:
    path, facts = world
    with client(path) as c:
        detailed = c.get(f"/records/{facts.ids['detailed']}").text
        # The quote, marked inside the user turn it came from, with the turn before it.
        assert "<mark>I now prefer detailed answers with examples</mark>" in detailed
        assert "Actually, " in detailed and "turn 2 · user" in detailed
        assert "supersedes" in detailed and short_id(facts.ids["concise"]) in detailed
        assert "record.created" in detailed and "user_statement" in detailed
        concise = c.get(f"/records/{facts.ids['concise']}").text
        assert "superseded by" in concise and short_id(facts.ids["detailed"]) in concise
        pst, cet = c.get(f"/records/{facts.ids['pst']}").text, c.get(f"/records/{facts.ids['cet']}").text
        for page, other in ((pst, "cet"), (cet, "pst")):
            assert "this → other" in page and "other → this" in page
            assert short_id(facts.ids[other]) in page
        apollo = c.get(f"/records/{facts.ids['apollo']}").text
        assert f"/entities/{facts.entities['apollo']}" in apollo and "about" in apollo
        forgotten = c.get(f"/records/{facts.ids['forgotten']}").text
        assert "deleted" in forgotten and "record.deleted" in forgotten


def test_entities_show_aliases_and_merges(world: tuple[Path | str, Facts]) -> None:
    path, facts = world
    with client(path) as c:
        listing = c.get("/entities").text
        assert "absorbed" in listing and "merged into" in listing
        survivor = c.get(f"/entities/{facts.entities['apollo']}").text
        assert "<code>apollo launch</code>" in survivor  # the merged entity's alias moved over
        assert short_id(facts.ids["apollo"]) in survivor and short_id(facts.ids["rocket"]) in survivor
        merged = c.get(f"/entities/{facts.entities['merged']}").text
        assert "merged into" in merged and f"/entities/{facts.entities['apollo']}" in merged
        assert "entity.merged" in merged and "same project" in merged
        people = c.get("/entities?kind=person").text
        assert "Aditya" in people and "Apollo" not in people


def test_sessions_transcripts_and_audit(world: tuple[Path | str, Facts]) -> None:
    path, facts = world
    with client(path) as c:
        assert "/sessions/planner/u1/s1" in c.get("/sessions").text
        session = c.get("/sessions/planner/u1/s1").text
        assert "I prefer concise answers, and my timezone is CET." in session
        assert short_id(facts.ids["detailed"]) in session  # the records its turns support
        audit = c.get("/audit").text
        assert "grant.changed" in audit and "entity.merged" in audit
        only = c.get("/audit?kind=record.deleted").text
        assert "record.deleted" in only and "grant.changed" not in only.split("<table>")[1]


def test_the_search_stage_view_and_its_replay(world: tuple[Path | str, Facts]) -> None:
    path, facts = world
    with client(path) as c:
        found = c.get(f"/searches/{facts.searches['found']}").text
        for stage in ("Stage 1 · Channels", "Fusion (RRF) and gate decisions", "Dedup", "Rerank", "Budget"):
            assert stage in found
        assert "Aditya prefers detailed answers with examples." in found
        assert "returned" in found and "gated out" in found and "<svg" in found
        empty = c.get(f"/searches/{facts.searches['empty']}").text
        assert "Nothing returned: best dense" in empty
        # Replaying with every floor at zero lets the gated-out candidates through.
        zero = {f"dense.{t}": "0" for t in ("semantic", "episodic", "procedural", "session_summary")}
        replay = c.get(
            f"/searches/{facts.searches['empty']}",
            params={"replay": "1", **zero, "lexical_min_term_fraction": "0"},
        )
        assert replay.status_code == 200 and "<h2>Replay</h2>" in replay.text
        assert re.search(r"[1-9]\d* decision\(s\) change", replay.text)


def test_a_live_search_as_a_principal_shows_its_stage_view(world: tuple[Path | str, Facts]) -> None:
    path, _ = world
    settings = UiSettings()
    with client(path, settings) as c:
        form = c.get("/search").text
        assert settings.csrf in form
        answer = c.post(
            "/search",
            data={
                "csrf": settings.csrf,
                "agent": "planner",
                "user": "u1",
                "queries": "detailed answers Aditya",
            },
            follow_redirects=False,
        )
        assert answer.status_code == 303 and answer.headers["location"].startswith("/searches/")
        page = c.get(answer.headers["location"]).text
        assert "Aditya prefers detailed answers with examples." in page and "Stage 1 · Channels" in page
        as_principal = c.post(
            "/search",
            data={
                "csrf": settings.csrf,
                "as": "helper/u2",
                "agent": "planner",
                "user": "u1",
                "queries": "door",
            },
            follow_redirects=False,
        )
        location = as_principal.headers["location"]
        assert "as=helper%2Fu2" in location  # acting as helper: it searches as helper, shown as helper
        assert "agent <b>helper</b> for user <b>u2</b>" in c.get(location).text


def test_the_plots_are_inline_svg_with_escaped_labels() -> None:
    svg = plots.stacked_columns([("<b>", {"a&b": 2.0})], ["a&b"], title="<t>", unit="ms")
    assert svg.startswith("<svg") and "<b>" not in svg and "&lt;b&gt;" in svg and "a&amp;b" in svg
    assert "nothing to plot yet" in plots.rate_columns([], title="rates")
    assert "<rect" in plots.hbars([("embed", 3.0), ("dense", 0.0)], title="stages", unit="ms")


def test_the_ui_is_imported_lazily_and_named_when_missing() -> None:
    code = (
        "import sys, retold, retold.cli, retold.ui, retold.store\n"
        "assert not {'starlette', 'jinja2', 'uvicorn'} & set(sys.modules), 'imported eagerly'\n"
        "sys.modules['starlette'] = None\n"
        "from retold.ui import create_app\n"
        "try:\n    create_app(None)\nexcept retold.MissingExtraError as e:\n    print(e)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    assert "retold[ui]" in out.stdout
