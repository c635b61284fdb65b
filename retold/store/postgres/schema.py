"""The schema of spec §3 on PostgreSQL, versioned like SQLite's (:mod:`retold.store.migrations`).

A new database is created at the latest version in one transaction: the tables as SQLite's
migrations leave them, with ``schema_migrations`` recording every version up to it, so a
future migration is written once for both backends and applies to both. Two processes that
open a fresh database at once are serialised by a transaction-scoped advisory lock taken
before anything is read, so exactly one creates the schema and the other finds it done.

Differences from SQLite's tables, all invisible above ``retold/store/``:

* text columns use the ``"C"`` collation, so ``ORDER BY`` sorts by code point as SQLite's
  ``BINARY`` does, whatever the server's default;
* tables ordered by SQLite's ``rowid`` carry an identity column of that name;
* ``records_fts`` is an ordinary table whose rows are tokenized in Python (see
  :mod:`retold.store.postgres.store`), with ``records_terms`` as its inverted list;
* ``embeddings`` keeps the float32 bytes SQLite keeps (every shared statement reads and
  writes them) plus pgvector's ``embedding``, filled from them before the writing
  transaction commits and searched through an HNSW index per dimension
  (:mod:`retold.store.postgres.vectors`);
* ``json_extract``, ``instr`` and ``group_concat`` exist as functions, so the statements
  both engines share need no rewriting for them.

One job: PostgreSQL's schema and its versioning; it is long because the latest schema is
spelled out whole, as DDL, beside the upgrades of the older layouts.
"""

from __future__ import annotations

from collections.abc import Callable

from retold.errors import SchemaVersionError, StoreError
from retold.store.migrations import LATEST_VERSION, MIGRATIONS
from retold.store.postgres.database import PgDatabase
from retold.store.postgres.lexicon import STATISTICS, TERMS_INDEXES, WEIGHTED_COLUMN, tokenize_pending
from retold.store.postgres.vectors import fill_pending
from retold.util import SystemClock, format_ts

__all__ = ["SCHEMA_LOCK", "current_version", "migrate", "upgrade_layout"]

SCHEMA_LOCK = 0x7265746F6C6473  # the advisory lock held while the schema is created or migrated

T = 'TEXT COLLATE "C"'

_FUNCTIONS = (
    # SQLite's json_extract(doc, '$.a.b') on the text documents retold stores: NULL, a number,
    # or the text of a string. Numbers come back as numeric so `= 1` compares as in SQLite.
    """CREATE OR REPLACE FUNCTION json_extract(doc text, path text) RETURNS text
       LANGUAGE sql IMMUTABLE PARALLEL SAFE AS
       $$ SELECT (doc::jsonb) #>> string_to_array(substr(path, 3), '.') $$""",
    """CREATE OR REPLACE FUNCTION json_type(doc text, path text) RETURNS text
       LANGUAGE sql IMMUTABLE PARALLEL SAFE AS
       $$ SELECT jsonb_typeof((doc::jsonb) #> string_to_array(substr(path, 3), '.')) $$""",
    # SQLite's json_tree(doc): every value in the document, strings typed 'text'.
    """CREATE OR REPLACE FUNCTION json_tree(doc text) RETURNS TABLE(type text, value text)
       LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
         WITH RECURSIVE t(v) AS (
           SELECT doc::jsonb
           UNION ALL
           SELECT x.c FROM t, LATERAL (
             SELECT e.value FROM jsonb_each(CASE WHEN jsonb_typeof(t.v) = 'object' THEN t.v END) e
             UNION ALL
             SELECT a.value FROM jsonb_array_elements(CASE WHEN jsonb_typeof(t.v) = 'array' THEN t.v END) a
           ) AS x(c)
         )
         SELECT CASE jsonb_typeof(v) WHEN 'string' THEN 'text' ELSE jsonb_typeof(v) END, v #>> '{}' FROM t
       $$""",
    """CREATE OR REPLACE FUNCTION instr(haystack text, needle text) RETURNS integer
       LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$ SELECT strpos(haystack, needle) $$""",
    """CREATE OR REPLACE FUNCTION retold_concat(acc text, val text, sep text) RETURNS text
       LANGUAGE sql IMMUTABLE PARALLEL SAFE AS
       $$ SELECT CASE WHEN val IS NULL THEN acc WHEN acc IS NULL THEN val ELSE acc || sep || val END $$""",
    "CREATE OR REPLACE AGGREGATE group_concat(text, text) (SFUNC = retold_concat, STYPE = text)",
)

