"""Entity resolution (spec §9): exact, scope-aware alias lookup that never guesses.

A wrong link can expose unrelated memory, so resolution only ever links an entity
the principal can read, and an alias several readable entities share is reported as
ambiguous with every candidate rather than resolved to one of them. Resolution itself
writes nothing: an entity it needs to create is returned as a plan and inserted by
:func:`materialize` inside the write transaction, so a rejected write leaves no
orphan entity behind.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from retold.errors import InvalidArgumentError, NotFoundError
from retold.models import Entity, EntityMention, Principal, Resolution, Scope
from retold.store import Store
from retold.util import Clock, new_id, normalize_alias, normalize_ws

__all__ = [
    "materialize",
    "merge_entities",
    "principal_entity",
    "resolve_entities",
]


async def resolve_entities(
    store: Store,
    mentions: Sequence[EntityMention],
    *,
    scope: Scope,
    readable: Sequence[Scope],
    clock: Clock,
) -> list[Resolution]:
    """One :class:`Resolution` per mention; creations are planned, not written.

    An explicit ``entity_id`` must name a readable entity of the mention's kind (merges
    are followed); otherwise :class:`NotFoundError` is raised with one message for
    missing, unreadable and mismatched ids, so no error confirms a foreign entity.
    """
    out: list[Resolution] = []
    planned: dict[tuple[str, str], Entity] = {}
    for mention in mentions:
        if mention.entity_id:
            entity = await store.follow_merges(mention.entity_id)
            if entity is None or entity.scope not in readable or entity.kind != mention.kind:
                raise NotFoundError(f"entity {mention.entity_id!r} not found")
            out.append(Resolution(mention, entity, "explicit", []))
            continue
        norm = normalize_alias(mention.text)
        if not norm:
            raise InvalidArgumentError(f"entity name {mention.text!r} is blank")
        hits = await store.entities_by_alias(norm, scopes=readable, kinds=[mention.kind])
        if len(hits) == 1:
            out.append(Resolution(mention, hits[0], "resolved", []))
        elif len(hits) > 1:
            out.append(Resolution(mention, None, "ambiguous", [h.id for h in hits]))
        else:
            key = (mention.kind, norm)
            if key not in planned:  # two mentions of one new name plan one entity
                planned[key] = Entity(
                    id=new_id(),
                    kind=mention.kind,
                    canonical=normalize_ws(mention.text),
                    scope=scope,
                    status="provisional",
                    merged_into=None,
                    aliases=[norm],
                    created_at=clock.now(),
                )
            out.append(Resolution(mention, planned[key], "created", []))
    return out


async def principal_entity(
    store: Store, principal: Principal, *, clock: Clock
) -> tuple[Entity | None, list[str]]:
    """The principal's person entity in ``user:<user_id>`` (spec §9.1).

    Returns ``(entity, [])`` when exactly one exists, ``(planned, [])`` when none does (a
    provisional entity to create, carrying ``normalize_alias(user_id)``), and
    ``(None, candidates)`` when several person entities carry the principal alias.
    """
    scope = principal.user_scope
    alias = normalize_alias(principal.user_id)
    hits = await store.entities_by_alias(alias, scopes=[scope], kinds=["person"])
    if len(hits) > 1:
        return None, [h.id for h in hits]
    if hits:
        return hits[0], []
    planned = Entity(
        id=new_id(),
        kind="person",
        canonical=principal.user_id,
        scope=scope,
        status="provisional",
        merged_into=None,
        aliases=[alias],
        created_at=clock.now(),
    )
    return planned, []


async def materialize(store: Store, entity: Entity, *, actor: str) -> Entity:
    """Insert a planned entity inside the current transaction, or reuse one created meanwhile.

    Between planning and the write another writer may have created the same alias in
    the scope; linking to it keeps one entity per name instead of two.
    """
    if await store.get_entity(entity.id) is not None:
        return entity
    existing = await store.entities_by_alias(entity.aliases[0], scopes=[entity.scope], kinds=[entity.kind])
    if len(existing) == 1:
        return existing[0]
    await store.insert_entity(entity)
    await store.append_event(
        "entity.created",
        actor,
        entity_id=entity.id,
        payload={"kind": entity.kind, "canonical": entity.canonical, "scope": str(entity.scope)},
    )
    return entity


async def merge_entities(
    store: Store, source_id: str, target_id: str, *, actor: str, reason: str | None = None
) -> Entity:
    """Merge one entity into another of the same kind (spec §9).

    The source becomes ``merged`` with ``merged_into``; links are repointed, aliases
    unioned, every record whose current-fact key named the source is re-keyed to the
    survivor (``subject_entity_id``, ``subject`` and its FTS row), and the FTS aliases of
    every record linked to the survivor are rebuilt. One ``entity.merged`` event.
    Authorisation (write access to both scopes) is the caller's job.
    """
    source = await store.follow_merges(source_id)
    target = await store.follow_merges(target_id)
    if source is None or target is None:
        raise NotFoundError(f"entity {source_id if source is None else target_id!r} not found")
    if source.id == target.id:
        raise InvalidArgumentError("an entity cannot be merged into itself")
    if source.kind != target.kind:
        raise InvalidArgumentError(
            f"cannot merge a {source.kind} entity into a {target.kind} entity: kinds must match"
        )
    async with store.transaction():
        linked = await store.merge_entity(source.id, target.id)
        rekeyed = []
        for record_id, attribute in await store.records_with_subject_entity(source.id):
            await store.update_record(
                record_id, subject_entity_id=target.id, subject=f"{target.id}/{attribute or '-'}"
            )
            rekeyed.append(record_id)
        await store.rewrite_fts(linked)
        await store.append_event(
            "entity.merged",
            actor,
            entity_id=source.id,
            payload={
                "merged_into": target.id,
                "reason": reason,
                "records_relinked": len(linked),
                "records_rekeyed": rekeyed,
            },
        )
    survivor = await store.require_entity(target.id)
    return dataclasses.replace(survivor)
