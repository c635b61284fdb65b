"""retold's main job in one short story, offline: ``make demo``, ``retold demo``.

A planning agent works for Aditya. It saves what he says through the memory tools,
with his words as evidence; retold keeps a guess provisional, downgrades a claim that
quotes the assistant, supersedes a changed preference instead of overwriting it, and
turns a weaker contradiction into a visible conflict. Then the agent searches: one
result with its explanation, and one honest "nothing relevant" with the reason. Last,
memory_get shows the lineage, and memory_forget retires the user's timezone, the stated one and
the agent's unverified guess alike, naming each (it does not erase them).
Everything runs on a fresh SQLite file with the packaged embedder; nothing leaves the machine.
"""

from __future__ import annotations

import asyncio
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.panel import Panel
from rich.text import Text

import retold
from retold import Principal, Scope
from retold.policy.prompt import POLICY_VERSION
from retold.retrieve.render import short_id

os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")  # keep the story free of load bars
console = Console(highlight=False, width=110)


def show(title: str, result: dict[str, Any]) -> None:
    """One line per tool call: what happened and why."""
    if not result["ok"]:
        console.print(f"  [red]{title}: {result['error']}[/] - {result['message']}")
        return
    note = f"  [dim]({result['note']})[/]" if result.get("note") else ""
    outcome = result.get("outcome") or result.get("action") or "ok"
    kind, _, target = outcome.partition(":")
    outcome = f"{kind}:{short_id(target)}" if target else kind  # the short id, as results show it
    console.print(f"  [green]{title}[/] -> [bold]{outcome}[/], {result.get('status')}{note}")


def panel(result: dict[str, Any], title: str) -> None:
    """A search exactly as the model sees it (Text: ids in brackets are not markup)."""
    console.print(Panel(Text(result["rendered"]), title=title, expand=False))


