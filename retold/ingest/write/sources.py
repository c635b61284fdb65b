"""Who supports a record: a source's owner-qualified identity and the row that keeps it.

Session ids are the adapter's, so ``session:t1<turn:3>`` alone does not say whose turn
it was. A source's *origin* adds the owner — ``<agent>/<user>/<source_ref>`` — and is
what independence (§6.4: a repeat of one source is not a reinforcement), the
identical-evidence shortcut and the one-live-summary rule compare. Agent and user ids
never contain ``/`` (and are never empty), so the first two slashes delimit them and no
two owners' origins can collide.
"""

from __future__ import annotations

from retold.models import Principal, Record, RecordSource

__all__ = ["source_for", "source_origin", "source_user"]


def source_origin(agent_id: str, user_id: str | None, session_id: str | None, source_ref: str | None) -> str:
    """``<agent>/<user>/<ref>``; a source without a reference is its session (or nothing)."""
    owner = f"{agent_id}/{user_id or ''}"
    if source_ref:
        return f"{owner}/{source_ref}"
    if session_id:
        return f"{owner}/session:{session_id}"
    return f"{owner}/-"


def source_user(principal: Principal, *, trusted: bool) -> str | None:
    """Whose words a write carries: the session's user, or an untrusted caller's; never the host's."""
    return principal.user_id if principal.session_id is not None or not trusted else None


def source_for(record: Record, principal: Principal, *, trusted: bool) -> RecordSource:
    """The source a write by ``principal`` contributes to ``record`` (a new one or its target).

    A write made in a session belongs to that session's user; so does an untrusted write
    without one (an agent acting for the user). The host's own writes belong to no user.
    """
    session_id = principal.session_id
    user_id = source_user(principal, trusted=trusted)
    return RecordSource(
        record_id=record.id,
        origin=source_origin(principal.agent_id, user_id, session_id, record.source_ref),
        source_kind=record.source_kind,
        source_ref=record.source_ref,
        agent_id=principal.agent_id,
        user_id=user_id,
        session_id=session_id,
        evidence=record.evidence,
        content=record.content,
        added_at=record.created_at,
        counted=record.source_ref is not None,
    )
