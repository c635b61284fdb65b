"""The README's Python example runs as written (real embedder, real file)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

ROOT = Path(__file__).parents[2]


async def test_readme_example_runs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = re.search(r"```python\n(.*?)```", (ROOT / "README.md").read_text(), re.S)
    assert code is not None
    lines = code.group(1).replace('"memory.sqlite"', repr(str(tmp_path / "m.sqlite"))).splitlines()
    imports = [line for line in lines if line.startswith(("import ", "from "))]
    body = [f"    {line}" for line in lines if not line.startswith(("import ", "from "))]
    namespace: dict[str, object] = {}
    exec("\n".join([*imports, "async def example():", *body]), namespace)
    await namespace["example"]()  # type: ignore[operator]
    out = capsys.readouterr().out
    assert "memory_search: 1 result" in out and "Aditya prefers concise answers." in out
