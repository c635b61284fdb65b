"""`make demo`: retold's main job, offline, on the embedded default (SQLite).

Creates a fresh store, provisions a user, grants an agent access, and prints what
is there: the schema version, the tables, the grants and the audit trail. Later
capabilities (writes, search) extend this script.
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
from pathlib import Path

import retold
from retold import Principal, Scope
from retold.policy.grants import readable_scopes, writable_scopes


async def main(path: Path) -> None:
    async with retold.open_runtime(path) as rt:
        print(f"store: {path}")
        print(f"schema version: {await rt.store.schema_version()}")
        print(f"tables: {', '.join(await rt.store.tables())}")

        person = await rt.host.provision_user("u1", aliases=["Aditya"])
        await rt.host.grant("planner", Scope("user", "u1"), read=True, write=True)
        await rt.host.grant("planner", Scope("org", "acme"), read=True)
        print(f"provisioned user u1 as person entity {person.id} ({', '.join(person.aliases)})")

        for user in ("u1", "u2"):
            principal = Principal(agent_id="planner", user_id=user, session_id="demo")
            readable = ", ".join(map(str, await readable_scopes(rt.store, principal)))
            writable = ", ".join(map(str, await writable_scopes(rt.store, principal)))
            print(f"planner for {user}: reads [{readable}]  writes [{writable}]")

        print("audit trail:")
        for event in await rt.store.events():
            print(f"  {event['at']}  {event['kind']:<22} by {event['actor']}")


if __name__ == "__main__":
    target = (
        Path(sys.argv[1])
        if len(sys.argv) > 1
        else Path(tempfile.mkdtemp(prefix="retold-demo-")) / "memory.sqlite"
    )
    asyncio.run(main(target))
