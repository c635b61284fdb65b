"""LoCoMo loading and ingest helpers shared by the LoCoMo benchmarks.

LoCoMo (Maharana et al., ACL 2024, CC BY-NC 4.0) is read from the shared benchmark data,
never copied into the repository: ``../shared/benchmarks/locomo/locomo10.json`` unless
``RETOLD_LOCOMO`` names another file. Categories follow the official code's naming:
1 multi-hop, 2 temporal, 3 open-domain, 4 single-hop, 5 adversarial (unanswerable).

One conversation is ingested into its own user scope ``user:<sample_id>`` as one episodic
record per turn (``"<speaker>: <text>"``, with an image turn's ``blip_caption`` appended),
``event_at`` = the session date, and the speaker linked ``about`` to a person entity of that
scope whose alias is the speaker's name. Two ways in:

* :func:`ingest_trusted` writes every turn through the host's trusted write API
  (``rt.host.ingest``), so entity resolution and duplicate merging are the ingestor's own;
  the model still runs in large batches, through a :class:`PreEmbedded` wrapper;
* :func:`ingest_conversations` inserts the rows directly through the store in one
  transaction (no duplicate merging), which is what the gate calibration sweep needs; a long
  turn's passage vectors are stored with it, as the write path stores them.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from retold.index.passages import split_passages
from retold.ingest.write.request import WriteRequest, WriteResult
from retold.models import Entity, EntityMention, Principal, Record, Scope
from retold.util import new_id, normalize_alias

if TYPE_CHECKING:
    from retold.runtime import Runtime

__all__ = [
    "CATEGORY_NAMES",
    "DEFAULT_PATH",
    "Conversation",
    "Ingested",
    "PreEmbedded",
    "Question",
    "Turn",
    "evidence_ids",
    "first_person",
    "in_first_person",
    "ingest_conversations",
    "ingest_trusted",
    "load_conversations",
    "parse_session_date",
    "turn_text",
]

# ../shared beside the repository (as on developer machines and in CI).
DEFAULT_PATH = Path(__file__).resolve().parents[2] / "shared" / "benchmarks" / "locomo" / "locomo10.json"
CATEGORY_NAMES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop", 5: "adversarial"}
_DATE = re.compile(r"^\s*(\d{1,2}):(\d{2})\s*([ap]m)\s+on\s+(\d{1,2})\s+([A-Za-z]+),?\s+(\d{4})\s*$", re.I)
_DIA = re.compile(r"^D(\d+):(\d+)$")


@dataclass(frozen=True)
class Turn:
    """One dialogue turn: ``dia_id`` such as ``D3:7``, the speaker, and the text to store."""

    dia_id: str
    session: int
    index: int
    speaker: str
    text: str
    at: datetime

    @property
    def content(self) -> str:
        """The record content: speaker-attributed, so lexical search sees the name; a turn with
        no speaker is the user's own message (:func:`first_person`) and is stored as said."""
        return f"{self.speaker}: {self.text}" if self.speaker else self.text


@dataclass(frozen=True)
class Question:
    sample_id: str
    question: str
    answer: str | None  # None for category 5 (it has an adversarial answer instead)
    evidence: tuple[str, ...]  # dia_ids; may include ids that resolve to no turn
    category: int


@dataclass(frozen=True)
class Conversation:
    sample_id: str
    speakers: tuple[str, str]
    turns: list[Turn]
    questions: list[Question]
    origin: str = ""  # the LoCoMo conversation a first-person store was made from

    @property
    def scope(self) -> Scope:
        return Scope("user", self.sample_id)


@dataclass
class Ingested:
    """What one ingested conversation maps to in the store."""

    conversation: Conversation
    record_of: dict[str, str] = field(default_factory=dict)  # dia_id -> record id
    dia_of: dict[str, str] = field(default_factory=dict)  # record id -> its first dia_id
    # record id -> every dia_id it stands for (more than one when the ingestor merged a duplicate)
    absorbed: dict[str, list[str]] = field(default_factory=dict)
    person_of: dict[str, str] = field(default_factory=dict)  # speaker -> person entity id

    def gold(self, question: Question) -> set[str]:
        """The record ids of the question's evidence turns that exist (some ids do not resolve)."""
        return {self.record_of[d] for d in question.evidence if d in self.record_of}


