"""Issue 20: memory_write's default target is the first offered one; ``version`` counts revisions."""

from __future__ import annotations

from typing import Any

from retold.ingest.write.batch import write_batch
from retold.ingest.write.ingestor import WriteRequest
from retold.models import Principal, Scope

from .writepath import USER, World

PROJECT = Scope("project", "p1")
CONCISE = "Aditya prefers concise answers."
DETAILED = "Aditya prefers detailed answers."
EXAMPLES = "Aditya prefers answers with examples."
EPISODE = {"type": "episodic", "content": "We chose Postgres for the Atlas service."}


async def project_only(world: World) -> Principal:
    """A principal whose only writable memory is the current project."""
    await world.rt.host.grant("builder", PROJECT, read=True, write=True)
    await world.rt.host.grant("builder", USER, read=True, write=False)
    return Principal("builder", "u1", "s1", project_id="p1")


async def test_without_write_target_a_project_only_principal_writes_to_the_project(world: World) -> None:
    p = await project_only(world)
    assert list(await world.rt.tools.write_targets(p)) == ["current_project"]
    landed = await world.rt.tools.call(p, "memory_write", EPISODE)
    assert landed["ok"] and landed["write_target"] == "current_project", landed
    assert (await world.record(landed["record_id"])).scope == PROJECT


async def test_personal_stays_the_default_when_offered(world: World) -> None:
    await world.rt.host.grant("planner", PROJECT, read=True, write=True)
    p = Principal("planner", "u1", "s1", project_id="p1")
    landed = await world.rt.tools.call(p, "memory_write", EPISODE)
    assert landed["ok"] and landed["write_target"] == "personal", landed
    assert (await world.record(landed["record_id"])).scope == USER


async def test_nothing_writable_answers_scope_not_writable_with_nothing_offered(world: World) -> None:
    """Spec §8.1/§17.2 (issue 45): invalid_write_target is for an unoffered name beside offered ones."""
    await world.rt.host.grant("planner", USER, read=True, write=False)
    version = await world.rt.store.records_version()
    for payload in (EPISODE, {**EPISODE, "write_target": "personal"}, {**EPISODE, "write_target": "team"}):
        refused = await world.rt.tools.call(world.p, "memory_write", payload)
        assert (refused["ok"], refused["error"], refused["offered"]) == (False, "scope_not_writable", [])
    assert await world.rt.store.records_version() == version


async def test_an_unavailable_write_target_lists_the_offered_ones(world: World) -> None:
    p = await project_only(world)
    version = await world.rt.store.records_version()
    for target in ("personal", "private", "user:u1", "project:p1"):
        refused = await world.rt.tools.call(p, "memory_write", {**EPISODE, "write_target": target})
        assert refused["error"] == "invalid_write_target", refused
        assert refused["offered"] == ["current_project"]
    assert await world.rt.store.records_version() == version


async def revise(world: World, record_id: str, content: str) -> dict[str, Any]:
    await world.say("user", f"Actually: {content}")
    result = await world.rt.tools.call(
        world.p,
        "memory_revise",
        {"id": record_id, "action": "supersede", "reason": "changed", "content": content,
         "source_kind": "user_statement", "evidence": f"Actually: {content}"},
    )  # fmt: skip
    assert result["ok"], result
    return result


async def test_manual_supersession_counts_versions_along_the_lineage(world: World) -> None:
    await world.say("user", "I prefer concise answers")
    first = await world.write(CONCISE, evidence="I prefer concise answers")
    second = await revise(world, first.record_id or "", DETAILED)
    third = await revise(world, second["record_id"], EXAMPLES)
    chain = [first.record_id, second["record_id"], third["record_id"]]
    assert [(await world.record(i)).version for i in chain] == [1, 2, 3]
    got = await world.rt.tools.call(world.p, "memory_get", {"ids": chain})
    assert [r["version"] for r in got["records"]] == [1, 2, 3]


async def test_automatic_supersession_counts_versions_and_reinforcement_keeps_them(world: World) -> None:
    world.judge.table[(CONCISE, DETAILED)] = "contradicts"
    world.judge.table[(DETAILED, EXAMPLES)] = "contradicts"
    world.judge.table[(EXAMPLES, "Aditya likes answers with examples.")] = "same"
    ids = []
    for n, content in enumerate((CONCISE, DETAILED, EXAMPLES)):
        await world.say("user", f"quote {n}: {content}")
        world.clock.advance(days=1)
        result = await world.write(content, evidence=f"quote {n}: {content}")
        assert result.ok and (n == 0 or result.outcome.startswith("superseded:")), result
        ids.append(result.record_id)
    assert [(await world.record(i)).version for i in ids] == [1, 2, 3]
    await world.say("user", "again: answers with examples")
    again = await world.write("Aditya likes answers with examples.", evidence="again: answers with examples")
    assert (again.outcome, again.record_id) == ("reinforced", ids[2])
    kept = await world.record(ids[2])
    assert (kept.reinforcements, kept.version) == (1, 3)


async def test_a_batch_counts_versions_through_its_own_earlier_writes(world: World) -> None:
    world.judge.table[(CONCISE, DETAILED)] = "contradicts"
    world.judge.table[(DETAILED, EXAMPLES)] = "contradicts"
    requests = []
    for n, content in enumerate((CONCISE, DETAILED, EXAMPLES)):
        await world.say("user", f"quote {n}: {content}")
        requests.append(
            WriteRequest(type="semantic", content=content, scope=USER, source_kind="user_statement",
                         attribute="answer_style", evidence=f"quote {n}: {content}")
        )  # fmt: skip
    results, _ = await write_batch(world.rt.ingestor, world.rt.store, world.p, requests, actor="test")
    assert [r.outcome.split(":")[0] for r in results] == ["created", "superseded", "superseded"], results
    assert [(await world.record(r.record_id)).version for r in results] == [1, 2, 3]
