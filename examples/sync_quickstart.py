"""retold from synchronous code (scripts, notebooks, sync frameworks): the same API, no await.

python examples/sync_quickstart.py [store.sqlite]
"""

import sys

import retold
from retold import Principal, Scope, SearchRequest

with retold.open_runtime_sync(sys.argv[1] if len(sys.argv) > 1 else "memory.sqlite") as rt:
    rt.host.provision_user("u1", aliases=["Aditya"])
    rt.host.grant("planner", Scope("user", "u1"), read=True, write=True)
    p = rt.hooks.on_session_start(Principal(agent_id="planner", user_id="u1", session_id="s1"))
    p = rt.hooks.on_turn(p, "user", "I prefer concise answers, please.")
    written = rt.tools.call(p, "memory_write", {
        "type": "semantic", "content": "Aditya prefers concise answers.", "attribute": "answer_style",
        "source_kind": "user_statement", "evidence": "I prefer concise answers",
    })  # fmt: skip
    print(f"memory_write: {written['outcome']} ({written['status']})")
    response = rt.search(p, SearchRequest(queries=["what answer style does Aditya prefer?"]))
    print(f"search: {[r.record.content for r in response.results]}")
