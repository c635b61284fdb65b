"""The session buffer and its hooks (spec §12): the transcript evidence is checked against.

Adapters call :class:`SessionHooks` as a conversation unfolds. Turns are numbered
from 1 in arrival order; tool turns carry the tool's result text. A framework that
cannot say when a session ends relies on the idle split: a turn arriving after
``ingestion.session_idle_timeout_minutes`` of silence ends the idle session and
continues under ``<session_id>~2`` (``~3``, ...). ``on_turn`` returns the principal to
keep using, whose ``session_id`` names the continuation.

    p = await rt.hooks.on_session_start(Principal("planner", "u1", "s1"))
    p = await rt.hooks.on_turn(p, "user", "I prefer concise answers.")
    await rt.hooks.on_session_end(p)
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Awaitable, Callable
from datetime import datetime, timedelta

from retold.config import Config
from retold.errors import InvalidArgumentError
from retold.models import Principal, SessionInfo, Turn
from retold.store import Store
from retold.util import Clock

__all__ = ["SessionEndCallback", "SessionHooks", "base_session_id", "split_session_id"]

SessionEndCallback = Callable[[SessionInfo], Awaitable[None]]
"""Called once for every session that ends (explicitly or by the idle split): the seam
where session extraction is scheduled."""

_ROLES = ("user", "assistant", "tool")


def base_session_id(session_id: str) -> str:
    """``s1~3`` → ``s1``: the id the adapter supplied before any idle split."""
    base, sep, suffix = session_id.rpartition("~")
    return base if sep and suffix.isdigit() and base else session_id


def split_session_id(session_id: str) -> str:
    """The id of the continuation after ``session_id`` goes idle: ``s1`` → ``s1~2`` → ``s1~3``."""
    base = base_session_id(session_id)
    if base == session_id:
        return f"{base}~2"
    return f"{base}~{int(session_id.rpartition('~')[2]) + 1}"


async def _no_extraction(session: SessionInfo) -> None:
    """Default seam: extraction is wired by the runtime once an extractor is configured."""


class SessionHooks:
    """Session start, turn and end for one store; safe to call from concurrent tasks."""

    def __init__(
        self, store: Store, config: Config, clock: Clock, on_end: SessionEndCallback = _no_extraction
    ) -> None:
        self._store = store
        self._config = config
        self._clock = clock
        self.on_end = on_end
        # One process-wide lock: starting, splitting and numbering must not interleave.
        self._lock = asyncio.Lock()

    @property
    def _idle(self) -> timedelta:
        return timedelta(minutes=self._config.ingestion.session_idle_timeout_minutes)

    async def on_session_start(self, principal: Principal) -> Principal:
        """Create the session for this principal (idempotent for the same principal)."""
        async with self._lock:
            return await self._start(principal)

    async def _start(self, principal: Principal) -> Principal:
        session_id = _require_session(principal)
        existing = await self._store.get_session(session_id)
        if existing is None:
            await self._store.insert_session(
                SessionInfo(
                    id=session_id,
                    agent_id=principal.agent_id,
                    user_id=principal.user_id,
                    project_id=principal.project_id,
                    started_at=self._clock.now(),
                    ended_at=None,
                    extraction_started_at=None,
                    extracted_at=None,
                )
            )
            return principal
        _check_owner(existing, principal)
        return await self._current(principal, existing)

    async def on_turn(self, principal: Principal, role: str, content: str) -> Principal:
        """Append one turn and return the principal to keep using (its session may have split)."""
        if role not in _ROLES:
            raise InvalidArgumentError(f"turn role must be one of {', '.join(_ROLES)}, got {role!r}")
        if not isinstance(content, str):
            raise InvalidArgumentError(f"turn content must be text, got {type(content).__name__}")
        async with self._lock:
            principal = await self._start(principal)
            assert principal.session_id is not None
            await self._store.append_turn(principal.session_id, role, content, self._clock.now())
        return principal

    async def on_session_end(self, principal: Principal) -> bool:
        """End the principal's current session; False (and nothing scheduled) if already ended."""
        session_id = _require_session(principal)
        async with self._lock:
            chain = await self._store.session_chain(base_session_id(session_id))
            if not chain:
                return False
            _check_owner(chain[0], principal)
            open_sessions = [s for s in chain if s.ended_at is None]
            if not open_sessions:
                return False
            return await self._end(open_sessions[-1], self._clock.now())

    async def turns(self, session_id: str) -> list[Turn]:
        return await self._store.turns(session_id)

    async def _end(self, session: SessionInfo, at: datetime) -> bool:
        if not await self._store.end_session(session.id, at):
            return False
        ended = await self._store.get_session(session.id)
        assert ended is not None
        await self.on_end(ended)
        return True

    async def _current(self, principal: Principal, session: SessionInfo) -> Principal:
        """The live session of the principal's chain, splitting off a continuation when needed.

        The latest session of the chain is used even when the adapter kept an older id,
        so a caller that ignores the returned principal still never forks the chain.
        """
        chain = await self._store.session_chain(base_session_id(session.id))
        latest = chain[-1] if chain else session
        now = self._clock.now()
        if latest.ended_at is None:
            last = await self._store.last_activity(latest.id)
            if last is None or now - last <= self._idle:
                return dataclasses.replace(principal, session_id=latest.id)
            await self._end(latest, last)
            reason = "idle"
        else:
            reason = "ended"
        successor = split_session_id(latest.id)
        async with self._store.transaction():
            await self._store.insert_session(
                SessionInfo(
                    id=successor,
                    agent_id=principal.agent_id,
                    user_id=principal.user_id,
                    project_id=principal.project_id,
                    started_at=now,
                    ended_at=None,
                    extraction_started_at=None,
                    extracted_at=None,
                )
            )
            await self._store.append_event(
                "session.split",
                principal.agent_id,
                payload={"from": latest.id, "to": successor, "reason": reason},
            )
        return dataclasses.replace(principal, session_id=successor)


def _require_session(principal: Principal) -> str:
    if not isinstance(principal, Principal):
        raise InvalidArgumentError(f"expected a retold.Principal, got {type(principal).__name__}")
    if principal.session_id is None:
        raise InvalidArgumentError("the principal has no session_id; sessions need one (the thread id)")
    return principal.session_id


def _check_owner(session: SessionInfo, principal: Principal) -> None:
    if (session.agent_id, session.user_id) != (principal.agent_id, principal.user_id):
        raise InvalidArgumentError(
            f"session {session.id!r} belongs to a different agent or user; session ids must be unique "
            "per conversation"
        )