_TABLES = (
    f"""CREATE TABLE schema_migrations (
      version    INTEGER PRIMARY KEY,
      name       {T} NOT NULL,
      applied_at {T} NOT NULL
    )""",
    f"""CREATE TABLE entities (
      id            {T} PRIMARY KEY,
      kind          {T} NOT NULL CHECK (kind IN ('person','project','org','repo','product','other')),
      canonical     {T} NOT NULL,
      scope_kind    {T} NOT NULL,
      scope_id      {T} NOT NULL,
      status        {T} NOT NULL CHECK (status IN ('provisional','confirmed','merged','deleted')),
      merged_into   {T} REFERENCES entities(id),
      created_at    {T} NOT NULL,
      origin_user   {T},
      origin_record {T}
    )""",
    "CREATE INDEX entities_scope ON entities(scope_kind, scope_id, kind)",
    f"""CREATE TABLE records (
      id              {T} PRIMARY KEY,
      type            {T} NOT NULL CHECK (type IN ('semantic','episodic','procedural')),
      version         INTEGER NOT NULL DEFAULT 1,
      content         {T} NOT NULL,
      subject         {T} NOT NULL,
      scope_kind      {T} NOT NULL CHECK (scope_kind IN ('agent','user','project','org')),
      scope_id        {T} NOT NULL,
      source_kind     {T} NOT NULL CHECK (source_kind IN
                        ('user_statement','system','tool_result','session_summary','agent_inference')),
      source_ref      {T},
      creator_agent_id {T} NOT NULL,
      evidence        {T},
      created_at      {T} NOT NULL,
      event_at        {T} NOT NULL,
      expires_at      {T},
      valid_from      {T},
      valid_until     {T},
      confidence      DOUBLE PRECISION NOT NULL,
      status          {T} NOT NULL CHECK (status IN
                        ('provisional','confirmed','superseded','expired','deleted')),
      supersedes_id   {T} REFERENCES records(id),
      reinforcements  INTEGER NOT NULL DEFAULT 0,
      last_reinforced_at {T},
      tags            {T} NOT NULL DEFAULT '[]',
      subject_entity_id {T} REFERENCES entities(id),
      attribute       {T},
      index_version   BIGINT NOT NULL DEFAULT 0,
      review_at       {T},
      review_flagged_at {T},
      source_origin   {T}
    )""",
    "CREATE INDEX records_scope ON records(scope_kind, scope_id, status)",
    "CREATE INDEX records_event ON records(type, event_at)",
    "CREATE INDEX records_subject ON records(scope_kind, scope_id, subject_entity_id, attribute, status)",
    "CREATE INDEX records_index_version ON records(index_version)",
    "CREATE INDEX records_temporal_review ON records(review_at, review_flagged_at, status)",
    "CREATE INDEX records_short_id ON records(right(id, 12))",
    """CREATE UNIQUE INDEX records_live_summary ON records(source_origin)
       WHERE source_kind = 'session_summary' AND status IN ('provisional','confirmed')""",
    "CREATE INDEX records_source_origin ON records(source_origin)",
    f"""CREATE TABLE record_conflicts (
      record_id   {T} NOT NULL REFERENCES records(id),
      other_id    {T} NOT NULL REFERENCES records(id),
      noted_at    {T} NOT NULL,
      PRIMARY KEY (record_id, other_id)
    )""",
    f"""CREATE TABLE embeddings (
      record_id   {T} PRIMARY KEY REFERENCES records(id),
      model       {T} NOT NULL,
      version     {T} NOT NULL,
      dims        INTEGER NOT NULL,
      vector      BYTEA NOT NULL,
      index_version BIGINT NOT NULL DEFAULT 0
    )""",
    "CREATE INDEX embeddings_index_version ON embeddings(index_version)",
    # The lexical index: each row's text and, filled in before its transaction commits, the
    # tokens SQLite's unicode61 tokenizer would index (retold.retrieve.query_terms.fts_tokens) per
    # column, and one records_terms row per distinct token (the inverted list BM25 reads).
    f"""CREATE TABLE records_fts (
      rowid       BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
      record_id   {T} NOT NULL,
      content     {T} NOT NULL DEFAULT '',
      subject     {T} NOT NULL DEFAULT '',
      aliases     {T} NOT NULL DEFAULT '',
      content_tokens TEXT[] COLLATE "C",
      subject_tokens TEXT[] COLLATE "C",
      alias_tokens TEXT[] COLLATE "C",
      ntokens     INTEGER NOT NULL DEFAULT 0,
      tokenized   BOOLEAN NOT NULL DEFAULT false
    )""",
    "CREATE INDEX records_fts_record ON records_fts(record_id)",
    "CREATE INDEX records_fts_pending ON records_fts(rowid) WHERE NOT tokenized",
    """CREATE OR REPLACE FUNCTION retold_fts_changed() RETURNS trigger LANGUAGE plpgsql AS $$
       BEGIN
         IF TG_OP = 'INSERT' OR NEW.content IS DISTINCT FROM OLD.content
            OR NEW.subject IS DISTINCT FROM OLD.subject OR NEW.aliases IS DISTINCT FROM OLD.aliases THEN
           NEW.tokenized := false;
         END IF;
         RETURN NEW;
       END $$""",
    """CREATE TRIGGER records_fts_changed BEFORE INSERT OR UPDATE ON records_fts
       FOR EACH ROW EXECUTE FUNCTION retold_fts_changed()""",
    # tf per column (content, subject, aliases): BM25 for single words is computed in SQL.
    f"""CREATE TABLE records_terms (
      term        {T} NOT NULL,
      fts_rowid   BIGINT NOT NULL REFERENCES records_fts(rowid) ON DELETE CASCADE,
      record_id   {T} NOT NULL,
      content_tf  INTEGER NOT NULL DEFAULT 0,
      subject_tf  INTEGER NOT NULL DEFAULT 0,
      alias_tf    INTEGER NOT NULL DEFAULT 0,
      ntokens     INTEGER NOT NULL DEFAULT 0,
      scope_kind  {T},
      scope_id    {T},
      {WEIGHTED_COLUMN},
      PRIMARY KEY (term, fts_rowid)
    )""",
    *TERMS_INDEXES,
    f"""CREATE TABLE entity_aliases (
      rowid       BIGINT GENERATED ALWAYS AS IDENTITY,
      entity_id   {T} NOT NULL REFERENCES entities(id),
      alias_norm  {T} NOT NULL,
      scope_kind  {T},
      scope_id    {T},
      origin_user {T},
      PRIMARY KEY (entity_id, alias_norm)
    )""",
    "CREATE INDEX entity_aliases_lookup ON entity_aliases(alias_norm)",
    f"""CREATE TABLE record_entities (
      rowid       BIGINT GENERATED ALWAYS AS IDENTITY,
      record_id   {T} NOT NULL REFERENCES records(id),
      entity_id   {T} NOT NULL REFERENCES entities(id),
      role        {T} NOT NULL DEFAULT 'about' CHECK (role IN ('about','mentions')),
      PRIMARY KEY (record_id, entity_id)
    )""",
    "CREATE INDEX record_entities_by_entity ON record_entities(entity_id)",
    f"""CREATE TABLE grants (
      agent_id    {T} NOT NULL,
      scope_kind  {T} NOT NULL,
      scope_id    {T} NOT NULL,
      can_read    INTEGER NOT NULL DEFAULT 1,
      can_write   INTEGER NOT NULL DEFAULT 0,
      PRIMARY KEY (agent_id, scope_kind, scope_id)
    )""",
    f"""CREATE TABLE sessions (
      id          {T} NOT NULL,
      agent_id    {T} NOT NULL,
      user_id     {T} NOT NULL,
      project_id  {T},
      started_at  {T} NOT NULL,
      ended_at    {T},
      extraction_started_at {T},
      extracted_at {T},
      PRIMARY KEY (agent_id, user_id, id)
    )""",
    "CREATE INDEX sessions_user ON sessions(user_id)",
    f"""CREATE TABLE session_turns (
      agent_id    {T} NOT NULL,
      user_id     {T} NOT NULL,
      session_id  {T} NOT NULL,
      turn        INTEGER NOT NULL,
      role        {T} NOT NULL CHECK (role IN ('user','assistant','tool')),
      content     {T} NOT NULL,
      at          {T} NOT NULL,
      PRIMARY KEY (agent_id, user_id, session_id, turn),
      FOREIGN KEY (agent_id, user_id, session_id) REFERENCES sessions(agent_id, user_id, id)
    )""",
    f"""CREATE TABLE events (
      id          {T} PRIMARY KEY,
      at          {T} NOT NULL,
      kind        {T} NOT NULL,
      actor       {T} NOT NULL,
      record_id   {T},
      entity_id   {T},
      payload     {T} NOT NULL
    )""",
    "CREATE INDEX events_record ON events(record_id)",
    "CREATE INDEX events_entity ON events(entity_id)",
    f"""CREATE TABLE search_log (
      id            {T} PRIMARY KEY,
      at            {T} NOT NULL,
      agent_id      {T} NOT NULL,
      user_id       {T} NOT NULL,
      session_id    {T},
      request       {T} NOT NULL,
      context       {T},
      rewrite_status {T} NOT NULL,
      rewritten_queries {T},
      readable_scopes {T} NOT NULL,
      dense         {T} NOT NULL,
      lexical       {T} NOT NULL,
      entity        {T} NOT NULL,
      fused         {T} NOT NULL,
      freshness     {T} NOT NULL,
      gated_out     {T} NOT NULL,
      deduped_out   {T} NOT NULL,
      reranked      {T},
      budget_out    {T} NOT NULL,
      returned      {T} NOT NULL,
      explanations  {T} NOT NULL,
      config_flags  {T} NOT NULL,
      warm          INTEGER NOT NULL,
      timings_ms    {T} NOT NULL,
      trigger       {T} NOT NULL DEFAULT 'tool',
      reranked_out  {T} NOT NULL DEFAULT '[]',
      rerank_status {T} NOT NULL DEFAULT 'disabled',
      rerank_error  {T}
    )""",
    "CREATE INDEX search_log_user ON search_log(user_id, at)",
    f"""CREATE TABLE migration_issues (
      migration_version INTEGER NOT NULL,
      record_id   {T} NOT NULL REFERENCES records(id),
      issue       {T} NOT NULL,
      resolution  {T} CHECK (resolution IN ('expired','acknowledged')),
      resolved_at {T},
      resolved_by {T},
      PRIMARY KEY (migration_version, record_id)
    )""",
    f"CREATE TABLE store_meta (key {T} PRIMARY KEY, value BIGINT NOT NULL)",
    "INSERT INTO store_meta(key, value) VALUES ('records_version', 0)",
    f"""CREATE TABLE record_sources (
      rowid       BIGINT GENERATED ALWAYS AS IDENTITY,
      record_id   {T} NOT NULL REFERENCES records(id),
      origin      {T} NOT NULL,
      source_kind {T} NOT NULL CHECK (source_kind IN
                    ('user_statement','system','tool_result','session_summary','agent_inference')),
      source_ref  {T},
      agent_id    {T} NOT NULL,
      user_id     {T},
      session_id  {T},
      evidence    {T},
      content     {T} NOT NULL,
      added_at    {T} NOT NULL,
      counted     INTEGER NOT NULL DEFAULT 1,
      PRIMARY KEY (record_id, origin)
    )""",
    "CREATE INDEX record_sources_user ON record_sources(user_id)",
    "CREATE INDEX record_sources_session ON record_sources(agent_id, user_id, session_id)",
    "CREATE INDEX record_sources_origin ON record_sources(origin)",
)