def windows(conv: Conversation, n: int) -> tuple[Conversation, dict[str, list[str]]]:
    """The conversation with every ``n`` consecutive turns of a session joined into one turn.

    A stand-in for stores of long, multi-sentence records (whole user messages, not chat
    lines): each joined turn is ``"<speaker>: <text>"`` lines and keeps its first turn's
    ``dia_id`` and speaker. Also returns first ``dia_id`` -> every ``dia_id`` it joined.
    """
    if n <= 1:
        return conv, {t.dia_id: [t.dia_id] for t in conv.turns}
    joined: list[Turn] = []
    members: dict[str, list[str]] = {}
    by_session: dict[int, list[Turn]] = {}
    for turn in conv.turns:
        by_session.setdefault(turn.session, []).append(turn)
    for turns in by_session.values():
        for i in range(0, len(turns), n):
            group = turns[i : i + n]
            first = group[0]
            text = "\n".join([first.text, *(t.content for t in group[1:])])
            joined.append(Turn(first.dia_id, first.session, first.index, first.speaker, text, first.at))
            members[first.dia_id] = [t.dia_id for t in group]
    return Conversation(conv.sample_id, conv.speakers, joined, conv.questions), members


# Before these words a speaker's name is the subject ("when did Caroline go"): "I", else "me".
_SUBJECT_BEFORE = frozenset(
    [
        "did",
        "does",
        "do",
        "is",
        "was",
        "are",
        "were",
        "has",
        "have",
        "had",
        "will",
        "would",
        "can",
        "could",
        "should",
        "may",
        "might",
        "who",
        "what",
        "when",
        "where",
        "why",
        "how",
        "which",
        "and",
    ]
)


def first_person(conv: Conversation) -> list[Conversation]:
    """Each speaker's own turns as one user's store, asked about in that user's own words.

    A stand-in for assistants' memories (the held-out benchmark's kind): the user's messages
    are stored as said, without a speaker name or entity, and a question is kept only when all
    its evidence is that user's turns and it names them, then put in the first person
    ("When did Caroline go to the support group?" asked by Caroline: "When did I go to the
    support group?"), so neither the name nor the entity channel can carry it. Each store's
    ``sample_id`` is ``<sample_id>-<n>`` (n = 1, 2 for the two speakers), ``origin`` the
    conversation's.
    """
    speaker_of = {t.dia_id: t.speaker for t in conv.turns}
    out = []
    for n, speaker in enumerate(conv.speakers, start=1):
        sample_id = f"{conv.sample_id}-{n}"
        own = [t for t in conv.turns if t.speaker == speaker]
        turns = [Turn(t.dia_id, t.session, t.index, "", t.text, t.at) for t in own]
        questions = []
        for q in conv.questions:
            owners = {speaker_of[d] for d in q.evidence if d in speaker_of}
            asked = in_first_person(q.question, speaker)
            if q.category <= 4 and owners == {speaker} and asked is not None:
                questions.append(Question(sample_id, asked, q.answer, q.evidence, q.category))
        out.append(Conversation(sample_id, conv.speakers, turns, questions, origin=conv.sample_id))
    return out


def in_first_person(question: str, name: str) -> str | None:
    """``question`` with ``name`` replaced by "my" / "I" / "me"; None when it does not name them."""
    possessive = re.compile(rf"\b{re.escape(name)}['’]s\b")
    plain = re.compile(rf"\b{re.escape(name)}\b")
    if not plain.search(question):
        return None
    text = possessive.sub("my", question)

    def pronoun(m: re.Match[str]) -> str:
        before = text[: m.start()].split()
        return "I" if not before or before[-1].lower().strip(",") in _SUBJECT_BEFORE else "me"

    text = plain.sub(pronoun, text)
    for third, first in _THIRD_TO_FIRST:  # "in her education" is theirs too, once they ask
        text = third.sub(first, text)
    return text[:1].upper() + text[1:]


