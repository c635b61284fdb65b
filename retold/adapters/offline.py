"""Offline stand-ins the LangGraph-side examples share, so each example shows only its own wiring.

    python examples/deepagents_memory.py [store.sqlite]

A real host passes its own chat model (``init_chat_model("anthropic:...")``) where the examples
pass :class:`ScriptedChatModel`, and drops the fake embedder and judge.
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

from langchain_core.language_models.fake_chat_models import FakeMessagesListChatModel

__all__ = ["ScriptedChatModel", "run_example"]


class ScriptedChatModel(FakeMessagesListChatModel):
    """langchain-core's fake that replies ``responses`` in order, able to take tools.

    ``bind_tools`` is accepted and ignored: the replies name the tools they call.
    """

    def bind_tools(self, tools: Any, **kwargs: Any) -> ScriptedChatModel:
        return self


def run_example(main: Callable[[Path], Coroutine[Any, Any, None]], argv: list[str] | None = None) -> None:
    """Run ``main`` on the store named on the command line, else on a temporary one removed after."""
    args = sys.argv[1:] if argv is None else argv
    if args:
        asyncio.run(main(Path(args[0])))
        return
    with tempfile.TemporaryDirectory() as tmp:
        asyncio.run(main(Path(tmp) / "memory.sqlite"))