# pgvector's column beside SQLite's bytes. A row whose bytes change (re-embedding) loses its
# vector until the transaction's end fills it again; the partial index finds those rows.
_VECTORS = (
    "ALTER TABLE embeddings ADD COLUMN embedding vector",
    # The vector stays in the row, where an exact scan reads it without detoasting; the bytes
    # (read only to load or copy) move out of line, so a row fits a page several times over.
    """ALTER TABLE embeddings ALTER COLUMN embedding SET STORAGE PLAIN,
                              ALTER COLUMN vector SET STORAGE EXTERNAL""",
    """CREATE FUNCTION retold_embedding_stale() RETURNS trigger LANGUAGE plpgsql AS $$
       BEGIN
         IF NEW.vector IS DISTINCT FROM OLD.vector OR NEW.dims IS DISTINCT FROM OLD.dims THEN
           NEW.embedding := NULL;
         END IF;
         RETURN NEW;
       END $$""",
    """CREATE TRIGGER embeddings_stale BEFORE UPDATE ON embeddings
       FOR EACH ROW EXECUTE FUNCTION retold_embedding_stale()""",
    "CREATE INDEX embeddings_pending ON embeddings(record_id) WHERE embedding IS NULL",
)

BASELINE = 7
"""The version the tables above are at; later versions are the migrations in :data:`_MIGRATIONS`."""

