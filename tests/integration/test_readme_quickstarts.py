"""The README's per-surface quickstarts run as written (real embedder, real files).

Each ``<!-- readme-snippet: NAME -->`` block is executed; the blocks the README cannot make
self-contained (a CrewAI crew, an MCP client) point at examples that tests run end to end.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

ROOT = Path(__file__).parents[2]
PRELUDE = ["import retold", "from retold import Principal, Scope, SearchRequest"]


def snippet(name: str, store: Path) -> list[str]:
    text = (ROOT / "README.md").read_text()
    found = re.search(rf"<!-- readme-snippet: {name} -->\n```python\n(.*?)```", text, re.S)
    assert found is not None, f"README has no snippet {name!r}"
    lines = found.group(1).replace('"memory.sqlite"', repr(str(store))).splitlines()
    assert len([line for line in lines if line.strip()]) <= 7, "a quickstart stays short"
    return lines


async def test_store_quickstart(tmp_path: Path) -> None:
    lines = snippet("store", tmp_path / "m.sqlite")
    imports = [line for line in lines if line.startswith(("import ", "from "))]
    body = [f"    {line}" for line in lines if not line.startswith(("import ", "from "))]
    namespace: dict[str, object] = {}
    exec("\n".join([*PRELUDE, *imports, "async def example():", *body, "    return hits"]), namespace)
    hits = await namespace["example"]()  # type: ignore[operator]
    assert [h.value["content"] for h in hits] == ["Is vegetarian and avoids mushrooms."]
    assert hits[0].explanation["record_id"] == hits[0].record_id


def test_sync_quickstart(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    lines = snippet("sync", tmp_path / "m.sqlite")
    exec("\n".join([*PRELUDE, *lines]), {})
    assert capsys.readouterr().out.strip().splitlines()[-1] == "Prefers tea."
