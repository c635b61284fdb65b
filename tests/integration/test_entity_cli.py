"""``retold entity merge`` as an operator runs it: a subprocess against a real store file."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from cli_runner import run

from retold.models import Entity, Scope
from retold.store import Store
from retold.testing import FakeClock, record_for_tests

pytestmark = pytest.mark.integration

U1, U2 = Scope("user", "u1"), Scope("user", "u2")


def _entity(
    entity_id: str, canonical: str, aliases: list[str], scope: Scope = U1, kind: str = "person"
) -> Entity:
    return Entity(
        id=entity_id,
        kind=kind,  # type: ignore[arg-type]
        canonical=canonical,
        scope=scope,
        status="confirmed",
        merged_into=None,
        aliases=aliases,
        created_at=FakeClock().now(),
    )


async def _seed(db: Path) -> dict[str, str]:
    store = await Store.open(db, clock=FakeClock())
    try:
        return await _insert(store)
    finally:
        await store.close()


async def _insert(store: Store) -> dict[str, str]:
    async with store.transaction():
        for entity in (
            _entity("e_adi", "Adi", ["adi"]),
            _entity("e_aditya", "Aditya", ["aditya", "aditya k"]),
            _entity("e_other", "Aditya", ["aditya"], scope=U2),
            _entity("e_acme", "Acme", ["acme"], kind="org"),
        ):
            await store.insert_entity(entity)
        ids = {}
        for name, entity, content in (
            ("adi", "e_adi", "Adi prefers concise answers."),
            ("aditya", "e_aditya", "Aditya works on retrieval."),
        ):
            record = record_for_tests(
                FakeClock().now(),
                content=content,
                subject=f"{entity}/fact",
                subject_entity_id=entity,
                attribute="fact",
                scope=U1,
                source_ref="session:s1<turn:1>",
                evidence=content,
            )
            await store.insert_record(record, links=[(entity, "about")])
            ids[name] = record.id
    return ids


async def _state(db: Path) -> dict[str, Any]:
    store = await Store.open(db, clock=FakeClock())
    try:
        q = store.db.fetchall
        return {
            "entities": [
                tuple(r) for r in await q("SELECT id, status, merged_into FROM entities ORDER BY id")
            ],
            "aliases": [
                tuple(r) for r in await q("SELECT entity_id, alias_norm FROM entity_aliases ORDER BY 1, 2")
            ],
            "links": [
                tuple(r) for r in await q("SELECT record_id, entity_id, role FROM record_entities ORDER BY 1")
            ],
            "subjects": [
                tuple(r) for r in await q("SELECT id, subject_entity_id, subject FROM records ORDER BY 1")
            ],
            "events": await store.events(kind="entity.merged"),
        }
    finally:
        await store.close()


def test_merge_moves_aliases_and_records_and_audits_the_operator(tmp_path: Path) -> None:
    db = tmp_path / "m.sqlite"
    ids = asyncio.run(_seed(db))
    out = run("entity", "merge", "e_adi", "e_aditya", "--reason", "same person", "--store", db, "--as", "ops")
    assert out.stdout.strip().splitlines() == [
        "merged e_adi into e_aditya (Aditya; aliases: aditya, aditya k, adi) in user:u1 as ops"
    ]
    state = asyncio.run(_state(db))
    assert ("e_adi", "merged", "e_aditya") in state["entities"]
    assert {a for e, a in state["aliases"] if e == "e_aditya"} == {"adi", "aditya", "aditya k"}
    assert {(r, e) for r, e, _ in state["links"]} == {(ids["adi"], "e_aditya"), (ids["aditya"], "e_aditya")}
    assert (ids["adi"], "e_aditya", "e_aditya/fact") in state["subjects"]
    (event,) = state["events"]
    assert (event["actor"], event["entity_id"]) == ("ops", "e_adi")
    payload = event["payload"] if isinstance(event["payload"], dict) else json.loads(event["payload"])
    assert payload["merged_into"] == "e_aditya" and payload["reason"] == "same person"
    assert payload["records_relinked"] == 2 and payload["records_rekeyed"] == [ids["adi"]]

    # The merged id now resolves to the survivor: merging it again is merging an entity into itself.
    again = run("entity", "merge", "e_adi", "e_aditya", "--reason", "x", "--store", db, "--json", rc=1)
    assert json.loads(again.stdout)["error"] == "invalid"


@pytest.mark.parametrize(
    ("source", "target", "code"),
    [
        ("e_missing", "e_aditya", "not_found"),
        ("e_adi", "e_missing", "not_found"),
        ("e_adi", "e_adi", "invalid"),  # itself
        ("e_adi", "e_acme", "invalid"),  # another kind
        ("e_adi", "e_other", "invalid"),  # another scope (another tenant)
    ],
)
def test_refusals_exit_nonzero_and_change_nothing(
    tmp_path: Path, source: str, target: str, code: str
) -> None:
    db = tmp_path / "m.sqlite"
    asyncio.run(_seed(db))
    before = asyncio.run(_state(db))
    plain = run("entity", "merge", source, target, "--reason", "r", "--store", db, rc=1)
    assert "Traceback" not in plain.stderr and plain.stderr.startswith("Error: ")
    assert len(plain.stderr.strip().splitlines()) == 1
    as_json = json.loads(
        run("entity", "merge", source, target, "--reason", "r", "--store", db, "--json", rc=1).stdout
    )
    assert as_json["ok"] is False and as_json["error"] == code and as_json["message"]
    assert asyncio.run(_state(db)) == before


def test_json_output_and_a_blank_reason(tmp_path: Path) -> None:
    db = tmp_path / "m.sqlite"
    asyncio.run(_seed(db))
    assert (
        "--reason" in run("entity", "merge", "e_adi", "e_aditya", "--reason", " ", "--store", db, rc=2).stderr
    )
    done = json.loads(
        run("entity", "merge", "e_adi", "e_aditya", "--reason", "dup", "--store", db, "--json").stdout
    )
    assert done["ok"] is True and (done["entity_id"], done["merged_into"], done["actor"]) == (
        "e_adi",
        "e_aditya",
        "admin",
    )
    assert set(done["aliases"]) == {"adi", "aditya", "aditya k"}