# Migrations after the baseline, by version: SQLite's (retold.store.migrations) in PostgreSQL's
# spelling. A new database runs them after the baseline tables; an older one runs those it lacks.
_MIGRATIONS: dict[int, tuple[str, ...]] = {
    10: (
        f"""CREATE TABLE record_activation (
          record_id   {T} PRIMARY KEY REFERENCES records(id),
          scope_kind  {T} NOT NULL,
          scope_id    {T} NOT NULL,
          activation  {T} NOT NULL CHECK (activation IN ('ambient','conditional')),
          category    {T},
          reason      {T} NOT NULL,
          decided_by  {T} NOT NULL CHECK (decided_by IN ('policy','review','operator')),
          actor       {T} NOT NULL,
          decided_at  {T} NOT NULL
        )""",
        "CREATE INDEX record_activation_scope ON record_activation(scope_kind, scope_id, activation)",
        f"""CREATE TABLE activation_reviews (
          id          {T} PRIMARY KEY,
          record_id   {T} NOT NULL REFERENCES records(id),
          scope_kind  {T} NOT NULL,
          scope_id    {T} NOT NULL,
          category    {T},
          reason      {T} NOT NULL,
          status      {T} NOT NULL CHECK (status IN ('open','resolved')),
          resolution  {T} CHECK (resolution IN ('promote','conditional','reject')),
          resolver    {T},
          note        {T},
          created_at  {T} NOT NULL,
          resolved_at {T}
        )""",
        "CREATE INDEX activation_reviews_status ON activation_reviews(status, created_at)",
        """CREATE UNIQUE INDEX activation_reviews_one_open ON activation_reviews(record_id)
           WHERE status = 'open'""",
    ),
    9: (),  # PostgreSQL's records_fts has always had its record_id index (records_fts_record)
    8: (
        f"""CREATE TABLE store_items (
          namespace   {T} NOT NULL,
          key         {T} NOT NULL,
          scope_kind  {T} NOT NULL,
          scope_id    {T} NOT NULL,
          record_id   {T} REFERENCES records(id),
          value       {T} NOT NULL,
          agent_id    {T} NOT NULL,
          user_id     {T},
          created_at  {T} NOT NULL,
          updated_at  {T} NOT NULL,
          expires_at  {T},
          ttl_minutes DOUBLE PRECISION,
          PRIMARY KEY (namespace, key)
        )""",
        "CREATE INDEX store_items_scope ON store_items(scope_kind, scope_id, updated_at)",
        "CREATE INDEX store_items_record ON store_items(record_id)",
        "CREATE INDEX store_items_user ON store_items(user_id)",
    ),
    11: (
        f"""CREATE TABLE passage_vectors (
          record_id   {T} NOT NULL REFERENCES records(id),
          ordinal     INTEGER NOT NULL,
          model       {T} NOT NULL,
          version     {T} NOT NULL,
          dims        INTEGER NOT NULL,
          vector      BYTEA NOT NULL,
          PRIMARY KEY (record_id, ordinal)
        )""",
    ),
    12: ("CREATE INDEX records_scope_order ON records(scope_kind, scope_id, event_at, id)",),
}


