"""Nothing the runtime is built from imports the runtime back (issue: an import circle of eight files).

Every import counts, ``TYPE_CHECKING`` and function-level ones included: stages receive the
services they use (``SearchServices``, ``ExtractionServices``, ``ToolServices``), so each is
importable and testable without :mod:`retold.runtime`.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2] / "retold"


def _module(path: Path) -> str:
    parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _graph() -> dict[str, set[str]]:
    modules = {_module(p): p for p in ROOT.rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        found: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                found.update(a.name for a in node.names)
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join([*parts, base] if base else parts)
                found.add(base)
                found.update(f"{base}.{a.name}" for a in node.names)
        graph[name] = {m for m in found if m in modules and m != name}
    return graph


def _reachable(graph: dict[str, set[str]], start: str) -> set[str]:
    seen: set[str] = set()
    stack = [start]
    while stack:
        for nxt in graph[stack.pop()]:
            if nxt not in seen:
                seen.add(nxt)
                stack.append(nxt)
    return seen


def test_nothing_the_runtime_imports_imports_the_runtime() -> None:
    graph = _graph()
    assert "retold.runtime" in graph and "retold.retrieve.retriever" in graph  # the walk found the package
    below = _reachable(graph, "retold.runtime")
    circle = sorted(m for m in below if "retold.runtime" in _reachable(graph, m))
    assert circle == []


def test_the_stages_and_graphs_do_not_import_the_runtime() -> None:
    graph = _graph()
    for name in (
        "retold.retrieve.retriever",
        "retold.graph_nodes.search",
        "retold.graph_nodes.extraction",
        "retold.ingest.extraction.stages",
        "retold.ingest.extraction.candidates",
        "retold.ingest.extraction.run",
        "retold.tools.handlers",
    ):
        assert "retold.runtime" not in _reachable(graph, name), name
