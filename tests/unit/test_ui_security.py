"""`retold ui`'s guards: read-only by default, confirmed and CSRF-checked admin actions, the token."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

import retold
from retold.cli import cli
from retold.errors import InvalidArgumentError
from retold.ui import UiSettings
from retold.ui.security import COOKIE, TokenGuard

from .ui_world import Facts, client, open_models, populate

TOKEN = "s3cret-token-for-the-ui-0123"


@pytest.fixture
def world(store_location: Any) -> tuple[Path | str, Facts]:
    path = store_location("ui.sqlite")
    return path, populate(path)


def events(path: Path | str, kind: str) -> list[dict[str, Any]]:
    async def read() -> list[dict[str, Any]]:
        async with retold.open_runtime(path, **open_models()) as rt:
            return await rt.store.events(kind=kind)

    return asyncio.run(read())


def test_read_only_mode_refuses_every_admin_route(world: tuple[Path | str, Facts]) -> None:
    path, facts = world
    settings = UiSettings()
    with client(path, settings) as c:
        record = facts.ids["detailed"]
        form = {"csrf": settings.csrf, "confirm": "yes", "reason": "x", "kind": "record", "target": record}
        for method, url in (
            ("GET", f"/records/{record}/forget"),
            ("POST", f"/records/{record}/forget"),
            ("GET", f"/erase?kind=record&target={record}"),
            ("POST", "/erase"),
            ("GET", "/records/no-such-id/forget"),
        ):
            answer = c.request(method, url, data=form if method == "POST" else None)
            assert answer.status_code == 403, (method, url, answer.status_code)
            assert "read-only" in answer.text
        page = c.get(f"/records/{record}").text
        assert "Forget…" not in page and "Erase…" not in page
    assert events(path, "record.deleted")[-1]["record_id"] == facts.ids["forgotten"]  # nothing new
    assert events(path, "record.erased") == []


def test_forget_needs_confirmation_and_csrf_and_is_audited_with_the_operator(
    world: tuple[Path | str, Facts],
) -> None:
    path, facts = world
    settings = UiSettings(allow_admin=True, operator="dana")
    record = facts.ids["detailed"]
    with client(path, settings) as c:
        assert "Forget…" in c.get(f"/records/{record}").text
        confirm = c.get(f"/records/{record}/forget")
        assert confirm.status_code == 200 and settings.csrf in confirm.text and "dana" in confirm.text
        url = f"/records/{record}/forget"
        good = {"csrf": settings.csrf, "confirm": "yes", "reason": "user asked"}
        assert c.post(url, data={**good, "csrf": "forged"}).status_code == 403
        assert c.post(url, data={k: v for k, v in good.items() if k != "csrf"}).status_code == 403
        unconfirmed = c.post(url, data={k: v for k, v in good.items() if k != "confirm"})
        assert unconfirmed.status_code == 400 and "confirm" in unconfirmed.text
        no_reason = c.post(url, data={**good, "reason": "  "})
        assert no_reason.status_code == 400 and "reason" in no_reason.text
        assert c.post("/records/no-such-record/forget", data=good).status_code == 404
        done = c.post(url, data=good, follow_redirects=False)
        assert done.status_code == 303
        assert "Forgotten" in c.get(done.headers["location"]).text
    deleted = [e for e in events(path, "record.deleted") if e["record_id"] == record]
    assert len(deleted) == 1 and deleted[0]["actor"] == "dana"
    assert deleted[0]["payload"]["reason"] == "user asked"


def test_erase_shows_its_plan_then_needs_confirmation_and_csrf_and_is_audited(
    world: tuple[Path | str, Facts],
) -> None:
    path, facts = world
    settings = UiSettings(allow_admin=True, operator="dpo")
    record = facts.ids["secret"]
    with client(path, settings) as c:
        plan = c.get("/erase", params={"kind": "record", "target": record})
        assert plan.status_code == 200 and record in plan.text and "Irreversible" in plan.text
        assert c.get("/erase", params={"kind": "planet", "target": record}).status_code == 400
        assert c.get("/erase", params={"kind": "record", "target": "nope"}).status_code == 404
        good = {
            "csrf": settings.csrf,
            "confirm": "yes",
            "reason": "request 12",
            "kind": "record",
            "target": record,
        }
        assert c.post("/erase", data={**good, "csrf": ""}).status_code == 403
        assert c.post("/erase", data={**good, "confirm": "no"}).status_code == 400
        assert c.get(f"/records/{record}").status_code == 200  # nothing changed yet
        done = c.post("/erase", data=good)
        assert done.status_code == 200 and "Erased record" in done.text
        assert "Bea's door code" not in c.get(f"/records/{record}").text
    erased = events(path, "record.erased")
    assert len(erased) == 1 and erased[0]["actor"] == "dpo" and erased[0]["record_id"] == record
    assert erased[0]["payload"]["reason"] == "request 12"


def test_a_non_loopback_bind_refuses_to_start_without_a_token(tmp_path: Path) -> None:
    with pytest.raises(InvalidArgumentError, match="without a token"):
        UiSettings(host="0.0.0.0")
    with pytest.raises(InvalidArgumentError, match="at least 16"):
        UiSettings(host="0.0.0.0", token="short")
    assert UiSettings(host="0.0.0.0", token=TOKEN).token == TOKEN
    store = tmp_path / "memory.sqlite"
    assert CliRunner().invoke(cli, ["migrate", "--store", str(store)]).exit_code == 0
    files = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    result = CliRunner().invoke(
        cli, ["ui", "--store", str(store), "--host", "0.0.0.0"], env={"RETOLD_UI_TOKEN": ""}
    )
    assert result.exit_code == 2 and "without a token" in result.output
    assert {
        p.name: p.read_bytes() for p in tmp_path.iterdir()
    } == files  # refused before the store was opened
    missing = tmp_path / "never.sqlite"
    result = CliRunner().invoke(
        cli, ["ui", "--store", str(missing), "--host", "0.0.0.0"], env={"RETOLD_UI_TOKEN": ""}
    )
    assert result.exit_code != 0 and not missing.exists()  # a mistyped path creates nothing either


def test_with_a_token_every_request_must_carry_it(world: tuple[Path | str, Facts]) -> None:
    path, _ = world
    with client(path, UiSettings(token=TOKEN)) as c:
        for url in ("/", "/records/anything", "/plots", "/nowhere"):
            denied = c.get(url)
            assert denied.status_code == 401 and "Aditya" not in denied.text
        assert c.get("/", headers={"Authorization": "Bearer wrong-token-0000000"}).status_code == 401
        assert c.get("/", headers={"Authorization": f"Basic {TOKEN}"}).status_code == 401
        assert c.get("/", headers={"Authorization": f"Bearer {TOKEN}"}).status_code == 200
        assert c.get("/?token=wrong").status_code == 401
        assert (
            c.get("/", headers={"Cookie": f"{COOKIE}={TOKEN}"}).status_code == 401
        )  # the cookie holds an HMAC, not the token
        visit = c.get(f"/plots?token={TOKEN}&page=2", follow_redirects=False)
        assert visit.status_code == 303 and visit.headers["location"] == "/plots?page=2"
        cookie = visit.headers["set-cookie"]
        assert "HttpOnly" in cookie and "SameSite=Strict" in cookie and TOKEN not in cookie
        assert c.get("/").status_code == 200  # the client kept the cookie
        c.cookies.clear()
        assert c.get("/").status_code == 401
        assert c.get("/", headers={"Cookie": f"{COOKIE}={TokenGuard.cookie_value(TOKEN)}"}).status_code == 200


def test_loopback_without_a_token_answers_only_loopback_host_names(world: tuple[Path | str, Facts]) -> None:
    path, _ = world
    with client(path) as c:
        assert c.get("/", headers={"Host": "evil.example"}).status_code == 400
        assert c.get("/", headers={"Host": "127.0.0.1.evil.example:80"}).status_code == 400
        for host in ("127.0.0.1:8766", "localhost:8766", "[::1]:8766", "localhost"):
            assert c.get("/", headers={"Host": host}).status_code == 200, host
        page = c.get("/")
        assert "default-src 'none'" in page.headers["content-security-policy"]
        assert page.headers["x-frame-options"] == "DENY" and page.headers["cache-control"] == "no-store"


def test_a_live_search_needs_csrf_and_names_bad_input(world: tuple[Path | str, Facts]) -> None:
    path, _ = world
    settings = UiSettings()
    with client(path, settings) as c:
        base = {"csrf": settings.csrf, "agent": "planner", "user": "u1", "queries": "answers"}
        assert c.post("/search", data={**base, "csrf": "x"}).status_code == 403
        for change, named in (
            ({"queries": "a\nb\nc\nd"}, "queries"),
            ({"queries": ""}, "queries"),
            ({"queries": "x" * 501}, "queries"),
            ({"k": "0"}, "k must be"),
            ({"k": "lots"}, "k must be"),
            ({"agent": "a/b"}, "agent_id"),
            ({"user": ""}, "agent and user"),
            ({"types": "gossip"}, "types"),
            ({"as": "nobody"}, "as must be"),
        ):
            answer = c.post("/search", data={**base, **change})
            assert answer.status_code == 400, change
            assert named in answer.text, (change, answer.text[-400:])
