"""retold as a LangGraph store, offline: ``python examples/langgraph_store_quickstart.py [store.sqlite]``."""

import asyncio
import sys
import tempfile
from pathlib import Path

import retold
from retold import Scope
from retold.adapters.langgraph_store import RetoldStore


async def main(path: str) -> None:
    async with retold.open_runtime(path) as rt:  # the packaged embedder; runs offline
        await rt.host.provision_user("u1")
        await rt.host.grant("assistant", Scope("user", "u1"), read=True, write=True)
        store = RetoldStore(rt, agent_id="assistant")  # ("memories", user_id, ...) -> user:<id>
        await store.aput(("memories", "u1"), "diet", {"content": "Is vegetarian and avoids mushrooms."})
        item = await store.aget(("memories", "u1"), "diet")
        print("get:", item.value if item else None)
        for hit in await store.asearch(("memories", "u1"), query="is the user vegetarian?"):
            print(f"search: {hit.key} score={hit.score:.3f} {hit.value['content']}")
        print("u2 sees:", await store.asearch(("memories", "u2"), query="food"))  # no grant: nothing


if __name__ == "__main__":
    target = sys.argv[1] if len(sys.argv) > 1 else str(Path(tempfile.mkdtemp()) / "memory.sqlite")
    asyncio.run(main(target))
