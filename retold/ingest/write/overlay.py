"""What a batch's earlier plans will have done, as the write path must see it for later ones.

:func:`~retold.ingest.write.batch.write_batch` plans every candidate before committing any;
an :class:`Overlay` carries the records the earlier plans create and retire and the entities
they create, so :meth:`Ingestor.plan <retold.ingest.write.ingestor.Ingestor.plan>` decides a
later candidate about the same fact against the earlier one exactly as it would after it
committed. Both of them use it; it imports neither.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from retold.ingest.write.request import Plan
from retold.models import Entity, Record, Scope

if TYPE_CHECKING:
    from retold.store import Store

__all__ = ["Overlay"]


@dataclass
class Overlay:
    """The effects of a batch's earlier plans, as later plans must see them."""

    created: dict[str, tuple[Record, np.ndarray]] = field(default_factory=dict)
    retired: set[str] = field(default_factory=set)
    entities: dict[tuple[str, str, Scope], Entity] = field(default_factory=dict)
    origins: dict[str, str] = field(default_factory=dict)  # record id -> its source's origin

    def add(self, plan: Plan) -> None:
        decision = plan.decision
        if decision.action == "supersede" and decision.target is not None:
            self.retired.update((decision.target.id, *decision.also_superseded))
        if decision.action not in ("reinforce", "superseded_on_arrival"):
            record = plan.record
            if decision.action == "supersede" and decision.target is not None:  # as Persister.commit will
                record = dataclasses.replace(record, version=decision.target.version + 1)
            if decision.adopt_attribute:  # what Persister.commit will store
                record = dataclasses.replace(
                    record,
                    attribute=decision.adopt_attribute,
                    subject=f"{record.subject_entity_id or '-'}/{decision.adopt_attribute}",
                )
            self.created[record.id] = (record, plan.vector)
            if plan.source is not None:
                self.origins[record.id] = plan.source.origin
        for entity, _ in plan.links:
            if entity.aliases:
                self.entities.setdefault((entity.kind, entity.aliases[0], entity.scope), entity)

    def _live(self) -> list[Record]:
        return [r for r, _ in self.created.values() if r.id not in self.retired]

    def with_origin(self, origin: str) -> list[Record]:
        return [r for r in self._live() if self.origins.get(r.id) == origin]

    def about(self, scope: Scope, record_type: str, entity_id: str) -> list[Record]:
        return [
            r
            for r in self._live()
            if r.scope == scope and r.type == record_type and r.subject_entity_id == entity_id
        ]

    def nearby(
        self, scope: Scope, record_type: str, vector: np.ndarray, floor: float, exclude: set[str]
    ) -> list[Record]:
        out = []
        for record in self._live():
            if record.scope != scope or record.type != record_type or record.id in exclude:
                continue
            if float(np.dot(vector, self.created[record.id][1])) >= floor:
                out.append(record)
        return out

    def vector_for(self, record_id: str) -> np.ndarray | None:
        item = self.created.get(record_id)
        return None if item is None else item[1]

    async def share_entities(
        self, store: Store, links: list[tuple[Entity, str]], primary: Entity | None
    ) -> tuple[list[tuple[Entity, str]], Entity | None]:
        """Replace an entity this plan would create by the one an earlier plan creates for the name."""
        shared: list[tuple[Entity, str]] = []
        for entity, role in links:
            if entity.aliases and await store.get_entity(entity.id) is None:
                earlier = self.entities.get((entity.kind, entity.aliases[0], entity.scope))
                if earlier is not None:
                    if primary is not None and primary.id == entity.id:
                        primary = earlier
                    entity = earlier
            if entity.id not in {e.id for e, _ in shared}:
                shared.append((entity, role))
        return shared, primary
