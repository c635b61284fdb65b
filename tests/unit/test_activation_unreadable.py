"""A text the claim reader once could not read, promoted by hand (issue 45, item 6).

"In our SQL we always cast ids with ::text" made the activation policy raise
``IndexError``: the write failed closed (``activation skipped``), but
``set_activation(id, "ambient")`` and ``retold activation <id> ambient`` ended in a
traceback. Now the text reads, the promotion goes through both ways on each backend, and
any other failure of the policy itself is a refusal naming it, nothing changed, never a
traceback.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

import retold
from retold.cli import cli
from retold.errors import InvalidArgumentError
from retold.models import Principal, Scope
from retold.testing import FakeEmbedder, FakeJudge

from .writepath import World

EVIDENCE = "In our SQL we always cast ids with ::text"
CONTENT = "Casts ids with ::text"
USER = Scope("user", "u1")


async def _write_sql_habit(world: World) -> Any:
    turn = await world.say("user", EVIDENCE)
    result = await world.write(CONTENT, evidence=EVIDENCE, evidence_turn=turn)
    assert result.ok, result
    return result


async def test_the_policy_reads_the_sql_cast_and_a_person_can_promote_it(world: World) -> None:
    result = await _write_sql_habit(world)
    assert "skipped" not in (result.activation_reason or ""), result.activation_reason
    assert await world.events("record.activation_skipped", result.record_id) == []
    down = await world.rt.activation.set_activation(
        result.record_id, "conditional", resolver="ops", reason="no"
    )
    assert down.activation == "conditional"
    assert CONTENT not in await world.rt.profile(world.p)
    up = await world.rt.activation.set_activation(result.record_id, "ambient", resolver="ops", reason="yes")
    assert up.changed and up.previous == "conditional" and up.activation == "ambient"
    assert CONTENT in await world.rt.profile(world.p)


async def test_a_policy_failure_is_a_refusal_and_changes_nothing(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    result = await _write_sql_habit(world)
    await world.rt.activation.set_activation(result.record_id, "conditional", resolver="ops", reason="no")
    before = await world.events(record_id=result.record_id)

    def broken(*args: Any, **kwargs: Any) -> Any:
        raise IndexError("tuple index out of range")

    monkeypatch.setattr("retold.ingest.activation.read_claim", broken)
    monkeypatch.setattr("retold.ingest.activation.eligibility", broken)
    with pytest.raises(InvalidArgumentError, match=r"cannot be ambient: .*could not read it \(IndexError\)"):
        await world.rt.activation.set_activation(result.record_id, "ambient", resolver="ops", reason="yes")
    assert await world.events(record_id=result.record_id) == before  # nothing changed
    assert await world.rt.profile(world.p) == ""
    # Demotion is always safe: it goes ahead with the category the record already had.
    again = await world.rt.activation.set_activation(
        result.record_id, "conditional", resolver="ops", reason="still no"
    )
    assert not again.changed and again.activation == "conditional"


# --- through the CLI -----------------------------------------------------------------------------


async def _seed(location: Path | str) -> str:
    async with retold.open_runtime(location, embedder=FakeEmbedder(), judge=FakeJudge()) as rt:
        await rt.host.provision_user("u1", aliases=["Aditya"])
        await rt.host.grant("planner", USER, read=True, write=True)
        p = await rt.hooks.on_session_start(Principal("planner", "u1", "s1"))
        p = await rt.hooks.on_turn(p, "user", EVIDENCE)
        payload = {
            "type": "semantic", "content": CONTENT, "attribute": "sql_casts",
            "source_kind": "user_statement", "evidence": EVIDENCE,
        }  # fmt: skip
        result = await rt.tools.call(p, "memory_write", payload)
        assert result["ok"], result
        return str(result["record_id"])


def _invoke(location: Path | str, config: Path, *args: str, code: int = 0) -> Result:
    argv = [*args, "--store", str(location), "--config", str(config)]
    result = CliRunner().invoke(cli, argv)
    assert result.exit_code == code, (result.exit_code, result.stdout, result.stderr, result.exception)
    assert "Traceback" not in result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    return result


@pytest.fixture
def seeded(
    store_location: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> tuple[Path | str, Path, str]:
    location = store_location("odd.sqlite")
    record_id = asyncio.run(_seed(location))
    monkeypatch.setattr("retold.index.embedding_backend.build_embedder", lambda config: FakeEmbedder())
    config = tmp_path / "fake.yaml"
    config.write_text("embedding:\n  model: fake-embedder\n  version: '1'\n  dims: 256\n")
    return location, config, record_id


def test_retold_activation_promotes_the_sql_cast(seeded: tuple[Path | str, Path, str]) -> None:
    location, config, record_id = seeded
    _invoke(location, config, "activation", record_id[-12:], "conditional", "--as", "ops", "--reason", "no")
    out = _invoke(location, config, "activation", record_id[-12:], "ambient", "--as", "ops", "--reason", "ok")
    assert out.stdout.strip() == f"record {record_id} is now ambient (was conditional): ok"


def test_retold_activation_answers_a_policy_failure_with_one_error(
    seeded: tuple[Path | str, Path, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    location, config, record_id = seeded
    _invoke(location, config, "activation", record_id, "conditional", "--as", "ops", "--reason", "no")

    def broken(*args: Any, **kwargs: Any) -> Any:
        raise IndexError("tuple index out of range")

    monkeypatch.setattr("retold.ingest.activation.eligibility", broken)
    args = ("activation", record_id, "ambient", "--as", "ops", "--reason", "ok")
    refused = _invoke(location, config, *args, code=1)
    lines = refused.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: "), refused.stderr
    assert f"record {record_id} cannot be ambient" in lines[0] and "IndexError" in lines[0]
    as_json = json.loads(_invoke(location, config, *args, "--json", code=1).stdout)
    assert as_json["ok"] is False and as_json["error"] == "invalid" and "IndexError" in as_json["message"]
