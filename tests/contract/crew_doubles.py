"""What the CrewAI contract tests share: an offline guard and a scripted CrewAI model."""

from __future__ import annotations

import json
import socket
from pathlib import Path
from typing import Any

import pytest
from crewai.llms.base_llm import BaseLLM
from pydantic import Field


def keep_crewai_offline(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """CrewAI writes under $HOME/.local/share: keep it in the test's directory; refuse the network."""
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_DATA_HOME", str(home / ".local" / "share"))
    real_connect = socket.socket.connect

    def connect(sock: socket.socket, address: Any) -> None:
        if sock.family != socket.AF_UNIX:
            raise AssertionError(f"a CrewAI test tried to reach the network: {address!r}")
        real_connect(sock, address)

    monkeypatch.setattr(socket.socket, "connect", connect)


class ScriptedLLM(BaseLLM):
    """Returns its replies in order (ReAct text, or OpenAI-style tool calls when ``native``)."""

    replies: list[Any] = Field(default_factory=list)
    native: bool = False
    seen: list[list[dict[str, Any]]] = Field(default_factory=list)

    def supports_function_calling(self) -> bool:
        return self.native

    def call(self, messages: Any, tools: Any = None, callbacks: Any = None, available_functions: Any = None,
             from_task: Any = None, from_agent: Any = None, response_model: Any = None) -> Any:  # fmt: skip
        self.seen.append([dict(m) for m in messages] if isinstance(messages, list) else [messages])
        assert self.replies, "the scripted model ran out of replies"
        reply = self.replies.pop(0)
        return [reply] if isinstance(reply, dict) else reply

    async def acall(self, messages: Any, *args: Any, **kwargs: Any) -> Any:
        return self.call(messages, *args, **kwargs)


def react_action(tool: str, args: dict[str, Any]) -> str:
    return f"Thought: I should use {tool}.\nAction: {tool}\nAction Input: {json.dumps(args)}"


def react_final(text: str) -> str:
    return f"Thought: I know the answer.\nFinal Answer: {text}"