_THIRD_TO_FIRST = [
    (re.compile(pattern, re.IGNORECASE), first)
    for pattern, first in (
        (r"\b(?:she|he)\b", "I"),
        (r"\b(?:her|his)\b", "my"),
        (r"\b(?:herself|himself)\b", "myself"),
        (r"\bhas I\b", "have I"),
        (r"\bis I\b", "am I"),
        (r"\bdoes I\b", "do I"),
        (r"\bI has\b", "I have"),
        (r"\bI is\b", "I am"),
        (r"\bI does\b", "I do"),
    )
]


def parse_session_date(text: str) -> datetime:
    """``"1:56 pm on 8 May, 2023"`` → ``2023-05-08 13:56 UTC`` (LoCoMo gives no zone; UTC is assumed)."""
    m = _DATE.match(text)
    if m is None:
        raise ValueError(f"unrecognised LoCoMo session date {text!r}")
    hour, minute, ampm, day, month, year = m.groups()
    h = int(hour) % 12 + (12 if ampm.lower() == "pm" else 0)
    month_no = datetime.strptime(month[:3].title(), "%b").month
    return datetime(int(year), month_no, int(day), h, int(minute), tzinfo=UTC)


def turn_text(turn: dict[str, Any]) -> str:
    """The turn's text, with the image caption appended for an image turn."""
    text = str(turn.get("text", "")).strip()
    caption = turn.get("blip_caption")
    if caption:
        text = f"{text} [shared an image: {str(caption).strip()}]".strip()
    return text


def evidence_ids(raw: Sequence[Any]) -> tuple[str, ...]:
    """The evidence ``dia_id``s, normalised: a few entries join several ids (``"D8:6; D9:17"``,
    ``"D9:1 D4:4"``) or pad a number (``"D30:05"``); ids that stay malformed are kept as they are."""
    out: list[str] = []
    for entry in raw:
        for token in re.split(r"[;,\s]+", str(entry).strip()):
            m = _DIA.match(token)
            if m is not None:
                token = f"D{int(m.group(1))}:{int(m.group(2))}"
            if token and token not in out:
                out.append(token)
    return tuple(out)


def _sessions(conv: dict[str, Any]) -> list[int]:
    return sorted(
        int(k.split("_")[1])
        for k, v in conv.items()
        if re.fullmatch(r"session_\d+", k) and isinstance(v, list)
    )


def _conversation(sample: dict[str, Any]) -> Conversation:
    conv = sample["conversation"]
    turns: list[Turn] = []
    for s in _sessions(conv):
        at = parse_session_date(conv[f"session_{s}_date_time"])
        for i, raw in enumerate(conv[f"session_{s}"]):
            dia = str(raw.get("dia_id", ""))
            if not _DIA.match(dia):
                continue
            turns.append(Turn(dia, s, i, str(raw["speaker"]), turn_text(raw), at))
    questions = [
        Question(
            sample_id=sample["sample_id"],
            question=str(q["question"]),
            answer=None if "answer" not in q else str(q["answer"]),
            evidence=evidence_ids(q.get("evidence", [])),
            category=int(q["category"]),
        )
        for q in sample.get("qa", [])
    ]
    return Conversation(sample["sample_id"], (conv["speaker_a"], conv["speaker_b"]), turns, questions)


def load_conversations(path: Path | str | None = None, limit: int | None = None) -> list[Conversation]:
    """The LoCoMo conversations in file order (the first ``limit`` when given)."""
    source = Path(path or os.environ.get("RETOLD_LOCOMO") or DEFAULT_PATH)
    if not source.exists():
        raise FileNotFoundError(
            f"LoCoMo data not found at {source}; set RETOLD_LOCOMO to the locomo10.json path"
        )
    samples = json.loads(source.read_text())
    if limit is not None:
        samples = samples[:limit]
    return [_conversation(s) for s in samples]


