"""An equivalence judge on a hosted model (MODELS.md: the second of three judges).

Why it exists: no NLI model ships on PyPI, and a user with a hosted key may prefer a
model's reading of "same / contradicts / distinct" to the conservative offline rules.
It answers the same :class:`~retold.models.EquivalenceJudge` protocol with one
structured call per question (prompt ``judge_v1``), so the ingestor treats it like any
judge: it runs in a worker thread and its identity is recorded with every verdict.

Entailment is asked as a label rather than a number, because a model's self-reported
probability is not calibrated; each label maps to a fixed score on the side of
``ingestion.evidence.entail_floor`` it must fall: ``entailed`` clears any floor up to
0.95, ``neutral`` and ``contradicted`` clear none above 0.3.

Select it with ``ingestion.equivalence.model: "<provider>:<model>"``, for example
``anthropic:claude-haiku-4-5-20251001``, or answer it with the host's LangChain chat model
(:meth:`LLMJudge.from_chat_model`, ``open_runtime(..., chat_model=model)``).
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from retold.hosted import API_KEY_ENV, CompletionClient, StructuredCompleter, load_prompt, strict_object
from retold.ingest.equivalence.verdicts import JudgeDecision
from retold.models import Verdict

if TYPE_CHECKING:
    from langchain_core.language_models.chat_models import BaseChatModel

    from retold.config import Config

__all__ = ["ENTAIL_SCORES", "JUDGE_PROMPT", "LLMJudge", "hosted_judge_model"]

JUDGE_PROMPT = "judge_v1"
ENTAIL_SCORES = {"entailed": 0.95, "neutral": 0.3, "contradicted": 0.0}
"""The score :meth:`LLMJudge.entails` returns for each label."""

_VERDICT_SCHEMA = strict_object(
    {"verdict": {"type": "string", "enum": ["same", "contradicts", "distinct"]}, "reason": {"type": "string"}}
)
_ENTAIL_SCHEMA = strict_object(
    {"label": {"type": "string", "enum": list(ENTAIL_SCORES)}, "reason": {"type": "string"}}
)


def hosted_judge_model(name: str) -> tuple[str, str] | None:
    """``"anthropic:claude-…"`` → ``("anthropic", "claude-…")``; None for a local model name."""
    provider, sep, model = name.partition(":")
    if sep and provider in API_KEY_ENV and model:
        return provider, model
    return None


class LLMJudge:
    """:class:`~retold.models.EquivalenceJudge` asking a hosted model (blocking; run it in a thread)."""

    name = "llm-judge"

    def __init__(self, client: StructuredCompleter, *, prompt_version: str = JUDGE_PROMPT) -> None:
        self.client = client
        self.prompt_version = prompt_version
        self._prompt = load_prompt("retold.ingest", prompt_version)

    @property
    def model(self) -> str:
        return self.client.identity

    @classmethod
    def from_config(cls, config: Config, **client_kwargs: Any) -> LLMJudge:
        """The judge ``ingestion.equivalence.model`` names as ``<provider>:<model>``."""
        parsed = hosted_judge_model(config.ingestion.equivalence.model)
        if parsed is None:
            raise ValueError(f"{config.ingestion.equivalence.model!r} does not name a hosted judge")
        provider, model = parsed
        client = CompletionClient.from_env(
            provider,  # type: ignore[arg-type]
            model,
            setting="ingestion.equivalence.model",
            feature="The hosted equivalence judge",
            max_output_tokens=config.ingestion.hosted_max_output_tokens,
            timeout_s=config.ingestion.review_timeout_ms / 1000.0,
            **client_kwargs,
        )
        return cls(client)

    @classmethod
    def from_chat_model(cls, model: BaseChatModel, config: Config | None = None) -> LLMJudge:
        """The judge answered by the host's LangChain chat model, under ``ingestion.review_timeout_ms``."""
        from retold.chat_model import ChatModelCompleter
        from retold.config import Config

        timeout_ms = (config or Config()).ingestion.review_timeout_ms
        return cls(ChatModelCompleter(model, timeout_s=timeout_ms / 1000.0))

    def judge_with_reason(self, a: str, b: str) -> JudgeDecision:
        """The verdict on ``a`` (existing) versus ``b`` (new), with the model's reason."""
        data = self.client.complete(
            system=self._prompt,
            user=json.dumps({"task": "equivalence", "a": a, "b": b}, ensure_ascii=False),
            schema=_VERDICT_SCHEMA,
            name="equivalence",
        )
        return JudgeDecision(data["verdict"], f"{self.model}: {data['reason']}")

    def judge(self, a: str, b: str) -> Verdict:
        verdict: Verdict = self.judge_with_reason(a, b).verdict  # type: ignore[assignment]
        return verdict

    def entails(self, premise: str, hypothesis: str) -> float:
        data = self.client.complete(
            system=self._prompt,
            user=json.dumps(
                {"task": "entailment", "premise": premise, "hypothesis": hypothesis}, ensure_ascii=False
            ),
            schema=_ENTAIL_SCHEMA,
            name="entailment",
        )
        return ENTAIL_SCORES[data["label"]]
