"""Optional query rewriting before retrieval (spec §2.3, §10.0).

With ``retrieval.rewrite.enabled`` a rewriter turns the agent's raw queries into
standalone ones from the raw queries and the host-supplied current-turn context
("what does he prefer?" → "Aditya's preferred explanation style"). It sees nothing
else: no candidates, no store, no earlier results. :func:`rewrite_stage` is the
pipeline stage: it bounds the call with a timeout, validates the answer, enforces
the no-invention rule in code, and on any problem lets the search go on with the
raw queries and ``failed`` in the log.

    queries, status = await rewrite_stage(
        rewriter, req.queries, req.context, enabled=cfg.enabled,
        max_context_chars=cfg.max_context_chars, timeout_ms=cfg.timeout_ms,
    )
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Literal

import anyio
import anyio.to_thread

from retold.errors import RetoldError
from retold.models import QueryRewriter, RewriteResult

if TYPE_CHECKING:
    from langchain_core.language_models.chat_models import BaseChatModel

    from retold.config import RewriteConfig
    from retold.hosted import StructuredCompleter

__all__ = [
    "REWRITE_PROMPT",
    "HostedLLMQueryRewriter",
    "NoRewriter",
    "QueryRewriter",
    "RewriteError",
    "RewriteResult",
    "RewriteStageStatus",
    "rewrite_stage",
    "rewriter_from_config",
    "violates_no_invention",
]

RewriteStageStatus = Literal["disabled", "applied", "unchanged", "failed"]
REWRITE_PROMPT = "rewrite_v1"

logger = logging.getLogger(__name__)

# A word: letters/digits, possibly joined by apostrophes (O'Brien, Priya's). Hyphens, dots and
# slashes split, so "Priya-style" yields "Priya" and "style".
_TOKEN = re.compile(r"[^\W_]+(?:'[^\W_]+)*", re.UNICODE)
_POSSESSIVE = re.compile(r"'s$", re.IGNORECASE)
# The pronoun "I" names nobody, so a rewrite may use it (e.g. "what did I decide").
_ALWAYS_ALLOWED = frozenset({"I"})


class RewriteError(RetoldError):
    """A rewriter could not produce a usable rewrite; the search proceeds on the raw queries."""


class NoRewriter:
    """The rewriter of a deployment without query rewriting: every query comes back unchanged.

    The stage reports ``disabled`` (not ``unchanged``) when ``retrieval.rewrite.enabled``
    is off, because it never calls the rewriter then.
    """

    def rewrite(self, queries: list[str], context: str | None) -> RewriteResult:
        return RewriteResult(list(queries), "unchanged")


def rewriter_from_config(config: RewriteConfig, rewriter: QueryRewriter | None = None) -> QueryRewriter:
    """The rewriter to use: ``rewriter`` when the host passes one; else the hosted one when
    ``retrieval.rewrite.enabled`` (a :class:`~retold.errors.ConfigError` without its API key);
    else :class:`NoRewriter`."""
    if rewriter is not None:
        return rewriter
    if config.enabled:
        return HostedLLMQueryRewriter.from_config(config)
    return NoRewriter()


class HostedLLMQueryRewriter:
    """:class:`QueryRewriter` on a hosted model: one structured call, prompt ``rewrite_v1`` (spec §10.0).

    The reply must hold exactly as many queries as were sent, none blank, and obey the
    no-invention rule (:func:`violates_no_invention`): a capitalised token, other than a
    query's first word, that neither the raw queries nor the context contain makes the
    rewrite fail, so the search goes on with the raw queries and ``failed``. A provider
    failure raises :class:`RewriteError` and a timeout :class:`TimeoutError`; the stage
    treats both the same way. The rewriter is given queries and context, nothing else.
    """

    name = "hosted-llm-rewriter"

    def __init__(self, client: StructuredCompleter, *, prompt_version: str = REWRITE_PROMPT) -> None:
        from retold.hosted import load_prompt

        self.client = client
        self.prompt_version = prompt_version
        self._prompt = load_prompt("retold.retrieve", prompt_version)

    @property
    def model(self) -> str:
        return self.client.identity

    @classmethod
    def from_config(cls, config: RewriteConfig, **client_kwargs: Any) -> HostedLLMQueryRewriter:
        """The rewriter ``retrieval.rewrite`` names; two attempts at most inside ``timeout_ms``."""
        from retold.hosted import CompletionClient

        client_kwargs.setdefault("max_attempts", 2)
        client_kwargs.setdefault("backoff_initial_s", 0.05)
        client = CompletionClient.from_env(
            config.provider,
            config.model,
            setting="retrieval.rewrite.provider",
            feature="Query rewriting (retrieval.rewrite.enabled)",
            max_output_tokens=config.max_output_tokens,
            timeout_s=config.timeout_ms / 1000.0,
            **client_kwargs,
        )
        return cls(client)

    @classmethod
    def from_chat_model(
        cls, model: BaseChatModel, config: RewriteConfig | None = None
    ) -> HostedLLMQueryRewriter:
        """The rewriter answered by the host's LangChain chat model, inside ``retrieval.rewrite.timeout_ms``.

        The chat model's own retries run inside that deadline; keep them few, since the
        rewrite sits on the search path.
        """
        from retold.chat_model import ChatModelCompleter
        from retold.config import RewriteConfig

        timeout_ms = (config or RewriteConfig()).timeout_ms
        return cls(ChatModelCompleter(model, timeout_s=timeout_ms / 1000.0))

    def rewrite(self, queries: list[str], context: str | None) -> RewriteResult:
        from retold.hosted import CompletionError, CompletionTimeoutError, strict_object

        raw = list(queries)
        schema = strict_object({"queries": {"type": "array", "items": {"type": "string"}}})
        user = json.dumps({"queries": raw, "context": context}, ensure_ascii=False)
        try:
            data = self.client.complete(system=self._prompt, user=user, schema=schema, name="rewrite")
        except CompletionTimeoutError:
            raise
        except CompletionError as exc:
            raise RewriteError(f"the rewrite model failed: {exc}") from exc
        rewritten = [q.strip() for q in data["queries"]]
        if len(rewritten) != len(raw) or not all(rewritten):
            raise RewriteError(f"the rewrite model returned {len(rewritten)} usable queries for {len(raw)}")
        if violates_no_invention(raw, context, rewritten):
            raise RewriteError("the rewrite names a capitalised term absent from the queries and the context")
        status: Literal["applied", "unchanged"] = (
            "unchanged" if rewritten == [q.strip() for q in raw] else "applied"
        )
        return RewriteResult(rewritten, status)


def _tokens(text: str) -> list[str]:
    """Word tokens with typographic apostrophes folded (a possessive 's still attached)."""
    return _TOKEN.findall(text.replace("\u2019", "'").replace("\u02bc", "'"))


def _stem(token: str) -> str:
    return _POSSESSIVE.sub("", token)


def violates_no_invention(raw_queries: Sequence[str], context: str | None, rewritten: Sequence[str]) -> bool:
    """True when a rewrite names something that neither the raw queries nor the context contain.

    A capitalised token in a rewritten query must appear case-sensitively as a token of
    the raw queries or of the context, after punctuation and a possessive 's are
    stripped. This stops a rewrite from carrying a name or private fact into retrieval
    that the turn did not already contain (spec §10.0). Exempt are the pronoun "I" and
    each query's first word, which sentence case capitalises, except that a possessive
    first word ("Priya's preferred style") is treated as a name: it must appear in the
    inputs, compared case-insensitively because its capital may be sentence case.
    """
    known: set[str] = set(_ALWAYS_ALLOWED)
    for text in (*raw_queries, context or ""):
        known.update(_stem(token) for token in _tokens(text))
    known_folded = {token.casefold() for token in known}
    for query in rewritten:
        tokens = _tokens(query)
        if not tokens:
            continue
        first = tokens[0]
        if first[:1].isupper() and _stem(first) != first and _stem(first).casefold() not in known_folded:
            return True
        for token in tokens[1:]:
            stem = _stem(token)
            if stem[:1].isupper() and stem not in known:
                return True
    return False


def _rejection(raw: list[str], context: str | None, result: object) -> str | None:
    """Why ``result`` is not a usable rewrite of ``raw``, or None when it is."""
    if not isinstance(result, RewriteResult):
        return f"the rewriter returned {type(result).__name__}, not a RewriteResult"
    if result.status == "failed":
        return "the rewriter reported failed"
    queries = result.queries
    if not isinstance(queries, list | tuple) or len(queries) != len(raw):
        count = len(queries) if isinstance(queries, list | tuple) else "no list of"
        return f"the rewriter returned {count} queries for {len(raw)}"
    if any(not isinstance(q, str) or not q.strip() for q in queries):
        return "the rewriter returned a blank query"
    if violates_no_invention(raw, context, [q.strip() for q in queries]):
        return "the rewrite names a capitalised term absent from the queries and the context"
    return None


async def rewrite_stage(
    rewriter: QueryRewriter,
    queries: Sequence[str],
    context: str | None,
    *,
    enabled: bool,
    max_context_chars: int,
    timeout_ms: int,
) -> tuple[list[str], RewriteStageStatus]:
    """Stage 10.0: the queries to search with and the ``rewrite_status`` to log.

    Disabled → the raw queries and ``disabled``, without calling the rewriter. Otherwise
    the rewriter gets a copy of the queries and the context cut to
    ``max_context_chars`` (``None`` when there is no context) and runs in a worker thread
    under ``timeout_ms``; a timeout, an exception, a different number of queries, a blank
    query, a ``failed`` status or a no-invention violation gives the raw queries and
    ``failed`` (the thread of a timed-out call runs on in the background, unused). A
    valid rewrite gives ``applied`` when it differs from the raw queries, else the raw
    queries and ``unchanged``. Never raises for a rewriter's failure.
    """
    raw = list(queries)
    if not enabled:
        return raw, "disabled"
    ctx = (context or "")[:max_context_chars] or None
    sent = list(raw)
    result: object = None
    timed_out = True
    try:
        with anyio.move_on_after(timeout_ms / 1000.0):
            result = await anyio.to_thread.run_sync(rewriter.rewrite, sent, ctx, abandon_on_cancel=True)
            timed_out = False
    except Exception as exc:
        logger.warning("query rewrite failed (%s); searching the raw queries", type(exc).__name__)
        return raw, "failed"
    if timed_out:
        logger.warning("query rewrite exceeded %d ms; searching the raw queries", timeout_ms)
        return raw, "failed"
    reason = _rejection(raw, ctx, result)
    if reason is not None:
        logger.warning("query rewrite rejected: %s; searching the raw queries", reason)
        return raw, "failed"
    assert isinstance(result, RewriteResult)  # _rejection checked it
    rewritten = [q.strip() for q in result.queries]
    if rewritten == [q.strip() for q in raw]:
        return raw, "unchanged"
    return rewritten, "applied"
