"""A model that proposes an activation category (config ``activation.classifier: model``).

The offline rules (:mod:`retold.policy.activation`) place most claims; for the rest a
hosted model, or the host's LangChain chat model, may propose a category. A proposal never
decides: the rules still check the evidence and the form, and a claim placed only by the
model waits in the review queue for a person. A failed call proposes nothing.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from retold.config.policy import ACTIVATION_CATEGORIES
from retold.hosted import CompletionClient, StructuredCompleter, load_prompt, strict_object

if TYPE_CHECKING:
    from langchain_core.language_models.chat_models import BaseChatModel

    from retold.config import Config

__all__ = ["ACTIVATION_PROMPT", "ModelActivationClassifier"]

ACTIVATION_PROMPT = "activation_v1"
_SCHEMA = strict_object(
    {
        "category": {"type": "string", "enum": [*ACTIVATION_CATEGORIES, "none"]},
        "reason": {"type": "string"},
    }
)


class ModelActivationClassifier:
    """:class:`~retold.ingest.activation.ActivationClassifier` over a structured completer (blocking)."""

    def __init__(self, client: StructuredCompleter, *, prompt_version: str = ACTIVATION_PROMPT) -> None:
        self.client = client
        self.prompt_version = prompt_version
        self._prompt = load_prompt("retold.ingest", prompt_version)

    @classmethod
    def from_config(cls, config: Config, **client_kwargs: Any) -> ModelActivationClassifier:
        """The review model (``ingestion.review_provider`` / ``review_model``) under its timeout."""
        ing = config.ingestion
        client = CompletionClient.from_env(
            ing.review_provider,
            ing.review_model,
            setting="activation.classifier",
            feature="The activation classifier",
            max_output_tokens=ing.hosted_max_output_tokens,
            timeout_s=ing.review_timeout_ms / 1000.0,
            **client_kwargs,
        )
        return cls(client)

    @classmethod
    def from_chat_model(cls, model: BaseChatModel, config: Config | None = None) -> ModelActivationClassifier:
        """The classifier answered by the host's chat model, under ``ingestion.review_timeout_ms``."""
        from retold.chat_model import ChatModelCompleter
        from retold.config import Config

        timeout_ms = (config or Config()).ingestion.review_timeout_ms
        return cls(ChatModelCompleter(model, timeout_s=timeout_ms / 1000.0))

    def propose(self, content: str, evidence: str | None) -> str | None:
        """A category name, or None for ``none``; raises the completer's errors."""
        data = self.client.complete(
            system=self._prompt,
            user=json.dumps({"content": content, "evidence": evidence}, ensure_ascii=False),
            schema=_SCHEMA,
            name="activation_category",
        )
        category = data["category"]
        return None if category == "none" else str(category)
