"""LongMemEval_S loading, sampling and ingest, shared by the LongMemEval benchmarks.

LongMemEval (Wu et al., ICLR 2025, MIT) is read from the shared benchmark data, never copied
into the repository: ``../shared/benchmarks/longmemeval/longmemeval_s_dev200.json.xz`` unless
``RETOLD_LONGMEMEVAL`` (or a harness's ``--data``) names another file. The ``.xz`` file is read
through :mod:`lzma` as it is, so nobody unpacks 103 MB of JSON into a checkout; a plain
``.json`` (a tier test's cut) is read as it is too.

One question is one store: every haystack session is recorded as a retold session of one user
(both roles, through the session hooks, at the session's date), and every user turn is
written through the ``memory_write`` tool as an episodic ``user_statement`` that quotes itself.
That is the path an agent's own memory takes, so evidence checking, duplicate merging and
passage embedding all happen as they would in use; the embedding model still runs in large
batches beforehand (:class:`locomo_data.PreEmbedded`, optionally behind :class:`EmbedCache`).
"""

from __future__ import annotations

import hashlib
import json
import lzma
import os
import random
from collections import Counter
from collections.abc import Callable, Sequence
from contextlib import nullcontext
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from locomo_data import PreEmbedded
from locomo_hosted import ReplayClock

from retold.index.passages import split_passages
from retold.ingest.write.evidence import as_the_user
from retold.models import Principal, Scope
from retold.tools.limits import MAX_CONTENT_CHARS
from retold.util import clean_text, normalize_ws

if TYPE_CHECKING:
    from retold.runtime import Runtime

__all__ = [
    "ABSTENTION",
    "DEFAULT_PATH",
    "CachedEmbedder",
    "EmbedCache",
    "LmeQuestion",
    "LmeSession",
    "Stored",
    "ingest_question",
    "load_questions",
    "parse_date",
    "pieces",
    "question_texts",
    "stratified_sample",
]

SHARED = Path(__file__).resolve().parents[2] / "shared" / "benchmarks"
DEFAULT_PATH = SHARED / "longmemeval" / "longmemeval_s_dev200.json.xz"
ABSTENTION = "abstention"  # the stratum of ``_abs`` questions, whatever their question_type
PIECE_CHARS = MAX_CONTENT_CHARS  # the protocol's 1,000: memory_write takes no longer content
MIN_PIECE_CHARS, MIN_PIECE_WORDS = 15, 3  # shorter pieces are skipped (the evidence check's minimum)


@dataclass(frozen=True)
class LmeSession:
    """One haystack session: its position, its LongMemEval id, its date, its turns as (role, text)."""

    index: int
    session_id: str
    at: datetime
    turns: tuple[tuple[str, str], ...]


@dataclass(frozen=True)
class LmeQuestion:
    question_id: str
    question_type: str
    question: str
    asked_at: datetime
    answer: str
    gold: tuple[str, ...]  # answer_session_ids
    sessions: tuple[LmeSession, ...]

    @property
    def abstention(self) -> bool:
        """Upstream's unanswerable questions: excluded from recall, reported for emptiness."""
        return self.question_id.endswith("_abs")

    @property
    def search_at(self) -> datetime:
        """When the question is asked: its ``question_date``, or a minute after the last session
        when that is later. The dates are day-level in effect: 26 of the 200 date a session later
        on the question's own day (often a gold one), and a search must not precede its memories."""
        return max(
            self.asked_at, max((s.at for s in self.sessions), default=self.asked_at) + timedelta(minutes=1)
        )

    @property
    def stratum(self) -> str:
        return ABSTENTION if self.abstention else self.question_type


def parse_date(text: str) -> datetime:
    """``"2023/05/20 (Sat) 07:47"`` → ``2023-05-20 07:47 UTC`` (LongMemEval gives no zone; UTC is assumed)."""
    day, _, clock = text.partition(")")
    parsed = datetime.strptime(f"{day.split('(')[0].strip()} {clock.strip()}", "%Y/%m/%d %H:%M")
    return parsed.replace(tzinfo=UTC)


