"""Erasure with no residue: one record, one session, or everything a user's words reached.

Spec §16 promises an erased person's words survive nowhere in the file, so this is the
one place rows of the append-only ``events`` table change, and :meth:`EraseMixin.compact`
rewrites the FTS index, the file and the WAL so no freed page keeps the text.
:mod:`retold.erasure` decides what to erase; the queries that find and change the rows
live here so the SQL stays in :mod:`retold.store`.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from retold.errors import StoreError
from retold.models import SessionKey
from retold.store.database import Database
from retold.store.rows import TURN_KEY_SQL, to_sql
from retold.util import Clock, format_ts

__all__ = ["ERASED_PAYLOAD", "EraseMixin", "ErasureSet", "Resupport", "prune_search_log"]

ERASED_PAYLOAD = '{"erased":true}'
"""What an event's payload becomes when it was about erased rows; its id, kind, actor and time stay."""

# Events whose payloads carry no user text, kept so grant history survives an erasure,
# and the erasure events themselves, whose reason must outlive later erasures.
_KEEP_PAYLOAD_KINDS = ("grant.changed", "record.erased", "session.erased", "user.erased")

# A private agent scope belongs to the user after its (only) slash: agent:<agent>/<user>.
_USER_SCOPES = """((scope_kind = 'user' AND scope_id = :user) OR
                   (scope_kind = 'agent' AND instr(scope_id, '/') > 0
                    AND substr(scope_id, instr(scope_id, '/') + 1) = :user))"""

# The session a legacy record's source_ref names: 'session:<id>' or 'session:<id><turn:n>'.
_REF_SESSION = """CASE WHEN instr({ref}, '<turn:') > 0
                       THEN substr({ref}, 9, instr({ref}, '<turn:') - 9)
                       ELSE substr({ref}, 9) END"""

# The columns of a search_log row that hold query text, context or matched terms.
_SEARCH_TEXT = """request = '{}', context = NULL, rewritten_queries = NULL, lexical = '[]',
                  explanations = '[]', reranked_out = '[]', rerank_error = NULL,
                  reranked = CASE WHEN reranked IS NULL THEN NULL ELSE '[]' END"""
# The columns of a search_log row that may name a record id.
_SEARCH_ID_COLUMNS = ("dense", "lexical", "entity", "fused", "freshness", "gated_out", "deduped_out",
                      "reranked", "reranked_out", "budget_out", "returned", "explanations")  # fmt: skip


@dataclass
class Resupport:
    """A record that survives an erasure on its other sources: the columns that change."""

    record_id: str
    changes: dict[str, Any]
    vector: bytes | None = None  # the new content's embedding, when the content changes
    model: tuple[str, str, int] | None = None  # (model, version, dims) of that vector


@dataclass
class ErasureSet:
    """Every row an erasure touches, found before anything changes (the dry run prints it)."""

    records: list[str] = field(default_factory=list)  # tombstoned: text, vector, FTS row and links go
    evidence_only: list[str] = field(default_factory=list)  # keep their content, lose the quoted evidence
    sources: list[tuple[str, str]] = field(default_factory=list)  # (record_id, origin) support removed
    resupported: list[Resupport] = field(default_factory=list)  # survive on other users' sources
    sessions: list[SessionKey] = field(default_factory=list)  # their turns go blank; the rows stay
    turns: int = 0  # non-blank turns among those sessions
    entities: list[str] = field(default_factory=list)  # canonical name and aliases go
    aliases: list[tuple[str, str]] = field(default_factory=list)  # (entity_id, alias) of kept entities
    search_logs: list[str] = field(default_factory=list)  # queries, context and matched terms go
    pruned_logs: list[str] = field(default_factory=list)  # others' searches: erased records' entries go
    events: list[str] = field(default_factory=list)  # payloads replaced by ERASED_PAYLOAD
    store_items: list[tuple[str, str]] = field(default_factory=list)  # (namespace, key): value rows go


