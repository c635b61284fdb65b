"""The schema of spec §3 as ordered, forward-only migrations.

Each migration runs in its own ``BEGIN IMMEDIATE`` transaction together with the
row in ``schema_migrations`` that records it, so a crash leaves the file at the
previous version, never half-way. Version 1 is the original ("legacy") schema,
which kept a free-text ``subject`` and no structured subject; later versions add
what the spec says they add:

1. base tables: records, conflicts, embeddings, FTS, entities, grants, sessions, events, search_log
2. structured subject (``subject_entity_id``, ``attribute``) with the backfill of §3.2,
   ``migration_issues``, and ``search_log.trigger``
3. vector-index versioning: ``store_meta.records_version`` and ``index_version`` columns (§7)
4. temporal review (``review_at``, ``review_flagged_at``) and one live summary per session (§6.2)
5. ``search_log.reranked_out``, ``rerank_status``, ``rerank_error`` (§3.6)
6. an index on the short id (the last 12 characters of a record id) that tools accept
7. ownership: sessions and turns keyed by (agent, user, session id); every source that supports a
   record in ``record_sources``; aliases carry the scope they may be shown in; entities remember
   the user whose words introduced them (issue 15: isolation and erasure)
8-10. LangGraph store items, full-text rows by record id, activation and its review queue
11. ``passage_vectors``: the vectors of a long record's passages (retold.index.passages)

There is deliberately no separate ``schema.sql``: two sources of truth for the DDL drift.

One job: SQLite's migrations and their runner; it is long because every migration's DDL and
backfill stays here, in order, for stores still at an older version.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from retold.errors import SchemaVersionError
from retold.store.database import Database
from retold.util import SystemClock, format_ts, normalize_attribute

__all__ = ["LATEST_VERSION", "MIGRATIONS", "STORE_ITEMS_COLUMNS", "Migration", "current_version", "migrate"]


@dataclass(frozen=True)
class Migration:
    version: int
    name: str
    statements: tuple[str, ...]
    backfill: Callable[[Database], Awaitable[None]] | None = None


_V1 = (
    """CREATE TABLE records (
      id              TEXT PRIMARY KEY,
      type            TEXT NOT NULL CHECK (type IN ('semantic','episodic','procedural')),
      version         INTEGER NOT NULL DEFAULT 1,
      content         TEXT NOT NULL,
      subject         TEXT NOT NULL,
      scope_kind      TEXT NOT NULL CHECK (scope_kind IN ('agent','user','project','org')),
      scope_id        TEXT NOT NULL,
      source_kind     TEXT NOT NULL CHECK (source_kind IN
                        ('user_statement','system','tool_result','session_summary','agent_inference')),
      source_ref      TEXT,
      creator_agent_id TEXT NOT NULL,
      evidence        TEXT,
      created_at      TEXT NOT NULL,
      event_at        TEXT NOT NULL,
      expires_at      TEXT,
      valid_from      TEXT,
      valid_until     TEXT,
      confidence      REAL NOT NULL,
      status          TEXT NOT NULL CHECK (status IN
                        ('provisional','confirmed','superseded','expired','deleted')),
      supersedes_id   TEXT REFERENCES records(id),
      reinforcements  INTEGER NOT NULL DEFAULT 0,
      last_reinforced_at TEXT,
      tags            TEXT NOT NULL DEFAULT '[]'
    )""",
    "CREATE INDEX records_scope ON records(scope_kind, scope_id, status)",
    "CREATE INDEX records_event ON records(type, event_at)",
    """CREATE TABLE record_conflicts (
      record_id   TEXT NOT NULL REFERENCES records(id),
      other_id    TEXT NOT NULL REFERENCES records(id),
      noted_at    TEXT NOT NULL,
      PRIMARY KEY (record_id, other_id)
    )""",
    """CREATE TABLE embeddings (
      record_id   TEXT PRIMARY KEY REFERENCES records(id),
      model       TEXT NOT NULL,
      version     TEXT NOT NULL,
      dims        INTEGER NOT NULL,
      vector      BLOB NOT NULL
    )""",
    """CREATE VIRTUAL TABLE records_fts USING fts5(
      record_id UNINDEXED,
      content,
      subject,
      aliases,
      tokenize = 'unicode61 remove_diacritics 2'
    )""",
    """CREATE TABLE entities (
      id            TEXT PRIMARY KEY,
      kind          TEXT NOT NULL CHECK (kind IN ('person','project','org','repo','product','other')),
      canonical     TEXT NOT NULL,
      scope_kind    TEXT NOT NULL,
      scope_id      TEXT NOT NULL,
      status        TEXT NOT NULL CHECK (status IN ('provisional','confirmed','merged','deleted')),
      merged_into   TEXT REFERENCES entities(id),
      created_at    TEXT NOT NULL
    )""",
    "CREATE INDEX entities_scope ON entities(scope_kind, scope_id, kind)",
    """CREATE TABLE entity_aliases (
      entity_id   TEXT NOT NULL REFERENCES entities(id),
      alias_norm  TEXT NOT NULL,
      PRIMARY KEY (entity_id, alias_norm)
    )""",
    "CREATE INDEX entity_aliases_lookup ON entity_aliases(alias_norm)",
    """CREATE TABLE record_entities (
      record_id   TEXT NOT NULL REFERENCES records(id),
      entity_id   TEXT NOT NULL REFERENCES entities(id),
      role        TEXT NOT NULL DEFAULT 'about' CHECK (role IN ('about','mentions')),
      PRIMARY KEY (record_id, entity_id)
    )""",
    "CREATE INDEX record_entities_by_entity ON record_entities(entity_id)",
    """CREATE TABLE grants (
      agent_id    TEXT NOT NULL,
      scope_kind  TEXT NOT NULL,
      scope_id    TEXT NOT NULL,
      can_read    INTEGER NOT NULL DEFAULT 1,
      can_write   INTEGER NOT NULL DEFAULT 0,
      PRIMARY KEY (agent_id, scope_kind, scope_id)
    )""",
    """CREATE TABLE sessions (
      id          TEXT PRIMARY KEY,
      agent_id    TEXT NOT NULL,
      user_id     TEXT NOT NULL,
      project_id  TEXT,
      started_at  TEXT NOT NULL,
      ended_at    TEXT,
      extraction_started_at TEXT,
      extracted_at TEXT
    )""",
    "CREATE INDEX sessions_user ON sessions(user_id)",
    """CREATE TABLE session_turns (
      session_id  TEXT NOT NULL REFERENCES sessions(id),
      turn        INTEGER NOT NULL,
      role        TEXT NOT NULL CHECK (role IN ('user','assistant','tool')),
      content     TEXT NOT NULL,
      at          TEXT NOT NULL,
      PRIMARY KEY (session_id, turn)
    )""",
    """CREATE TABLE events (
      id          TEXT PRIMARY KEY,
      at          TEXT NOT NULL,
      kind        TEXT NOT NULL,
      actor       TEXT NOT NULL,
      record_id   TEXT,
      entity_id   TEXT,
      payload     TEXT NOT NULL
    )""",
    "CREATE INDEX events_record ON events(record_id)",
    "CREATE INDEX events_entity ON events(entity_id)",
    """CREATE TABLE search_log (
      id            TEXT PRIMARY KEY,
      at            TEXT NOT NULL,
      agent_id      TEXT NOT NULL,
      user_id       TEXT NOT NULL,
      session_id    TEXT,
      request       TEXT NOT NULL,
      context       TEXT,
      rewrite_status TEXT NOT NULL,
      rewritten_queries TEXT,
      readable_scopes TEXT NOT NULL,
      dense         TEXT NOT NULL,
      lexical       TEXT NOT NULL,
      entity        TEXT NOT NULL,
      fused         TEXT NOT NULL,
      freshness     TEXT NOT NULL,
      gated_out     TEXT NOT NULL,
      deduped_out   TEXT NOT NULL,
      reranked      TEXT,
      budget_out    TEXT NOT NULL,
      returned      TEXT NOT NULL,
      explanations  TEXT NOT NULL,
      config_flags  TEXT NOT NULL,
      warm          INTEGER NOT NULL,
      timings_ms    TEXT NOT NULL
    )""",
    "CREATE INDEX search_log_user ON search_log(user_id, at)",
)

_V2 = (
    "ALTER TABLE records ADD COLUMN subject_entity_id TEXT REFERENCES entities(id)",
    "ALTER TABLE records ADD COLUMN attribute TEXT",
    "CREATE INDEX records_subject ON records(scope_kind, scope_id, subject_entity_id, attribute, status)",
    # resolution/resolved_at/resolved_by extend the spec's table: they record the
    # operator's --expire-unmapped / --allow-unmapped decision instead of deleting the issue.
    """CREATE TABLE migration_issues (
      migration_version INTEGER NOT NULL,
      record_id   TEXT NOT NULL REFERENCES records(id),
      issue       TEXT NOT NULL,
      resolution  TEXT CHECK (resolution IN ('expired','acknowledged')),
      resolved_at TEXT,
      resolved_by TEXT,
      PRIMARY KEY (migration_version, record_id)
    )""",
    "ALTER TABLE search_log ADD COLUMN trigger TEXT NOT NULL DEFAULT 'tool'",
)

_V3 = (
    "CREATE TABLE store_meta (key TEXT PRIMARY KEY, value INTEGER NOT NULL)",
    "INSERT INTO store_meta(key, value) VALUES ('records_version', 0)",
    "ALTER TABLE records ADD COLUMN index_version INTEGER NOT NULL DEFAULT 0",
    "ALTER TABLE embeddings ADD COLUMN index_version INTEGER NOT NULL DEFAULT 0",
    "CREATE INDEX records_index_version ON records(index_version)",
    "CREATE INDEX embeddings_index_version ON embeddings(index_version)",
)

_V4 = (
    "ALTER TABLE records ADD COLUMN review_at TEXT",
    "ALTER TABLE records ADD COLUMN review_flagged_at TEXT",
    "CREATE INDEX records_temporal_review ON records(review_at, review_flagged_at, status)",
    # One live summary per session: source_ref is the summary's idempotency key (spec §6.2).
    """CREATE UNIQUE INDEX records_live_summary ON records(source_ref)
       WHERE source_kind = 'session_summary' AND status IN ('provisional','confirmed')""",
)

_V5 = (
    "ALTER TABLE search_log ADD COLUMN reranked_out TEXT NOT NULL DEFAULT '[]'",
    "ALTER TABLE search_log ADD COLUMN rerank_status TEXT NOT NULL DEFAULT 'disabled'",
    "ALTER TABLE search_log ADD COLUMN rerank_error TEXT",
)

# The rendered result shows only the short id; tools resolve it without a table scan.
_V6 = ("CREATE INDEX records_short_id ON records(substr(id, -12))",)

# Sessions are keyed by their owner: a session id is the adapter's (a thread id), so two
# principals may both have "t1", and neither may reach the other's transcript. The old
# tables are renamed, copied and dropped child-first so no foreign key is left dangling.
_V7 = (
    "ALTER TABLE session_turns RENAME TO session_turns_v6",
    "ALTER TABLE sessions RENAME TO sessions_v6",
    """CREATE TABLE sessions (
      id          TEXT NOT NULL,
      agent_id    TEXT NOT NULL,
      user_id     TEXT NOT NULL,
      project_id  TEXT,
      started_at  TEXT NOT NULL,
      ended_at    TEXT,
      extraction_started_at TEXT,
      extracted_at TEXT,
      PRIMARY KEY (agent_id, user_id, id)
    )""",
    """INSERT INTO sessions(id, agent_id, user_id, project_id, started_at, ended_at,
                            extraction_started_at, extracted_at)
       SELECT id, agent_id, user_id, project_id, started_at, ended_at, extraction_started_at, extracted_at
         FROM sessions_v6""",
    """CREATE TABLE session_turns (
      agent_id    TEXT NOT NULL,
      user_id     TEXT NOT NULL,
      session_id  TEXT NOT NULL,
      turn        INTEGER NOT NULL,
      role        TEXT NOT NULL CHECK (role IN ('user','assistant','tool')),
      content     TEXT NOT NULL,
      at          TEXT NOT NULL,
      PRIMARY KEY (agent_id, user_id, session_id, turn),
      FOREIGN KEY (agent_id, user_id, session_id) REFERENCES sessions(agent_id, user_id, id)
    )""",
    """INSERT INTO session_turns(agent_id, user_id, session_id, turn, role, content, at)
       SELECT s.agent_id, s.user_id, t.session_id, t.turn, t.role, t.content, t.at
         FROM session_turns_v6 t JOIN sessions_v6 s ON s.id = t.session_id""",
    "DROP TABLE session_turns_v6",
    "DROP TABLE sessions_v6",
    "CREATE INDEX sessions_user ON sessions(user_id)",
    # The owner-qualified identity of a record's own source (see retold.ingest.write.sources): two
    # principals' "session:t1<turn:3>" are different sources. One live summary per session
    # becomes one per owned session.
    "ALTER TABLE records ADD COLUMN source_origin TEXT",
    "DROP INDEX records_live_summary",
    """CREATE UNIQUE INDEX records_live_summary ON records(source_origin)
       WHERE source_kind = 'session_summary' AND status IN ('provisional','confirmed')""",
    "CREATE INDEX records_source_origin ON records(source_origin)",
    # Every observation that supports a record, with who made it and the content it carried:
    # reinforcement keeps them all, and erasing one user removes only that user's.
    """CREATE TABLE record_sources (
      record_id   TEXT NOT NULL REFERENCES records(id),
      origin      TEXT NOT NULL,
      source_kind TEXT NOT NULL CHECK (source_kind IN
                    ('user_statement','system','tool_result','session_summary','agent_inference')),
      source_ref  TEXT,
      agent_id    TEXT NOT NULL,
      user_id     TEXT,
      session_id  TEXT,
      evidence    TEXT,
      content     TEXT NOT NULL,
      added_at    TEXT NOT NULL,
      counted     INTEGER NOT NULL DEFAULT 1,
      PRIMARY KEY (record_id, origin)
    )""",
    "CREATE INDEX record_sources_user ON record_sources(user_id)",
    "CREATE INDEX record_sources_session ON record_sources(agent_id, user_id, session_id)",
    "CREATE INDEX record_sources_origin ON record_sources(origin)",
    # An alias is shown only where its scope is readable: a user's private nickname for
    # themselves must not reach a project record's index text.
    "ALTER TABLE entity_aliases ADD COLUMN scope_kind TEXT",
    "ALTER TABLE entity_aliases ADD COLUMN scope_id TEXT",
    "ALTER TABLE entity_aliases ADD COLUMN origin_user TEXT",
    """UPDATE entity_aliases SET
         scope_kind = (SELECT e.scope_kind FROM entities e WHERE e.id = entity_aliases.entity_id),
         scope_id = (SELECT e.scope_id FROM entities e WHERE e.id = entity_aliases.entity_id)""",
    "ALTER TABLE entities ADD COLUMN origin_user TEXT",
    "ALTER TABLE entities ADD COLUMN origin_record TEXT",
)


# LangGraph store items (retold.adapters.langgraph_store): a key's whole value beside the
# record that carries its text. ``record_id`` is NULL for an item put with ``index=False``;
# ``user_id`` is whose principal wrote it, so erasing that user removes the value too.
STORE_ITEMS_COLUMNS = (
    "namespace", "key", "scope_kind", "scope_id", "record_id", "value", "agent_id", "user_id",
    "created_at", "updated_at", "expires_at", "ttl_minutes",
)  # fmt: skip
_V8 = (
    """CREATE TABLE store_items (
      namespace   TEXT NOT NULL,
      key         TEXT NOT NULL,
      scope_kind  TEXT NOT NULL,
      scope_id    TEXT NOT NULL,
      record_id   TEXT REFERENCES records(id),
      value       TEXT NOT NULL,
      agent_id    TEXT NOT NULL,
      user_id     TEXT,
      created_at  TEXT NOT NULL,
      updated_at  TEXT NOT NULL,
      expires_at  TEXT,
      ttl_minutes REAL,
      PRIMARY KEY (namespace, key)
    )""",
    "CREATE INDEX store_items_scope ON store_items(scope_kind, scope_id, updated_at)",
    "CREATE INDEX store_items_record ON store_items(record_id)",
    "CREATE INDEX store_items_user ON store_items(user_id)",
)

# FTS5 cannot index its UNINDEXED ``record_id`` column, so rewriting one record's row (a
# status change, a forget, an alias change) scanned the whole table: 30 ms at 200K rows, on
# every supersession. The column lives in FTS5's own content table (``c0``, the first
# column) as a plain SQLite table, so an ordinary index finds the row (see Store._write_fts).
_V9 = ("CREATE INDEX records_fts_record ON records_fts_content(c0)",)

# Activation (spec §8.2, §11): a semantic record's place in the ambient profile, decided after
# its write commits, and the queue of borderline decisions a person resolves. Kept beside
# ``records`` rather than in it: the write and search paths never read them.
_V10 = (
    """CREATE TABLE record_activation (
      record_id   TEXT PRIMARY KEY REFERENCES records(id),
      scope_kind  TEXT NOT NULL,
      scope_id    TEXT NOT NULL,
      activation  TEXT NOT NULL CHECK (activation IN ('ambient','conditional')),
      category    TEXT,
      reason      TEXT NOT NULL,
      decided_by  TEXT NOT NULL CHECK (decided_by IN ('policy','review','operator')),
      actor       TEXT NOT NULL,
      decided_at  TEXT NOT NULL
    )""",
    "CREATE INDEX record_activation_scope ON record_activation(scope_kind, scope_id, activation)",
    """CREATE TABLE activation_reviews (
      id          TEXT PRIMARY KEY,
      record_id   TEXT NOT NULL REFERENCES records(id),
      scope_kind  TEXT NOT NULL,
      scope_id    TEXT NOT NULL,
      category    TEXT,
      reason      TEXT NOT NULL,
      status      TEXT NOT NULL CHECK (status IN ('open','resolved')),
      resolution  TEXT CHECK (resolution IN ('promote','conditional','reject')),
      resolver    TEXT,
      note        TEXT,
      created_at  TEXT NOT NULL,
      resolved_at TEXT
    )""",
    "CREATE INDEX activation_reviews_status ON activation_reviews(status, created_at)",
    "CREATE UNIQUE INDEX activation_reviews_one_open ON activation_reviews(record_id) WHERE status = 'open'",
)

_V11 = (
    """CREATE TABLE passage_vectors (
      record_id   TEXT NOT NULL REFERENCES records(id),
      ordinal     INTEGER NOT NULL,
      model       TEXT NOT NULL,
      version     TEXT NOT NULL,
      dims        INTEGER NOT NULL,
      vector      BLOB NOT NULL,
      PRIMARY KEY (record_id, ordinal)
    )""",
)

# The records beside a search's best matches on a day too busy to read whole (a bulk import):
# each found by one lookup in (scope, event time, id) order (Store.eligible_beside).
_V12 = ("CREATE INDEX records_scope_order ON records(scope_kind, scope_id, event_at, id)",)


async def _backfill_sources(db: Database) -> None:
    """One ``record_sources`` row per record and per counted reinforcement; FTS aliases re-scoped.

    Before this version session ids were unique, so a ``session:<id>`` reference names one
    owner; references to no known session (tool calls, documents, host writes) belong to the
    record's creator.
    """
    session_of = """CASE WHEN instr({ref}, '<turn:') > 0
                          THEN substr({ref}, 9, instr({ref}, '<turn:') - 9)
                          ELSE substr({ref}, 9) END"""
    owner = """coalesce((SELECT s.agent_id || '/' || s.user_id FROM sessions s
                          WHERE {ref} LIKE 'session:%' AND s.id = ({session})), {agent} || '/')"""
    rec_owner = owner.format(
        ref="r.source_ref", session=session_of.format(ref="r.source_ref"), agent="r.creator_agent_id"
    )
    await db.execute(
        f"""UPDATE records AS r SET source_origin = {rec_owner} || '/' || r.source_ref
             WHERE r.source_ref IS NOT NULL"""
    )
    user_of = """(SELECT s.user_id FROM sessions s WHERE {ref} LIKE 'session:%' AND s.id = ({session}))"""
    await db.execute(
        f"""INSERT OR IGNORE INTO record_sources(record_id, origin, source_kind, source_ref, agent_id,
                   user_id, session_id, evidence, content, added_at, counted)
            SELECT r.id, coalesce(r.source_origin, r.creator_agent_id || '//-'), r.source_kind,
                   r.source_ref, r.creator_agent_id,
                   {user_of.format(ref="r.source_ref", session=session_of.format(ref="r.source_ref"))},
                   CASE WHEN r.source_ref LIKE 'session:%'
                        THEN {session_of.format(ref="r.source_ref")} END,
                   r.evidence, r.content, r.created_at, r.source_ref IS NOT NULL
              FROM records r WHERE r.status != 'deleted'"""
    )
    ref = "json_extract(ev.payload, '$.source_ref')"
    ev_owner = owner.format(ref=ref, session=session_of.format(ref=ref), agent="ev.actor")
    await db.execute(
        f"""INSERT OR IGNORE INTO record_sources(record_id, origin, source_kind, source_ref, agent_id,
                   user_id, session_id, evidence, content, added_at, counted)
            SELECT ev.record_id, {ev_owner} || '/' || {ref},
                   coalesce(json_extract(ev.payload, '$.source_kind'), r.source_kind), {ref}, ev.actor,
                   {user_of.format(ref=ref, session=session_of.format(ref=ref))},
                   CASE WHEN {ref} LIKE 'session:%' THEN {session_of.format(ref=ref)} END,
                   json_extract(ev.payload, '$.evidence'), r.content, ev.at, 1
              FROM events ev JOIN records r ON r.id = ev.record_id
             WHERE ev.kind = 'record.reinforced' AND json_extract(ev.payload, '$.counted') = 1
               AND {ref} IS NOT NULL AND r.status != 'deleted'"""
    )
    # Index text may hold only names readable at the record's own scope.
    await db.execute("DELETE FROM records_fts")
    await db.execute(
        """INSERT INTO records_fts(record_id, content, subject, aliases)
           SELECT r.id, r.content, r.subject,
                  coalesce((SELECT group_concat(a.alias_norm, ' ')
                              FROM record_entities l JOIN entity_aliases a ON a.entity_id = l.entity_id
                             WHERE l.record_id = r.id AND a.scope_kind = r.scope_kind
                               AND a.scope_id = r.scope_id), '')
             FROM records r WHERE r.status != 'deleted'"""
    )


async def _backfill_structured_subject(db: Database) -> None:
    """Map each legacy row to (subject_entity_id, attribute) or record why it cannot be mapped.

    A row maps only with exactly one ``about`` link and a non-empty attribute segment
    (the text after the last ``/`` of the old subject, or the whole subject when it has
    none), normalised with the same :func:`normalize_attribute` new writes use.
    """
    rows = await db.fetchall(
        """SELECT r.id, r.subject, r.type,
                  (SELECT group_concat(entity_id, ' ') FROM record_entities e
                    WHERE e.record_id = r.id AND e.role = 'about') AS about_ids
             FROM records r ORDER BY r.id"""
    )
    for row in rows:
        about = (row["about_ids"] or "").split()
        segment = row["subject"].rsplit("/", 1)[-1] if row["subject"] else ""
        attribute = normalize_attribute(segment)
        issue = None
        if len(about) != 1:
            issue = f"{len(about)} about links (exactly one is needed to pick the primary entity)"
        elif not attribute or (attribute == "-" and row["type"] != "episodic"):
            issue = f"no attribute segment in legacy subject {row['subject']!r}"
        if issue is None:
            await db.execute(
                "UPDATE records SET subject_entity_id = ?, attribute = ?, subject = ? WHERE id = ?",
                (about[0], attribute, f"{about[0]}/{attribute}", row["id"]),
            )
            # records_fts mirrors records.subject, so the derived subject must replace the legacy one.
            await db.execute(
                "UPDATE records_fts SET subject = ? WHERE record_id = ?",
                (f"{about[0]}/{attribute}", row["id"]),
            )
        else:
            await db.execute(
                "INSERT INTO migration_issues(migration_version, record_id, issue) VALUES (2, ?, ?)",
                (row["id"], issue),
            )


MIGRATIONS: tuple[Migration, ...] = (
    Migration(1, "base schema", _V1),
    Migration(
        2, "structured subject, migration issues, search_log.trigger", _V2, _backfill_structured_subject
    ),
    Migration(3, "vector index versioning", _V3),
    Migration(4, "temporal review and live summary index", _V4),
    Migration(5, "reranker columns in search_log", _V5),
    Migration(6, "short record id index", _V6),
    Migration(7, "ownership: owner-keyed sessions, record sources, scoped aliases", _V7, _backfill_sources),
    Migration(8, "langgraph store items", _V8),
    Migration(9, "full-text rows found by record id", _V9),
    Migration(10, "activation and its review queue", _V10),
    Migration(11, "passage vectors of long records", _V11),
    Migration(12, "records in scope and event order", _V12),
)
LATEST_VERSION = MIGRATIONS[-1].version

_BOOKKEEPING = """CREATE TABLE IF NOT EXISTS schema_migrations (
  version    INTEGER PRIMARY KEY,
  name       TEXT NOT NULL,
  applied_at TEXT NOT NULL
)"""


async def current_version(db: Database) -> int:
    exists = await db.fetchval(
        "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'schema_migrations'"
    )
    if not exists:
        return 0
    return int(await db.fetchval("SELECT coalesce(max(version), 0) FROM schema_migrations"))


async def migrate(
    db: Database, *, target: int | None = None, progress: Callable[[int, int], None] | None = None
) -> list[int]:
    """Apply every pending migration up to ``target`` (default: latest); return those applied.

    ``progress(done, total)`` counts the pending migrations as each one commits.
    """
    target = LATEST_VERSION if target is None else target
    version = await current_version(db)
    if version > LATEST_VERSION:
        raise SchemaVersionError(
            f"{db.path} is at schema version {version}, newer than this retold understands "
            f"({LATEST_VERSION}); upgrade retold to open it"
        )
    pending = [m for m in MIGRATIONS if version < m.version <= target]
    if progress is not None:
        progress(0, len(pending))
    applied: list[int] = []
    for done, migration in enumerate(pending, 1):
        if await _apply(db, migration):
            applied.append(migration.version)
        if progress is not None:
            progress(done, len(pending))
    return applied


async def _apply(db: Database, migration: Migration) -> bool:
    """One migration and its ``schema_migrations`` row in one transaction; False if already applied."""
    async with db.transaction():
        # Re-read inside the write lock: another process may have migrated meanwhile.
        await db.execute(_BOOKKEEPING)
        if await db.fetchval("SELECT 1 FROM schema_migrations WHERE version = ?", (migration.version,)):
            return False
        for statement in migration.statements:
            await db.execute(statement)
        if migration.backfill is not None:
            await migration.backfill(db)
        await db.execute(
            "INSERT INTO schema_migrations(version, name, applied_at) VALUES (?, ?, ?)",
            (migration.version, migration.name, format_ts(SystemClock().now())),
        )
    return True
