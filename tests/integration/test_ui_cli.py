"""``retold ui`` as a user runs it: a subprocess over a SQLite file written with the packaged embedder."""

from __future__ import annotations

import re
import secrets
from pathlib import Path

import httpx
import pytest
from cli_runner import run

from tests.ui_harness import UiServer, demo_store

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("ui") / "memory.sqlite"
    demo_store(path)
    return path


def test_the_inspector_serves_the_demo_store_and_runs_a_live_search(demo: Path) -> None:
    with UiServer(demo) as server, httpx.Client(base_url=server.url, timeout=60) as http:
        home = http.get("/")
        assert home.status_code == 200 and "user:u1" in home.text
        assert "Aditya prefers detailed answers with examples." in home.text
        searches = http.get("/searches").text
        assert "how detailed should answers to Aditya be" in searches
        for path in ("/entities", "/sessions", "/audit", "/plots", "/sessions/planner/u1/s1"):
            assert http.get(path).status_code == 200, path
        csrf = re.search(r'name="csrf" value="([^"]+)"', http.get("/search").text)
        assert csrf is not None
        answer = http.post(
            "/search",
            data={"csrf": csrf.group(1), "agent": "planner", "user": "u1", "queries": "What answer style?"},
        )
        assert answer.status_code == 303
        stages = http.get(answer.headers["location"]).text
        assert "Aditya prefers detailed answers with examples." in stages
        assert "Stage 1 · Channels" in stages and "dense #1" in stages
        record = re.search(r'href="(/records/[^"?]+)"', stages)
        assert record is not None
        assert "<mark>I now prefer detailed answers with examples</mark>" in http.get(record.group(1)).text
        assert http.post(f"{record.group(1)}/forget", data={"csrf": csrf.group(1)}).status_code == 403


def test_off_loopback_it_needs_a_token_and_then_every_request_carries_it(demo: Path) -> None:
    refused = run("ui", "--store", demo, "--host", "0.0.0.0", rc=2)
    assert "without a token" in refused.stderr and "Traceback" not in refused.stderr
    token = secrets.token_urlsafe(24)
    server = UiServer(demo, "--host", "127.0.0.1", env={"RETOLD_UI_TOKEN": token})
    with server, httpx.Client(base_url=server.url, timeout=60) as http:
        assert http.get("/").status_code == 401
        assert http.get("/", headers={"Authorization": f"Bearer {token}"}).status_code == 200
        visit = http.get(f"/?token={token}")
        assert visit.status_code == 303 and "HttpOnly" in visit.headers["set-cookie"]
        assert http.get("/").status_code == 200  # the cookie now
