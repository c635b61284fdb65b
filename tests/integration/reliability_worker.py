"""A separate OS process using retold's public API, for the crash and concurrency tests.

    python reliability_worker.py crash STORE ROUND
    python reliability_worker.py concurrent STORE WORKER COUNT GO_FILE WORKERS

Both run on the deterministic fakes (no torch) and print one JSON line per event, flushed,
so the parent knows exactly which writes were acknowledged before it killed the process.

``crash`` writes forever, alternating an episodic note with a new value of one current
fact (each superseding the last, several rows in one transaction), and prints each
record id after its write committed. ``concurrent`` writes COUNT notes as agent
``w<WORKER>``, searching for its own latest note every 50 writes; then it prints
``done``, waits for GO_FILE, and searches for notes the other workers wrote. Every
worker also writes facts that overlap with the others': every 10th write one shared
sentence (deduplicated to one record), every 25th a new value of one shared fact (each
superseding the current one).
STORE is a SQLite file or a postgresql:// URL.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import sys
import time

import retold
from retold.models import Principal, Scope, SearchRequest
from retold.testing import FakeEmbedder, FakeJudge

USER = Scope("user", "u1")
SHARED_NOTE = "The team office is in Lisbon."


def say(**fields: object) -> None:
    print(json.dumps(fields), flush=True)


def marker(worker: int, n: int) -> str:
    """A token found in exactly one note: worker ``worker``'s ``n``-th."""
    return f"zq{worker}x{n}k"


async def crash(store: str, round_no: int) -> None:
    async with retold.open_runtime(store, embedder=FakeEmbedder(), judge=FakeJudge()) as rt:
        say(ready=True)
        n = 0
        while True:
            if n % 2 == 0:
                text = f"crash round {round_no} note {n} code cr{round_no}x{n}k"
                result = await rt.host.write_system(USER, text, type="episodic", actor="crasher")
            else:
                text = f"the current task is step {n} of round {round_no}"
                result = await rt.host.write_system(USER, text, attribute="current_task", actor="crasher")
            if not result.ok:
                say(error=result.error, message=result.message)
                return
            say(id=result.record_id, text=text, outcome=result.outcome)
            n += 1


async def find(rt: retold.Runtime, principal: Principal, token: str) -> bool:
    response = await rt.search(principal, SearchRequest(queries=[token], k=3))
    return any(token in r.record.content for r in response.results)


async def concurrent(store: str, worker: int, count: int, go_file: str, workers: int) -> None:
    principal = Principal(f"w{worker}", "u1", f"session-w{worker}")
    async with retold.open_runtime(store, embedder=FakeEmbedder(), judge=FakeJudge()) as rt:
        own_misses = []
        for n in range(count):
            text = f"worker {worker} wrote note {n} with code {marker(worker, n)}"
            result = await rt.host.write_system(USER, text, type="episodic", actor=principal.agent_id)
            if not result.ok:
                say(error=result.error, message=result.message)
                sys.exit(1)
            say(id=result.record_id, n=n)
            if n % 10 == 3:
                shared = await rt.host.write_system(
                    USER, SHARED_NOTE, attribute="office", actor=principal.agent_id
                )
                if not shared.ok:
                    say(error=shared.error, message=shared.message)
                    sys.exit(1)
                say(shared=shared.record_id, outcome=shared.outcome)
            if n % 25 == 7:
                text = f"The standup moves to {worker}:{n:03d} (worker {worker})."
                current = await rt.host.write_system(
                    USER, text, attribute="standup_time", actor=principal.agent_id
                )
                if not current.ok:
                    say(error=current.error, message=current.message)
                    sys.exit(1)
                say(current=current.record_id, outcome=current.outcome)
            if n % 50 == 49 and not await find(rt, principal, marker(worker, n)):
                own_misses.append(n)
        say(done=worker, own_misses=own_misses)
        deadline = time.monotonic() + 120
        while not await asyncio.to_thread(os.path.exists, go_file):  # created once every worker is done
            if time.monotonic() > deadline:
                say(error="timeout", message="no go file")
                sys.exit(1)
            await asyncio.sleep(0.02)
        rng = random.Random(worker)
        wanted = []
        for other in range(workers):
            if other != worker:
                wanted += [marker(other, count - 1), *(marker(other, rng.randrange(count)) for _ in range(5))]
        missing = [token for token in wanted if not await find(rt, principal, token)]
        say(searched=len(wanted), missing=missing)


if __name__ == "__main__":
    mode = sys.argv[1]
    if mode == "crash":
        asyncio.run(crash(sys.argv[2], int(sys.argv[3])))
    elif mode == "concurrent":
        asyncio.run(
            concurrent(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5], int(sys.argv[6]))
        )
    else:
        raise SystemExit(f"unknown mode {mode!r}")
