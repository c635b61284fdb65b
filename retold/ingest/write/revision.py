"""Lifecycle changes a caller asks for by id: confirm, expire, forget (spec §11, §6.5).

``supersede`` writes a new record and lives in the ingestor; these three only change a
record's status. Each re-reads the record inside its transaction, so a concurrent
change cannot be overwritten, appends one event with the caller's reason, and tells
the in-memory vector index after the commit.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from retold.errors import InvalidArgumentError, NotFoundError
from retold.index.vector import VectorIndex
from retold.models import Record
from retold.store import Store

__all__ = ["HistoryError", "LifecycleChange", "Reviser"]

Action = Literal["confirm", "expire", "forget"]


class HistoryError(InvalidArgumentError):
    """The record is superseded, expired or deleted: revising it would fork its lineage."""


@dataclass(frozen=True)
class LifecycleChange:
    record_id: str
    action: Action
    previous_status: str
    status: str
    changed: bool  # False when the record already was in the asked-for state


class Reviser:
    """Status changes by id for the memory tools and the host."""

    def __init__(self, store: Store, index: VectorIndex) -> None:
        self._store = store
        self._index = index

    async def confirm(self, record_id: str, *, reason: str, actor: str) -> LifecycleChange:
        """Provisional → confirmed, clearing the provisional expiry with the status.

        A confirmed record that kept its ``expires_at`` would silently leave retrieval on
        that date. Confirming a confirmed record changes nothing.
        """
        return await self._change(record_id, "confirm", reason, actor)

    async def expire(self, record_id: str, *, reason: str, actor: str) -> LifecycleChange:
        """An active record becomes ``expired``: history, found only with include_history."""
        return await self._change(record_id, "expire", reason, actor)

    async def forget(self, record_id: str, *, reason: str, actor: str) -> LifecycleChange:
        """Status ``deleted``: the FTS row goes, the vector dies, a tombstone stays.

        This is not erasure: content and embedding stay in the file until an operator runs
        ``retold erase``. Forgetting history (superseded, expired) is allowed; forgetting a
        forgotten record changes nothing.
        """
        return await self._change(record_id, "forget", reason, actor)

    async def _change(self, record_id: str, action: Action, reason: str, actor: str) -> LifecycleChange:
        async with self._store.transaction():
            record = await self._store.get_record(record_id)
            if record is None:
                raise NotFoundError(f"no record {record_id!r}")
            before = record.status
            fields = _fields_for(action, record)
            if not fields:
                return LifecycleChange(record_id, action, before, before, changed=False)
            version = await self._store.update_record(record_id, **fields)
            after = str(fields.get("status", before))
            payload = {"reason": reason, "action": action, "from": before, "to": after}
            if "expires_at" in fields and record.expires_at is not None:
                payload["expires_at_cleared"] = record.expires_at.isoformat()
            await self._store.append_event(_EVENT[action], actor, record_id=record_id, payload=payload)
        if action == "forget":
            self._index.remove(record_id, version)
        else:
            self._index.touch(record_id, version)
        return LifecycleChange(record_id, action, before, after, changed=True)


_EVENT = {"confirm": "record.confirmed", "expire": "record.expired", "forget": "record.deleted"}


def _fields_for(action: Action, record: Record) -> dict[str, object]:
    """The columns to change; empty when nothing would change. Raises for history."""
    if action == "forget":
        return {} if record.status == "deleted" else {"status": "deleted"}
    if not record.is_active:
        raise HistoryError(
            f"record {record.id} is {record.status}: history cannot be "
            f"{'confirmed' if action == 'confirm' else 'expired'}"
        )
    if action == "expire":
        return {"status": "expired"}
    if record.status == "confirmed":
        return {}  # a confirmed record's expiry (a session summary's TTL) is not provisional
    return {"status": "confirmed", "expires_at": None}
