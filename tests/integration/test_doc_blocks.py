"""Every Python block of README.md and docs/integrations.md runs as pasted.

A reader pastes a block into a file and runs it, in the order the page gives them, in one
folder (so a later block finds the ``memory.sqlite`` an earlier one made). That is what this
does, with the real packaged embedder and real files. The only line a test changes is one
ending in ``# your model``: it names a hosted model the reader has a key for, and here it
becomes a scripted offline model (a langchain chat model, or a CrewAI LLM in a block that
imports crewai). A block that is not meant to run is not a ``python`` block.
"""

from __future__ import annotations

import re
import runpy
import sys
import types
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.integration

ROOT = Path(__file__).parents[2]
PAGES = ["README.md", "docs/integrations.md"]
YOUR_MODEL = re.compile(r"^(?P<indent>\s*)(?P<name>\w+) = .*# your model\s*$", re.M)
REPLY = "Noted: a vegetarian dinner without mushrooms."


def blocks(page: str) -> list[str]:
    return re.findall(r"^```python\n(.*?)^```", (ROOT / page).read_text(), re.S | re.M)


def offline(code: str) -> str:
    """``code`` with each ``NAME = ...  # your model`` line bound to a scripted model."""
    kind = "crewai_llm" if re.search(r"^from crewai", code, re.M) else "chat_model"
    return YOUR_MODEL.sub(lambda m: f"{m['indent']}from _doc_models import {kind} as {m['name']}", code)


def _doc_models() -> types.ModuleType:
    """The stand-ins a ``# your model`` line becomes, built lazily: a page without framework
    blocks needs neither framework."""
    module = types.ModuleType("_doc_models")

    def __getattr__(name: str) -> Any:
        if name == "chat_model":
            from langchain_core.messages import AIMessage

            from retold.adapters.offline import ScriptedChatModel

            return ScriptedChatModel(responses=[AIMessage(REPLY)])
        if name == "crewai_llm":
            from crewai.llms.base_llm import BaseLLM

            class ScriptedLLM(BaseLLM):
                def call(self, messages: Any, *args: Any, **kwargs: Any) -> str:
                    return f"Thought: I can answer.\nFinal Answer: {REPLY}"

            return ScriptedLLM(model="scripted")
        raise AttributeError(name)

    module.__getattr__ = __getattr__  # type: ignore[method-assign]
    return module


def test_every_page_has_blocks_and_model_lines_are_marked() -> None:
    """The pages hold the blocks this test runs, and a hosted model is only ever named on a
    line marked ``# your model`` (else the block would need a key to run as pasted)."""
    for page in PAGES:
        found = blocks(page)
        assert len(found) >= 5, f"{page}: {len(found)} python blocks"
        for code in found:
            for line in code.splitlines():
                if re.search(r"\"(anthropic|openai)[:/]", line):
                    assert line.rstrip().endswith("# your model"), f"{page}: {line.strip()}"


def test_readme_program_is_short_and_complete() -> None:
    program = blocks("README.md")[0]
    assert "asyncio.run(main())" in program
    assert len([line for line in program.splitlines() if line.strip()]) <= 15


@pytest.mark.parametrize("page", PAGES)
def test_page_blocks_run_as_pasted(
    page: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setitem(sys.modules, "_doc_models", _doc_models())
    # `retold` as a reader's shell finds it: the MCP block starts `retold mcp` by name.
    monkeypatch.setenv("PATH", f"{Path(sys.executable).parent}:{__import__('os').environ['PATH']}")
    outputs = []
    for index, code in enumerate(blocks(page)):
        path = tmp_path / f"block{index}.py"
        path.write_text(offline(code))
        try:
            runpy.run_path(str(path), run_name="__main__")
        except BaseException as error:  # a SystemExit too: the block did not run to its end
            raise AssertionError(f"{page} block {index} failed:\n{code}") from error
        outputs.append(capfd.readouterr().out)
    if page == "README.md":
        first = outputs[0]
        assert "created confirmed" in first and "passed gate on dense" in first, first
        assert "no lexical match" in first, first  # the unrelated question: no result, a reason
        assert all(out.strip() for out in outputs), outputs  # each block shows its result
