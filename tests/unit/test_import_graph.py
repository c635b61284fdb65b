"""The import graph of ``retold/`` and ``benchmarks/`` has no circles and no upward imports (issue 49).

Every import counts, ``TYPE_CHECKING`` and function-level ones included: a lazy import only
moves a circle from import time to call time. ``from package import module`` is an import of
that module (Python runs every parent package's ``__init__`` for any import, so the parent
is not an edge of its own); ``from package import name`` of anything else is an import of the
package. In ``benchmarks/`` a bare ``import sibling`` is the sibling script, as the scripts run
with their own folder on ``sys.path``.

The layers, lowest first, are :data:`LAYERS`; a module may import its own layer and the ones
below it. Stages receive the services they use (``SearchServices``, ``ExtractionServices``,
``ToolServices``), so each is importable and testable without :mod:`retold.runtime`; what two
modules both need lives in the lower one (a backend registry beside the store, the completion
client below the stages that call it, a batch's overlay below the ingestor and the batch).
"""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

LAYERS: tuple[tuple[str, str], ...] = (
    ("foundation", "retold.errors retold.util retold.hosted"),  # errors, clocks and ids, the HTTP client
    ("types", "retold.models retold.config"),
    ("store", "retold.store"),
    ("index", "retold.index"),
    ("completion", "retold.chat_model"),  # the chat-model completer the hosted stages call
    # Peers: the write path, the read path and the rules both apply share their text rules
    # (query terms, the claim lexicon, voice, temporal expressions). Circles among them still fail.
    ("stages", "retold.policy retold.ingest retold.retrieve"),
    ("tools", "retold.tools"),
    ("graphs", "retold.graph_nodes"),  # the compiled search and extraction graphs
    (
        "runtime",
        "retold.runtime retold.chat_stages retold.host retold.operations retold.erasure retold.copying",
    ),
    # retold.interchange is an operation over the host API and the store, but it reads other stores'
    # exports too (LangGraph items through the LangGraph adapter's namespace map and value rules).
    (
        "integrations",
        "retold.adapters retold.middleware retold.sync retold.graph_nodes.nodes retold.ui retold.testing "
        "retold.interchange",
    ),
    # Where a process starts: the package's API, the CLI, and what langgraph.json serves.
    (
        "entry",
        "retold retold.__main__ retold.cli retold.quickstart retold.graph_nodes.studio "
        "retold.adapters.langgraph_store_dev",
    ),
    ("benchmarks", "benchmarks"),
)
"""Lowest first. A name covers that module and every module under it, except the bare root
package ``retold``, which covers only ``retold/__init__.py``; the longest name that covers a
module gives its layer, so a new module sits in its package's layer unless it is named here."""

KNOWN_UPWARD: dict[tuple[str, str], str] = {}
"""Upward imports still to remove, each with why it is there; the list may only shrink."""


