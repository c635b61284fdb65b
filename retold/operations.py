"""Operations: the maintenance and inspection surface behind ``retold`` commands (spec §16).

The CLI parses arguments and calls one method here; hosts can call the same methods
through ``rt.ops``. Every method that changes the store appends audit events with the
operator's identity (``actor``) and keeps ``records_version`` in step, so other
processes' vector indexes catch up; every refusal happens before anything changes.

One job: the operator's surface (``rt.ops``); it is long because each maintenance command
(expire, retain, erase, re-embed, check and repair, snapshots) is a method here, with its
report, while the store and the stages do the work.

    report = await rt.ops.erase(user="u1", reason="GDPR request 1432", actor="ops", dry_run=True)
    print(report.summary())

:func:`load_snapshot` is a module function, not a method: it replaces the file under
the store and refuses while any connection (a runtime included) holds it.
"""

from __future__ import annotations

import functools
import json
import os
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any, Literal

import anyio.to_thread
import numpy as np

from retold.config import Config
from retold.erasure import plan_erasure
from retold.errors import ConfigError, InvalidArgumentError, StoreError
from retold.index.passages import split_passages
from retold.models import STATUSES, Record, Scope, SessionKey, validate_id
from retold.policy import lifecycle
from retold.store import Store
from retold.store.database import run_to_completion
from retold.store.maintenance import ErasureSet, Finding, SnapshotInfo, read_snapshot_info, restore_snapshot
from retold.store.snapshots import on_event_loop
from retold.util import Clock, format_ts

__all__ = [
    "CheckReport",
    "ErasureReport",
    "Finding",
    "Operations",
    "ReembedReport",
    "RetainReport",
    "SnapshotInfo",
    "load_snapshot",
]

ErasureTarget = Literal["record", "session", "user"]  # as retold.erasure names them
Progress = Callable[[int, int], None]
"""``progress(done, total)``: called as a long operation's items finish (the CLI draws a bar)."""

# Findings --repair can fix because the rows are derived from others (FTS, vectors, the version).
_FTS_KINDS = frozenset({"fts_rows", "fts_orphan", "fts_deleted", "fts_stale"})
_EMBED_KINDS = frozenset({"vector_missing", "vector_foreign", "vector_corrupt"})
_DROP_VECTOR_KINDS = frozenset({"vector_erased", "vector_orphan"})
_STALE_ATTEMPTS = 3


@dataclass
class RetainReport:
    """Sessions whose transcripts ``retain`` blanked, and how many turns that was."""

    sessions: list[str]
    turns: int


@dataclass
class ErasureReport:
    """What an erasure changed (or, on a dry run, would change)."""

    target: str  # record:<id> | session:<id> | user:<id>
    reason: str
    applied: bool
    records: list[str]
    evidence_cleared: list[str]
    sessions: list[str]
    turns: int
    entities: list[str]
    search_logs: int
    events: int
    resupported: list[str] = field(default_factory=list)  # shared records kept on other users' sources
    search_logs_pruned: int = 0  # other people's searches that lose the erased records' entries
    store_items: int = 0  # LangGraph store items whose values go with them
    event_id: str | None = None  # the erasure event, once applied
    compacted: bool | None = None  # False: another connection kept the WAL from being emptied

    def summary(self) -> str:
        verb = "erased" if self.applied else "would erase"
        parts = [
            _count(len(self.records), "record"),
            f"the evidence of {_count(len(self.evidence_cleared), 'other record')}"
            if self.evidence_cleared
            else "",
            f"their support for {_count(len(self.resupported), 'shared record')} (kept on others' sources)"
            if self.resupported
            else "",
            f"{_count(len(self.sessions), 'session')} ({_count(self.turns, 'turn')} with text)"
            if self.sessions
            else "",
            _count(len(self.entities), "entity", "entities") if self.entities else "",
            _count(self.search_logs, "search log"),
            _count(self.events, "event payload"),
            _count(self.store_items, "store item") if self.store_items else "",
        ]
        return f"{verb} {self.target}: " + ", ".join(p for p in parts if p)


@dataclass
class ReembedReport:
    model: str
    version: str
    dims: int
    records: int
    batches: int
    replaced: list[dict[str, Any]]  # the (model, version, dims, n) the old vectors came from
    event_id: str


