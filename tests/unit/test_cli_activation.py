"""`retold reviews` and `retold activation` (issue 21) as an operator runs them.

In-process through click's CliRunner, on each backend the suite runs, over a store written
by a real runtime on fakes: a hedged preference the policy queued for review, a standing
one it made ambient, and items opened by hand for an inference and two user statements.
Each command is checked for what it prints, its exit status and what it left in the store.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

import retold
from retold.cli import cli
from retold.models import Principal, Scope
from retold.testing import FakeClock, FakeEmbedder, FakeJudge

USER = Scope("user", "u1")
HEDGED = ("I think I might prefer shorter answers, maybe.", "Might prefer shorter answers")
STANDING = ("Please always answer me in French.", "Prefers answers in French")
AGE_DAYS = 10  # the store was written this long before the commands run


@dataclass
class Seeded:
    location: Path | str
    config: Path
    ids: dict[str, str]  # record ids by name
    reviews: dict[str, str]  # review ids by the record's name

    def args(self, *args: str | Path) -> list[str]:
        return [str(a) for a in (*args, "--store", self.location, "--config", self.config)]

    def invoke(self, *args: str | Path, code: int = 0) -> Result:
        result = CliRunner().invoke(cli, self.args(*args))
        assert result.exit_code == code, (result.exit_code, result.stdout, result.stderr, result.exception)
        return result

    def read(self, use: Callable[[retold.Runtime], Coroutine[Any, Any, Any]]) -> Any:
        async def go() -> Any:
            async with retold.open_runtime(self.location, embedder=FakeEmbedder(), judge=FakeJudge()) as rt:
                return await use(rt)

        return asyncio.run(go())


async def _seed(location: Path | str) -> tuple[dict[str, str], dict[str, str]]:
    clock = FakeClock(datetime.now(UTC) - timedelta(days=AGE_DAYS))
    ids: dict[str, str] = {}
    async with retold.open_runtime(location, embedder=FakeEmbedder(), judge=FakeJudge(), clock=clock) as rt:
        await rt.host.provision_user("u1", aliases=["Aditya"])
        await rt.host.grant("planner", USER, read=True, write=True)
        p = await rt.hooks.on_session_start(Principal("planner", "u1", "s1"))

        async def write(name: str, content: str, attribute: str, quote: str | None) -> dict[str, Any]:
            nonlocal p
            payload = {"type": "semantic", "content": content, "attribute": attribute}
            if quote is None:
                payload["source_kind"] = "agent_inference"
            else:
                p = await rt.hooks.on_turn(p, "user", quote)
                payload |= {"source_kind": "user_statement", "evidence": quote}
            result = await rt.tools.call(p, "memory_write", payload)
            assert result["ok"], result
            ids[name] = result["record_id"]
            return result

        hedged = await write("hedged", HEDGED[1], "answer_length", HEDGED[0])
        assert hedged["activation"] == "conditional", hedged
        standing = await write("standing", STANDING[1], "language", STANDING[0])
        assert standing["activation"] == "ambient", standing
        await write("guess", "Aditya prefers dark mode.", "theme", None)
        # A past habit and a one-off: the policy queues neither (they are not borderline).
        await write(
            "tea", "Aditya used to drink green tea.", "drink", "I used to drink green tea every morning."
        )
        await write(
            "desk",
            "Sign this email off with initials.",
            "sign_off",
            "For this email, sign off with my initials.",
        )
        reviews = {item.record_id: item.id for item in await rt.store.activation_reviews()}
        assert list(reviews) == [ids["hedged"]], "the policy queues the hedged preference, only it"
        for name in ("guess", "tea", "desk"):  # queued by hand, later than the policy's item
            clock.advance(hours=1)
            record = await rt.store.require_record(ids[name])
            opened = await rt.store.open_activation_review(
                record, category="workflow", reason="by hand", at=clock.now()
            )
            assert opened is not None
            reviews[ids[name]] = opened
    return ids, {name: reviews[ids[name]] for name in ("hedged", "guess", "tea", "desk")}


@pytest.fixture
def seeded(store_location: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Seeded:
    location = store_location("cli.sqlite")
    ids, reviews = asyncio.run(_seed(location))
    monkeypatch.setattr("retold.index.embedding_backend.build_embedder", lambda config: FakeEmbedder())
    config = tmp_path / "fake.yaml"
    config.write_text("embedding:\n  model: fake-embedder\n  version: '1'\n  dims: 256\n")
    return Seeded(location, config, ids, reviews)


def _one_object(result: Result) -> dict[str, Any]:
    """The whole of stdout is one JSON object (json.loads refuses anything before or after it)."""
    value = json.loads(result.stdout)
    assert isinstance(value, dict)
    return value


def _error_line(result: Result) -> str:
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: "), result.stderr
    assert "Traceback" not in result.output
    return lines[0]


def test_list_shows_the_open_items_with_their_records(seeded: Seeded) -> None:
    text = seeded.invoke("reviews", "list").stdout
    assert text.strip().splitlines()[-1] == "4 open review item(s)"
    hedged = seeded.reviews["hedged"]
    assert f"{hedged[-12:]}  open  record {seeded.ids['hedged']} in user:u1" in text
    assert f"content: {HEDGED[1]!r}" in text and f"evidence: {HEDGED[0]!r}" in text
    assert text.index(hedged[-12:]) < text.index(seeded.reviews["desk"][-12:])  # oldest first

    listed = _one_object(seeded.invoke("reviews", "list", "--json"))
    assert listed["ok"] is True and listed["count"] == 4
    first = listed["reviews"][0]
    assert first["id"] == hedged and first["short_id"] == hedged[-12:] and first["status"] == "open"
    assert first["record"]["content"] == HEDGED[1] and first["stale"] is False
    assert [r["record_id"] for r in listed["reviews"]] == [
        seeded.ids[n] for n in ("hedged", "guess", "tea", "desk")
    ]
    assert "--limit" in seeded.invoke("reviews", "list", "--limit", "2").stdout.splitlines()[-1]


def test_promote_puts_the_record_in_the_profile_and_a_second_resolve_fails_cleanly(seeded: Seeded) -> None:
    short = seeded.reviews["hedged"][-12:]
    out = seeded.invoke(
        "reviews", "resolve", short, "--as", "promote", "--resolver", "ops", "--note", "standing"
    )
    assert out.stdout.startswith(
        f"resolved review {seeded.reviews['hedged']} as promote: "
        f"record {seeded.ids['hedged']} is now ambient ("
    )

    async def state(rt: retold.Runtime) -> tuple[Any, ...]:
        decided = await rt.store.events(kind="record.activation_decided", record_id=seeded.ids["hedged"])
        resolved = await rt.store.events(kind="activation.review_resolved", record_id=seeded.ids["hedged"])
        profile = await rt.profile(Principal("planner", "u1"))
        return decided[-1], resolved, profile

    decided, resolved, profile = seeded.read(state)
    assert decided["actor"] == "ops" and decided["payload"]["by"] == "review"
    assert decided["payload"]["activation"] == "ambient" and decided["payload"]["reason"] == "standing"
    assert [e["payload"]["resolution"] for e in resolved] == ["promote"]
    assert HEDGED[1] in profile

    again = seeded.invoke("reviews", "resolve", short, "--as", "conditional", "--resolver", "ops", code=1)
    assert "already resolved as promote by ops" in _error_line(again) and again.stdout == ""
    refused = _one_object(
        seeded.invoke("reviews", "resolve", short, "--as", "reject", "--resolver", "ops", "--json", code=1)
    )
    assert (
        refused["ok"] is False and refused["error"] == "invalid" and "already resolved" in refused["message"]
    )
    assert seeded.read(lambda rt: rt.store.get_record(seeded.ids["hedged"])).status != "deleted"


def test_promoting_an_inference_is_refused_with_one_line_and_nothing_changes(seeded: Seeded) -> None:
    before = seeded.read(lambda rt: rt.store.events(record_id=seeded.ids["guess"]))
    refused = seeded.invoke(
        "reviews", "resolve", seeded.reviews["guess"], "--as", "promote", "--resolver", "ops", code=1
    )
    assert f"record {seeded.ids['guess']} cannot be ambient" in _error_line(refused)
    assert seeded.read(lambda rt: rt.store.events(record_id=seeded.ids["guess"])) == before
    [item] = seeded.read(lambda rt: rt.store.activation_review(seeded.reviews["guess"]))
    assert item.status == "open"
    # Kept searchable only instead: allowed, and the item is closed.
    kept = seeded.invoke(
        "reviews", "resolve", seeded.reviews["guess"], "--as", "conditional", "--resolver", "ops"
    )
    assert "stays conditional" in kept.stdout


def test_conditional_and_reject_resolutions(seeded: Seeded) -> None:
    kept = _one_object(
        seeded.invoke(
            "reviews", "resolve", seeded.reviews["tea"], "--as", "conditional", "--resolver", "ops", "--json"
        )
    )
    assert kept == {
        "ok": True, "review_id": seeded.reviews["tea"], "record_id": seeded.ids["tea"],
        "resolution": "conditional", "activation": "conditional", "record_status": kept["record_status"],
    }  # fmt: skip
    assert kept["record_status"] in ("confirmed", "provisional")

    rejected = seeded.invoke(
        "reviews",
        "resolve",
        seeded.reviews["desk"][-12:],
        "--as",
        "reject",
        "--resolver",
        "ops",
        "--note",
        "misheard",
    )
    assert rejected.stdout.strip() == (
        f"resolved review {seeded.reviews['desk']} as reject: "
        f"record {seeded.ids['desk']} was forgotten (deleted)"
    )
    record = seeded.read(lambda rt: rt.store.get_record(seeded.ids["desk"]))
    assert record.status == "deleted"
    kinds = [e["kind"] for e in seeded.read(lambda rt: rt.store.events(record_id=seeded.ids["desk"]))]
    assert "record.deleted" in kinds and kinds[-1] == "activation.review_resolved"

    everything = seeded.invoke("reviews", "list", "--all").stdout
    assert everything.strip().splitlines()[-1] == "4 review item(s), 2 open"
    assert (
        "resolved as reject" in everything
        and "resolved by ops at " in everything
        and ": misheard" in everything
    )
    missing = seeded.invoke("reviews", "resolve", "nope", "--as", "promote", "--resolver", "ops", code=1)
    assert "no review item 'nope'" in _error_line(missing)
    seeded.invoke("reviews", "resolve", seeded.reviews["tea"], "--as", "maybe", "--resolver", "ops", code=2)
    seeded.invoke(
        "reviews", "resolve", seeded.reviews["tea"], "--as", "promote", code=2
    )  # --resolver required


def test_backlog_exits_3_only_when_a_limit_is_breached(seeded: Seeded) -> None:
    within = seeded.invoke("reviews", "backlog", "--max-open", "4", "--max-age-days", str(AGE_DAYS + 1))
    line = within.stdout.strip()
    assert line.startswith("review backlog: 4 open item(s), the oldest opened ") and "days ago)" in line
    assert f"({AGE_DAYS}.0 days ago)" in line and within.stderr == ""

    too_many = seeded.invoke("reviews", "backlog", "--max-open", "3", code=3)
    assert too_many.stdout.startswith("review backlog: 4 open item(s)")  # the figures, either way
    assert "4 open item(s), more than --max-open 3" in _error_line(too_many)
    too_old = seeded.invoke("reviews", "backlog", "--max-age-days", str(AGE_DAYS - 1), code=3)
    assert f"more than --max-age-days {AGE_DAYS - 1}" in _error_line(too_old)

    breached = _one_object(seeded.invoke("reviews", "backlog", "--max-open", "3", "--json", code=3))
    assert breached["ok"] is False and breached["error"] == "backlog_breached" and breached["open"] == 4
    assert breached["breached"] is True and breached["max_open"] == 3
    assert AGE_DAYS - 0.01 < breached["oldest_age_days"] < AGE_DAYS + 0.01

    # A forgotten record's item is stale: it leaves the backlog without being resolved.
    seeded.read(lambda rt: rt.reviser.forget(seeded.ids["desk"], reason="gone", actor="ops"))
    fine = _one_object(seeded.invoke("reviews", "backlog", "--max-open", "3", "--json"))
    assert fine["ok"] is True and fine["open"] == 3 and fine["open_stale"] == 1 and "error" not in fine
    assert "stale" in seeded.invoke("reviews", "list").stdout


def test_activation_demotes_and_promotes_by_short_id_with_events(seeded: Seeded) -> None:
    standing = seeded.ids["standing"]
    out = seeded.invoke(
        "activation", standing[-12:], "conditional", "--resolver", "ops", "--reason", "only at work"
    )
    assert out.stdout.strip() == f"record {standing} is now conditional (was ambient): only at work"
    assert seeded.read(lambda rt: rt.profile(Principal("planner", "u1"))) == ""

    back = _one_object(
        seeded.invoke("activation", standing, "ambient", "--as", "dpo", "--reason", "asked again", "--json")
    )
    assert back == {
        "ok": True, "record_id": standing, "previous": "conditional", "activation": "ambient",
        "changed": True, "reason": "asked again",
    }  # fmt: skip
    assert STANDING[1] in seeded.read(lambda rt: rt.profile(Principal("planner", "u1")))
    same = seeded.invoke("activation", standing, "ambient", "--resolver", "ops", "--reason", "still")
    assert same.stdout.strip() == f"record {standing} stays ambient; decision recorded: still"

    decided = seeded.read(lambda rt: rt.store.events(kind="record.activation_decided", record_id=standing))
    operator = [e for e in decided if e["payload"]["by"] == "operator"]
    assert [(e["actor"], e["payload"]["previous"], e["payload"]["activation"]) for e in operator] == [
        ("ops", "ambient", "conditional"), ("dpo", "conditional", "ambient"), ("ops", "ambient", "ambient"),
    ]  # fmt: skip

    guess = seeded.ids["guess"]
    refused = seeded.invoke(
        "activation", guess[-12:], "ambient", "--resolver", "ops", "--reason", "x", code=1
    )
    assert f"record {guess} cannot be ambient" in _error_line(refused)
    missing = _one_object(
        seeded.invoke(
            "activation", "000000000000", "ambient", "--resolver", "ops", "--reason", "x", "--json", code=1
        )
    )
    assert missing == {"ok": False, "error": "not_found", "message": "no record '000000000000'"}
    seeded.invoke("activation", guess, "everywhere", "--resolver", "ops", "--reason", "x", code=2)

    # Demoting a record with an open item resolves the item by the same decision.
    seeded.invoke("activation", guess, "conditional", "--resolver", "ops", "--reason", "a guess")
    [item] = seeded.read(lambda rt: rt.store.activation_review(seeded.reviews["guess"]))
    assert item.status == "resolved" and item.resolution == "conditional" and item.resolver == "ops"