class EraseMixin:
    """Finds every row an erasure reaches before changing any, so a dry run shows the same set."""

    db: Database
    clock: Clock

    if TYPE_CHECKING:  # provided by Store

        async def _bump(self) -> int: ...

        async def _write_fts(self, record_id: str, *, fresh: bool = False) -> None: ...

    # --- finding the rows --------------------------------------------------------------------------

    async def user_known(self, user_id: str) -> bool:
        """Whether anything in the store belongs to the user: a session, a scope, a source, a search."""
        return bool(
            await self.db.fetchval(
                f"""SELECT EXISTS (SELECT 1 FROM sessions WHERE user_id = :user)
                        OR EXISTS (SELECT 1 FROM records WHERE {_USER_SCOPES})
                        OR EXISTS (SELECT 1 FROM entities WHERE {_USER_SCOPES})
                        OR EXISTS (SELECT 1 FROM record_sources WHERE user_id = :user)
                        OR EXISTS (SELECT 1 FROM search_log WHERE user_id = :user)""",
                {"user": user_id},
            )
        )

    async def user_session_keys(self, user_id: str) -> list[SessionKey]:
        rows = await self.db.fetchall(
            "SELECT agent_id, user_id, id FROM sessions WHERE user_id = ? ORDER BY id, agent_id", (user_id,)
        )
        return [SessionKey(r[0], r[1], r[2]) for r in rows]

    async def user_scope_record_ids(self, user_id: str) -> list[str]:
        """Records in ``user:<id>`` and in every private ``agent:<agent>/<id>`` scope."""
        rows = await self.db.fetchall(
            f"SELECT id FROM records WHERE {_USER_SCOPES} ORDER BY id", {"user": user_id}
        )
        return [r[0] for r in rows]

    async def user_scope_entity_ids(self, user_id: str) -> list[str]:
        rows = await self.db.fetchall(
            f"SELECT id FROM entities WHERE {_USER_SCOPES} ORDER BY id", {"user": user_id}
        )
        return [r[0] for r in rows]

    async def session_summary_ids(self, key: SessionKey, origin: str) -> list[str]:
        """The session's summary records (every version), by their owned source."""
        rows = await self.db.fetchall(
            """SELECT DISTINCT r.id FROM records r LEFT JOIN record_sources s ON s.record_id = r.id
                WHERE r.source_kind = 'session_summary' AND (r.source_origin = ? OR s.origin = ?)
                ORDER BY r.id""",
            (origin, origin),
        )
        return [r[0] for r in rows]

    async def records_citing_sessions(self, keys: Sequence[SessionKey]) -> list[str]:
        """Records whose own evidence was quoted from one of the sessions."""
        async with self.db.temp_ids(str(k) for k in keys) as sessions:
            rows = await self.db.fetchall(
                f"""SELECT DISTINCT r.id FROM records r JOIN record_sources s ON s.record_id = r.id
                     WHERE s.origin = r.source_origin AND {_source_key("s")} IN (SELECT id FROM {sessions})
                     ORDER BY r.id"""
            )
        return [r[0] for r in rows]

    async def count_text_turns(self, keys: Iterable[SessionKey]) -> int:
        async with self.db.temp_ids(str(k) for k in keys) as sessions:
            return int(
                await self.db.fetchval(
                    f"""SELECT count(*) FROM session_turns
                         WHERE content != '' AND {TURN_KEY_SQL} IN (SELECT id FROM {sessions})"""
                )
            )

    async def search_log_ids(
        self,
        *,
        user_id: str | None = None,
        sessions: Iterable[SessionKey] = (),
        record_ids: Iterable[str] = (),
    ) -> list[str]:
        """Search-log rows run for the user, inside one of the sessions, or that ranked a record."""
        found: set[str] = set()
        if user_id is not None:
            found.update(
                await self.db.fetch_column("SELECT id FROM search_log WHERE user_id = ?", (user_id,))
            )
        mentions = " OR ".join(f"instr(coalesce(l.{c}, ''), t.id) > 0" for c in _SEARCH_ID_COLUMNS)
        async with (
            self.db.temp_ids(str(k) for k in sessions) as keys,
            self.db.temp_ids(record_ids) as records,
        ):
            found.update(
                await self.db.fetch_column(
                    f"""SELECT id FROM search_log WHERE session_id IS NOT NULL AND
                               agent_id || '/' || user_id || '/' || session_id IN (SELECT id FROM {keys})"""
                )
            )
            found.update(
                await self.db.fetch_column(
                    f"SELECT DISTINCT l.id FROM search_log l JOIN {records} t ON ({mentions})"
                )
            )
        return sorted(found)

    async def entities_introduced(
        self, *, user_id: str | None = None, record_ids: Iterable[str] = ()
    ) -> list[str]:
        """Live entities that the user's words, or one of the records' writes, created."""
        async with self.db.temp_ids(record_ids) as records:
            rows = await self.db.fetchall(
                f"""SELECT id FROM entities WHERE status != 'deleted'
                      AND (origin_user = :user OR origin_record IN (SELECT id FROM {records}))
                    ORDER BY id""",
                {"user": user_id},
            )
        return [r[0] for r in rows]

    async def entities_still_used(self, entity_ids: Iterable[str], erased_records: Iterable[str]) -> set[str]:
        """Of the entities, those a record that survives the erasure still links or is about."""
        async with self.db.temp_ids(entity_ids) as wanted, self.db.temp_ids(erased_records) as erased:
            rows = await self.db.fetchall(
                f"""SELECT w.id FROM {wanted} w
                     WHERE EXISTS (SELECT 1 FROM record_entities l
                                    WHERE l.entity_id = w.id AND l.record_id NOT IN (SELECT id FROM {erased}))
                        OR EXISTS (SELECT 1 FROM records r
                                    WHERE r.subject_entity_id = w.id AND r.status != 'deleted'
                                      AND r.id NOT IN (SELECT id FROM {erased}))
                        OR EXISTS (SELECT 1 FROM entities e WHERE e.merged_into = w.id
                                      AND e.status != 'deleted')"""
            )
        return {r[0] for r in rows}

    async def aliases_from_user(self, user_id: str) -> list[tuple[str, str]]:
        """Alias rows the user's words added (on entities that may outlive the erasure)."""
        rows = await self.db.fetchall(
            "SELECT entity_id, alias_norm FROM entity_aliases WHERE origin_user = ? ORDER BY entity_id",
            (user_id,),
        )
        return [(r[0], r[1]) for r in rows]

    async def event_ids_about(
        self,
        *,
        record_ids: Iterable[str] = (),
        entity_ids: Iterable[str] = (),
        sessions: Sequence[SessionKey] = (),
        user_id: str | None = None,
    ) -> list[str]:
        """Events whose payload may carry erased text.

        Those about an erased record or entity; those recorded for one of the sessions or
        for the user (write, reinforcement, split, extraction and alias events carry their
        owner's ``agent_id``, ``user_id`` and ``session_id``); for a user, those recorded
        against one of the user's scopes; and events written before schema 7 recorded owners
        that name one of the session ids anywhere (session ids were unique then). Grant
        changes and earlier erasure events hold no user text and keep their payloads.
        """
        keep = ", ".join(f"'{k}'" for k in _KEEP_PAYLOAD_KINDS)
        async with (
            self.db.temp_ids(record_ids) as records,
            self.db.temp_ids(entity_ids) as entities,
            self.db.temp_ids(str(k) for k in sessions) as keys,
            self.db.temp_ids(k.session_id for k in sessions) as bare,
        ):
            rows = await self.db.fetchall(
                f"""WITH ev AS (SELECT id, kind, record_id, entity_id, payload,
                                       json_extract(payload, '$.scope') AS scope,
                                       json_extract(payload, '$.user_id') AS user_id,
                                       json_type(payload, '$.user_id') IS NOT NULL AS owned,
                                       json_extract(payload, '$.agent_id') || '/'
                                         || json_extract(payload, '$.user_id') || '/'
                                         || json_extract(payload, '$.session_id') AS session_key
                                  FROM events)
                    SELECT ev.id FROM ev
                     WHERE ev.kind NOT IN ({keep}) AND (
                           ev.record_id IN (SELECT id FROM {records})
                        OR ev.entity_id IN (SELECT id FROM {entities})
                        OR ev.user_id = :user
                        OR ev.session_key IN (SELECT id FROM {keys})
                        OR ev.scope = 'user:' || :user
                        OR (ev.scope LIKE 'agent:%/%' AND substr(ev.scope, instr(ev.scope, '/') + 1) = :user)
                        OR (NOT ev.owned AND EXISTS (
                             SELECT 1 FROM json_tree(ev.payload) j
                              WHERE j.type = 'text' AND (
                                    j.value IN (SELECT id FROM {bare})
                                 OR (j.value LIKE 'session:%' AND ({_REF_SESSION.format(ref="j.value")})
                                                                  IN (SELECT id FROM {bare}))))))
                     ORDER BY ev.id""",
                {"user": user_id},
            )
        return [r[0] for r in rows]

    # --- changing the rows --------------------------------------------------------------------------

    async def apply_erasure(self, erasure: ErasureSet) -> int:
        """Erase every row in ``erasure`` in one transaction; return the ``records_version`` it took.

        Records keep their ids, kinds, scopes, references and timestamps as a ``deleted``
        tombstone; their content, evidence, tags, attribute, vector, FTS row, entity links
        and sources go. A resupported record takes the columns its remaining sources give
        it (a new vector and FTS row when its wording changes). Entities keep their row
        with a blank name and no aliases; records linked to them get FTS rows without
        those aliases.
        """
        async with (
            self.db.transaction(),
            self.db.temp_ids(erasure.records) as records,
            self.db.temp_ids(erasure.evidence_only) as evidence,
            self.db.temp_ids(str(k) for k in erasure.sessions) as sessions,
            self.db.temp_ids(erasure.entities) as entities,
            self.db.temp_ids(erasure.search_logs) as logs,
            self.db.temp_ids(erasure.events) as events,
        ):
            version = await self._bump()
            self.db.after_commit(functools.partial(self.forget_lexical_caches, words_removed=True))
            await self.db.execute(
                f"""UPDATE records SET content = '', evidence = NULL, tags = '[]', attribute = NULL,
                           subject = '-', status = 'deleted', index_version = ?
                     WHERE id IN (SELECT id FROM {records})""",
                (version,),
            )
            await self.db.execute(
                f"UPDATE records SET evidence = NULL, index_version = ? "
                f"WHERE id IN (SELECT id FROM {evidence})",
                (version,),
            )
            for namespace, key in erasure.store_items:  # before the records they may reference
                await self.db.execute(
                    "DELETE FROM store_items WHERE namespace = ? AND key = ?", (namespace, key)
                )
            derived = ("embeddings", "passage_vectors", "records_fts", "record_entities", "record_sources")
            for table in derived:
                await self.db.execute(f"DELETE FROM {table} WHERE record_id IN (SELECT id FROM {records})")
            await self.db.execute(
                f"UPDATE migration_issues SET issue = 'erased' WHERE record_id IN (SELECT id FROM {records})"
            )
            # A person's reason or note may quote the record; the decisions' ids and kinds stay.
            await self.db.execute(
                f"""UPDATE record_activation SET activation = 'conditional', reason = 'erased'
                     WHERE record_id IN (SELECT id FROM {records})"""
            )
            await self.db.execute(
                f"""UPDATE activation_reviews SET reason = 'erased', note = NULL,
                           status = 'resolved', resolution = coalesce(resolution, 'reject'),
                           resolver = coalesce(resolver, 'erasure'), resolved_at = coalesce(resolved_at, ?)
                     WHERE record_id IN (SELECT id FROM {records})""",
                (format_ts(self.clock.now()),),
            )
            for record_id, origin in erasure.sources:
                await self.db.execute(
                    "DELETE FROM record_sources WHERE record_id = ? AND origin = ?", (record_id, origin)
                )
            # The quotes an erased session supplied go with its transcript.
            await self.db.execute(
                f"UPDATE record_sources SET evidence = NULL WHERE evidence IS NOT NULL "
                f"AND {_source_key('record_sources')} IN (SELECT id FROM {sessions})"
            )
            for item in erasure.resupported:
                await self._resupport(item, version)
            await self.db.execute(
                f"UPDATE session_turns SET content = '' WHERE content != '' "
                f"AND {TURN_KEY_SQL} IN (SELECT id FROM {sessions})"
            )
            await self.db.execute(
                f"UPDATE entities SET canonical = '', status = 'deleted' "
                f"WHERE id IN (SELECT id FROM {entities})"
            )
            await self.db.execute(
                f"DELETE FROM entity_aliases WHERE entity_id IN (SELECT id FROM {entities})"
            )
            for entity_id, alias in erasure.aliases:
                await self.db.execute(
                    "DELETE FROM entity_aliases WHERE entity_id = ? AND alias_norm = ?", (entity_id, alias)
                )
            renamed = [entity_id for entity_id, _ in erasure.aliases]
            relinked = await self.db.fetchall(
                f"""SELECT DISTINCT record_id FROM record_entities
                     WHERE (entity_id IN (SELECT id FROM {entities}) OR entity_id IN ({_marks(renamed)}))
                       AND record_id NOT IN (SELECT id FROM {records})""",
                renamed,
            )
            for row in relinked:
                await self._write_fts(row[0])
            await self.db.execute(f"UPDATE search_log SET {_SEARCH_TEXT} WHERE id IN (SELECT id FROM {logs})")
            await self._prune_search_logs(erasure.pruned_logs, set(erasure.records))
            await self.db.execute(
                f"UPDATE events SET payload = ? WHERE id IN (SELECT id FROM {events})", (ERASED_PAYLOAD,)
            )
        return version

    async def _prune_search_logs(self, log_ids: Iterable[str], erased: set[str]) -> None:
        """Take the erased records out of other people's searches; the searcher's own text stays."""
        columns = ", ".join(_SEARCH_ID_COLUMNS)
        for log_id in log_ids:
            row = await self.db.fetchone(f"SELECT {columns} FROM search_log WHERE id = ?", (log_id,))
            if row is None:
                continue
            pruned = prune_search_log(dict(row), erased)
            assignments = ", ".join(f"{c} = :{c}" for c in pruned)
            await self.db.execute(
                f"UPDATE search_log SET {assignments} WHERE id = :_id", {**pruned, "_id": log_id}
            )

    async def _resupport(self, item: Resupport, version: int) -> None:
        if not item.changes and item.vector is None:
            return
        assignments = "".join(f"{c} = :{c}, " for c in item.changes)
        params = {c: to_sql(c, v) for c, v in item.changes.items()}
        await self.db.execute(
            f"UPDATE records SET {assignments}index_version = :_v WHERE id = :_id",
            {**params, "_v": version, "_id": item.record_id},
        )
        if item.vector is not None and item.model is not None:
            model, model_version, dims = item.model
            await self.db.execute(
                """UPDATE embeddings SET model = ?, version = ?, dims = ?, vector = ?, index_version = ?
                    WHERE record_id = ?""",
                (model, model_version, dims, item.vector, version, item.record_id),
            )
        else:
            await self.db.execute(
                "UPDATE embeddings SET index_version = ? WHERE record_id = ?", (version, item.record_id)
            )
        if "content" in item.changes:  # the passages were of the text that is gone
            await self.db.execute("DELETE FROM passage_vectors WHERE record_id = ?", (item.record_id,))
            await self._write_fts(item.record_id)

    async def compact(self) -> bool:
        """Leave no residue of deleted text in the file: rebuild FTS, VACUUM, truncate the WAL.

        FTS5 records a delete as a tombstone in a newer segment, so the erased terms stay
        in older segments until they merge: ``rebuild`` writes the index afresh from the
        remaining rows. ``secure_delete`` (on for every connection) zeroes freed cells,
        VACUUM rewrites the file without free pages, and a TRUNCATE checkpoint moves every
        page into the main file and empties the WAL, which still holds pre-erasure frames.
        Returns False when another connection kept the file from being compacted or the WAL
        from being emptied; the deleted rows are gone either way, and running it again finishes.
        """
        async with self.db.transaction():
            await self.db.execute("INSERT INTO records_fts(records_fts) VALUES ('rebuild')")
            await self.db.execute("INSERT INTO records_fts(records_fts) VALUES ('optimize')")
        # Outside a transaction these run on the idle read connection; SQLite's own locking
        # orders them after any write another task or process has in progress.
        try:
            await self.db.execute("VACUUM")
        except StoreError:  # another writer outlasted the busy timeout: report, do not hide the erasure
            await self.truncate_wal()
            return False
        return await self.truncate_wal()

    async def truncate_wal(self) -> bool:
        """Checkpoint every WAL frame into the main file and truncate the WAL to zero bytes."""
        row = await self.db.fetchone("PRAGMA wal_checkpoint(TRUNCATE)")
        return row is None or int(row[0]) == 0


