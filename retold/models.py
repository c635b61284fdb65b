"""The framework-neutral types of spec §4 and the model protocols of §5.

Storage, ingestion, retrieval, tools and adapters exchange these instead of
framework objects. ``Record`` is persisted state; ``CandidateRecord`` is untrusted
extractor output that becomes a record only after the ingestor validates it.

One job: the shared types and protocols; it is long because every type the packages
exchange is defined here, so none of them imports another for a type.

    >>> p = Principal(agent_id="planner", user_id="u1", session_id="s1")
    >>> p.private_scope
    Scope(kind='agent', id='planner/u1')
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Literal, Protocol, get_args, runtime_checkable

from retold.errors import InvalidArgumentError

if TYPE_CHECKING:
    import numpy as np

__all__ = [
    "ENTITY_KINDS",
    "MAX_ID_CHARS",
    "MAX_SESSION_ID_CHARS",
    "RECORD_TYPES",
    "SCOPE_KINDS",
    "SOURCE_KINDS",
    "STATUSES",
    "Candidate",
    "CandidateRecord",
    "CandidateReviewer",
    "Embedder",
    "Entity",
    "EntityKind",
    "EntityMention",
    "EquivalenceJudge",
    "EvidenceCheck",
    "Explanation",
    "ExtractionContext",
    "ExtractionOutput",
    "Extractor",
    "GeneratorHit",
    "Grant",
    "LexicalMatch",
    "LexicalTerm",
    "Principal",
    "QueryRewriter",
    "Record",
    "RecordSource",
    "RecordType",
    "Reranker",
    "Resolution",
    "ReviewContext",
    "ReviewDecision",
    "RewriteResult",
    "Scope",
    "ScopeKind",
    "SearchRequest",
    "SearchResponse",
    "SearchResult",
    "SessionInfo",
    "SessionKey",
    "SessionSummary",
    "SourceKind",
    "Status",
    "Turn",
    "Verdict",
    "validate_id",
]

ScopeKind = Literal["agent", "user", "project", "org"]
RecordType = Literal["semantic", "episodic", "procedural"]
SourceKind = Literal["user_statement", "system", "tool_result", "session_summary", "agent_inference"]
Status = Literal["provisional", "confirmed", "superseded", "expired", "deleted"]
EntityKind = Literal["person", "project", "org", "repo", "product", "other"]
EntityStatus = Literal["provisional", "confirmed", "merged", "deleted"]
Role = Literal["user", "assistant", "tool"]
LinkRole = Literal["about", "mentions"]
Verdict = Literal["same", "contradicts", "distinct"]
RewriteStatus = Literal["disabled", "applied", "unchanged", "failed"]
Trigger = Literal["tool", "auto"]

SCOPE_KINDS: tuple[str, ...] = get_args(ScopeKind)
RECORD_TYPES: tuple[str, ...] = get_args(RecordType)
SOURCE_KINDS: tuple[str, ...] = get_args(SourceKind)
STATUSES: tuple[str, ...] = get_args(Status)
ENTITY_KINDS: tuple[str, ...] = get_args(EntityKind)
ACTIVE_STATUSES: tuple[str, ...] = ("provisional", "confirmed")


MAX_ID_CHARS = 512
"""The longest id (agent, user, session, project, scope) a caller may choose."""

MAX_SESSION_ID_CHARS = MAX_ID_CHARS + 64
"""A session id may grow past :data:`MAX_ID_CHARS` only by idle-split suffixes (``~2``, ...),
which retold appends itself; the session hooks refuse to start a session with a longer id."""

_BAD_ID_CHARS = re.compile("[\x00-\x1f\x7f\ud800-\udfff]")


def validate_id(name: str, value: object, *, allow_slash: bool = False, max_len: int = MAX_ID_CHARS) -> None:
    """Refuse an empty, overlong or unprintable id, and a '/' unless the id may contain one.

    Ids reach SQLite and every log line: a control character or an unpaired surrogate
    (which no UTF-8 encoder accepts) is refused here rather than failing deep in a write.
    """
    if not isinstance(value, str) or not value.strip():
        raise InvalidArgumentError(f"{name} must be a non-empty string, got {_shown(value)}")
    if len(value) > max_len:
        raise InvalidArgumentError(f"{name} is {len(value)} characters long; ids are at most {max_len}")
    if _BAD_ID_CHARS.search(value):
        raise InvalidArgumentError(
            f"{name} {_shown(value)} contains a control character or an unpaired surrogate"
        )
    if not allow_slash and "/" in value:
        raise InvalidArgumentError(
            f"{name} {_shown(value)} contains '/', which retold reserves for private agent scopes "
            "(agent:<agent_id>/<user_id>); choose an id without '/'"
        )


def _shown(value: object) -> str:
    """A bounded, ASCII-safe rendering of a caller's value for an error message."""
    return ascii(value if not isinstance(value, str) else value[:80])


