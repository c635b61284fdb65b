"""A populated store for the UI tests, and an in-process client for `retold ui` over it.

:func:`populate` writes, through the public write path on fakes, what every page has to
show: a session whose quotes became records, a changed preference (supersession), a weaker
contradiction (a conflict both ways), a merged entity, a forgotten record, another user's
secret, and logged searches. :func:`client` serves the app in-process (Starlette's
TestClient, whose lifespan opens the runtime on its own event loop) on ``127.0.0.1``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import retold
from retold.ingest.write.entities import merge_entities
from retold.ingest.write.revision import Reviser
from retold.models import EntityMention, Principal, Scope, SearchRequest
from retold.testing import FakeClock, FakeEmbedder, FakeJudge
from retold.ui import UiSettings, create_app

__all__ = ["BASE", "Facts", "client", "open_models", "populate"]

BASE = "http://127.0.0.1"
CET, PST = "Aditya's timezone is CET.", "Aditya's timezone is PST."


def open_models() -> dict[str, Any]:
    """The fakes every runtime over the UI world opens with (the judge calls CET/PST a contradiction)."""
    return {
        "embedder": FakeEmbedder(),
        "judge": FakeJudge({(PST, CET): "contradicts"}),
        "clock": FakeClock(),
    }


@dataclass
class Facts:
    """Ids the tests look for."""

    ids: dict[str, str] = field(default_factory=dict)
    searches: dict[str, str] = field(default_factory=dict)
    entities: dict[str, str] = field(default_factory=dict)


async def _populate(path: Path | str) -> Facts:
    facts = Facts()
    async with retold.open_runtime(path, **open_models()) as rt:
        await rt.host.provision_user("u1", aliases=["Aditya"])
        await rt.host.provision_user("u2", aliases=["Bea"])
        await rt.host.grant("planner", Scope("user", "u1"), read=True, write=True)
        await rt.host.grant("planner", Scope("project", "apollo"), read=True, write=True)
        p = await rt.hooks.on_session_start(Principal("planner", "u1", "s1"))

        async def write(name: str, content: str, attribute: str, quote: str | None = None, **kw: Any) -> None:
            payload = {"type": "semantic", "content": content, "attribute": attribute, **kw}
            if quote:
                payload |= {"source_kind": "user_statement", "evidence": quote}
            result = await rt.tools.call(p, "memory_write", payload)
            assert result["ok"], result
            facts.ids[name] = result["record_id"]

        p = await rt.hooks.on_turn(p, "user", "Hi! I prefer concise answers, and my timezone is CET.")
        await write("concise", "Aditya prefers concise answers.", "answer_style", "I prefer concise answers")
        await write("cet", CET, "timezone", "my timezone is CET")
        p = await rt.hooks.on_turn(p, "user", "Actually, I now prefer detailed answers with examples.")
        await write("detailed", "Aditya prefers detailed answers with examples.", "answer_style",
                    "I now prefer detailed answers with examples")  # fmt: skip
        await write("pst", PST, "timezone", source_kind="agent_inference")
        mention = [EntityMention("project", "Apollo", "about")]
        apollo = await rt.host.write_system(
            Scope("project", "apollo"), "Apollo ships on Friday.", attribute="ship_day", entities=mention
        )
        facts.ids["apollo"] = str(apollo.record_id)
        other = await rt.host.write_system(
            Scope("project", "apollo"), "Apollo launch uses the blue rocket.", attribute="rocket",
            entities=[EntityMention("project", "Apollo launch", "about")],
        )  # fmt: skip
        facts.ids["rocket"] = str(other.record_id)
        secret = await rt.host.write_system(Scope("user", "u2"), "Bea's door code is 4711.", attribute="door")
        facts.ids["secret"] = str(secret.record_id)
        survivor = (await rt.store.get_record(facts.ids["apollo"])).subject_entity_id  # type: ignore[union-attr]
        merged = (await rt.store.get_record(facts.ids["rocket"])).subject_entity_id  # type: ignore[union-attr]
        assert survivor and merged and survivor != merged
        await merge_entities(rt.store, merged, survivor, actor="admin", reason="same project")
        facts.entities |= {"apollo": survivor, "merged": merged}
        await rt.hooks.on_session_end(p)
        found = await rt.search(p, SearchRequest(queries=["how detailed should answers to Aditya be"]))
        facts.searches["found"] = found.search_id
        assert found.results, "the world's first search must find the detailed-answers record"
        empty = await rt.search(p, SearchRequest(queries=["password of the staging database"]))
        facts.searches["empty"] = empty.search_id
        await rt.host.grant("helper", Scope("user", "u2"), read=True)
        bea = await rt.search(Principal("helper", "u2"), SearchRequest(queries=["Bea door code"]))
        facts.searches["bea"] = bea.search_id
        forgotten = await rt.host.write_system(
            Scope("user", "u1"), "Aditya drinks oat milk.", attribute="milk"
        )
        facts.ids["forgotten"] = str(forgotten.record_id)
        await Reviser(rt.store, rt.index).forget(facts.ids["forgotten"], reason="asked", actor="admin")
    return facts


def populate(path: Path | str) -> Facts:
    """Write the UI world into a new store at ``path`` (SQLite file or PostgreSQL URL)."""
    return asyncio.run(_populate(path))


@contextmanager
def client(path: Path | str, settings: UiSettings | None = None, **kwargs: Any) -> Iterator[Any]:
    """A TestClient on ``http://127.0.0.1`` for the inspector over the store at ``path``."""
    from starlette.testclient import TestClient

    app = create_app(lambda: retold.open_runtime(path, **open_models()), settings or UiSettings())
    with TestClient(app, base_url=BASE, **kwargs) as test_client:
        yield test_client