def _record(turn: Turn, scope: Scope, person_id: str, now: datetime) -> Record:
    return Record(
        id=new_id(),
        type="episodic",
        version=1,
        content=turn.content,
        subject=f"{person_id}/-",
        subject_entity_id=person_id,
        attribute="-",
        scope=scope,
        source_kind="user_statement",
        source_ref=f"locomo:{scope.id}:{turn.dia_id}",
        creator_agent_id="locomo-ingest",
        evidence=None,
        created_at=now,
        event_at=turn.at,
        expires_at=None,
        valid_from=None,
        valid_until=None,
        review_at=None,
        review_flagged_at=None,
        confidence=0.9,
        status="confirmed",
        supersedes_id=None,
        reinforcements=0,
        last_reinforced_at=None,
        tags=["locomo"],
        entity_ids=[person_id],
    )


async def ingest_conversations(rt: Runtime, conversations: Sequence[Conversation]) -> list[Ingested]:
    """Ingest every conversation into its own user scope; one batched embedding call for all turns."""
    texts = [t.content for c in conversations for t in c.turns]
    vectors = await asyncio.to_thread(rt.embedder.embed_documents, texts) if texts else []
    # A long turn is also embedded in passages (retold.index.passages), as the write path does.
    pieces = [split_passages(text, rt.config.embedding.passage_chars) for text in texts]
    flat = [p for ps in pieces for p in ps]
    passage_vectors = await asyncio.to_thread(rt.embedder.embed_documents, flat) if flat else []
    starts = np.cumsum([0, *map(len, pieces)])
    now = rt.clock.now()
    out: list[Ingested] = []
    n = 0
    async with rt.store.transaction():
        for conv in conversations:
            ingested = Ingested(conv)
            for speaker in dict.fromkeys(conv.speakers):
                entity = Entity(
                    id=new_id(),
                    kind="person",
                    canonical=speaker,
                    scope=conv.scope,
                    status="confirmed",
                    merged_into=None,
                    aliases=[normalize_alias(speaker)],
                    created_at=now,
                )
                await rt.store.insert_entity(entity)
                ingested.person_of[speaker] = entity.id
            for turn in conv.turns:
                person = ingested.person_of.get(turn.speaker)
                if person is None:  # a speaker outside speaker_a/speaker_b: give them an entity too
                    entity = Entity(
                        new_id(),
                        "person",
                        turn.speaker,
                        conv.scope,
                        "confirmed",
                        None,
                        [normalize_alias(turn.speaker)],
                        now,
                    )
                    await rt.store.insert_entity(entity)
                    person = ingested.person_of[turn.speaker] = entity.id
                record = _record(turn, conv.scope, person, now)
                await rt.store.insert_record(record, links=[(person, "about")])
                passages = passage_vectors[starts[n] : starts[n + 1]] if pieces[n] else None
                await rt.store.put_embedding(
                    record.id, rt.embedder.name, rt.embedder.version, vectors[n], passages
                )
                n += 1
                ingested.record_of[turn.dia_id] = record.id
                ingested.dia_of[record.id] = turn.dia_id
                ingested.absorbed[record.id] = [turn.dia_id]
            out.append(ingested)
    return out


# --------------------------------------------------------------------------- through the write path

INGEST_AGENT = "locomo-ingest"
Advance = Callable[[int], None]


class PreEmbedded:
    """The real embedder, answering document calls from vectors computed beforehand in big batches.

    The ingestor embeds one record per write; one model call per turn would cost minutes on
    a CPU, so :meth:`prefill` encodes every text first (sorted by length, so batches pad
    little) and the write path then finds each vector here. Anything not prefilled (a judge
    text, say) still goes to the model; queries pass straight through to the real embedder
    and its query cache. Everything else (``name``, ``version``, ``warm`` ...) is the real one's.
    """

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self._docs: dict[str, np.ndarray] = {}
        self.misses = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def prefill(self, texts: Sequence[str], *, batch: int = 256, advance: Advance | None = None) -> None:
        todo = sorted({t for t in texts if t not in self._docs}, key=len)
        for start in range(0, len(todo), batch):
            chunk = todo[start : start + batch]
            self._docs.update(zip(chunk, self.inner.embed_documents(chunk), strict=True))
            if advance is not None:
                advance(len(chunk))

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        missing = list(dict.fromkeys(t for t in texts if t not in self._docs))
        if missing:
            self.misses += len(missing)
            self._docs.update(zip(missing, self.inner.embed_documents(missing), strict=True))
        if not texts:
            return np.zeros((0, self.inner.dims), dtype=np.float32)
        return np.stack([self._docs[t] for t in texts])

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        return self.inner.embed_queries(texts)