@dataclass(frozen=True)
class Scope:
    """One ownership boundary, written ``kind:id`` (``user:u1``, ``agent:planner/u1``)."""

    kind: ScopeKind
    id: str

    def __post_init__(self) -> None:
        if self.kind not in SCOPE_KINDS:
            raise InvalidArgumentError(
                f"scope kind must be one of {', '.join(SCOPE_KINDS)}, got {self.kind!r}"
            )
        validate_id("scope id", self.id, allow_slash=True)

    @classmethod
    def parse(cls, text: str) -> Scope:
        """``"user:u1"`` → ``Scope("user", "u1")``; the id may itself contain ``:``."""
        kind, sep, ident = text.partition(":")
        if not sep:
            raise InvalidArgumentError(f"scope {text!r} must be written kind:id, e.g. user:u1")
        return cls(kind, ident)  # type: ignore[arg-type]

    def __str__(self) -> str:
        return f"{self.kind}:{self.id}"

    @property
    def is_private(self) -> bool:
        """An implicit ``agent:<agent_id>/<user_id>`` scope, which no grant may name."""
        return self.kind == "agent" and "/" in self.id


@dataclass(frozen=True)
class Principal:
    """Who is calling: derived by the host or adapter from the run, never from tool input."""

    agent_id: str
    user_id: str
    session_id: str | None = None
    project_id: str | None = None

    def __post_init__(self) -> None:
        validate_id("agent_id", self.agent_id)
        validate_id("user_id", self.user_id)
        if self.session_id is not None:
            validate_id("session_id", self.session_id, max_len=MAX_SESSION_ID_CHARS)
        if self.project_id is not None:
            validate_id("project_id", self.project_id, allow_slash=True)

    @property
    def private_scope(self) -> Scope:
        """The implicit agent-and-user scope, readable and writable without a grant."""
        return Scope("agent", f"{self.agent_id}/{self.user_id}")

    @property
    def user_scope(self) -> Scope:
        return Scope("user", self.user_id)


@dataclass(frozen=True)
class Grant:
    """One row of ``grants``: an agent's access to a shared scope."""

    agent_id: str
    scope: Scope
    can_read: bool
    can_write: bool


@dataclass
class Record:
    id: str
    type: RecordType
    version: int
    content: str
    subject: str
    subject_entity_id: str | None
    attribute: str | None
    scope: Scope
    source_kind: SourceKind
    source_ref: str | None
    creator_agent_id: str
    evidence: str | None
    created_at: datetime
    event_at: datetime
    expires_at: datetime | None
    valid_from: datetime | None
    valid_until: datetime | None
    review_at: datetime | None
    review_flagged_at: datetime | None
    confidence: float
    status: Status
    supersedes_id: str | None
    reinforcements: int
    last_reinforced_at: datetime | None
    tags: list[str]
    entity_ids: list[str]
    index_version: int = 0

    @property
    def is_active(self) -> bool:
        return self.status in ACTIVE_STATUSES


