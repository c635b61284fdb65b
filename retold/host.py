"""MemoryHost: the host application's administrative surface (spec §6.1, §9.1).

Agents never call this: the host (or an operator through the CLI) decides which
shared scopes an agent may read and write, and which display names refer to a
user. Every change appends an audit event in the same transaction, and every
refusal happens before anything is written.

    await rt.host.provision_user("u1", aliases=["Aditya"])
    await rt.host.grant("planner", Scope("user", "u1"), read=True, write=True)
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Literal

from retold.errors import AliasConflictError, InvalidArgumentError
from retold.ingest.write.ingestor import Ingestor, WriteRequest, WriteResult
from retold.models import Entity, EntityMention, Grant, Principal, Scope, validate_id
from retold.store import Store
from retold.util import Clock, new_id, normalize_alias, normalize_ws

__all__ = ["MemoryHost"]


class MemoryHost:
    """Grants and user provisioning over one store."""

    def __init__(self, store: Store, clock: Clock, ingestor: Ingestor | None = None) -> None:
        self._store = store
        self._clock = clock
        self._ingestor = ingestor

    async def write_system(
        self,
        scope: Scope,
        content: str,
        *,
        type: Literal["semantic", "episodic", "procedural"] = "semantic",
        attribute: str | None = None,
        entities: Sequence[EntityMention] = (),
        source_ref: str | None = None,
        evidence: str | None = None,
        tags: Sequence[str] = (),
        event_at: datetime | None = None,
        actor: str = "admin",
    ) -> WriteResult:
        """Write a host-provided fact with source kind ``system`` (rank 3) into a concrete scope.

        The host vouches for it, so no session evidence is required; it still goes through
        entity resolution, duplicate and supersession rules, and is audited like any write.
        """
        user_id = scope.id if scope.kind == "user" else actor
        principal = Principal(agent_id=actor, user_id=user_id)
        request = WriteRequest(
            type=type, content=content, scope=scope, source_kind="system", attribute=attribute,
            entities=list(entities), source_ref=source_ref, evidence=evidence, tags=list(tags),
            event_at=event_at, trusted=True,
        )  # fmt: skip
        return await self._writer().write(principal, request, actor=actor)

    async def ingest(self, principal: Principal, request: WriteRequest) -> WriteResult:
        """A write into a concrete scope for a principal (extraction, bulk import).

        Permission and evidence are checked as for a tool write unless ``request.trusted``.
        """
        return await self._writer().write(principal, request)

    async def ingest_many(
        self, principal: Principal, requests: Sequence[WriteRequest], *, actor: str | None = None
    ) -> list[WriteResult]:
        """Several writes for one principal committed as one unit: an import (a transcript, a history).

        Each request is decided exactly as :meth:`ingest` would decide it, later ones against
        the earlier ones (a repeated fact reinforces, a newer one supersedes), and all commit in
        one transaction instead of one each. One result per request, in order: a refused
        request keeps its structured error and writes nothing while the others commit; if the
        store changes under the batch twice, or an item is not a :class:`WriteRequest`,
        nothing is written and every result says why. Keep batches to a few hundred requests:
        the write lock is held while they commit.
        """
        from retold.ingest.write.batch import BatchError, write_batch
        from retold.ingest.write.request import fail

        items = list(requests)
        if not items:
            return []
        wrong = next((i for i, item in enumerate(items) if not isinstance(item, WriteRequest)), None)
        if wrong is not None:
            refused = fail(
                "invalid_input", f"request {wrong} is not a retold WriteRequest: nothing was written"
            )
            return [refused.result for _ in items]
        try:
            results, _ = await write_batch(
                self._writer(), self._store, principal, items, actor=actor or principal.agent_id
            )
        except BatchError as exc:  # the store changed under the batch twice: nothing was written
            return [exc.result for _ in items]
        return results

    def _writer(self) -> Ingestor:
        if self._ingestor is None:
            raise RuntimeError("this MemoryHost has no ingestor; use the one on a Runtime (rt.host)")
        return self._ingestor

    async def grant(
        self, agent_id: str, scope: Scope, *, read: bool = True, write: bool = False, actor: str = "admin"
    ) -> Grant:
        """Create or update the agent's grant on a shared scope; append ``grant.changed``.

        Refuses private ``agent:<a>/<u>`` scopes (they are implicit and never granted)
        and user ids containing ``/``.
        """
        _check_grant_target(agent_id, scope)
        if not (read or write):
            raise InvalidArgumentError(
                f"a grant with neither read nor write gives nothing; use revoke to remove {agent_id}'s "
                f"access to {scope}"
            )
        grant = Grant(agent_id=agent_id, scope=scope, can_read=read, can_write=write)
        async with self._store.transaction():
            before = await self._store.set_grant(grant)
            await self._store.append_event(
                "grant.changed",
                actor,
                payload={
                    "agent_id": agent_id,
                    "scope": str(scope),
                    "before": _grant_payload(before),
                    "after": _grant_payload(grant),
                },
            )
        return grant

    async def revoke(self, agent_id: str, scope: Scope, *, actor: str = "admin") -> bool:
        """Remove the grant; return False (and write nothing) when there was none.

        Unlike :meth:`grant` it accepts a private ``agent:<a>/<u>`` scope, so a legacy or
        direct-store grant on one can still be removed.
        """
        validate_id("agent_id", agent_id)
        if not isinstance(scope, Scope):
            raise InvalidArgumentError(f"scope must be a retold.Scope, got {scope!r}")
        async with self._store.transaction():
            before = await self._store.delete_grant(agent_id, scope)
            if before is None:
                return False
            await self._store.append_event(
                "grant.changed",
                actor,
                payload={
                    "agent_id": agent_id,
                    "scope": str(scope),
                    "before": _grant_payload(before),
                    "after": None,
                },
            )
        return True

    async def grants(self, agent_id: str) -> list[Grant]:
        return await self._store.grants_for(agent_id)

    async def provision_user(
        self, user_id: str, aliases: Sequence[str] = (), *, actor: str = "admin"
    ) -> Entity:
        """Create the user's person entity if absent and attach the names people use for them.

        The principal entity lives in ``user:<user_id>`` with ``normalize_alias(user_id)``
        as its first alias, so a subject-less write and an ``about`` mention of "Aditya"
        land on one entity instead of two (spec §9.1). An alias that already names a
        different person in the scope is refused, and nothing is written.
        """
        validate_id("user_id", user_id)
        if isinstance(aliases, str):
            raise InvalidArgumentError("aliases must be a list of names, not one string")
        scope = Scope("user", user_id)
        names = [normalize_ws(a) for a in aliases if isinstance(a, str)]
        if len(names) != len(aliases) or any(not normalize_alias(n) for n in names):
            raise InvalidArgumentError(f"every alias must be a non-blank string, got {list(aliases)!r}")
        principal_alias = normalize_alias(user_id)
        wanted = list(dict.fromkeys([principal_alias, *(normalize_alias(n) for n in names)]))

        async with self._store.transaction():
            owners = await self._store.entities_by_alias(principal_alias, scopes=[scope], kinds=["person"])
            if len(owners) > 1:
                raise AliasConflictError(
                    f"user {user_id!r} already has {len(owners)} person entities carrying its id "
                    f"({', '.join(e.id for e in owners)}); merge them before provisioning"
                )
            entity = owners[0] if owners else None
            for alias in wanted:
                holders = await self._store.entities_by_alias(alias, scopes=[scope], kinds=["person"])
                other = [h for h in holders if entity is None or h.id != entity.id]
                if other:
                    raise AliasConflictError(
                        f"alias {alias!r} already names a different person entity ({other[0].id}, "
                        f"{other[0].canonical!r}) in {scope}; nothing was written"
                    )
            created = entity is None
            if entity is None:
                entity = Entity(
                    id=new_id(),
                    kind="person",
                    canonical=names[0] if names else user_id,
                    scope=scope,
                    status="confirmed",
                    merged_into=None,
                    aliases=wanted,
                    created_at=self._clock.now(),
                )
                await self._store.insert_entity(entity)
                await self._store.append_event(
                    "entity.created",
                    actor,
                    entity_id=entity.id,
                    payload={"kind": "person", "canonical": entity.canonical, "scope": str(scope)},
                )
                added = wanted
            else:
                added = await self._store.add_aliases(entity.id, wanted)
                entity = await self._store.require_entity(entity.id)
            await self._store.append_event(
                "principal.provisioned",
                actor,
                entity_id=entity.id,
                payload={"user_id": user_id, "created": created, "aliases_added": added},
            )
        return entity


def _check_grant_target(agent_id: str, scope: Scope) -> None:
    validate_id("agent_id", agent_id)
    if not isinstance(scope, Scope):
        raise InvalidArgumentError(f"scope must be a retold.Scope, got {scope!r}")
    if scope.kind == "agent" and "/" in scope.id:
        raise InvalidArgumentError(
            f"{scope} is a private agent-and-user scope: it is implicit for that pair and cannot be "
            "granted; grant a plain agent:<agent_id>, project or org scope to share memory"
        )
    if scope.kind == "user" and "/" in scope.id:
        raise InvalidArgumentError(f"user id {scope.id!r} contains '/', which retold does not allow")


def _grant_payload(grant: Grant | None) -> dict[str, bool] | None:
    return None if grant is None else {"read": grant.can_read, "write": grant.can_write}
