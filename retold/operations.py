"""Operations: the maintenance and inspection surface behind ``retold`` commands (spec §16).

The CLI parses arguments and calls one method here; hosts can call the same
methods through ``rt.ops``. Later issues add expire, retain, erase, reembed and
snapshots to this class.
"""

from __future__ import annotations

from typing import Any

from retold.config import Config
from retold.models import STATUSES, Record, Scope
from retold.store import Store
from retold.util import Clock

__all__ = ["Operations"]


class Operations:
    """Maintenance and inspection over one store."""

    def __init__(self, store: Store, config: Config, clock: Clock) -> None:
        self._store = store
        self._config = config
        self._clock = clock

    async def dump_scope(self, scope: Scope, *, all_statuses: bool = False) -> list[Record]:
        """The records of one scope, active ones only unless ``all_statuses``."""
        if all_statuses:
            return await self._store.records_in_scope(scope, statuses=STATUSES)
        return await self._store.records_in_scope(scope)

    async def record_report(self, record_id: str) -> dict[str, Any]:
        """A record with what an operator needs to understand it: lineage, conflicts, links, events."""
        store = self._store
        record = await store.require_record(record_id)
        return {
            "record": record,
            "supersedes": await store.supersession_chain(record_id),
            "superseded_by": await store.superseded_by(record_id),
            "conflicts": await store.conflicts_for(record_id),
            "links": [{"entity_id": e, "role": role} for e, role in await store.record_links(record_id)],
            "events": await store.events(record_id=record_id),
        }