def _question(raw: dict[str, Any]) -> LmeQuestion:
    sessions = tuple(
        LmeSession(i, str(sid), parse_date(date), tuple((str(t["role"]), str(t["content"])) for t in turns))
        for i, (sid, date, turns) in enumerate(
            zip(raw["haystack_session_ids"], raw["haystack_dates"], raw["haystack_sessions"], strict=True)
        )
    )
    return LmeQuestion(
        question_id=str(raw["question_id"]),
        question_type=str(raw["question_type"]),
        question=str(raw["question"]),
        asked_at=parse_date(raw["question_date"]),
        answer=str(raw["answer"]),
        gold=tuple(str(s) for s in raw["answer_session_ids"]),
        sessions=sessions,
    )


def load_questions(path: Path | str | None = None) -> list[LmeQuestion]:
    """Every question of the file in file order; ``.xz`` is decompressed on the fly."""
    source = Path(path or os.environ.get("RETOLD_LONGMEMEVAL") or DEFAULT_PATH)
    if not source.exists():
        raise FileNotFoundError(
            f"LongMemEval data not found at {source}; set RETOLD_LONGMEMEVAL to the longmemeval_s "
            "json(.xz) path"
        )
    opener = lzma.open if source.suffix == ".xz" else open
    with opener(source, "rt", encoding="utf-8") as handle:
        return [_question(raw) for raw in json.load(handle)]


def stratified_sample(questions: Sequence[LmeQuestion], n: int, seed: int) -> list[LmeQuestion]:
    """A seeded sample of ``n`` questions, each stratum (question type; abstention apart) in proportion.

    Largest remainder: every stratum gets the floor of its share, the strata with the largest
    remainders one more, ties broken by the seeded draw; the sample keeps file order, so a
    ``--sample`` run is a subset of the full run question for question.
    """
    if n >= len(questions):
        return list(questions)
    rng = random.Random(seed)
    strata: dict[str, list[int]] = {}
    for i, q in enumerate(questions):
        strata.setdefault(q.stratum, []).append(i)
    shares = {s: n * len(ids) / len(questions) for s, ids in strata.items()}
    quota = {s: int(share) for s, share in shares.items()}
    order = sorted(strata, key=lambda s: (-(shares[s] - quota[s]), rng.random()))
    for s in order[: n - sum(quota.values())]:
        quota[s] += 1
    keep = {i for s, ids in strata.items() for i in rng.sample(ids, quota[s])}
    return [q for i, q in enumerate(questions) if i in keep]


def pieces(text: str) -> list[str]:
    """A user turn as the protocol writes it: 1,000-character pieces, too-short ones skipped.

    The text is cleaned as the session hook cleans a turn, so every piece is a verbatim quote of
    the recorded turn; a piece is stripped (the evidence check ignores the edges' whitespace),
    and one under 3 words or 15 characters is skipped, as the evidence check would refuse it.
    """
    text = clean_text(text)
    out = []
    for start in range(0, len(text), PIECE_CHARS):
        piece = text[start : start + PIECE_CHARS].strip()
        if len(normalize_ws(piece)) >= MIN_PIECE_CHARS and len(piece.split()) >= MIN_PIECE_WORDS:
            out.append(piece)
    return out


def question_texts(question: LmeQuestion, passage_chars: int) -> list[str]:
    """Every document text the write path will embed for this question, so none costs a model call.

    The pieces and their passages (the index), and what the evidence check compares: the
    quote whitespace-normalised and the claim as the user's (capitalised; the user has no name).
    """
    said = [text for s in question.sessions for role, text in s.turns if role == "user"]
    contents = [p for text in said for p in pieces(text)]
    checked = [v for c in contents for v in (normalize_ws(c), as_the_user(c, ())) if v != c]
    return contents + checked + [p for c in contents for p in split_passages(c, passage_chars)]


@dataclass
class Stored:
    """What one question's store holds: record id -> the haystack sessions it stands for."""

    sessions_of: dict[str, list[str]] = field(default_factory=dict)
    outcomes: Counter[str] = field(default_factory=Counter)
    pieces: int = 0

    def add(self, record_id: str, session_id: str) -> None:
        stands = self.sessions_of.setdefault(record_id, [])
        if session_id not in stands:  # a piece merged into an earlier record stands for both sessions
            stands.append(session_id)