async def current_version(db: PgDatabase) -> int:
    if not await db.fetchval("SELECT to_regclass('schema_migrations') IS NOT NULL"):
        return 0
    return int(await db.fetchval("SELECT coalesce(max(version), 0) FROM schema_migrations"))


async def migrate(db: PgDatabase, *, progress: Callable[[int, int], None] | None = None) -> list[int]:
    """Create the schema on a new database, or migrate an older one (at most once across processes).

    Returns the versions applied. ``progress(done, total)`` counts the pending migrations
    as each one is applied (all of them commit together, in one transaction).
    """
    missing = [m.version for m in MIGRATIONS if m.version > BASELINE and m.version not in _MIGRATIONS]
    if missing:  # pragma: no cover - a reminder for the next migration's author
        raise SchemaVersionError(
            f"SQLite's migration(s) {missing} have no PostgreSQL spelling: add them to "
            "retold/store/postgres/schema.py _MIGRATIONS"
        )
    version = await current_version(db)
    if version > LATEST_VERSION:
        raise SchemaVersionError(
            f"{db.path} is at schema version {version}, newer than this retold understands "
            f"({LATEST_VERSION}); upgrade retold to open it"
        )
    if version == LATEST_VERSION:
        await upgrade_layout(db)
        return []
    async with db.transaction():
        await db.fetchval(f"SELECT pg_advisory_xact_lock({SCHEMA_LOCK})")
        version = await current_version(db)  # another process may have done it meanwhile
        if version >= LATEST_VERSION:
            return []
        if version < BASELINE:
            for ddl in (*_FUNCTIONS, *_TABLES):
                await db.run_raw(ddl)
            for present, change in _LAYOUT:
                if not await present(db):
                    await change(db)
        now = format_ts(SystemClock().now())
        pending = [m for m in MIGRATIONS if m.version > version]
        if progress is not None:
            progress(0, len(pending))
        applied = []
        for migration in pending:
            for ddl in _MIGRATIONS.get(migration.version, ()) if migration.version > BASELINE else ():
                await db.run_raw(ddl)
            await db.execute(
                "INSERT INTO schema_migrations(version, name, applied_at) VALUES (?, ?, ?)",
                (migration.version, migration.name, now),
            )
            applied.append(migration.version)
            if progress is not None:
                progress(len(applied), len(pending))
    await upgrade_layout(db)
    return applied


