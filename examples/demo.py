"""`make demo`: retold's main job, offline, on the embedded default (SQLite + packaged embedder).

A user talks to a planning agent over one session. The agent saves what the user
says as evidence-backed memories; retold reinforces a repeat instead of duplicating it,
supersedes a changed preference instead of overwriting it, keeps an unsupported guess
provisional, and refuses a write that would leak into another user's memory. Then the
agent searches: hybrid retrieval returns the current facts with an explanation each, and
the same agent working for another user gets an honest empty result. Last, the audit trail.
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
from pathlib import Path

import retold
from retold import Principal, Scope, SearchRequest
from retold.ingest.ingestor import WriteRequest

USER = Scope("user", "u1")


async def main(path: Path) -> None:
    async with retold.open_runtime(path) as rt:
        print(f"store: {path}  (schema version {await rt.store.schema_version()})")
        print(f"tables: {', '.join(await rt.store.tables())}")
        print("loading the packaged embedder (all-MiniLM-L6-v2, offline)...")
        await rt.warm()

        await rt.host.provision_user("u1", aliases=["Aditya"])
        await rt.host.grant("planner", USER, read=True, write=True)
        p = await rt.hooks.on_session_start(Principal("planner", "u1", "demo-session"))

        async def user_says(text: str) -> None:
            nonlocal p
            p = await rt.hooks.on_turn(p, "user", text)

        async def save(content: str, attribute: str | None, evidence: str | None, **kw: object) -> None:
            request = WriteRequest(
                type=kw.pop("type", "semantic"),  # type: ignore[arg-type]
                content=content,
                scope=kw.pop("scope", USER),  # type: ignore[arg-type]
                attribute=attribute,
                source_kind=kw.pop("source_kind", "user_statement"),  # type: ignore[arg-type]
                evidence=evidence,
            )
            result = await rt.ingestor.write(p, request)
            if result.ok:
                line = f"{result.outcome:<48} {result.status:<12} {content}"
                note = f"  [{result.note}]" if result.note else ""
                print(f"  write -> {line}{note}  ({result.timings_ms['total']:.0f} ms)")
            else:
                print(f"  write -> refused: {result.error}: {result.message}")

        print("\nthe conversation and what the agent saves:")
        await user_says("Hi! Quick thing first: I prefer concise answers, no essays please.")
        await save("Aditya prefers concise answers.", "answer_style", "I prefer concise answers")
        await user_says("Again, I prefer concise answers. Also my timezone is CET.")
        await save("Aditya prefers concise answers.", "answer_style", "I prefer concise answers")
        await save("Aditya's timezone is CET.", "timezone", "my timezone is CET")
        await save("Aditya's timezone is CET.", "timezone", "my timezone is CET")
        await save("Aditya probably works nights.", "work_hours", None, source_kind="agent_inference")
        await user_says("Change of plan: from now on I prefer detailed answers with examples.")
        await save(
            "Aditya prefers detailed answers.", "answer_style", "I prefer detailed answers with examples"
        )
        await save("Aditya likes Rust.", "language", "I love Rust", scope=Scope("user", "u2"))
        await rt.hooks.on_session_end(p)

        print("\nactive memories in user:u1:")
        for record in await rt.ops.dump_scope(USER):
            print(f"  {record.status:<12} {record.source_kind:<16} {record.content}")
        print("\nhistory kept, never overwritten:")
        for record in await rt.ops.dump_scope(USER, all_statuses=True):
            if record.status == "superseded":
                print(f"  superseded   {record.content}")

        print("\nthe agent later searches its memory (rendered exactly as the model sees it):")
        response = await rt.search(
            p, SearchRequest(queries=["how detailed should my answers be", "which timezone am I in"])
        )
        print("  " + retold.render_search(response).replace("\n", "\n  "))
        print("\nthe same agent working for another user finds nothing of Aditya's:")
        other = Principal("planner", "u2", "other-session")
        response = await rt.search(other, SearchRequest(queries=["how long should answers be"]))
        print("  " + retold.render_search(response).replace("\n", "\n  "))

        print("\naudit trail:")
        for event in await rt.store.events():
            payload = event["payload"]
            detail = payload.get("outcome") or payload.get("reason") or ""
            verdicts = payload.get("verdicts") or []
            if verdicts:
                detail += f"  judge: {verdicts[0]['verdict']}" + (
                    f" ({verdicts[0]['reason']})" if verdicts[0]["reason"] else ""
                )
            print(f"  {event['kind']:<22} by {event['actor']:<8} {detail}")


if __name__ == "__main__":
    if len(sys.argv) > 1:
        target = Path(sys.argv[1])
    else:
        target = Path(tempfile.mkdtemp(prefix="retold-demo-")) / "memory.sqlite"
    asyncio.run(main(target))
