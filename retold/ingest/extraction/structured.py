"""The hosted extractor and candidate reviewer (spec §5, §8.2 step 5, §8.3).

Each makes one structured completion through a :class:`~retold.hosted.StructuredCompleter`
(the provider SDKs' :class:`~retold.hosted.CompletionClient`, or the host's LangChain chat
model through ``from_chat_model``) with a versioned prompt from ``retold/ingest/prompts/``.
The reply is validated against its JSON schema and converted into the spec's types;
anything that does not fit —
a malformed timestamp, a confidence outside [0, 1], a ``revise`` without a revision —
raises :class:`~retold.hosted.SchemaMismatchError`, and the extraction run fails closed.

The reviewer cannot even express a forbidden revision: its schema carries only the
fields a revision may narrow (content, attribute, source kind, temporal metadata), and
the revised candidate is built from the original, so evidence, turn, type and entities
are copied, not trusted. The worker still re-checks every revision, because a reviewer
may be any object implementing the protocol.

Both run their blocking call in the worker thread the extraction graph gives them.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, ClassVar, Literal, Self

from retold.hosted import (
    CompletionClient,
    SchemaMismatchError,
    StructuredCompleter,
    load_prompt,
    nullable,
    strict_object,
)
from retold.models import (
    ENTITY_KINDS,
    RECORD_TYPES,
    CandidateRecord,
    EntityMention,
    ExtractionContext,
    ExtractionOutput,
    ReviewContext,
    ReviewDecision,
    SessionSummary,
    Turn,
)

if TYPE_CHECKING:
    from langchain_core.language_models.chat_models import BaseChatModel

    from retold.config import Config

__all__ = [
    "EXTRACTION_SCHEMA",
    "EXTRACT_PROMPT",
    "REVIEW_PROMPT",
    "REVIEW_SCHEMA",
    "StructuredLLMCandidateReviewer",
    "StructuredLLMExtractor",
    "StructuredLLMReviewer",
    "candidate_to_json",
    "extractor_from_config",
    "reviewer_from_config",
]

EXTRACT_PROMPT = "extract_v1"
REVIEW_PROMPT = "review_v1"
_PACKAGE = "retold.ingest"
_CLAIM_KINDS = ("user_statement", "tool_result", "agent_inference")

_STRING = {"type": "string"}
_TIMESTAMP = nullable(_STRING)
_ENTITY = strict_object(
    {
        "kind": {"type": "string", "enum": list(ENTITY_KINDS)},
        "text": _STRING,
        "role": {"type": "string", "enum": ["about", "mentions"]},
    }
)
_CANDIDATE = strict_object(
    {
        "type": {"type": "string", "enum": list(RECORD_TYPES)},
        "content": _STRING,
        "attribute": nullable(_STRING),
        "source_kind": {"type": "string", "enum": list(_CLAIM_KINDS)},
        "evidence": _STRING,
        "evidence_turn": {"type": "integer"},
        "entities": {"type": "array", "items": _ENTITY},
        "event_at": _TIMESTAMP,
        "valid_from": _TIMESTAMP,
        "valid_until": _TIMESTAMP,
        "review_at": _TIMESTAMP,
        "confidence": {"type": "number"},
    }
)
EXTRACTION_SCHEMA: dict[str, Any] = strict_object(
    {
        "candidates": {"type": "array", "items": _CANDIDATE},
        "summary": strict_object(
            {
                "content": _STRING,
                "decisions": {"type": "array", "items": _STRING},
                "entities": {"type": "array", "items": _ENTITY},
            }
        ),
    }
)
"""The JSON an extractor returns: ``ExtractionOutput`` (spec §5) as provider-strict JSON schema."""

_REVISION = strict_object(
    {
        "content": _STRING,
        "attribute": nullable(_STRING),
        "source_kind": {"type": "string", "enum": list(_CLAIM_KINDS)},
        "valid_from": _TIMESTAMP,
        "valid_until": _TIMESTAMP,
        "review_at": _TIMESTAMP,
    }
)
REVIEW_SCHEMA: dict[str, Any] = strict_object(
    {
        "action": {"type": "string", "enum": ["accept", "reject", "revise"]},
        "reason": _STRING,
        "revision": nullable(_REVISION),
    }
)
"""The JSON a reviewer returns; a revision carries only the fields it may narrow."""


# --- JSON in and out -----------------------------------------------------------------------------


def _ts_out(value: datetime | None) -> str | None:
    if value is None:
        return None
    aware = value if value.tzinfo else value.replace(tzinfo=UTC)
    return aware.astimezone(UTC).isoformat().replace("+00:00", "Z")


def _ts_in(value: Any, field: str, identity: str, provider: str) -> datetime | None:
    if value is None:
        return None
    try:
        parsed = datetime.fromisoformat(str(value).strip().replace("Z", "+00:00"))
    except ValueError as exc:
        raise SchemaMismatchError(
            f"{identity}: {field} is not an ISO-8601 timestamp", provider=provider
        ) from exc
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def _turn_json(turn: Turn) -> dict[str, Any]:
    return {"turn": turn.turn, "role": turn.role, "at": _ts_out(turn.at), "content": turn.content}


def _mentions_json(mentions: Sequence[EntityMention]) -> list[dict[str, str]]:
    return [{"kind": m.kind, "text": m.text, "role": m.role} for m in mentions]


def candidate_to_json(candidate: CandidateRecord) -> dict[str, Any]:
    """A candidate as the JSON the prompts and the extraction.run event use."""
    return {
        "type": candidate.type,
        "content": candidate.content,
        "attribute": candidate.attribute,
        "source_kind": candidate.source_kind,
        "evidence": candidate.evidence,
        "evidence_turn": candidate.evidence_turn,
        "entities": _mentions_json(candidate.entity_mentions),
        "event_at": _ts_out(candidate.event_at),
        "valid_from": _ts_out(candidate.valid_from),
        "valid_until": _ts_out(candidate.valid_until),
        "review_at": _ts_out(candidate.review_at),
        "confidence": candidate.confidence,
    }


def _mentions(items: Sequence[Mapping[str, Any]]) -> list[EntityMention]:
    return [EntityMention(kind=i["kind"], text=i["text"], role=i["role"]) for i in items]


def _confidence(value: Any, identity: str, provider: str) -> float:
    score = float(value)
    if not 0.0 <= score <= 1.0:
        raise SchemaMismatchError(f"{identity}: confidence {score} is outside [0, 1]", provider=provider)
    return score


class _HostedStage:
    """What the extractor and the reviewer share: a structured completer, a versioned prompt, config.

    Both report the same ``name`` / ``model`` / ``prompt_version`` identity in extraction
    events, and config names their settings alike (``ingestion.<stage>_provider``,
    ``_model``, ``_timeout_ms``), so one constructor serves both.
    """

    name: ClassVar[str]
    _stage: ClassVar[Literal["extraction", "review"]]
    _feature: ClassVar[str]  # how a missing API key error names what needed it

    def __init__(self, client: StructuredCompleter, *, prompt_version: str) -> None:
        self.client = client
        self.prompt_version = prompt_version
        self._prompt = load_prompt(_PACKAGE, prompt_version)

    @property
    def model(self) -> str:
        return self.client.identity

    @classmethod
    def from_config(cls, config: Config, **client_kwargs: Any) -> Self:
        """The model ``ingestion.<stage>_provider`` / ``<stage>_model`` name, under ``<stage>_timeout_ms``."""
        ing = config.ingestion
        return cls(
            CompletionClient.from_env(
                getattr(ing, f"{cls._stage}_provider"),
                getattr(ing, f"{cls._stage}_model"),
                setting=f"ingestion.{cls._stage}_provider",
                feature=cls._feature,
                max_output_tokens=ing.hosted_max_output_tokens,
                timeout_s=getattr(ing, f"{cls._stage}_timeout_ms") / 1000.0,
                **client_kwargs,
            )
        )

    @classmethod
    def from_chat_model(cls, model: BaseChatModel, config: Config | None = None) -> Self:
        """The stage answered by the host's LangChain chat model, under ``ingestion.<stage>_timeout_ms``.

        The provider and model settings of the stage do not apply: the chat model is both.
        """
        from retold.chat_model import ChatModelCompleter
        from retold.config import Config

        timeout_ms = getattr((config or Config()).ingestion, f"{cls._stage}_timeout_ms")
        return cls(ChatModelCompleter(model, timeout_s=timeout_ms / 1000.0))


# --- the extractor -------------------------------------------------------------------------------


class StructuredLLMExtractor(_HostedStage):
    """:class:`~retold.models.Extractor` over a hosted model (prompt ``extract_v1``).

    extractor = StructuredLLMExtractor(CompletionClient.from_env(...))   # or .from_chat_model(model)
    output = extractor.extract(turns, context)   # blocking; the graph runs it in a thread
    """

    name = "structured-llm-extractor"
    _stage = "extraction"
    _feature = "Session extraction (ingestion.extraction_enabled)"

    def __init__(self, client: StructuredCompleter, *, prompt_version: str = EXTRACT_PROMPT) -> None:
        super().__init__(client, prompt_version=prompt_version)

    def request(self, transcript: Sequence[Turn], context: ExtractionContext) -> str:
        """The user message: the numbered transcript and the bounded context, as JSON."""
        return json.dumps(
            {
                "user_id": context.principal.user_id,
                "transcript": [_turn_json(t) for t in transcript],
                "known_entities": [{"kind": kind, "name": name} for _, kind, name in context.known_entities],
                "existing_subjects": list(context.existing_subjects),
            },
            ensure_ascii=False,
        )

    def extract(self, transcript: list[Turn], context: ExtractionContext) -> ExtractionOutput:
        data = self.client.complete(
            system=self._prompt,
            user=self.request(transcript, context),
            schema=EXTRACTION_SCHEMA,
            name="extraction",
        )
        return self.parse(data)

    def parse(self, data: Mapping[str, Any]) -> ExtractionOutput:
        """Schema-valid JSON → :class:`ExtractionOutput`; timestamps and confidences are checked."""
        identity, provider = self.client.identity, self.client.provider
        candidates = []
        for item in data["candidates"]:
            candidates.append(
                CandidateRecord(
                    type=item["type"],
                    content=item["content"],
                    attribute=item["attribute"],
                    source_kind=item["source_kind"],
                    evidence=item["evidence"],
                    evidence_turn=int(item["evidence_turn"]),
                    entity_mentions=_mentions(item["entities"]),
                    event_at=_ts_in(item["event_at"], "event_at", identity, provider),
                    valid_from=_ts_in(item["valid_from"], "valid_from", identity, provider),
                    valid_until=_ts_in(item["valid_until"], "valid_until", identity, provider),
                    review_at=_ts_in(item["review_at"], "review_at", identity, provider),
                    confidence=_confidence(item["confidence"], identity, provider),
                )
            )
        summary_data = data["summary"]
        summary = SessionSummary(
            content=summary_data["content"],
            decisions=list(summary_data["decisions"]),
            entity_mentions=_mentions(summary_data["entities"]),
        )
        return ExtractionOutput(candidates=candidates, summary=summary)


# --- the reviewer --------------------------------------------------------------------------------


class StructuredLLMReviewer(_HostedStage):
    """:class:`~retold.models.CandidateReviewer` over a hosted model (prompt ``review_v1``).

    It sees one candidate, its evidence window and the live records about the same
    entity in the destination scope — never the rest of the store.
    """

    name = "structured-llm-reviewer"
    _stage = "review"
    _feature = "Candidate review for session extraction"

    def __init__(self, client: StructuredCompleter, *, prompt_version: str = REVIEW_PROMPT) -> None:
        super().__init__(client, prompt_version=prompt_version)

    def request(self, candidate: CandidateRecord, context: ReviewContext) -> str:
        return json.dumps(
            {
                "candidate": candidate_to_json(candidate),
                "transcript_window": [_turn_json(t) for t in context.transcript_window],
                "live_records": [
                    {
                        "content": r.content,
                        "attribute": r.attribute,
                        "source_kind": r.source_kind,
                        "status": r.status,
                    }
                    for r in context.live_records
                ],
            },
            ensure_ascii=False,
        )

    def review(self, candidate: CandidateRecord, context: ReviewContext) -> ReviewDecision:
        data = self.client.complete(
            system=self._prompt, user=self.request(candidate, context), schema=REVIEW_SCHEMA, name="review"
        )
        return self.parse(candidate, data)

    def parse(self, candidate: CandidateRecord, data: Mapping[str, Any]) -> ReviewDecision:
        """Schema-valid JSON → :class:`ReviewDecision`; a revision is applied to a copy of ``candidate``."""
        identity, provider = self.client.identity, self.client.provider
        action, reason, revision = data["action"], data["reason"], data["revision"]
        if (action == "revise") != (revision is not None):
            raise SchemaMismatchError(
                f"{identity}: a review must carry a revision exactly when its action is revise",
                provider=provider,
            )
        if revision is None:
            return ReviewDecision(action, None, reason)
        revised = dataclasses.replace(
            candidate,
            content=revision["content"],
            attribute=revision["attribute"],
            source_kind=revision["source_kind"],
            valid_from=_ts_in(revision["valid_from"], "valid_from", identity, provider),
            valid_until=_ts_in(revision["valid_until"], "valid_until", identity, provider),
            review_at=_ts_in(revision["review_at"], "review_at", identity, provider),
        )
        return ReviewDecision("revise", revised, reason)


StructuredLLMCandidateReviewer = StructuredLLMReviewer
"""The name spec §5's table uses."""


def extractor_from_config(config: Config) -> StructuredLLMExtractor | None:
    """The hosted extractor when ``ingestion.extraction_enabled``, else None (sessions wait)."""
    if not config.ingestion.extraction_enabled:
        return None
    return StructuredLLMExtractor.from_config(config)


def reviewer_from_config(config: Config) -> StructuredLLMReviewer:
    """The hosted reviewer; needed whenever an extractor is configured."""
    return StructuredLLMReviewer.from_config(config)