@dataclass
class CheckReport:
    """The integrity findings still present, and what ``repair`` changed to get there."""

    findings: list[Finding]
    repaired: list[str] = field(default_factory=list)

    @property
    def clean(self) -> bool:
        return not self.findings


class _StoreChanged(Exception):
    """Records gained or changed text while re-embedding ran; carries the ones to embed again."""

    def __init__(self, stale: list[tuple[str, str]]) -> None:
        super().__init__(f"{len(stale)} record(s) changed while re-embedding")
        self.stale = stale


async def _embed_with_passages(
    embedder: Any, texts: list[str], passage_chars: int
) -> list[tuple[np.ndarray, np.ndarray]]:
    """Each text's vector and its passages' (none for a short text; retold.index.passages), all
    in one model call."""
    from retold.index.embedder import embed_documents

    pieces = [[text, *split_passages(text, passage_chars)] for text in texts]
    flat = [piece for record_pieces in pieces for piece in record_pieces]
    vectors = np.asarray(await embed_documents(embedder, flat), np.float32)
    dims = int(embedder.dims)
    if vectors.shape != (len(flat), dims):
        raise StoreError(
            f"the embedder returned vectors of shape {vectors.shape}, expected ({len(flat)}, {dims})"
        )
    out, at = [], 0
    for record_pieces in pieces:
        out.append((vectors[at], vectors[at + 1 : at + len(record_pieces)]))
        at += len(record_pieces)
    return out


