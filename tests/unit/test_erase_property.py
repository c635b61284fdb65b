"""Property: an erasure leaves no word of its subject anywhere, and takes nothing from anyone else.

Three users of one project — all using the same session id, so sessions are told apart
by owner only — provision private aliases, say turns, write personal and project records
(with tags and newly named organisations), confirm shared facts that other users also
state (reinforcement), and search. Every piece of text carries a marker unique to who
wrote it and where. Then one user, one session or one record is erased. Afterwards no
marker unique to the erased subject is in any table, in the database file or its WAL,
or in an in-process cache; every other session's transcript is intact; and every
record another user supports is still there for that user, found by its own words.
"""

from __future__ import annotations

import asyncio
import json
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import retold
from retold.models import Principal, Scope, SessionKey
from retold.testing import FakeClock, FakeEmbedder, FakeJudge

from .slow import examples
from .test_lexical_tenancy import cached_words
from .test_operations import table_rows

USERS = ("u1", "u2", "u3")
PROJECT = Scope("project", "p1")

actions = st.lists(
    st.tuples(
        st.integers(0, 2), st.sampled_from(["personal", "project", "shared", "search"]), st.integers(0, 2)
    ),
    min_size=1,
    max_size=10,
)
targets = st.tuples(st.sampled_from(["user", "session", "record"]), st.integers(0, 2), st.integers(0, 50))


@dataclass
class Ledger:
    """Which marker came from whom: the user, their session, and the record it went into."""

    by_user: dict[str, set[str]] = field(default_factory=lambda: {u: set() for u in USERS})
    turns: dict[str, set[str]] = field(default_factory=lambda: {u: set() for u in USERS})
    records: dict[str, set[str]] = field(default_factory=dict)  # record id -> markers only it holds
    owners: dict[str, set[str]] = field(default_factory=dict)  # record id -> users that wrote it

    def add(self, user: str, marker: str, *, turn: bool = False) -> str:
        self.by_user[user].add(marker)
        if turn:
            self.turns[user].add(marker)
        return marker


async def scenario(path: Path, steps: list[tuple[int, str, int]], target: tuple[str, int, int]) -> None:
    clock = FakeClock()
    async with retold.open_runtime(path, embedder=FakeEmbedder(64), judge=FakeJudge(), clock=clock) as rt:
        ledger = Ledger()
        principals = {}
        for u in USERS:
            alias = ledger.add(u, f"alias{u}qz")
            await rt.host.provision_user(u, aliases=[alias])
            await rt.host.grant("planner", Scope("user", u), read=True, write=True)
            principals[u] = await rt.hooks.on_session_start(Principal("planner", u, "s", project_id="p1"))
        await rt.host.grant("planner", PROJECT, read=True, write=True)

        for n, (who, action, fact) in enumerate(steps):
            u = USERS[who]
            p = principals[u]
            if action == "search":
                query = ledger.add(u, f"query{u}n{n}qz")
                result = await rt.tools.call(p, "memory_search", {"queries": [f"{query} shared fact"]})
                assert result["ok"], result
                continue
            said = ledger.add(u, f"turn{u}n{n}qz", turn=True)
            if action == "shared":  # the same fact in every user's words: reinforcement
                text = f"the shared fact number {fact} holds"
                p = principals[u] = await rt.hooks.on_turn(p, "user", f"{said} {text}")
                payload: dict[str, Any] = {
                    "type": "episodic", "content": f"The shared fact number {fact} holds.",
                    "write_target": "current_project", "source_kind": "user_statement", "evidence": text,
                }  # fmt: skip
                markers: set[str] = set()
            else:
                content = ledger.add(u, f"content{u}n{n}qz")
                tag = ledger.add(u, f"tag{u}n{n}qz")
                org = ledger.add(u, f"org{u}n{n}qz")
                p = principals[u] = await rt.hooks.on_turn(p, "user", f"{said} is worth a note")
                payload = {
                    "type": "episodic", "content": f"Note {content} from the conversation.",
                    "source_kind": "user_statement", "evidence": f"{said} is worth a note", "tags": [tag],
                    "entities": [{"kind": "org", "name": org, "role": "mentions"}],
                }  # fmt: skip
                if action == "project":
                    payload["write_target"] = "current_project"
                markers = {content, tag, org}
            result = await rt.tools.call(p, "memory_write", payload)
            assert result["ok"], result
            rid = result["record_id"]
            ledger.records.setdefault(rid, set()).update(markers)
            ledger.owners.setdefault(rid, set()).add(u)

        kind, who, pick = target
        u = USERS[who]
        records = sorted(ledger.records)
        if kind == "record" and not records:
            kind = "user"
        if kind == "user":
            report = await rt.ops.erase(user=u, reason="property")
            gone = set(ledger.by_user[u])
            erased_users = {u}
        elif kind == "session":
            report = await rt.ops.erase(session=str(SessionKey.of(principals[u])), reason="property")
            gone, erased_users = set(ledger.turns[u]), set()
        else:
            rid = records[pick % len(records)]
            report = await rt.ops.erase(record=rid, reason="property")
            gone, erased_users = set(ledger.records[rid]), set()

        text = json.dumps(await table_rows(rt.store), default=str)
        files = b"".join(f.read_bytes() for f in path.parent.glob(path.name + "*") if f.is_file())
        cached = " ".join(cached_words(rt.store))
        for marker in gone:
            assert marker not in text, (kind, marker)
            assert marker.encode() not in files, (kind, marker, "file bytes")
            assert marker not in cached, (kind, marker, "vocabulary cache")
        for rid in report.records:  # this process's vector index forgot them too
            assert rt.index.vector_for(rid) is None, rid

        # Nobody else lost anything: their transcripts, and the records they support.
        for other in USERS:
            if other in erased_users:
                continue
            key = SessionKey.of(principals[other])
            if kind == "session" and other == u:
                continue
            turns = " ".join(t.content for t in await rt.store.turns(key))
            assert all(m in turns for m in ledger.turns[other]), (other, turns)
        for rid, owners in ledger.owners.items():
            keepers = owners - erased_users
            if not keepers or (kind == "record" and rid == records[pick % len(records)]):
                continue
            keeper = principals[sorted(keepers)[0]]
            got = await rt.tools.call(keeper, "memory_get", {"ids": [rid]})
            assert got["ok"] and got["records"][0]["content"], (rid, got)
            content = got["records"][0]["content"]
            found = await rt.tools.call(keeper, "memory_search", {"queries": [content], "k": 20})
            assert rid in [r["record_id"] for r in found["results"]], (rid, content, found["empty_reason"])
        assert (await rt.ops.check()).clean


@settings(max_examples=examples(15), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(steps=actions, target=targets)
def test_an_erasure_leaves_no_marker_of_its_subject_and_keeps_everyone_elses(steps, target) -> None:  # type: ignore[no-untyped-def]
    with tempfile.TemporaryDirectory() as tmp:
        asyncio.run(scenario(Path(tmp) / "m.sqlite", steps, target))