def prune_search_log(row: dict[str, str | None], erased: set[str]) -> dict[str, str | None]:
    """A search_log row's id columns without any entry that names an erased record.

    Every channel column is a JSON list of ``[record_id, ...]`` entries (``deduped_out``
    names two records; ``budget_out`` and ``returned`` are plain ids); an entry naming an
    erased record goes, with its matched terms and scores. ``explanations`` line up with
    ``returned`` (one per returned record, then an optional empty reason), and lose the
    erased records' explanations and every erased id among the conflict partners.
    """

    def named(entry: Any) -> bool:
        if isinstance(entry, str):
            return entry in erased
        return isinstance(entry, list) and any(isinstance(v, str) and v in erased for v in entry)

    out: dict[str, str | None] = {}
    returned = json.loads(row.get("returned") or "[]")
    for column in _SEARCH_ID_COLUMNS:
        raw = row.get(column)
        if raw is None or column == "explanations":
            out[column] = raw
            continue
        value = json.loads(raw)
        out[column] = json.dumps([e for e in value if not named(e)]) if isinstance(value, list) else raw
    explanations = json.loads(row.get("explanations") or "[]")
    kept = []
    for index, explanation in enumerate(explanations):
        if index < len(returned) and returned[index] in erased:
            continue
        if isinstance(explanation, dict) and isinstance(explanation.get("conflicts_with"), list):
            explanation["conflicts_with"] = [c for c in explanation["conflicts_with"] if c not in erased]
        kept.append(explanation)
    out["explanations"] = json.dumps(kept)
    return out


def _source_key(alias: str) -> str:
    """A source row's session as ``str(SessionKey)`` (NULL for sources outside a session)."""
    return f"({alias}.agent_id || '/' || {alias}.user_id || '/' || {alias}.session_id)"


def _marks(items: Sequence[Any]) -> str:
    return ", ".join("?" for _ in items) or "NULL"
