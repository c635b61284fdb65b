"""The session buffer and its hooks (spec §12): the transcript evidence is checked against.

Adapters call :class:`SessionHooks` as a conversation unfolds. Turns are numbered
from 1 in arrival order; tool turns carry the tool's result text. A framework that
cannot say when a session ends relies on the idle split: a turn arriving after
``ingestion.session_idle_timeout_minutes`` of silence ends the idle session and
continues under ``<session_id>~2`` (``~3``, ...). ``on_turn`` returns the principal to
keep using, whose ``session_id`` names the continuation.

Sessions belong to their principal: the store keys them by (agent, user, session id), so
a session id another principal chose (``t1`` or ``t1~7``) never joins this one's chain,
transcript or evidence.

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
from retold.models import MAX_ID_CHARS, Principal, SessionInfo, SessionKey, Turn
from retold.store import Store
from retold.store.database import run_to_completion
from retold.util import Clock, clean_text

__all__ = ["MAX_TURN_CHARS", "SessionEndCallback", "SessionHooks", "base_session_id", "split_session_id"]

MAX_TURN_CHARS = 200_000
"""A turn's text is kept up to this many characters (about 50K tokens; the rest is dropped):
evidence validation reads the transcript, so an unbounded turn would make every later write
in the session slow."""

SessionEndCallback = Callable[[SessionInfo], Awaitable[None]]
"""Called once for every session that ends (explicitly or by the idle split): the seam
where session extraction is scheduled."""

_ROLES = ("user", "assistant", "tool")


def base_session_id(session_id: str) -> str:
    """``s1~3`` → ``s1``: the id the adapter supplied before any idle split.

    A base that could not itself be a session id (blank, as in `` ~7``) means the id is
    not a split: it is its own base, so the chain lookup never builds an invalid key.
    """
    base, sep, suffix = session_id.rpartition("~")
    return base if sep and base.strip() and _split_suffix(suffix) else session_id


def _split_suffix(suffix: str) -> bool:
    """``2``, ``3``, ...: what an idle split appends (ASCII digits, no leading zero, at least 2)."""
    return suffix.isascii() and suffix.isdigit() and str(int(suffix)) == suffix and int(suffix) >= 2


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
            idle = await self._close_idle(principal)
            async with self._store.transaction():
                return await self._start(principal, idle)

    async def _close_idle(self, principal: Principal) -> bool:
        """End the principal's live session when it went idle; True when it did.

        The end commits (and schedules extraction) on its own: the session was idle whatever
        happens to the turn that noticed it. What follows — the continuation, its
        ``session.split`` event and the turn — is one transaction.
        """
        existing = await self._store.get_session(_require_session(principal))
        if existing is None:
            return False
        chain = await self._store.session_chain(existing.key.with_session(base_session_id(existing.id)))
        latest = chain[-1] if chain else existing
        if latest.ended_at is not None:
            return False
        last = await self._store.last_activity(latest.key)
        if last is None or self._clock.now() - last <= self._idle:
            return False
        return await self._end(latest, last)

    async def _start(self, principal: Principal, idle: bool = False) -> Principal:
        key = _require_session(principal)
        session_id = key.session_id
        existing = await self._store.get_session(key)
        if existing is None and len(session_id) > MAX_ID_CHARS:
            raise InvalidArgumentError(
                f"session_id is {len(session_id)} characters long; a new session's id is at most "
                f"{MAX_ID_CHARS} (idle-split continuations may grow past it)"
            )
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
        return await self._current(principal, existing, "idle" if idle else "ended")

    async def on_turn(self, principal: Principal, role: str, content: str) -> Principal:
        """Append one turn and return the principal to keep using (its session may have split)."""
        if role not in _ROLES:
            shown = ascii(role)[:40]
            raise InvalidArgumentError(f"turn role must be one of {', '.join(_ROLES)}, got {shown}")
        if not isinstance(content, str):
            raise InvalidArgumentError(f"turn content must be text, got {type(content).__name__}")
        # A turn is kept, not refused: a lone surrogate (which no UTF-8 encoder accepts) becomes
        # U+FFFD and stray control characters go, so a broken client cannot lose the user's words.
        content = clean_text(content[:MAX_TURN_CHARS])
        async with self._lock:
            idle = await self._close_idle(principal)
            async with self._store.transaction():  # the continuation (if any) and the turn, or neither
                principal = await self._start(principal, idle)
                await self._store.append_turn(SessionKey.of(principal), role, content, self._clock.now())
        return principal

    async def on_session_end(self, principal: Principal) -> bool:
        """End the principal's current session; False (and nothing scheduled) if already ended."""
        key = _require_session(principal)
        async with self._lock:
            chain = await self._store.session_chain(key.with_session(base_session_id(key.session_id)))
            if not chain:
                return False
            open_sessions = [s for s in chain if s.ended_at is None]
            if not open_sessions:
                return False
            return await self._end(open_sessions[-1], self._clock.now())

    async def turns(self, principal: Principal) -> list[Turn]:
        """The transcript of the principal's session (only ever its own)."""
        return await self._store.turns(_require_session(principal))

    async def _end(self, session: SessionInfo, at: datetime) -> bool:
        """End the session and notify ``on_end`` as one step, even if the caller is cancelled.

        Once the end commits, ending again changes nothing and notifies no one, so a
        notification lost to a cancellation would leave the session never extracted. Inside
        a caller's transaction the end commits or rolls back with it, so it runs inline.
        """
        if self._store.db.in_transaction:
            return await self._end_and_notify(session, at)
        return await run_to_completion(self._end_and_notify(session, at))

    async def _end_and_notify(self, session: SessionInfo, at: datetime) -> bool:
        if not await self._store.end_session(session.key, at):
            return False
        ended = await self._store.get_session(session.key)
        assert ended is not None
        await self.on_end(ended)
        return True

    async def _current(self, principal: Principal, session: SessionInfo, reason: str) -> Principal:
        """The live session of the principal's chain, splitting off a continuation when it ended.

        The latest session of the chain is used even when the adapter kept an older id,
        so a caller that ignores the returned principal still never forks the chain. An idle
        session was ended just before (:meth:`_close_idle`); ``reason`` says which it was.
        """
        chain = await self._store.session_chain(session.key.with_session(base_session_id(session.id)))
        latest = chain[-1] if chain else session
        now = self._clock.now()
        if latest.ended_at is None:
            return dataclasses.replace(principal, session_id=latest.id)
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
                payload={
                    "from": latest.id,
                    "to": successor,
                    "reason": reason,
                    "agent_id": principal.agent_id,
                    "user_id": principal.user_id,
                },
            )
        return dataclasses.replace(principal, session_id=successor)


def _require_session(principal: Principal) -> SessionKey:
    if not isinstance(principal, Principal):
        raise InvalidArgumentError(f"expected a retold.Principal, got {type(principal).__name__}")
    return SessionKey.of(principal)
