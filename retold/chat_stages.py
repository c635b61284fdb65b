"""The hosted stages a host's chat model answers when :class:`~retold.runtime.Runtime` gets one.

``open_runtime(..., chat_model=model)`` fills the judge, rewriter, extractor and reviewer that
config enables, and the host did not pass, with :class:`~retold.chat_model.ChatModelCompleter`
over ``model``. This sits above the stages it builds (the LLM judge, the structured extractor
and reviewer, the hosted query rewriter), which import :mod:`retold.chat_model` themselves.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, NamedTuple

if TYPE_CHECKING:
    from langchain_core.language_models.chat_models import BaseChatModel

    from retold.config import Config

__all__ = ["HostedStages", "hosted_stages"]


class HostedStages(NamedTuple):
    """The models :class:`~retold.runtime.Runtime` takes that a chat model can answer."""

    judge: Any
    rewriter: Any
    extractor: Any
    reviewer: Any


def hosted_stages(
    config: Config,
    model: BaseChatModel,
    *,
    judge: Any = None,
    rewriter: Any = None,
    extractor: Any = None,
    reviewer: Any = None,
) -> HostedStages:
    """Fill every hosted stage config enables, and the host did not pass, with ``model``.

    Enabled means what it means without a chat model: ``retrieval.rewrite.enabled``,
    ``ingestion.extraction_enabled``, a reviewer whenever there is an extractor, and
    ``ingestion.equivalence.model`` naming a hosted judge (``<provider>:<model>``). The
    chat model answers them in place of the provider and model named there; timeouts still
    come from config. Stages left ``None`` are built from config as before.
    """
    from retold.ingest.equivalence.llm import LLMJudge, hosted_judge_model
    from retold.ingest.extraction.structured import StructuredLLMExtractor, StructuredLLMReviewer
    from retold.retrieve.rewrite import HostedLLMQueryRewriter

    if judge is None and hosted_judge_model(config.ingestion.equivalence.model) is not None:
        judge = LLMJudge.from_chat_model(model, config)
    if rewriter is None and config.retrieval.rewrite.enabled:
        rewriter = HostedLLMQueryRewriter.from_chat_model(model, config.retrieval.rewrite)
    if extractor is None and config.ingestion.extraction_enabled:
        extractor = StructuredLLMExtractor.from_chat_model(model, config)
    if reviewer is None and extractor is not None:
        reviewer = StructuredLLMReviewer.from_chat_model(model, config)
    return HostedStages(judge, rewriter, extractor, reviewer)