async def ingest_question(
    rt: Runtime, question: LmeQuestion, agent: str, user: str, clock: ReplayClock | None
) -> Stored:
    """Record every haystack session and write every user piece through ``memory_write``.

    Each session is a session of its own (``s<position>``: a few questions repeat a haystack id)
    with its turns in order; a user turn's pieces are written right after the turn, quoting it
    (``evidence_turn`` names it), with ``event_at`` = the session's date. With a ``clock`` the
    session also happens at that date (the store's ``created_at`` and the session's times).
    """
    stored = Stored()
    await rt.host.grant(agent, Scope("user", user), read=True, write=True)
    for session in question.sessions:
        with clock.at(session.at) if clock is not None else nullcontext():
            p = await rt.hooks.on_session_start(Principal(agent, user, f"s{session.index}"))
            for number, (role, text) in enumerate(session.turns, start=1):
                p = await rt.hooks.on_turn(p, role, text)
                if role != "user":
                    continue
                for piece in pieces(text):
                    stored.pieces += 1
                    result = await rt.tools.call(p, "memory_write", _payload(piece, number, session.at))
                    if not result.get("ok") or not result.get("record_id"):
                        stored.outcomes[f"error:{result.get('error')}"] += 1
                        continue
                    stored.outcomes[str(result.get("outcome") or "unknown").partition(":")[0]] += 1
                    stored.add(str(result["record_id"]), session.session_id)
            await rt.hooks.on_session_end(p)
    return stored


def _payload(piece: str, turn: int, at: datetime) -> dict[str, Any]:
    return {"type": "episodic", "content": piece, "source_kind": "user_statement", "evidence": piece,
            "evidence_turn": turn, "event_at": at.isoformat()}  # fmt: skip


# --------------------------------------------------------------------------- the embedding cache


class EmbedCache:
    """Document vectors kept between runs in one ``.npz`` file, keyed by text hash and model id.

    A LongMemEval question embeds ~700 texts and an ablation re-runs the same questions many
    times with the same model, so the vectors are worth keeping; the key includes the model's
    name and version, so a cache written with another model is never read as this one's.
    """

    def __init__(self, path: Path, model_id: str) -> None:
        self.path = path
        self.model_id = model_id
        self._vectors: dict[str, np.ndarray] = {}
        self.hits = self.added = 0
        if path.exists():
            with np.load(path, allow_pickle=False) as data:
                self._vectors = dict(zip(data["keys"].tolist(), data["vectors"], strict=True))

    def key(self, text: str) -> str:
        return hashlib.sha256(f"{self.model_id}\x00{text}".encode()).hexdigest()[:32]

    def lookup(self, texts: Sequence[str]) -> dict[str, np.ndarray]:
        found = {t: v for t in dict.fromkeys(texts) if (v := self._vectors.get(self.key(t))) is not None}
        self.hits += len(found)
        return found

    def add(self, vectors: dict[str, np.ndarray]) -> None:
        for text, vector in vectors.items():
            key = self.key(text)
            if key not in self._vectors:
                self._vectors[key] = np.asarray(vector, dtype=np.float32)
                self.added += 1

    def save(self) -> None:
        """Write the file (only when this run added vectors), through a temporary file."""
        if not self.added or not self._vectors:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_name(self.path.name + ".tmp.npz")
        keys = np.array(list(self._vectors), dtype="U32")
        np.savez(tmp, keys=keys, vectors=np.stack(list(self._vectors.values())))
        tmp.replace(self.path)


class CachedEmbedder(PreEmbedded):
    """:class:`PreEmbedded` that takes what it can from an :class:`EmbedCache` before the model."""

    def __init__(self, inner: Any, cache: EmbedCache | None) -> None:
        super().__init__(inner)
        self.cache = cache

    def prefill(
        self, texts: Sequence[str], *, batch: int = 256, advance: Callable[[int], None] | None = None
    ) -> None:
        if self.cache is not None:
            self._docs.update(self.cache.lookup(texts))
        super().prefill(texts, batch=batch, advance=advance)
        if self.cache is not None:
            self.cache.add({t: self._docs[t] for t in texts})
