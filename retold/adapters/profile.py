"""The ambient profile in what a model reads (spec §8.2, §14): appended to the system message.

Every surface that builds a model call puts the principal's profile
(:meth:`retold.runtime.Runtime.profile`) after everything already in the system message, so
the host's prompt (and retold's policy text) stay a stable prefix the provider's prompt cache
can keep; the profile itself is byte-identical while the ambient set is unchanged. It is
added to the request of each call, never written into the conversation, so a changed
profile replaces the old one on the next call instead of piling up.

* :func:`prompt_profile`: the block for a prompt; "" when ``activation.profile_in_prompt``
  is off or nothing the principal may read is ambient.
* :func:`with_profile`: a LangChain ``SystemMessage`` with the block appended once.
* :func:`messages_with_profile`: the same for CrewAI's (OpenAI-style) message dicts.

Only langchain-core is imported here.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from langchain_core.messages import SystemMessage

if TYPE_CHECKING:
    from retold.models import Principal
    from retold.runtime import Runtime

__all__ = ["append_text", "messages_with_profile", "prompt_profile", "with_profile"]


async def prompt_profile(rt: Runtime, principal: Principal) -> str:
    """The profile block for ``principal``'s prompt; "" when ``profile_in_prompt`` is off or it is empty."""
    if not rt.config.activation.profile_in_prompt:
        return ""
    return await rt.profile(principal)


def append_text(text: str, block: str) -> str:
    """``text``, a blank line, ``block``; ``block`` alone for empty text; unchanged if it already ends so."""
    if not block or text.endswith(block):
        return text
    return f"{text}\n\n{block}" if text else block


def _blocks_with(content: list[Any], block: str) -> list[Any]:
    last = content[-1] if content else None
    if isinstance(last, Mapping) and last.get("type") == "text" and last.get("text") == block:
        return content
    return [*content, {"type": "text", "text": block}]


def with_profile(system_message: SystemMessage | None, profile: str) -> SystemMessage | None:
    """The system message with ``profile`` appended after its content (a new one for None; "": unchanged)."""
    if not profile:
        return system_message
    if system_message is None:
        return SystemMessage(content=profile)
    content = system_message.content
    if isinstance(content, str):
        updated: Any = append_text(content, profile)
    else:
        updated = _blocks_with(list(content), profile)
    if updated == content:
        return system_message
    return system_message.model_copy(update={"content": updated})


def _role(message: Any) -> Any:
    return message.get("role") if isinstance(message, Mapping) else getattr(message, "role", None)


def messages_with_profile(messages: Any, profile: str) -> Any:
    """CrewAI's messages with ``profile`` at the end of the system message (one is prepended if none).

    A new list with a copied system message: the caller's list, which CrewAI keeps for the
    task's later calls, is not changed, so each call carries the profile of that moment.
    A plain string prompt becomes a system and a user message. ``""`` returns ``messages``.
    """
    if not profile:
        return messages
    if isinstance(messages, str):
        return [{"role": "system", "content": profile}, {"role": "user", "content": messages}]
    out = list(messages)
    for index, message in enumerate(out):
        if _role(message) != "system" or not isinstance(message, Mapping):
            continue
        content = message.get("content")
        if isinstance(content, list):
            out[index] = {**message, "content": _blocks_with(content, profile)}
        else:
            out[index] = {**message, "content": append_text(str(content or ""), profile)}
        return out
    return [{"role": "system", "content": profile}, *out]