@dataclass
class Entity:
    id: str
    kind: EntityKind
    canonical: str
    scope: Scope
    status: EntityStatus
    merged_into: str | None
    aliases: list[str]  # normalized forms
    created_at: datetime
    origin_user: str | None = None  # the user whose words introduced it (None: the host's)
    origin_record: str | None = None  # the record whose write created it (None: provisioned)


@dataclass(frozen=True)
class EntityMention:
    kind: EntityKind
    text: str  # as written in the source
    role: LinkRole
    entity_id: str | None = None  # explicit id supplied by the writer; skips alias resolution when set


@dataclass
class Resolution:
    """The resolver's outcome for one mention (spec §9); it never writes an event itself."""

    mention: EntityMention
    entity: Entity | None
    outcome: Literal["explicit", "resolved", "created", "ambiguous"]
    candidates: list[str] = field(default_factory=list)  # entity ids, set when ambiguous


@dataclass(frozen=True)
class Turn:
    session_id: str
    turn: int
    role: Role
    content: str
    at: datetime


@dataclass(frozen=True)
class SessionKey:
    """A session as its owner knows it: ``(agent_id, user_id, session_id)``.

    Session ids are the adapter's (a thread id), so two principals may both use ``t1``;
    every transcript, chain and evidence lookup is keyed by the owner as well, and
    nothing a caller chooses as a session id can reach another principal's turns.
    ``str(key)`` is ``agent/user/session``, unambiguous because no id contains ``/``.
    """

    agent_id: str
    user_id: str
    session_id: str

    def __post_init__(self) -> None:
        validate_id("agent_id", self.agent_id)
        validate_id("user_id", self.user_id)
        validate_id("session_id", self.session_id, max_len=MAX_SESSION_ID_CHARS)

    @classmethod
    def of(cls, principal: Principal) -> SessionKey:
        if principal.session_id is None:
            raise InvalidArgumentError("the principal has no session_id; sessions need one (the thread id)")
        return cls(principal.agent_id, principal.user_id, principal.session_id)

    @classmethod
    def parse(cls, text: str) -> SessionKey | None:
        """``agent/user/session`` → a key; None for a bare session id (no ``/``)."""
        if not isinstance(text, str) or "/" not in text:
            return None
        parts = text.split("/")
        if len(parts) != 3:
            raise InvalidArgumentError(f"a qualified session is agent/user/session, got {_shown(text)}")
        return cls(*parts)

    def with_session(self, session_id: str) -> SessionKey:
        return SessionKey(self.agent_id, self.user_id, session_id)

    def __str__(self) -> str:
        return f"{self.agent_id}/{self.user_id}/{self.session_id}"


@dataclass(frozen=True)
class SessionInfo:
    """One row of ``sessions``; ``key`` is what identifies it (the id alone does not)."""

    id: str
    agent_id: str
    user_id: str
    project_id: str | None
    started_at: datetime
    ended_at: datetime | None
    extraction_started_at: datetime | None
    extracted_at: datetime | None

    @property
    def key(self) -> SessionKey:
        return SessionKey(self.agent_id, self.user_id, self.id)


@dataclass(frozen=True)
class RecordSource:
    """One observation that supports a record (a row of ``record_sources``).

    A record keeps every supporting source, not just the strongest: reinforcement adds
    one, and erasing a user removes theirs, deleting the record only when no other
    source is left. ``origin`` is the source's owner-qualified identity (see
    :func:`retold.ingest.write.sources.source_origin`); ``user_id`` is the user whose session
    supplied it (None for the host's own writes).
    """

    record_id: str
    origin: str
    source_kind: SourceKind
    source_ref: str | None
    agent_id: str
    user_id: str | None
    session_id: str | None
    evidence: str | None
    content: str
    added_at: datetime
    counted: bool = True


@dataclass(frozen=True)
class ExtractionContext:
    principal: Principal
    known_entities: list[tuple[str, str, str]]  # (entity_id, kind, canonical) readable by the agent
    existing_subjects: list[str]  # active subjects in the agent's writable scopes
    prompt_version: str


