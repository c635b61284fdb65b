"""``MemoryHost.ingest_many``: an import decided as one-by-one writes would be, committed at once."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from retold.ingest.write.request import WriteRequest
from retold.models import EntityMention, Principal

from .writepath import USER, make_world

IMPORTER = Principal("importer", "u1")


def fact(content: str, **fields: Any) -> WriteRequest:
    values: dict[str, Any] = {
        "type": "semantic", "content": content, "scope": USER, "source_kind": "system",
        "attribute": "editor", "entities": [EntityMention("person", "Aditya", "about")], "trusted": True,
    }  # fmt: skip
    values.update(fields)
    return WriteRequest(**values)


def story() -> list[WriteRequest]:
    return [
        fact("Aditya uses vim.", source_ref="import:1"),
        fact("Aditya uses vim.", source_ref="import:1"),  # the same claim from the same source
        fact("Aditya's team ships on Fridays.", attribute="release_day", source_ref="import:2"),
        fact("Aditya uses emacs now.", source_ref="import:3"),  # a newer value of the same fact
        fact("Aditya moved to Lisbon in May.", type="episodic", attribute=None, source_ref="import:4"),
    ]


async def outcomes(path: Path, *, batched: bool) -> tuple[list[str | None], list[tuple[str, str]]]:
    world = await make_world(path)
    try:
        if batched:
            results = await world.rt.host.ingest_many(IMPORTER, story())
        else:
            results = [await world.rt.host.ingest(IMPORTER, request) for request in story()]
        assert all(r.ok for r in results), results
        records = await world.rt.store.records_in_scope(
            USER, statuses=("confirmed", "provisional", "superseded")
        )
        kinds = [(r.outcome or "").split(":")[0] for r in results]  # "superseded:<id>": ids differ
        return kinds, sorted((r.content, r.status) for r in records)
    finally:
        await world.rt.close()


async def test_a_batch_decides_as_one_by_one_writes_do(tmp_path: Path) -> None:
    one_by_one = await outcomes(tmp_path / "a.sqlite", batched=False)
    batched = await outcomes(tmp_path / "b.sqlite", batched=True)
    assert batched == one_by_one
    assert batched[0] == ["created", "already_reinforced", "created", "superseded", "created"]


async def test_a_refused_request_writes_nothing_while_the_others_commit(tmp_path: Path) -> None:
    world = await make_world(tmp_path / "m.sqlite")
    try:
        bad = fact("   ")
        results = await world.rt.host.ingest_many(IMPORTER, [fact("Aditya uses vim."), bad])
        assert results[0].ok and not results[1].ok and results[1].error == "invalid_input"
        assert len(await world.rt.store.records_in_scope(USER)) == 1
    finally:
        await world.rt.close()


async def test_anything_but_a_write_request_writes_nothing(tmp_path: Path) -> None:
    world = await make_world(tmp_path / "m.sqlite")
    try:
        mixed: list[Any] = [fact("Aditya uses vim."), {"content": "x"}]
        results = await world.rt.host.ingest_many(IMPORTER, mixed)
        assert [r.error for r in results] == ["invalid_input", "invalid_input"]
        assert "request 1" in (results[0].message or "")
        assert await world.rt.store.records_in_scope(USER) == []
        assert await world.rt.host.ingest_many(IMPORTER, []) == []
    finally:
        await world.rt.close()