class Operations:
    """Maintenance and inspection over one store.

    ``embedder`` and ``index`` are the runtime's: re-embedding and vector repair use the
    embedder, and erasure makes both forget. ``caches`` are other in-process objects
    (judge, reranker, rewriter) whose caches an erasure must clear.
    """

    def __init__(
        self,
        store: Store,
        config: Config,
        clock: Clock,
        *,
        embedder: Any = None,
        index: Any = None,
        caches: Sequence[Any] = (),
    ) -> None:
        self._store = store
        self._config = config
        self._clock = clock
        self._embedder = embedder
        self._index = index
        self._caches = tuple(caches)

    # --- inspection -----------------------------------------------------------------------------

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

    # --- expiry and retention -------------------------------------------------------------------

    async def expire(self, *, actor: str = "admin", progress: Progress | None = None) -> list[str]:
        """Mark every active record past ``expires_at`` as ``expired``, one ``record.status`` event each.

        Provisional records and session summaries alike (spec §6.5, §16). Retrieval already
        ignores them; this makes the status say so. Running it again changes nothing.
        ``progress(done, total)`` counts the candidate records as they are decided.
        """
        now = self._clock.now()
        store = self._store
        expired: list[tuple[str, int]] = []
        async with store.transaction():
            candidates = await store.get_records(await store.expirable_ids(now))
            _report(progress, 0, len(candidates))
            for done, record in enumerate(candidates, 1):
                if lifecycle.needs_expiry(record, now):
                    version = await store.set_status(record.id, "expired")
                    await store.append_event(
                        "record.status",
                        actor,
                        record_id=record.id,
                        payload={
                            "from": record.status,
                            "to": "expired",
                            "reason": "expired",
                            "expires_at": format_ts(record.expires_at) if record.expires_at else None,
                        },
                        at=now,
                    )
                    expired.append((record.id, version))
                _report(progress, done, len(candidates))
        if self._index is not None:
            for record_id, version in expired:  # the vector stays: history searches still rank it
                self._index.touch(record_id, version)
        return [record_id for record_id, _ in expired]

    async def retain(self, *, actor: str = "admin", progress: Progress | None = None) -> RetainReport:
        """Blank the transcripts of extracted sessions that ended over ``sessions.retain_days`` ago.

        The turn rows stay (role, number, time) so a ``source_ref`` still resolves to a
        tombstoned turn. A session never extracted keeps its text whatever its age, since
        extraction still needs it. One ``session.retained`` event per session.
        ``progress(done, total)`` counts the sessions as their events are appended.
        """
        now = self._clock.now()
        cutoff = now - timedelta(days=self._config.sessions.retain_days)
        store = self._store
        async with store.transaction():
            due = await store.retainable_sessions(cutoff)
            _report(progress, 0, len(due))
            keys = [SessionKey(s["agent_id"], s["user_id"], s["id"]) for s in due]
            turns = await store.blank_turns(keys)
            for done, session in enumerate(due, 1):
                await store.append_event(
                    "session.retained",
                    actor,
                    payload={
                        "session_id": session["id"],
                        "agent_id": session["agent_id"],
                        "user_id": session["user_id"],
                        "turns": session["turns"],
                        "ended_at": session["ended_at"],
                        "retain_days": self._config.sessions.retain_days,
                    },
                    at=now,
                )
                _report(progress, done, len(due))
        return RetainReport(sessions=[str(k) for k in keys], turns=turns)

    # --- erasure --------------------------------------------------------------------------------

    async def erase(
        self,
        *,
        record: str | None = None,
        session: str | None = None,
        user: str | None = None,
        reason: str,
        actor: str = "admin",
        dry_run: bool = False,
        progress: Progress | None = None,
    ) -> ErasureReport:
        """Irreversibly erase durable content (spec §16); exactly one of record, session or user.

        * a record becomes a ``deleted`` tombstone without text, evidence, tags, vector,
          FTS row or entity links;
        * a session keeps blank turn rows; its summary record is erased, records quoting
          its turns lose the quoted evidence, and searches run in it lose their queries;
        * a user loses every session, every record in ``user:<id>`` and in the private
          ``agent:*/<id>`` scopes, every record anywhere sourced from their sessions, their
          search-log text, and the entities and aliases in their scopes.

        Events about erased rows keep id, kind, actor and time; their payloads go. The file
        is then compacted (FTS rebuilt, VACUUM, WAL truncated) and this process's vector
        index and model caches forget the erased text. ``dry_run`` only reports.
        ``progress(done, total)`` counts the records a user's sessions sourced elsewhere as
        each is judged erased or kept on others' support (the slow part of a user erasure).
        """
        targets = [
            (k, v) for k, v in (("record", record), ("session", session), ("user", user)) if v is not None
        ]
        if len(targets) != 1:
            raise InvalidArgumentError("erase needs exactly one target: a record, a session or a user id")
        if not isinstance(reason, str) or not reason.strip():
            raise InvalidArgumentError("erase needs a non-blank reason; it is recorded on the erasure event")
        kind, target_id = targets[0]
        if isinstance(target_id, SessionKey) and kind == "session":
            target_id = str(target_id)
        if not isinstance(target_id, str) or not target_id:
            raise InvalidArgumentError(f"the {kind} id to erase must be a non-empty string")
        if kind == "user":
            validate_id("user_id", target_id)
        store = self._store
        if kind == "session":  # a bare id names one principal's session, or the error lists them
            target_id = str(await store.resolve_session(target_id))
        vectors: dict[str, tuple[bytes, tuple[str, str, int]]] = {}
        erasure = await self._erasure_set(kind, target_id, vectors, progress)  # type: ignore[arg-type]
        if dry_run:
            return _erasure_report(kind, target_id, reason, erasure, applied=False)
        async with store.transaction():
            # Found again under the write lock, so rows written since the look above count too
            # (re-worded records reuse the vectors computed before the lock where they can).
            erasure = await self._erasure_set(kind, target_id, vectors)  # type: ignore[arg-type]
            version = await store.apply_erasure(erasure)
            # Forgotten in this process the moment the erasure commits, even when this call is
            # cancelled during the COMMIT and never reaches the lines after the block.
            store.db.after_commit(functools.partial(self._forget_in_process, erasure, version))
            report = _erasure_report(kind, target_id, reason, erasure, applied=True)
            report.event_id = await store.append_event(
                f"{kind}.erased",
                actor,
                record_id=target_id if kind == "record" else None,
                payload={
                    "reason": reason,
                    "target": report.target,
                    "records": erasure.records,
                    "evidence_cleared": erasure.evidence_only,
                    "resupported": [r.record_id for r in erasure.resupported],
                    "sessions": [str(k) for k in erasure.sessions],
                    "turns": erasure.turns,
                    "entities": erasure.entities,
                    "search_logs": len(erasure.search_logs),
                    "search_logs_pruned": len(erasure.pruned_logs),
                    "events": len(erasure.events),
                    "store_items": len(erasure.store_items),
                },
            )
        # Committed, the erasure is compacted out of the file (and its WAL) even if the caller
        # is cancelled now: a cancelled erase must not leave the erased text recoverable.
        report.compacted = await run_to_completion(store.compact())
        return report

    async def _erasure_set(
        self,
        kind: ErasureTarget,
        target_id: str,
        vectors: dict[str, tuple[bytes, tuple[str, str, int]]],
        progress: Progress | None = None,
    ) -> ErasureSet:
        return await plan_erasure(
            self._store, kind, target_id, config=self._config, clock=self._clock,
            embedder=self._embedder, vectors=vectors, progress=progress,
        )  # fmt: skip

    def _forget_in_process(self, erasure: ErasureSet, version: int) -> None:
        """Erased text must not outlive the rows in this process: vectors, query and judge caches."""
        if self._index is not None:
            for record_id in erasure.records:
                self._index.forget(record_id, version)
            for record_id in erasure.evidence_only:
                self._index.touch(record_id, version)
            for item in erasure.resupported:  # re-worded: the new wording's vector replaces the old
                if item.vector is not None:
                    self._index.upsert(item.record_id, np.frombuffer(item.vector, dtype=np.float32), version)
                else:
                    self._index.touch(item.record_id, version)
        for holder in (self._embedder, *self._caches):
            _clear_cache(holder)
        from retold.ingest.equivalence.claim_parser import parse_claim

        parse_claim.cache_clear()  # keyed by claim and quote text

    # --- re-embedding ---------------------------------------------------------------------------

    async def reembed(
        self,
        model: str,
        version: str,
        *,
        actor: str = "admin",
        batch_size: int | None = None,
        progress: Progress | None = None,
    ) -> ReembedReport:
        """Re-embed every record that has text with the configured embedder and swap all vectors at once.

        ``model`` and ``version`` must name the configured embedder (``embedding.model`` /
        ``embedding.version``): every later open checks the stored vectors against that
        configuration. Refuses (:class:`ConfigError`) when the latest logged search ran
        under another embedding with the very dense floors the configuration still
        carries, because floors are calibrated per model (spec §10.5). Vectors are computed
        in batches before the swap; the swap is one transaction that also appends the
        ``store.reembedded`` event. Records written meanwhile are embedded before it commits.
        ``batch_size`` defaults to ``embedding.reembed_batch_size``.
        """
        embedder = self._require_embedder()
        if (model, version) != (embedder.name, embedder.version):
            raise InvalidArgumentError(
                f"reembed --model {model} --version {version} does not match the configured embedder "
                f"(model {embedder.name!r} version {embedder.version!r}); set embedding.model and "
                "embedding.version in the config you pass with --config, so later opens accept the new "
                "vectors"
            )
        if batch_size is None:
            batch_size = self._config.embedding.reembed_batch_size
        if not isinstance(batch_size, int) or batch_size < 1:
            raise InvalidArgumentError(f"batch_size must be a positive integer, got {batch_size!r}")
        await self._refuse_uncalibrated(model, version)

        store = self._store
        dims = int(embedder.dims)
        embedded: dict[str, tuple[str, bytes, list[bytes]]] = {}  # id -> (text, vector, passages)
        passage_chars = self._config.embedding.passage_chars
        pending = await store.records_with_text()
        total, done, batches = len(pending), 0, 0
        _report(progress, done, total)
        for _attempt in range(_STALE_ATTEMPTS):
            for start in range(0, len(pending), batch_size):
                chunk = pending[start : start + batch_size]
                rows = await _embed_with_passages(embedder, [text for _, text in chunk], passage_chars)
                for (record_id, text), (vector, passages) in zip(chunk, rows, strict=True):
                    embedded[record_id] = (text, vector.tobytes(), [v.tobytes() for v in passages])
                batches += 1
                done += len(chunk)
                _report(progress, done, total)
            try:
                async with store.transaction():
                    current = await store.records_with_text()
                    stale = [(rid, text) for rid, text in current if embedded.get(rid, (None,))[0] != text]
                    if stale:
                        raise _StoreChanged(stale)
                    replaced = await store.embedding_models()
                    await store.replace_all_embeddings(
                        model, version, dims, [(rid, embedded[rid][1]) for rid, _ in current],
                        [(rid, embedded[rid][2]) for rid, _ in current if embedded[rid][2]],
                    )  # fmt: skip
                    event_id = await store.append_event(
                        "store.reembedded",
                        actor,
                        payload={
                            "model": model,
                            "version": version,
                            "dims": dims,
                            "records": len(current),
                            "batches": batches,
                            "replaced": replaced,
                        },
                    )
                break
            except _StoreChanged as changed:
                pending = changed.stale
                total += len(pending)
        else:
            raise StoreError(
                "records kept changing while re-embedding; stop the hosts writing to this store and run "
                "reembed again"
            )
        if self._index is not None:
            await self._index.refresh(store, self._config.embedding.incremental_reload_max)
        return ReembedReport(model, version, dims, len(current), batches, replaced, event_id)

    async def _refuse_uncalibrated(self, model: str, version: str) -> None:
        latest = await self._store.latest_search_log()
        if latest is None:
            return
        try:
            flags = json.loads(latest["config_flags"] or "{}")
        except ValueError:
            return
        ran = (flags.get("embedding_model"), flags.get("embedding_version"))
        if ran == (model, version):
            return
        logged = (flags.get("gate") or {}).get("dense_floor")
        trigger = latest.get("trigger") or "tool"
        floors = self._config.retrieval.gate.floors_for(trigger).dense_floor.model_dump()
        if logged == floors:
            key = "retrieval.gate.auto.dense_floor" if trigger == "auto" else "retrieval.gate.dense_floor"
            raise ConfigError(
                f"refusing to re-embed with {model!r} version {version!r}: the latest logged search "
                f"({latest['id']} at {latest['at']}) ran under {ran[0]!r} version {ran[1]!r} with the dense "
                f"floors this configuration still carries ({key}: {floors}). Dense floors are calibrated "
                "per model (spec §10.5): recalibrate them for the new model (benchmarks/calibrate_gate.py), "
                "put them in the config, then run reembed again",
                key=key,
            )

    def _require_embedder(self) -> Any:
        if self._embedder is None:
            raise StoreError("these operations have no embedder; use the ones on a Runtime (rt.ops)")
        return self._embedder

    # --- integrity ------------------------------------------------------------------------------

    async def check(self, *, repair: bool = False, actor: str = "admin") -> CheckReport:
        """Integrity beyond SQLite's ``integrity_check``; ``repair`` rebuilds what is derivable.

        Findings: SQLite and FTS5 corruption; a non-deleted record without exactly one FTS
        row, orphan or stale FTS rows; an active record without a vector of the configured
        model, version and width, foreign or corrupt vectors; links, conflicts, subjects and
        turns pointing at nothing; conflicts recorded one way; an ``index_version`` above
        ``records_version``; supersession cycles. ``repair`` rewrites FTS rows, re-embeds
        or drops vectors, lifts ``records_version`` (one ``store.repaired`` event) and
        checks again; what it cannot derive stays in the findings.
        """
        findings = await self._findings()
        repaired: list[str] = []
        if repair and findings:
            repaired = await self._repair(findings, actor)
            findings = await self._findings()
        return CheckReport(findings=findings, repaired=repaired)

    def _vector_identity(self) -> tuple[str, str, int]:
        if self._embedder is not None:
            return self._embedder.name, self._embedder.version, int(self._embedder.dims)
        cfg = self._config.embedding
        return cfg.model, cfg.version, cfg.dims

    async def _findings(self) -> list[Finding]:
        store = self._store
        findings = [Finding("sqlite", problem) for problem in await store.sqlite_integrity()]
        findings += await store.fts_findings()
        findings += await store.embedding_findings(*self._vector_identity())
        findings += await store.orphan_findings()
        findings += await store.one_way_conflicts()
        findings += await store.version_findings()
        findings += [
            Finding("supersession_cycle", " -> ".join([*cycle, cycle[0]]), cycle[0])
            for cycle in supersession_cycles(await store.supersession_edges())
        ]
        return findings

    async def _repair(self, findings: list[Finding], actor: str) -> list[str]:
        store = self._store
        done: list[str] = []
        if any(f.kind == "sqlite" and "records_fts" in f.detail for f in findings):
            await store.rebuild_fts_index()
            done.append("rebuilt the records_fts index from its rows")
        fts_ids = sorted({f.record_id for f in findings if f.kind in _FTS_KINDS and f.record_id})
        if fts_ids:
            await store.rebuild_fts_rows(fts_ids)
            done.append(f"rewrote the FTS rows of {len(fts_ids)} record(s): {', '.join(fts_ids)}")
        drop = sorted({f.record_id for f in findings if f.kind in _DROP_VECTOR_KINDS and f.record_id})
        if drop:
            await store.drop_embeddings(drop)
            done.append(f"dropped the vectors of {len(drop)} erased or missing record(s): {', '.join(drop)}")
        embed_ids = sorted({f.record_id for f in findings if f.kind in _EMBED_KINDS and f.record_id})
        if embed_ids:
            done.append(await self._reembed_records(embed_ids))
        if any(f.kind == "records_version" for f in findings) and await store.version_findings():
            value = await store.raise_records_version()
            done.append(f"raised records_version to {value}")
        if done:
            await store.append_event("store.repaired", actor, payload={"repaired": done})
            if self._index is not None:
                await self._index.refresh(store, self._config.embedding.incremental_reload_max)
        return done

    async def _reembed_records(self, record_ids: list[str]) -> str:

        embedder = self._require_embedder()
        store = self._store
        records = [r for r in await store.get_records(record_ids) if r.content]
        passage_chars = self._config.embedding.passage_chars
        rows = await _embed_with_passages(embedder, [r.content for r in records], passage_chars)
        async with store.transaction():
            for record, (vector, passages) in zip(records, rows, strict=True):
                await store.put_embedding(record.id, embedder.name, embedder.version, vector, passages)
        ids = ", ".join(r.id for r in records)
        return f"re-embedded {len(records)} record(s) with {embedder.name} version {embedder.version}: {ids}"

    # --- snapshots ------------------------------------------------------------------------------

    async def save_snapshot(
        self, path: str | os.PathLike[str], *, progress: Progress | None = None
    ) -> SnapshotInfo:
        """A consistent copy of the whole store, taken online through SQLite's backup API.

        Every table is included (lineage, events, search logs, sessions, the FTS index,
        schema history). Refuses to overwrite an existing file. ``progress(done, total)``
        counts the database pages copied.
        """
        return await self._store.backup_to(path, progress=progress)


