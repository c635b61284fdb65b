"""How long `retold import` takes for 2,000 records with the real embedder (issue 47, item 5).

Writes a JSON Lines file of ``--records`` memories (default 2,000: 20 users, each with facts
about themselves and the people they work with, events and procedures, so the write path
reinforces and supersedes as it would on a real history), creates a fresh store with
``retold migrate``, then times ``retold import FILE --json`` as an operator runs it: a new
process, the packaged all-MiniLM-L6-v2 loaded from disk, every line through
``MemoryHost.ingest_many``. Then it exports the store again and imports that into a second
store, and imports the first file a second time (nothing may be written twice).

    python benchmarks/import_speed.py                 # 2,000 records; PASS/FAIL against 60 s
    python benchmarks/import_speed.py --records 200   # a quick run
    python benchmarks/import_speed.py --json out.json

The target is the whole command (process start, model load, every write) under 60 s on this
machine; the figure varies with the machine's load (a shared two-core box), so the report
gives the import's own elapsed time, its batches and the outcome counts beside the wall time.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

from common import Target, check_targets, machine

TARGET_S = 60.0
USERS = 20

PEOPLE = ["Priya", "Marco", "Aiko", "Lena", "Omar", "Sofia", "Ravi", "Jonas", "Mei", "Tariq", "Ines", "Kwame"]
PROJECTS = ["Atlas", "Borealis", "Cinder", "Delta", "Ember", "Falcon", "Gemini", "Harbor"]
CITIES = ["Lisbon", "Osaka", "Berlin", "Austin", "Pune", "Nairobi", "Bogotá", "Tallinn"]
FACTS = [
    ("editor", "{p} uses {x} as their editor.", ["vim", "Emacs", "VS Code", "Helix", "Zed", "IntelliJ"]),
    ("timezone", "{p} works in the {x} timezone.", ["CET", "PST", "IST", "JST", "UTC", "EST"]),
    ("diet", "{p} follows a {x} diet.", ["vegetarian", "vegan", "pescatarian", "gluten-free"]),
    ("coffee", "{p} takes their coffee {x}.", ["black", "with oat milk", "as an espresso", "decaf"]),
    ("scripting_language", "{p} prefers {x} for scripting.", ["Python", "Ruby", "Go", "Bash", "Perl"]),
    ("home_city", "{p} lives in {x}.", CITIES),
    ("role", "{p} is the {x} on the team.", ["tech lead", "designer", "product manager", "SRE"]),
    ("meeting_time", "{p} prefers meetings in the {x}.", ["morning", "early afternoon", "late afternoon"]),
]
EVENTS = [
    "met {o} to discuss the {j} launch",
    "fixed a memory leak in the {j} billing service",
    "presented the {j} roadmap to {o}",
    "flew to {c} for the {j} offsite",
    "reviewed {o}'s pull request on {j}",
    "paired with {o} on the {j} migration",
    "shipped version {n}.{m} of {j}",
    "was on call for {j} and handled an outage",
]
PROCEDURES = [
    ("deploy", "To deploy {j}, run the smoke tests first and tag the release as v{n}.{m}."),
    ("code_review", "Code for {j} needs two approvals, one of them from {o}."),
    ("incident", "During a {j} incident, page {o} before posting in the status channel."),
]


def records(n: int, seed: int = 7) -> list[dict[str, Any]]:
    """``n`` JSON Lines records, the fields `retold import` reads, about ``USERS`` users."""
    rng = random.Random(seed)
    start = datetime(2025, 1, 6, 9, tzinfo=UTC)
    out = []
    for i in range(n):
        user = f"u{i % USERS:02d}"
        at = start + timedelta(hours=7 * i + rng.randint(0, 5))
        o, j, c = rng.choice(PEOPLE), rng.choice(PROJECTS), rng.choice(CITIES)
        roll = rng.random()
        line: dict[str, Any] = {"scope": f"user:{user}", "agent_id": "planner", "source_ref": f"crm:{i}"}
        if roll < 0.45:
            attribute, template, values = rng.choice(FACTS)
            person = rng.choice(PEOPLE)
            content = template.format(p=person, x=rng.choice(values))
            line |= {
                "type": "semantic", "content": content, "attribute": attribute,
                "source_kind": "user_statement", "evidence": content.rstrip("."),
                "entities": [{"kind": "person", "name": person, "role": "about"}],
            }  # fmt: skip
        elif roll < 0.9:
            what = rng.choice(EVENTS).format(o=o, j=j, c=c, n=rng.randint(1, 9), m=rng.randint(0, 20))
            line |= {
                "type": "episodic", "content": f"On {at:%A %d %B %Y} the user {what}.",
                "source_kind": "tool_result", "tags": ["calendar"],
                "entities": [{"kind": "project", "name": j, "role": "mentions"}],
            }  # fmt: skip
        else:
            attribute, template = rng.choice(PROCEDURES)
            content = template.format(j=j, o=o, n=rng.randint(1, 9), m=rng.randint(0, 20))
            line |= {
                "type": "procedural", "content": content, "attribute": f"{attribute}_{j.lower()}",
                "source_kind": "system",
                "entities": [{"kind": "project", "name": j, "role": "about"}],
            }  # fmt: skip
        line["event_at"] = at.isoformat()
        out.append(line)
    return out


def retold(*args: str | Path, timeout: float = 900) -> tuple[subprocess.CompletedProcess[str], float]:
    started = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "retold", *map(str, args)], capture_output=True, text=True, timeout=timeout
    )
    return proc, time.perf_counter() - started


def timed_import(file: Path, store: Path, *extra: str) -> dict[str, Any]:
    proc, wall = retold("import", file, "--store", store, "--json", *extra)
    if proc.returncode != 0:
        raise SystemExit(
            f"retold import failed ({proc.returncode}): {proc.stdout[-2000:]} {proc.stderr[-2000:]}"
        )
    report = json.loads(proc.stdout)
    return {
        "wall_s": round(wall, 2), "elapsed_s": report["elapsed_s"], "outcomes": report["outcomes"],
        "records": report["records"], "batches": report["batches"], "skipped": len(report["skipped"]),
    }  # fmt: skip


def run(n: int, folder: Path) -> dict[str, Any]:
    file = folder / "memories.jsonl"
    file.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records(n)), encoding="utf-8")
    first, second = folder / "first.sqlite", folder / "second.sqlite"
    for store in (first, second):
        proc, _ = retold("migrate", "--store", store)
        if proc.returncode != 0:
            raise SystemExit(f"retold migrate failed: {proc.stderr}")
    report: dict[str, Any] = {"records": n, "users": USERS, **machine()}
    report["import"] = timed_import(file, first)
    done = report["import"]
    print(f"import of {n:,} records: {done['wall_s']:.1f} s wall ({done['elapsed_s']:.1f} s in the command), "
          f"{done['outcomes']}")  # fmt: skip
    report["again"] = timed_import(file, first)
    print(f"the same file again: {report['again']['wall_s']:.1f} s, {report['again']['outcomes']}")
    exported = folder / "export.jsonl"
    proc, wall = retold("export", "--store", first, "-o", exported, "--json")
    if proc.returncode != 0:
        raise SystemExit(f"retold export failed: {proc.stderr}")
    report["export"] = {"wall_s": round(wall, 2), "records": json.loads(proc.stdout)["records"]}
    report["round_trip"] = timed_import(exported, second)
    print(f"export: {report['export']['records']:,} records in {wall:.1f} s; imported into a fresh store in "
          f"{report['round_trip']['wall_s']:.1f} s, {report['round_trip']['outcomes']}")  # fmt: skip
    return report


TARGETS = [
    Target(
        "import of 2,000 records, whole command",
        lambda r: r["import"]["wall_s"] if r["records"] >= 2000 else None,
        TARGET_S,
        "<",
        "s",
    ),
    Target("the same file again writes nothing", lambda r: float(r["again"]["records"]), 0, "<=", "records"),
]


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--records", type=int, default=2000)
    parser.add_argument("--json", type=Path, default=None, help="Write the report here.")
    parser.add_argument("--keep", type=Path, default=None, help="Keep the files in this folder.")
    args = parser.parse_args()
    if args.keep is not None:
        args.keep.mkdir(parents=True, exist_ok=True)
        report = run(args.records, args.keep)
    else:
        with tempfile.TemporaryDirectory() as folder:
            report = run(args.records, Path(folder))
    if args.json is not None:
        args.json.write_text(json.dumps(report, indent=2) + "\n")
    sys.exit(check_targets(TARGETS, report))


if __name__ == "__main__":
    main()