def _modules(roots: tuple[str, ...], base: Path) -> dict[str, Path]:
    modules: dict[str, Path] = {}
    for root in roots:
        for path in (base / root).rglob("*.py"):
            parts = list(path.relative_to(base).with_suffix("").parts)
            modules[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return modules


def _graph(roots: tuple[str, ...] = ("retold",), base: Path = REPO) -> dict[str, dict[str, int]]:
    """Each module's imports of the others: imported module -> line of its first import."""
    modules = _modules(roots, base)
    graph: dict[str, dict[str, int]] = {}
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        top = name.partition(".")[0]
        found: dict[str, int] = {}
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                for alias in node.names:
                    targets.append(alias.name)
                    targets.append(f"{top}.{alias.name}")  # a sibling script in benchmarks/
            elif isinstance(node, ast.ImportFrom):
                base_name = node.module or ""
                if node.level:
                    parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base_name = ".".join([*parts, base_name] if base_name else parts)
                elif f"{top}.{base_name}" in modules and base_name not in modules:
                    base_name = f"{top}.{base_name}"  # from sibling import name
                submodules = [f"{base_name}.{a.name}" for a in node.names]
                targets = [m for m in submodules if m in modules]
                if len(targets) < len(submodules):  # a name defined in (or re-exported by) the package
                    targets.append(base_name)
            for target in targets:
                if target in modules and target != name:
                    found.setdefault(target, node.lineno)
        graph[name] = found
    return graph


def _reachable(graph: dict[str, dict[str, int]], start: str) -> set[str]:
    seen: set[str] = set()
    stack = [start]
    while stack:
        for nxt in graph[stack.pop()]:
            if nxt not in seen:
                seen.add(nxt)
                stack.append(nxt)
    return seen


def _circles(graph: dict[str, dict[str, int]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's, iteratively)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    circles: list[list[str]] = []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, successors = work[-1]
            for nxt in successors:
                if nxt not in index:
                    index[nxt] = low[nxt] = len(index)
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(sorted(graph[nxt]))))
                    break
                if nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        circles.append(sorted(component))
    return sorted(circles)


def _describe(graph: dict[str, dict[str, int]], circle: list[str]) -> str:
    members = set(circle)
    edges = [f"{a} -> {b} (line {graph[a][b]})" for a in circle for b in sorted(members & set(graph[a]))]
    return f"circle of {len(circle)}: " + "; ".join(edges)


def _layer(module: str) -> int | None:
    best: tuple[int, int] | None = None
    for rank, (_, names) in enumerate(LAYERS):
        for name in names.split():
            covers = module == name or (name != "retold" and module.startswith(f"{name}."))
            if covers and (best is None or len(name) > best[1]):
                best = (rank, len(name))
    return None if best is None else best[0]


def _upward(graph: dict[str, dict[str, int]]) -> dict[tuple[str, str], str]:
    out = {}
    for module, imports in graph.items():
        for target, line in imports.items():
            low, high = _layer(module), _layer(target)
            if low is not None and high is not None and high > low:
                out[(module, target)] = (
                    f"{module} [{LAYERS[low][0]}] -> {target} [{LAYERS[high][0]}] (line {line})"
                )
    return out


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


def test_there_is_no_import_circle_in_retold_or_the_benchmarks() -> None:
    graph = _graph(("retold", "benchmarks"))
    assert "benchmarks.common" in graph["benchmarks.search_latency"]  # sibling imports are resolved
    circles = _circles(graph)
    assert circles == [], "\n".join(_describe(graph, c) for c in circles)


def test_every_module_has_a_layer() -> None:
    graph = _graph(("retold", "benchmarks"))
    assert sorted(m for m in graph if _layer(m) is None) == []


def test_no_module_imports_a_higher_layer() -> None:
    upward = _upward(_graph(("retold", "benchmarks")))
    new = sorted(line for edge, line in upward.items() if edge not in KNOWN_UPWARD)
    assert new == [], "move what both need into the lower module:\n" + "\n".join(new)
    gone = sorted(f"{a} -> {b}" for a, b in KNOWN_UPWARD if (a, b) not in upward)
    assert gone == [], "no longer imported upward: take it off KNOWN_UPWARD"


def test_the_checks_see_lazy_and_type_checking_imports(tmp_path: Path) -> None:
    # The checks above can fail: a circle closed only inside a function, and one closed only
    # under TYPE_CHECKING, are both found, and so is an upward import.
    package = tmp_path / "retold"
    (package / "store").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "store" / "__init__.py").write_text("")
    (package / "models.py").write_text("def f():\n    from retold.store import base\n")
    (package / "store" / "base.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from retold.store.sub import Sub\n"
    )
    (package / "store" / "sub.py").write_text("from retold.store.base import Base\nimport retold.models\n")
    graph = _graph(("retold",), tmp_path)
    assert _circles(graph) == [["retold.models", "retold.store.base", "retold.store.sub"]]
    assert list(_upward(graph)) == [("retold.models", "retold.store.base")]