@dataclass(frozen=True)
class RewriteResult:
    queries: list[str]
    status: Literal["applied", "unchanged", "failed"]


@dataclass(frozen=True)
class EvidenceCheck:
    found: bool
    turn: int | None
    role: Role | None
    source_kind: Literal["user_statement", "tool_result", "agent_inference"]
    note: str | None  # set when the claimed kind was downgraded


@dataclass(frozen=True)
class SearchRequest:
    queries: list[str]  # 1 to 3, as the agent wrote them (the raw retrieval request)
    context: str | None = None  # host-supplied current-turn context, set by the adapter, never by the agent
    types: list[str] | None = None
    entities: list[str] | None = None  # alias strings, resolved by the retriever
    since: datetime | None = None  # applies to event_at
    until: datetime | None = None
    k: int | None = None  # None: retrieval.default_k (or trigger.auto_k for host-issued searches)
    include_history: bool = False  # superseded and expired become eligible
    trigger: Trigger = "tool"  # set by the adapter; "auto" for host-issued searches (section 14.1)
    # Set by an adapter that searches one place (a LangGraph store namespace): only these of the
    # principal's readable scopes are searched. Never widens what the principal may read.
    scopes: list[Scope] | None = None
    # Set by an adapter whose caller asked for every match (a LangGraph store built with
    # gate=False): relevance floors at zero; the source-kind policy still applies.
    gate: bool = True


@dataclass
class GeneratorHit:
    rank: int  # 1-based rank within that generator's list
    score: float  # cosine, bm25, or 0.0 for entity


@dataclass(frozen=True)
class LexicalTerm:
    value: str
    is_identifier: bool
    is_entity_alias: bool
    # A plain word in more than gate.common_word_share of the searcher's records, or a word of a
    # date the query names: it ranks, but it is no evidence for the gate ("awesome", "great" in
    # a chat history; "june", "2023" of "on 16 June, 2023", which the time window stands for).
    common: bool = False
    # A plain word in at most gate.rare_word_records of the searcher's records: matched alone, it
    # is evidence as an identifier is ("Where have I camped?"), and it cannot flood the answer.
    rare: bool = False

    @property
    def precise(self) -> bool:
        """An identifier or an entity alias: one match is enough for the lexical floors."""
        return self.is_identifier or self.is_entity_alias


@dataclass(frozen=True)
class LexicalMatch:
    terms: tuple[LexicalTerm, ...]
    total_terms: int
    common_terms: int = 0  # of total_terms, the common and date words (the gate counts neither side)

    @property
    def counted(self) -> tuple[int, int]:
        """(matched, total) terms the gate counts: every term but the common words."""
        return sum(1 for t in self.terms if not t.common), self.total_terms - self.common_terms


@dataclass
class Candidate:
    record_id: str
    dense: GeneratorHit | None
    lexical: GeneratorHit | None
    lexical_terms: LexicalMatch | None
    entity: GeneratorHit | None
    entity_id: str | None
    rrf_score: float
    fused_rank: int
    freshness_multiplier: float | None  # set for episodic records only
    score: float  # rrf_score * freshness_multiplier
    gate_reason: str | None  # why it passed, or why it was dropped
    rerank_score: float | None
    rank_after_rerank: int | None
    in_context: bool = False  # in the same-day context pass (retold.retrieve.context)
    in_window: bool = False  # its event time lies in a date window the query names (time_window)
    from_passage: bool = False  # its dense score is its best passage's (retold.index.passages)
    other_subject: bool = False  # about someone else than the query names (retold.retrieve.subjects)
    tells_time: bool = False  # tells a time, and the query asks when (retold.retrieve.time_answers)
    is_reply: bool = False  # the reply to a candidate that asks a question (retold.retrieve.replies)
    # What each fused list gave rrf_score, by list name (retold.retrieve.fusion), weights applied.
    contributions: dict[str, float] = field(default_factory=dict)


