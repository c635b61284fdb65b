"""The ambient profile's scripted conversation, shared by the LangGraph-side and CrewAI contract tests.

The user states a standing preference (ambient), then corrects it (a supersession); the agent
writes each with the user's words as evidence.
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "FRENCH", "FRENCH_QUOTE", "FRENCH_TURN", "GERMAN", "GERMAN_QUOTE", "GERMAN_TURN", "write_args",
]  # fmt: skip

FRENCH_TURN = "Please always answer me in French."
FRENCH_QUOTE = "Please always answer me in French"
FRENCH = "Prefers answers in French"
GERMAN_TURN = "Actually, answer me in German from now on."
GERMAN_QUOTE = "answer me in German from now on"
GERMAN = "Prefers answers in German"


def write_args(content: str, quote: str) -> dict[str, Any]:
    """``memory_write``'s arguments for one of the preferences, quoting the user."""
    return {"type": "semantic", "content": content, "attribute": "answer_language",
            "source_kind": "user_statement", "evidence": quote}  # fmt: skip
