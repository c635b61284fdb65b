"""Property: acting as a principal, no page of `retold ui` shows what that principal may not read.

A store holds records in every kind of scope for three agents and three users (with entity
links, a supersession, conflicts, events whose payloads name records of other scopes,
sessions with transcripts and logged searches of every principal) under a fixed set of
grants. For a random principal, every page reachable through links that keep ``as=`` is
fetched, a live search is run through the form, and every record, entity, session and search
of someone else is asked for by id. No page may show a record id (full or short), a
content marker or an entity id outside the principal's readable scopes, nor another
principal's transcript; asking for one answers exactly like asking for one that never existed.
The readable scopes are worked out here from the grant rules, not by asking retold.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from html import unescape
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import retold
from retold.ingest.write.request import WriteRequest
from retold.models import Entity, EntityMention, Grant, Principal, Scope, SearchRequest
from retold.retrieve.render import short_id
from retold.ui import UiSettings
from retold.util import new_id

from .factories import build_record
from .slow import examples
from .ui_world import client, open_models

AGENTS = ("a1", "a2", "a3")
USERS = ("u1", "u2", "u3")
SCOPES = (
    *(Scope("user", u) for u in USERS),
    Scope("agent", "a1/u1"), Scope("agent", "a1/u2"), Scope("agent", "a2/u2"), Scope("agent", "a3/u3"),
    Scope("agent", "a1"), Scope("agent", "a2"), Scope("project", "p1"), Scope("project", "p2"),
    Scope("org", "acme"),
)  # fmt: skip
GRANTS = (
    ("a1", Scope("user", "u1")), ("a1", Scope("user", "u2")), ("a1", Scope("project", "p1")),
    ("a1", Scope("org", "acme")), ("a1", Scope("agent", "a2/u2")),  # a private grant: counts for u2 only
    ("a2", Scope("project", "p2")), ("a2", Scope("agent", "a1")), ("a2", Scope("user", "u3")),
)  # fmt: skip
WORDS = "deploy billing Priya postgres friday answers"


def readable(agent: str, user: str) -> set[Scope]:
    """The oracle: the private scope, and granted scopes that do not belong to another user."""
    scopes = {Scope("agent", f"{agent}/{user}")}
    for granted_agent, scope in GRANTS:
        if granted_agent != agent:
            continue
        if scope.kind == "user" and scope.id != user:
            continue
        if scope.kind == "agent" and "/" in scope.id and scope.id.split("/")[1] != user:
            continue
        scopes.add(scope)
    return scopes


@dataclass
class Isolated:
    path: Path | str
    records: dict[str, tuple[Scope, str]] = field(default_factory=dict)  # id -> (scope, marker)
    entities: dict[str, Scope] = field(default_factory=dict)
    sessions: dict[tuple[str, str], str] = field(default_factory=dict)  # (agent, user) -> transcript marker
    searches: dict[str, tuple[str, str]] = field(default_factory=dict)  # id -> (agent, user)


async def _build(path: Path | str) -> Isolated:
    world = Isolated(path)
    async with retold.open_runtime(path, **open_models()) as rt:
        store, clock = rt.store, rt.clock
        for agent, scope in GRANTS:
            await store.set_grant(Grant(agent, scope, True, False))  # direct rows: the private one too
        by_scope: dict[Scope, list[str]] = {}
        for n, scope in enumerate(s for s in SCOPES for _ in range(2)):
            entity = next((e for e, s in world.entities.items() if s == scope), None)
            if entity is None:
                entity = new_id()
                await store.insert_entity(Entity(entity, "person", "Priya", scope, "confirmed", None,
                                                 ["priya", f"priya {scope.kind}"], clock.now()))  # fmt: skip
                world.entities[entity] = scope
            marker = f"m{n:03d}q"
            record = build_record(clock.now(), content=f"{marker} {WORDS}", scope=scope)
            await store.insert_record(record, links=[(entity, "about")])
            vector = rt.embedder.embed_documents([record.content])[0]
            await store.put_embedding(record.id, rt.embedder.name, rt.embedder.version, vector)
            world.records[record.id] = (scope, marker)
            by_scope.setdefault(scope, []).append(record.id)
        ids = list(world.records)
        for scope, (first, second) in by_scope.items():
            await store.add_conflict(first, second, clock.now())
            await store.update_record(first, status="superseded")
            await store.update_record(second, supersedes_id=first)
            foreign = next(i for i in ids if world.records[i][0] != scope)
            await store.append_event(  # a payload that names a record of another scope
                "record.noted",
                "admin",
                record_id=second,
                payload={"see": foreign, "short": short_id(foreign)},
            )
        for agent in AGENTS:
            for user in USERS:
                p = await rt.hooks.on_session_start(Principal(agent, user, f"s-{agent}-{user}"))
                marker = f"t{agent}{user}z"
                p = await rt.hooks.on_turn(p, "user", f"Note {marker}. I deploy billing on friday.")
                request = WriteRequest(
                    type="semantic", content=f"w{agent}{user}w deploy billing friday", scope=p.private_scope,
                    attribute="deploy_day", source_kind="user_statement",
                    evidence="I deploy billing on friday",
                    entities=[EntityMention("person", f"Sam {agent} {user}", "about")],
                )  # fmt: skip
                written = await rt.host.ingest(p, request)
                assert written.ok and written.record_id, written
                world.records[written.record_id] = (p.private_scope, f"w{agent}{user}w")
                for entity_id in (await store.require_record(written.record_id)).entity_ids:
                    world.entities[entity_id] = p.private_scope
                world.sessions[(agent, user)] = marker
                found = await rt.search(p, SearchRequest(queries=[WORDS]))
                world.searches[found.search_id] = (agent, user)
    return world


@pytest.fixture
def isolated(store_location: Any) -> Iterator[tuple[Any, Isolated, UiSettings]]:
    path = store_location("ui-isolation.sqlite")
    world = asyncio.run(_build(path))
    ui_settings = UiSettings()
    with client(path, ui_settings) as c:
        yield c, world, ui_settings


def _crawl(c: Any, starts: list[str], keep: str, limit: int = 250) -> dict[str, str]:
    pages: dict[str, str] = {}
    todo = list(starts)
    while todo and len(pages) < limit:
        url = todo.pop(0)
        if url in pages:
            continue
        answer = c.get(url)
        assert answer.status_code == 200, (url, answer.status_code, answer.text[-300:])
        pages[url] = answer.text
        found = (unescape(h) for h in re.findall(r'href="(/[^"]*)"', answer.text))
        todo += [h for h in found if keep in h and h not in pages]
    return pages


def _not_found_like_a_missing_one(c: Any, url: str, missing: str, as_: str) -> None:
    """The answer for a foreign id is the answer for an id that never existed, but for the id itself."""
    ident = url.rstrip("/").rsplit("/", 1)[-1]
    foreign = c.get(url, params={"as": as_})
    absent = c.get(url.replace(ident, missing), params={"as": as_})
    assert foreign.status_code == absent.status_code == 404, (url, foreign.status_code)
    assert foreign.text.replace(ident, "ID") == absent.text.replace(missing, "ID"), url


@settings(
    max_examples=examples(10),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(agent=st.sampled_from(AGENTS), user=st.sampled_from(USERS), words=st.sampled_from(WORDS.split()))
def test_no_page_shows_what_the_principal_may_not_read(
    isolated: tuple[Any, Isolated, UiSettings], agent: str, user: str, words: str
) -> None:
    c, world, ui_settings = isolated
    as_ = f"{agent}/{user}"
    keep = "as=" + quote(as_, safe="")
    scopes = readable(agent, user)
    live = c.post(
        "/search",
        data={"csrf": ui_settings.csrf, "as": as_, "queries": f"{words} {WORDS}"},
        follow_redirects=False,
    )
    assert live.status_code == 303 and keep in live.headers["location"]
    starts = ["/", "/entities", "/sessions", "/searches", "/audit", "/plots", "/search"]
    pages = _crawl(c, [f"{s}?{keep}" for s in starts] + [live.headers["location"]], keep)
    text = "\n".join(pages.values())
    shown = {rid for rid, (scope, _) in world.records.items() if scope in scopes}
    assert any(world.records[rid][1] in text for rid in shown)  # the crawl reached the principal's records
    for rid, (scope, marker) in world.records.items():
        if scope not in scopes:
            assert rid not in text and short_id(rid) not in text and marker not in text, (as_, scope)
    for entity_id, scope in world.entities.items():
        if scope not in scopes:
            assert entity_id not in text and short_id(entity_id) not in text, (as_, scope)
    for owner, marker in world.sessions.items():
        assert (marker in text) == (owner == (agent, user)), (as_, owner)
    for search_id, owner in world.searches.items():
        assert (f"/searches/{search_id}" in text) == (owner == (agent, user)), (as_, owner)
    missing = "01900000-0000-7000-8000-00000000dead"
    for rid, (scope, _) in world.records.items():
        if scope not in scopes:
            _not_found_like_a_missing_one(c, f"/records/{rid}", missing, as_)
    for entity_id, scope in world.entities.items():
        if scope not in scopes:
            _not_found_like_a_missing_one(c, f"/entities/{entity_id}", missing, as_)
    for search_id, owner in world.searches.items():
        if owner != (agent, user):
            _not_found_like_a_missing_one(c, f"/searches/{search_id}", missing, as_)
    for other_agent, other_user in world.sessions:
        if (other_agent, other_user) != (agent, user):
            url = f"/sessions/{other_agent}/{other_user}/s-{other_agent}-{other_user}"
            assert c.get(url, params={"as": as_}).status_code == 404
    for scope in SCOPES:
        if scope not in scopes:
            assert c.get(f"/scopes/{scope.kind}/{scope.id}", params={"as": as_}).status_code == 404