@dataclass
class Explanation:
    raw_queries: list[str]
    rewritten_queries: list[str] | None
    rewrite_status: RewriteStatus
    matched_by: list[Literal["dense", "lexical", "entity"]]
    dense: GeneratorHit | None
    lexical: GeneratorHit | None
    lexical_terms: LexicalMatch | None
    entity: GeneratorHit | None
    fused_rank: int
    freshness_multiplier: float | None
    rerank: tuple[int, int, float] | None  # rank_before, rank_after, score; None when disabled
    gate: str  # which floor or match let it through
    dedup: str  # "kept" or "kept over <dropped_id> at cosine 0.94"
    budget: str  # "fit at position 3 of 8, 412 tokens used"
    source_kind: str
    status: str
    created_at: datetime
    event_at: datetime
    entity_ids: list[str]
    conflicts_with: list[str]  # unresolved conflict record IDs shown with this result
    summary: str  # one line, human readable, rendered to the model
    # What each fused list gave the fused score (dense, context, neighbours, time_answers, replies,
    # lexical, entity), weights applied; they add up to it. Empty for a conflict counterpart.
    contributions: dict[str, float] = field(default_factory=dict)


@dataclass
class SearchResult:
    record: Record
    score: float
    explanation: Explanation


@dataclass
class SearchResponse:
    search_id: str
    raw_queries: list[str]
    rewritten_queries: list[str] | None
    rewrite_status: RewriteStatus
    results: list[SearchResult]
    empty_reason: str | None  # set when results is empty; states which floors the best candidate missed
    timings_ms: dict[str, float]


@dataclass
class CandidateRecord:
    type: RecordType
    content: str
    attribute: str | None  # hint only; the ingestor resolves the primary entity and derived subject
    source_kind: Literal["user_statement", "tool_result", "agent_inference"]
    evidence: str  # verbatim
    evidence_turn: int
    entity_mentions: list[EntityMention]
    event_at: datetime | None = None
    valid_from: datetime | None = None
    valid_until: datetime | None = None
    review_at: datetime | None = None
    confidence: float = 0.6


@dataclass(frozen=True)
class ReviewContext:
    transcript_window: list[Turn]
    destination_scope: Scope
    primary_entity_id: str
    live_records: list[Record]  # same entity and destination scope only
    prompt_version: str


@dataclass(frozen=True)
class ReviewDecision:
    action: Literal["accept", "reject", "revise"]
    candidate: CandidateRecord | None  # required only for revise
    reason: str


@dataclass
class SessionSummary:
    content: str  # 3 to 8 sentences: goal, what happened, decisions, open threads
    decisions: list[str]
    entity_mentions: list[EntityMention]


@dataclass
class ExtractionOutput:
    candidates: list[CandidateRecord]
    summary: SessionSummary | None


# --- model protocols (spec §5): production implementations run in worker threads -----------


@runtime_checkable
class Embedder(Protocol):
    name: str
    version: str
    dims: int

    @property
    def is_loaded(self) -> bool: ...

    def embed_queries(self, texts: list[str]) -> np.ndarray: ...  # (n, dims) float32, L2-normalised

    def embed_documents(self, texts: list[str]) -> np.ndarray: ...  # never enters the query cache


@runtime_checkable
class Reranker(Protocol):
    def score(self, query: str, docs: list[str]) -> list[float]: ...


@runtime_checkable
class QueryRewriter(Protocol):
    def rewrite(self, queries: list[str], context: str | None) -> RewriteResult: ...


@runtime_checkable
class EquivalenceJudge(Protocol):
    def judge(self, a: str, b: str) -> Verdict: ...

    def entails(self, premise: str, hypothesis: str) -> float: ...


@runtime_checkable
class Extractor(Protocol):
    def extract(self, transcript: list[Turn], context: ExtractionContext) -> ExtractionOutput: ...


@runtime_checkable
class CandidateReviewer(Protocol):
    def review(self, candidate: CandidateRecord, context: ReviewContext) -> ReviewDecision: ...
