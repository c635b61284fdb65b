"""The public namespace is what ARCHITECTURE §5 pins, and importing it stays cheap."""

from __future__ import annotations

import json
import subprocess
import sys

import retold

HEAVY = (
    "torch", "sentence_transformers", "crewai", "deepagents", "langchain", "transformers",
    "anthropic", "openai",  # the hosted SDKs load on a hosted model's first call
)  # fmt: skip


def test_import_retold_loads_no_framework_or_model() -> None:
    code = (
        "import json, sys, retold, retold.testing, retold.host, retold.store; "
        f"print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in {HEAVY!r})))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert json.loads(out.stdout) == []


def test_all_is_sorted_and_complete() -> None:
    assert retold.__all__ == sorted(retold.__all__)
    for name in retold.__all__:
        assert hasattr(retold, name), name
    for pinned in ("open_runtime", "Principal", "Scope", "SearchRequest"):
        assert pinned in retold.__all__


def test_search_request_defaults_match_the_pinned_call() -> None:
    request = retold.SearchRequest(queries=["answer style"])
    assert request.k is None and request.trigger == "tool" and request.include_history is False
    principal = retold.Principal(agent_id="planner", user_id="u1", session_id="s1")
    assert principal.project_id is None
