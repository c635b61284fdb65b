"""Screenshots of `retold ui`'s main pages for the docs: docs/screenshots/*.png.

    .venv/bin/python scripts/ui_screenshots.py [--out docs/screenshots]

Builds the quickstart store (``make demo``'s story, packaged embedder, offline), serves it
with ``retold ui`` and photographs the pages with headless Chromium, using the browser
test's own set-up (tests/ui_harness.py).
"""

from __future__ import annotations

import argparse
import re
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.ui_harness import UiServer, chromium, demo_store  # noqa: E402

QUERIES = (
    "how detailed should answers be", "Aditya's timezone", "what language does Aditya use at work",
    "night shifts", "answer style with examples", "staging database password", "concise answers",
    "where does Aditya work", "examples in answers", "Rust",
)  # fmt: skip

WIDTH = 1280
MAX_HEIGHT = 2000


def shoot(driver, url: str, out: Path) -> None:  # type: ignore[no-untyped-def]
    """The page at ``url``, as tall as its content (up to MAX_HEIGHT), saved to ``out``."""
    driver.set_window_size(WIDTH, 900)
    driver.get(url)
    height = min(MAX_HEIGHT, int(driver.execute_script("return document.documentElement.scrollHeight")))
    driver.set_window_size(WIDTH, max(600, height))
    driver.save_screenshot(str(out))
    print(f"{out.relative_to(ROOT) if out.is_relative_to(ROOT) else out}: {out.stat().st_size // 1024} KB")


def more_searches(store: Path) -> None:
    """A few more logged searches, so the plots have columns to draw."""
    import asyncio

    import retold
    from retold import Principal, SearchRequest

    async def run() -> None:
        async with retold.open_runtime(store) as rt:
            p = Principal(agent_id="planner", user_id="u1", session_id="s2")
            for query in QUERIES:
                await rt.search(p, SearchRequest(queries=[query]))

    asyncio.run(run())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "screenshots")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        store = Path(tmp) / "memory.sqlite"
        demo_store(store)
        more_searches(store)
        with UiServer(store) as server:
            driver = chromium(Path(tmp) / "profile")
            try:
                base = server.url.rstrip("/")
                shoot(driver, base + "/", args.out / "home.png")
                driver.get(base + "/searches")
                searches = re.findall(r'href="(/searches/[^"?]+)"', driver.page_source)
                # The search that finds the changed preference: its stage view shows every stage at work.
                answered = next(
                    (s for s in searches if "how detailed" in _page(driver, base + s)), searches[0]
                )
                shoot(driver, base + answered, args.out / "search.png")
                driver.get(base + answered)
                record = re.search(r'href="(/records/[^"?]+)"', driver.page_source)
                assert record is not None, "the search view links no record"
                shoot(driver, base + record.group(1), args.out / "record.png")
                shoot(driver, base + "/plots", args.out / "plots.png")
            finally:
                driver.quit()


def _page(driver, url: str) -> str:  # type: ignore[no-untyped-def]
    driver.get(url)
    return str(driver.page_source)


if __name__ == "__main__":
    main()
