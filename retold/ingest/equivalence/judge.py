"""Equivalence judges: is a new claim the same as, contradicted by, or distinct from an old one?

Spec §5 defines the :class:`EquivalenceJudge` protocol and §6.3 how its verdicts are used.
No PyPI package ships an NLI model (docs: MODELS.md), so three judges are planned:

* :class:`ConservativeJudge` — the offline default (``retold/conservative-judge-v1``): the
  embedder's cosine plus explicit, named rules. It says ``same`` only when it can prove it
  and ``contradicts`` only with a reason naming the rule and the differing words.
* :class:`NLICrossEncoderJudge` — a local sentence-transformers NLI cross-encoder such as
  ``cross-encoder/nli-deberta-v3-small`` for users who have one in their model cache.
* :class:`~retold.ingest.equivalence.llm.LLMJudge` — a hosted model through the CompletionClient,
  chosen by naming it ``<provider>:<model>`` (see :func:`build_judge`).

Judges run in worker threads (``anyio.to_thread``), so each keeps no mutable state except
caches guarded by a lock. :func:`decide` is how the ingestor asks any judge for a verdict
plus the reason and scores its events record, together with :func:`judge_identity`.

    judge = build_judge(config, embedder)
    decision = decide(judge, old.content, new.content)   # JudgeDecision(verdict, reason, scores)
    score = judge.entails(evidence_quote, new.content)   # compared with ingestion.evidence.entail_floor

This module is the public surface and the only one callers import from. The rest lives in
one module per job: :mod:`~retold.ingest.equivalence.verdicts` (:class:`JudgeDecision`),
:mod:`~retold.ingest.equivalence.conservative` and :mod:`~retold.ingest.equivalence.nli` (the judges),
and the conservative judge's text analysis in :mod:`~retold.ingest.equivalence.claim_lexicon` (word
lists, stemmer), :mod:`~retold.ingest.equivalence.claim_parser` (text -> parsed claim) and
:mod:`~retold.ingest.equivalence.claim_rules` (contradiction / same / entailment rules).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from retold.ingest.equivalence.conservative import CONSERVATIVE_MODEL, ConservativeJudge
from retold.ingest.equivalence.nli import NLICrossEncoderJudge
from retold.ingest.equivalence.verdicts import JudgeDecision
from retold.models import EquivalenceJudge

if TYPE_CHECKING:
    from retold.config import Config

__all__ = [
    "CONSERVATIVE_MODEL",
    "ConservativeJudge",
    "EquivalenceJudge",
    "JudgeDecision",
    "NLICrossEncoderJudge",
    "build_judge",
    "decide",
    "judge_identity",
]


def decide(judge: Any, a: str, b: str) -> JudgeDecision:
    """Judge ``a`` (the existing claim) against ``b`` (the new one), with a reason when available.

    Judges that explain themselves expose ``judge_with_reason``; a plain protocol judge
    (``FakeJudge``, a user's own) is wrapped so callers handle one shape.
    """
    explain = getattr(judge, "judge_with_reason", None)
    if callable(explain):
        decision = explain(a, b)
        if isinstance(decision, JudgeDecision):
            return decision
        verdict, reason = decision  # a (verdict, reason) pair from a third-party judge
        return JudgeDecision(verdict, reason)
    return JudgeDecision(judge.judge(a, b))


def judge_identity(judge: Any) -> dict[str, str]:
    """``{"judge": name, "model": model}`` for an event; falls back to the class name."""
    name = getattr(judge, "name", None) or type(judge).__name__
    model = getattr(judge, "model", None) or "unknown"
    return {"judge": str(name), "model": str(model)}


def build_judge(config: Config, embedder: Any) -> EquivalenceJudge:
    """The judge ``ingestion.equivalence.model`` names.

    ``retold/conservative-judge-v1`` (the default) is :class:`ConservativeJudge` over
    ``embedder``; ``<provider>:<model>`` (``anthropic:claude-haiku-4-5-20251001``) is the
    hosted ``LLMJudge``; any other name is a sentence-transformers NLI cross-encoder id or
    path, loaded lazily on first use with the configured floors.
    """
    eq = config.ingestion.equivalence
    if eq.model == CONSERVATIVE_MODEL:
        return ConservativeJudge(embedder, same_cosine=eq.same_cosine)
    from retold.ingest.equivalence.llm import LLMJudge, hosted_judge_model

    if hosted_judge_model(eq.model) is not None:  # "<provider>:<model>": the hosted LLMJudge
        return LLMJudge.from_config(config)
    device = config.embedding.device
    return NLICrossEncoderJudge(
        eq.model,
        entail_floor=eq.entail_floor,
        contradict_floor=eq.contradict_floor,
        device=None if device == "auto" else device,
    )