async def story(path: Path) -> dict[str, dict[str, Any]]:
    """The whole job on a new store at ``path``; returns every tool result it printed."""
    out: dict[str, dict[str, Any]] = {}
    async with retold.open_runtime(path) as rt:
        console.print(f"[bold]retold[/] on {path} - loading the packaged embedder (offline)...")
        await rt.warm()

        # 1. The host provisions the user and decides what the agent may touch.
        await rt.host.provision_user("u1", aliases=["Aditya"])
        await rt.host.grant("planner", Scope("user", "u1"), read=True, write=True)
        p = await rt.hooks.on_session_start(Principal(agent_id="planner", user_id="u1", session_id="s1"))
        console.print(f"tools offered: {', '.join(s['name'] for s in await rt.tools.atool_schemas(p))}")

        async def turn(role: str, text: str) -> None:
            nonlocal p
            p = await rt.hooks.on_turn(p, role, text)  # keep the returned principal
            console.print(f"[cyan]{role:>9}[/]: {text}")

        async def write(name: str, content: str, attribute: str, quote: str | None = None, **kw: Any) -> None:
            payload = {"type": "semantic", "content": content, "attribute": attribute, **kw}
            if quote:
                payload |= {"source_kind": "user_statement", "evidence": quote}
            out[name] = await rt.tools.call(p, "memory_write", payload)
            show(f"memory_write {content!r}", out[name])

        # 2. A short session; the agent saves what matters, quoting the user.
        await turn("user", "Hi! I prefer concise answers, and my timezone is CET.")
        await write("concise", "Aditya prefers concise answers.", "answer_style", "I prefer concise answers")
        await write("cet", "Aditya's timezone is CET.", "timezone", "my timezone is CET")
        await write("guess", "Aditya works night shifts.", "work_hours")  # no evidence: a guess
        await turn("assistant", "Noted. You mentioned you use Rust at work, right?")
        await write("rust", "Aditya uses Rust at work.", "work_language", "you use Rust at work")
        await turn("user", "Actually, I now prefer detailed answers with examples.")
        await write("detailed", "Aditya prefers detailed answers with examples.", "answer_style",
                    "I now prefer detailed answers with examples")  # fmt: skip
        await write("pst", "Aditya's timezone is PST.", "timezone", source_kind="agent_inference")
        await rt.hooks.on_session_end(p)

        # 3. Later: the agent searches before acting, and may honestly find nothing.
        out["found"] = await rt.tools.call(
            p, "memory_search", {"queries": ["how detailed should answers to Aditya be"]}
        )
        panel(out["found"], "memory_search - what the model sees")
        out["empty"] = await rt.tools.call(
            p, "memory_search", {"queries": ["password of the staging database"]}
        )
        panel(out["empty"], "memory_search - nothing relevant")

        # 4. Why does the agent believe this? memory_get shows the evidence and the lineage.
        out["got"] = await rt.tools.call(p, "memory_get", {"ids": [out["found"]["results"][0]["short_id"]]})
        record = out["got"]["records"][0]
        console.print(f"memory_get {record['short_id']}: {record['content']!r} from {record['evidence']!r}")
        for old in record["supersedes"]:
            console.print(f"  replaced {old['short_id']} ({old['status']}): {old['content']!r}")

        # 5. The user asks to forget their timezone. The agent looks up what memory holds about it:
        # the CET they stated and the agent's own unverified PST guess, shown as a conflict. It
        # forgets both, so no unverified guess is left to answer the question in their place.
        await turn("user", "Please forget my timezone.")
        out["held"] = await rt.tools.call(p, "memory_search", {"queries": ["Aditya's timezone"]})
        panel(out["held"], "memory_search - before forgetting")
        forgotten: list[dict[str, Any]] = []
        for held in out["held"]["results"]:
            if "timezone" not in held["content"]:
                continue  # only what the user asked to forget
            forgot = await rt.tools.call(p, "memory_forget", {"id": held["short_id"], "reason": "user asked"})
            forgotten.append({**forgot, "short_id": held["short_id"], "content": held["content"]})
            console.print(
                escape(f"memory_forget [{held['short_id']}] {held['content']!r} ({held['status']}, ")
                + escape(f"{held['source_kind']}) -> tombstone {forgot['tombstone']}")
            )
        out["forgot"] = {
            "ok": bool(forgotten) and all(f["ok"] for f in forgotten),
            "tombstone": bool(forgotten) and all(f.get("tombstone") for f in forgotten),
            "note": forgotten[0].get("note") if forgotten else None,
            "records": forgotten,
        }
        console.print(f"  [dim]{escape(str(out['forgot']['note']))}[/]")
        # Forgotten means gone from search: the question now has no answer, not the guess.
        out["after"] = await rt.tools.call(p, "memory_search", {"queries": ["which timezone is Aditya in"]})
        after = out["after"]["results"]
        answered = repr(after[0]["content"]) if after else "no relevant memory"
        console.print(escape(f"memory_search 'which timezone is Aditya in' -> {answered}"))
        console.print(f"[dim]policy text {POLICY_VERSION}; store {path}[/]")
    return out


def main(argv: list[str] | None = None) -> None:
    """Run the story on a fresh store (a temporary one unless a path is given).

    ``--keep-in PATH`` (what ``make demo`` passes) keeps the store at PATH for ``retold ui``
    when no file is there yet; when one is, the story runs on a temporary store and PATH is
    left as it was, so a second ``make demo`` neither fails nor overwrites anything.
    """
    args = sys.argv[1:] if argv is None else argv
    if len(args) == 2 and args[0] == "--keep-in":
        keep = Path(args[1])
        if not keep.exists():
            asyncio.run(story(keep))
            console.print(f"kept the demo store in {keep}: `retold ui --store {keep}` shows it")
            return
        console.print(f"[dim]{keep} already exists and is left as it was; this run uses a temporary store[/]")
        args = []
    if args:
        if Path(args[0]).exists():
            raise SystemExit(f"{args[0]} already exists; the demo needs a new store file")
        asyncio.run(story(Path(args[0])))
        return
    with tempfile.TemporaryDirectory() as tmp:
        asyncio.run(story(Path(tmp) / "memory.sqlite"))


if __name__ == "__main__":
    main()
