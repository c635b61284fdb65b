"""What an erasure reaches (spec §16), decided before anything changes.

:meth:`retold.operations.Operations.erase` asks :func:`plan_erasure` for the rows, shows
them on a dry run, and has the store apply them in one transaction. The rules:

* **record** — the record becomes a tombstone; entities its write introduced that nothing
  else uses go; every search that ranked it loses its query text and matched terms (they
  sat beside its id, and a query that found it may quote it).
* **session** (a :class:`~retold.models.SessionKey`, or an id only one principal uses) —
  its turns go blank; its summary is erased; records quoting it lose the quote; searches
  run in it lose their text.
* **user** — every session of theirs, every record in their own scopes, and every source
  their sessions contributed anywhere. A shared record another user also supports
  survives on that support: its provenance, wording and status are re-derived from the
  remaining sources (:func:`retold.policy.lifecycle.resupport`); a record only they
  supported is erased. Entities and aliases their words introduced go once nothing left
  uses them; their search logs and every event that names them lose their payloads.
  Other people's searches that ranked an erased record keep their own query text and lose
  that record's entries (a session erasure treats its summary the same way).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from typing import Any, Literal

import anyio.to_thread
import numpy as np

from retold.config import Config
from retold.errors import ConfigError, NotFoundError
from retold.ingest.write.sources import source_origin
from retold.models import RecordSource, SessionKey
from retold.policy import lifecycle
from retold.store import Store
from retold.store.erase import ErasureSet, Resupport
from retold.util import Clock

__all__ = ["ErasureTarget", "plan_erasure"]

ErasureTarget = Literal["record", "session", "user"]


async def plan_erasure(
    store: Store,
    kind: ErasureTarget,
    target: str | SessionKey,
    *,
    config: Config,
    clock: Clock,
    embedder: Any = None,
    vectors: dict[str, tuple[bytes, tuple[str, str, int]]] | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> ErasureSet:
    """Every row one erasure touches.

    ``embedder`` re-embeds a resupported record's new wording; ``vectors`` (content →
    vector and model) caches those embeddings across a dry look and the locked one.
    ``progress(done, total)`` follows a user erasure through the records their sessions
    sourced, each judged (and maybe re-embedded) on its own; the other kinds are quick.
    """
    if kind == "record":
        return await _record(store, str(target))
    if kind == "session":
        return await _session(store, await store.resolve_session(target))
    cache = {} if vectors is None else vectors
    return await _user(
        store, str(target), config=config, clock=clock, embedder=embedder, vectors=cache, progress=progress
    )


async def _orphaned_entities(
    store: Store, erased: list[str], *, user_id: str | None = None, always: list[str] = ()
) -> list[str]:
    """Entities the erased records' writes (or the user's words) introduced that nothing else uses."""
    introduced = await store.entities_introduced(user_id=user_id, record_ids=erased)
    candidates = [e for e in introduced if e not in set(always)]
    used = await store.entities_still_used(candidates, erased)
    return sorted({*always, *(e for e in candidates if e not in used)})


async def _record(store: Store, record_id: str) -> ErasureSet:
    if await store.get_record(record_id) is None:
        raise NotFoundError(f"no record {record_id!r}")
    entities = await _orphaned_entities(store, [record_id])
    return ErasureSet(
        records=[record_id],
        entities=entities,
        search_logs=await store.search_log_ids(record_ids=[record_id]),
        events=await store.event_ids_about(record_ids=[record_id], entity_ids=entities),
        store_items=await store.store_items_reached(record_ids=[record_id]),
    )


async def _session(store: Store, key: SessionKey) -> ErasureSet:
    summary_origin = source_origin(key.agent_id, key.user_id, key.session_id, f"session:{key.session_id}")
    summaries = await store.session_summary_ids(key, summary_origin)
    quoting = [r for r in await store.records_citing_sessions([key]) if r not in set(summaries)]
    entities = await _orphaned_entities(store, summaries)
    own_logs = await store.search_log_ids(sessions=[key])
    return ErasureSet(
        records=summaries,
        evidence_only=quoting,
        sessions=[key],
        turns=await store.count_text_turns([key]),
        entities=entities,
        search_logs=own_logs,
        pruned_logs=_others(await store.search_log_ids(record_ids=summaries), own_logs),
        events=await store.event_ids_about(record_ids=summaries, entity_ids=entities, sessions=[key]),
        store_items=await store.store_items_reached(record_ids=summaries),
    )


async def _user(
    store: Store,
    user_id: str,
    *,
    config: Config,
    clock: Clock,
    embedder: Any,
    vectors: dict[str, tuple[bytes, tuple[str, str, int]]],
    progress: Callable[[int, int], None] | None = None,
) -> ErasureSet:
    if not await store.user_known(user_id):
        raise NotFoundError(f"no user {user_id!r}: no session, scope, source or search of theirs is stored")
    sessions = await store.user_session_keys(user_id)
    erased = set(await store.user_scope_record_ids(user_id))
    theirs: dict[str, list[RecordSource]] = defaultdict(list)
    for source in await store.sources_from_user(user_id):
        if source.record_id not in erased:
            theirs[source.record_id].append(source)
    removed: list[tuple[str, str]] = []
    resupported: list[Resupport] = []
    now = clock.now()
    if progress is not None:
        progress(0, len(theirs))
    for done, (record_id, own) in enumerate(sorted(theirs.items()), 1):
        remaining = [s for s in await store.sources_of(record_id) if s.user_id != user_id]
        record = await store.get_record(record_id)
        if not remaining or record is None:
            erased.add(record_id)
        else:
            removed += [(record_id, s.origin) for s in own]
            primary = await store.source_origin_of(record_id)
            changes = lifecycle.resupport(
                record, remaining, primary_removed=primary in {s.origin for s in own}, now=now, config=config
            )
            first = min(await store.sources_of(record_id), key=lambda s: s.added_at)
            if first.user_id == user_id and record.tags:  # the labels came with the erased user's write
                changes["tags"] = []
            resupported.append(await _with_vector(Resupport(record_id, changes), embedder, vectors))
        if progress is not None:
            progress(done, len(theirs))
    records = sorted(erased)
    own_logs = await store.search_log_ids(user_id=user_id, sessions=sessions)
    entities = await _orphaned_entities(
        store, records, user_id=user_id, always=await store.user_scope_entity_ids(user_id)
    )
    gone = set(entities)
    return ErasureSet(
        records=records,
        sources=removed,
        resupported=resupported,
        sessions=sessions,
        turns=await store.count_text_turns(sessions),
        entities=entities,
        aliases=[a for a in await store.aliases_from_user(user_id) if a[0] not in gone],
        search_logs=own_logs,
        pruned_logs=_others(await store.search_log_ids(record_ids=records), own_logs),
        events=await store.event_ids_about(
            record_ids=records, entity_ids=entities, sessions=sessions, user_id=user_id
        ),
        store_items=await store.store_items_reached(record_ids=records, user_id=user_id),
    )


def _others(ranked: list[str], own: list[str]) -> list[str]:
    """Other people's searches that ranked an erased record: they lose its entries, not their text."""
    mine = set(own)
    return [log_id for log_id in ranked if log_id not in mine]


async def _with_vector(
    item: Resupport, embedder: Any, vectors: dict[str, tuple[bytes, tuple[str, str, int]]]
) -> Resupport:
    """A record whose wording changes gets the new wording's vector (computed before the write)."""
    content = item.changes.get("content")
    if not isinstance(content, str):
        return item
    if content in vectors:
        item.vector, item.model = vectors[content]
        return item
    if embedder is None:
        raise ConfigError(
            "erasing this user re-words a record that another user still supports, which needs the "
            "embedder; open the runtime with one (the default config loads the packaged model)",
            key="embedding.model",
        )
    vectors = await anyio.to_thread.run_sync(embedder.embed_documents, [content])
    vector = np.asarray(vectors[0], dtype=np.float32).reshape(-1)
    item.vector = vector.tobytes()
    item.model = (embedder.name, embedder.version, int(vector.shape[0]))
    vectors[content] = (item.vector, item.model)
    return item
