"""Property: names readable only in one scope never surface to a caller who cannot read it.

Two users of one project each have a private alias for themselves and name new
organisations in their personal memory. Both write personal and project records about
themselves (by private alias or user id), about those organisations and about shared
project entities, and revise some. Every private name is a marker. Then each user — and a
read-only project agent — searches for every marker (as queries and as entity filters)
and fetches everything they got back. No marker they cannot read may appear in a result,
an explanation, a matched term, an entity list, a conflict partner or a lineage entry,
and no id of an entity they cannot read may appear in a result's record or explanation.
"""

from __future__ import annotations

import asyncio
import json
import tempfile
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import retold
from retold.models import Principal, Scope, SearchRequest
from retold.policy.grants import readable_scopes
from retold.testing import FakeClock, FakeEmbedder, FakeJudge

from .slow import examples

PROJECT = Scope("project", "p1")
USERS = ("u1", "u2")
WORDS = ("deploy", "billing", "friday", "postgres", "latency", "budget")

write = st.tuples(
    st.integers(0, 1),  # writer
    st.sampled_from(["personal", "current_project"]),
    st.sampled_from(["alias", "user_id", "new_org", "own_org", "project_entity"]),
    st.lists(st.sampled_from(WORDS), min_size=1, max_size=3),
    st.booleans(),  # revise it afterwards (lineage)
)


def private(user: str) -> str:
    return f"priv{user}zq"


def org(user: str, n: int) -> str:
    return f"org{user}n{n}zq"


async def scenario(path: Path, writes: list[tuple[Any, ...]]) -> None:
    clock = FakeClock()
    async with retold.open_runtime(path, embedder=FakeEmbedder(64), judge=FakeJudge(), clock=clock) as rt:
        await rt.host.grant("planner", PROJECT, read=True, write=True)
        await rt.host.grant("reader", PROJECT, read=True)
        principals = {}
        for u in USERS:
            await rt.host.provision_user(u, aliases=[private(u)])
            await rt.host.grant("planner", Scope("user", u), read=True, write=True)
            principals[u] = await rt.hooks.on_session_start(Principal("planner", u, f"s{u}", project_id="p1"))
        reader = Principal("reader", "u2", "sr", project_id="p1")
        personal_orgs: dict[str, list[str]] = {u: [] for u in USERS}

        for n, (who, target, about, words, revise) in enumerate(writes):
            u = USERS[who]
            p = principals[u]
            mention: dict[str, Any] = {"kind": "person", "name": private(u), "role": "about"}
            if about == "user_id":
                mention = {"kind": "person", "name": u, "role": "about"}
            elif about == "new_org":
                mention = {"kind": "org", "name": org(u, n), "role": "about"}
                if target == "personal":
                    personal_orgs[u].append(org(u, n))
            elif about == "own_org" and personal_orgs[u]:
                mention = {"kind": "org", "name": personal_orgs[u][0], "role": "about"}
            elif about == "project_entity":
                mention = {"kind": "project", "name": "Atlas", "role": "about"}
            result = await rt.tools.call(p, "memory_write", {
                "type": "semantic", "content": f"Fact {n}: " + " ".join(words), "attribute": f"fact_{n % 3}",
                "write_target": target, "entities": [mention],
            })  # fmt: skip
            if not result["ok"]:
                assert result["error"] in ("entity_ambiguous", "invalid_subject"), result
                continue
            if revise and result["status"] in ("provisional", "confirmed"):
                revised = await rt.tools.call(p, "memory_revise", {
                    "id": result["record_id"], "action": "supersede", "reason": "update",
                    "content": f"Fact {n} revised: " + " ".join(reversed(words)),
                })  # fmt: skip
                assert revised["ok"] or revised["error"] == "invalid_input", revised

        for caller in (*principals.values(), reader):
            readable = set(await readable_scopes(rt.store, caller))
            foreign = [private(u) for u in USERS if Scope("user", u) not in readable]
            foreign += [o for u in USERS if Scope("user", u) not in readable for o in personal_orgs[u]]
            for marker in foreign:
                found = await rt.tools.call(
                    caller, "memory_search", {"queries": [marker], "entities": [marker]}
                )
                assert found["ok"], found
                shown = json.dumps(found["results"]).lower()
                assert marker not in shown, (caller, marker, shown)
                log = await rt.store.search_log(found["search_id"])
                assert log is not None
                for column in ("lexical", "entity"):
                    assert marker not in log[column].lower(), (caller, marker, column, log[column])
                # Explanations echo the caller's own queries; everything else in them is stored text.
                explained = [
                    {k: v for k, v in e.items() if k not in ("raw_queries", "rewritten_queries")}
                    for e in json.loads(log["explanations"])
                ]
                assert marker not in json.dumps(explained).lower(), (caller, marker, explained)
                assert json.loads(log["entity"]) == [], (caller, marker, log["entity"])
            everything = await rt.search(caller, SearchRequest(queries=[" ".join(WORDS)], k=20))
            ids = [r.record.id for r in everything.results]
            for result in everything.results:
                for entity_id in {*result.record.entity_ids, *result.explanation.entity_ids}:
                    entity = await rt.store.get_entity(entity_id)
                    assert entity is not None and entity.scope in readable, (caller, entity)
            if ids:
                got = await rt.tools.call(caller, "memory_get", {"ids": ids[:20]})
                assert got["ok"], got
                text = json.dumps(got).lower()
                for marker in foreign:
                    assert marker not in text, (caller, marker)
                for record in got["records"]:
                    assert all(Scope.parse(e["scope"]) in readable for e in record["entities"]), record
                    for brief in (*record["supersedes"], *record["superseded_by"], *record["conflicts"]):
                        linked = await rt.store.get_record(brief["record_id"])
                        assert linked is not None and linked.scope in readable, (caller, brief)


@settings(max_examples=examples(20), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(writes=st.lists(write, min_size=1, max_size=8))
def test_no_name_reaches_a_caller_who_cannot_read_its_scope(writes) -> None:  # type: ignore[no-untyped-def]
    with tempfile.TemporaryDirectory() as tmp:
        asyncio.run(scenario(Path(tmp) / "m.sqlite", writes))