async def load_snapshot(
    store_path: str | os.PathLike[str],
    snapshot_path: str | os.PathLike[str],
    *,
    dry_run: bool = False,
    progress: Progress | None = None,
) -> SnapshotInfo:
    """Replace a store's contents with a snapshot's; nothing may hold the store open.

    The snapshot is validated first (a retold store, schema no newer than this code,
    passing ``quick_check``); the store is then locked exclusively without waiting, so a
    running host or command makes this fail before anything changes. ``dry_run``
    validates and describes the snapshot only. ``progress(done, total)`` counts the
    database pages copied into the store.
    """
    if dry_run:
        return await anyio.to_thread.run_sync(read_snapshot_info, snapshot_path)
    restore = functools.partial(restore_snapshot, progress=on_event_loop(progress))
    return await anyio.to_thread.run_sync(restore, store_path, snapshot_path)


def supersession_cycles(edges: Iterable[tuple[str, str]]) -> list[list[str]]:
    """Each cycle in the ``record -> supersedes_id`` graph once, in chain order."""
    nxt = dict(edges)
    finished: set[str] = set()
    cycles = []
    for start in nxt:
        path: list[str] = []
        where: dict[str, int] = {}
        node: str | None = start
        while node is not None and node in nxt and node not in finished:
            if node in where:
                cycles.append(path[where[node] :])
                break
            where[node] = len(path)
            path.append(node)
            node = nxt[node]
        finished.update(path)
    return cycles


def _erasure_report(
    kind: str, target_id: str, reason: str, erasure: ErasureSet, *, applied: bool
) -> ErasureReport:
    return ErasureReport(
        target=f"{kind}:{target_id}",
        reason=reason,
        applied=applied,
        records=list(erasure.records),
        evidence_cleared=list(erasure.evidence_only),
        resupported=[r.record_id for r in erasure.resupported],
        search_logs_pruned=len(erasure.pruned_logs),
        sessions=[str(k) for k in erasure.sessions],
        turns=erasure.turns,
        entities=list(erasure.entities),
        search_logs=len(erasure.search_logs),
        events=len(erasure.events),
        store_items=len(erasure.store_items),
    )


def _report(progress: Progress | None, done: int, total: int) -> None:
    if progress is not None:
        progress(done, total)


def _count(n: int, singular: str, plural: str | None = None) -> str:
    return f"{n} {singular if n == 1 else plural or singular + 's'}"


def _clear_cache(holder: Any) -> None:
    """Empty an object's text-keyed cache: ``clear_cache()`` where it has one."""
    clear = getattr(holder, "clear_cache", None)
    if callable(clear):
        clear()