def turn_request(conv: Conversation, turn: Turn) -> WriteRequest:
    """One turn as the host's trusted write: episodic, about its speaker, dated by its session."""
    return WriteRequest(
        type="episodic",
        content=turn.content,
        scope=conv.scope,
        source_kind="user_statement",
        entities=[EntityMention("person", turn.speaker, "about")] if turn.speaker else [],
        event_at=turn.at,
        tags=["locomo"],
        source_ref=f"locomo:{conv.sample_id}:{turn.dia_id}",
        trusted=True,
    )


async def ingest_trusted(
    rt: Runtime,
    conversations: Sequence[Conversation],
    *,
    advance: Advance | None = None,
    stage_ms: Counter[str] | None = None,
    batch: int = 1,
) -> tuple[list[Ingested], Counter[str]]:
    """Write every turn through ``rt.host.ingest`` (trusted), one conversation per user scope.

    ``batch`` > 1 imports that many turns at a time through ``rt.host.ingest_many`` (one
    transaction each, decided as one-by-one writes would be).

    ``rt`` must have been opened with a :class:`PreEmbedded` embedder already prefilled with
    the turn contents, or each write pays one model call. A turn the ingestor merges into an
    earlier record (outcome ``reinforced``) maps to that record, which then stands for every
    ``dia_id`` it absorbed. Returns the mapping and a count of the write outcomes (a refused
    write counts under ``error:<code>`` and maps to no record); ``stage_ms`` (when given)
    accumulates the write path's own per-stage timings.
    """
    outcomes: Counter[str] = Counter()
    out: list[Ingested] = []
    for conv in conversations:
        ingested = Ingested(conv)
        principal = Principal(INGEST_AGENT, conv.sample_id)
        for turn, result in await _written(rt, principal, conv, batch, advance):
            if stage_ms is not None:
                stage_ms.update(result.timings_ms)
            if not result.ok or result.record_id is None:
                outcomes[f"error:{result.error}"] += 1
            else:
                outcomes[result.outcome or "unknown"] += 1
                ingested.record_of[turn.dia_id] = result.record_id
                ingested.dia_of.setdefault(result.record_id, turn.dia_id)
                ingested.absorbed.setdefault(result.record_id, []).append(turn.dia_id)
        speaker_of = {t.dia_id: t.speaker for t in conv.turns}
        for record in await rt.store.get_records(ingested.absorbed):
            if record.subject_entity_id is not None:  # the primary entity: the about-linked speaker
                speaker = speaker_of[ingested.dia_of[record.id]]
                ingested.person_of.setdefault(speaker, record.subject_entity_id)
        out.append(ingested)
    return out, outcomes


async def _written(
    rt: Runtime, principal: Principal, conv: Conversation, batch: int, advance: Advance | None
) -> list[tuple[Turn, WriteResult]]:
    """Each turn of ``conv`` with its write's result, written one by one or ``batch`` at a time."""
    out: list[tuple[Turn, WriteResult]] = []
    for start in range(0, len(conv.turns), max(1, batch)):
        turns = conv.turns[start : start + max(1, batch)]
        if batch > 1:
            results = await rt.host.ingest_many(principal, [turn_request(conv, t) for t in turns])
        else:
            results = [await rt.host.ingest(principal, turn_request(conv, turns[0]))]
        out += zip(turns, results, strict=True)
        if advance is not None:
            advance(len(turns))
    return out