async def _has_vectors(db: PgDatabase) -> bool:
    return bool(
        await db.fetchval(
            """SELECT count(*) FROM information_schema.columns WHERE table_schema = current_schema()
                AND table_name = 'embeddings' AND column_name = 'embedding'"""
        )
    )


async def _create_vectors(db: PgDatabase) -> None:
    """pgvector's column, inside the caller's schema transaction (the extension first, if allowed)."""
    if not await db.fetchval("SELECT count(*) FROM pg_extension WHERE extname = 'vector'"):
        try:
            async with db.transaction():  # a savepoint: a refusal leaves the schema work intact
                await db.run_raw("CREATE EXTENSION IF NOT EXISTS vector")
        except StoreError as exc:
            raise StoreError(
                f"{db.path} needs the pgvector extension and this role may not create it: have a "
                "superuser run CREATE EXTENSION vector in this database once (pgvector 0.8 or newer)"
            ) from exc
    for ddl in _VECTORS:
        await db.run_raw(ddl)


async def _has_scoped_terms(db: PgDatabase) -> bool:
    return bool(await db.fetchval("SELECT to_regclass('records_terms_doc') IS NOT NULL"))


async def _has_ranked_terms(db: PgDatabase) -> bool:
    return bool(await db.fetchval("SELECT to_regclass('records_terms_ranked') IS NOT NULL"))


async def _rank_terms(db: PgDatabase) -> None:
    """Postings ordered within a word by weighted frequency and length."""
    await db.run_raw(f"ALTER TABLE records_terms ADD COLUMN IF NOT EXISTS {WEIGHTED_COLUMN}")
    await db.run_raw("DROP INDEX IF EXISTS records_terms_scoped")
    for ddl in TERMS_INDEXES:
        await db.run_raw(ddl)


async def _scope_terms(db: PgDatabase) -> None:
    """Postings that carry their record's scope and length: tokenize every row again."""
    await db.run_raw(
        f"""ALTER TABLE records_terms ADD COLUMN IF NOT EXISTS ntokens INTEGER NOT NULL DEFAULT 0,
                                      ADD COLUMN IF NOT EXISTS scope_kind {T},
                                      ADD COLUMN IF NOT EXISTS scope_id {T}"""
    )
    await db.run_raw("DROP INDEX IF EXISTS records_terms_row")
    await _rank_terms(db)
    await db.execute("UPDATE records_fts SET tokenized = false")
    await tokenize_pending(db)


async def _add_vectors(db: PgDatabase) -> None:
    await _create_vectors(db)
    await fill_pending(db, set())


# PostgreSQL-only changes since a database's tables were created, each detected by what it adds.
async def _has_statistics(db: PgDatabase) -> bool:
    return bool(await db.fetchval("SELECT to_regclass('records_term_counts') IS NOT NULL"))


async def _keep_statistics(db: PgDatabase) -> None:
    for ddl in STATISTICS:
        await db.run_raw(ddl)


_LAYOUT = (
    (_has_vectors, _add_vectors),
    (_has_scoped_terms, _scope_terms),
    (_has_ranked_terms, _rank_terms),
    (_has_statistics, _keep_statistics),
)


async def upgrade_layout(db: PgDatabase) -> None:
    """Bring a database created by an earlier retold to this one's PostgreSQL layout."""
    if all([await present(db) for present, _ in _LAYOUT]):
        return
    async with db.transaction():
        await db.fetchval(f"SELECT pg_advisory_xact_lock({SCHEMA_LOCK})")
        for present, change in _LAYOUT:
            if not await present(db):
                await change(db)
