"""The offline default equivalence judge: the embedder's cosine plus explicit, named rules.

Why a module of its own: :class:`ConservativeJudge` is the one stateful piece of the
conservative judge, the embedder and a bounded, lock-guarded text->vector LRU, wrapped
around the pure rules in :mod:`retold.ingest.equivalence.claim_rules` (which read claims parsed by
:mod:`retold.ingest.equivalence.claim_parser`). It is selected by ``ingestion.equivalence.model =
"retold/conservative-judge-v1"`` (:data:`CONSERVATIVE_MODEL`) and built by
:func:`retold.ingest.equivalence.judge.build_judge`; import it from there.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any

import numpy as np

from retold.ingest.equivalence.claim_parser import parse_claim
from retold.ingest.equivalence.claim_rules import contradiction_reason, entailment_evidence, same_reason
from retold.ingest.equivalence.verdicts import JudgeDecision
from retold.models import Verdict

__all__ = ["CONSERVATIVE_MODEL", "ConservativeJudge"]

CONSERVATIVE_MODEL = "retold/conservative-judge-v1"
"""The ``ingestion.equivalence.model`` value that selects :class:`ConservativeJudge`."""


class ConservativeJudge:
    """The offline default judge: embedder cosine plus explicit, named rules.

    ``judge(a, b)`` answers:

    * ``same`` only when both claims reduce to the same words — after lower-casing,
      stemming, British/American spelling, number words, a short synonym list
      (prefers/likes, answers/responses, short/brief/concise) and dropping articles and
      fillers — in the same order or one rotated (a fronted "On staging," or a swapped
      copula "Ben is the user's brother"), with equal polarity, AND the cosine is at least
      ``same_cosine``;
    * ``contradicts`` only when every difference between the two claims is explained by
      one rule, and the reason names it: ``negation`` (not/never/no longer/stopped/quit),
      ``antonyms`` (75 curated pairs plus negative verbs, e.g. concise/detailed, dark/light,
      tabs/spaces, enabled/disabled, likes/dislikes), ``reversed preference`` (X over Y vs
      Y over X), or a single value slot holding two values: ``numbers`` (3 vs five),
      ``dates`` (weekdays, months, years), ``proper nouns`` (Lisbon vs Porto),
      ``identifiers`` (bge-m3 vs minilm, vim vs emacs) or ``values`` (``The default branch is
      main`` vs ``... master``);
    * ``distinct`` otherwise.

    How it fails safe (spec §6.3): a wrong ``same`` silently merges two different facts
    (the new one is never stored), and a wrong ``contradicts`` against a record under
    another attribute supersedes a true fact, so both verdicts need proof. ``distinct`` is
    the cheap error: a missed ``same`` leaves a duplicate live, a missed ``contradicts``
    leaves two records live for ``memory_get`` to surface, and between same-attribute
    records any non-``same`` verdict already runs the supersession rule. The value rules
    never fire on the subject slot (Aditya vs Priya), under verbs where several values hold
    at once (speaks, visited, knows, has), across tenses (worked at / works at), or when
    anything else in the claim changed too, so a new fact about the same person is
    ``distinct``.

    ``entails(premise, hypothesis)`` scores how well a verbatim quote supports a claim::

        coverage = weighted share of the claim's content words found in the quote
                   (names, numbers, dates, identifiers weigh 1.5; user/like/want/have 0.5;
                   "I/my/we" in the quote covers "the user"; "please"/"can you" covers "wants")
        score    = min(cap, 0.8 * coverage + 0.2 * max(cosine, 0))

    where ``cap`` is 0.1 when a quote clause about the claim's words disagrees in polarity
    (negation, negative verbs, antonyms) or states the reverse preference, 0.4 when the quote
    is hedged ("maybe", "thinking about", "should I"), and 0.45 when the claim adds a name,
    number, date or identifier absent from the quote, or the quote is about the speaker's
    relative ("my sister is vegetarian"). Calibrated so supported claims clear
    ``ingestion.evidence.entail_floor`` (0.70) and unsupported ones fall below it.
    """

    name = "conservative"

    def __init__(self, embedder: Any, *, same_cosine: float = 0.85, cache_size: int = 4096) -> None:
        self.embedder = embedder
        self.same_cosine = same_cosine
        self.model = f"{CONSERVATIVE_MODEL}+{getattr(embedder, 'name', type(embedder).__name__)}"
        self._cache: OrderedDict[str, np.ndarray] = OrderedDict()
        self._cache_size = cache_size
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"ConservativeJudge(model={self.model!r}, same_cosine={self.same_cosine})"

    def clear_cache(self) -> None:
        """Forget every cached text vector (an erasure must not leave the text behind)."""
        with self._lock:
            self._cache.clear()

    # -- cosine with a small LRU: the ingestor judges one new claim against many old ones
    def vectors(self, texts: Sequence[str]) -> list[np.ndarray]:
        """One vector per text: cache hits from the LRU, every miss embedded in ONE batch.

        A ``judge``/``entails`` call needs at most two texts; whichever are not cached go to
        ``embed_documents`` together (never one call per text), so a call costs at most one
        model forward pass. The cache is bounded (``cache_size``, least recently used out
        first) and only touched under the lock.
        """
        with self._lock:
            found = {t: self._cache[t] for t in texts if t in self._cache}
            for text in found:
                self._cache.move_to_end(text)
        missing = [t for t in dict.fromkeys(texts) if t not in found]
        if missing:  # embedded outside the lock, so threads never wait on each other's model calls
            fresh = np.asarray(self.embedder.embed_documents(missing), dtype=np.float32)
            found.update(zip(missing, fresh, strict=True))
            with self._lock:
                for text, vec in zip(missing, fresh, strict=True):
                    self._cache[text] = vec
                    self._cache.move_to_end(text)
                while len(self._cache) > self._cache_size:
                    self._cache.popitem(last=False)
        return [found[t] for t in texts]

    def prefetch(self, texts: Sequence[str]) -> None:
        """Embed, in one batch, every text a write is about to compare or store.

        A write needs its claim's vector (for the index), the quote and claim for the
        entailment check, and the texts of the records it is judged against: fetched
        together, that is one model call per write instead of one per stage.
        """
        self.vectors(list(dict.fromkeys(texts)))

    def cosine(self, a: str, b: str) -> float:
        """Cosine of the two texts' document embeddings (normalised, so a dot product)."""
        va, vb = self.vectors([a, b])
        na, nb = float(np.linalg.norm(va)), float(np.linalg.norm(vb))
        if na == 0.0 or nb == 0.0:
            return 0.0
        return float(np.dot(va, vb) / (na * nb))

    def judge(self, a: str, b: str) -> Verdict:
        return self.judge_with_reason(a, b).verdict

    def judge_with_reason(self, a: str, b: str) -> JudgeDecision:
        """The verdict with the rule that produced it and the cosine it saw."""
        if " ".join(a.split()).casefold() == " ".join(b.split()).casefold():
            return JudgeDecision("same", "identical text", {"cosine": 1.0})
        pa, pb = parse_claim(a), parse_claim(b)
        contradiction = contradiction_reason(pa, pb)
        if contradiction is not None:
            return JudgeDecision("contradicts", contradiction, {})
        same = same_reason(pa, pb)
        if same is None:
            return JudgeDecision("distinct", None, {})
        cosine = self.cosine(a, b)
        scores = {"cosine": round(cosine, 4)}
        if cosine >= self.same_cosine:
            return JudgeDecision("same", f"{same} (cosine {cosine:.2f})", scores)
        return JudgeDecision("distinct", f"{same}, but cosine {cosine:.2f} < {self.same_cosine}", scores)

    def entails(self, premise: str, hypothesis: str) -> float:
        return self.entailment(premise, hypothesis)[0]

    def entailment(self, premise: str, hypothesis: str) -> tuple[float, str | None]:
        """``(score, reason)``: :meth:`entails` with the rule that capped the score, if one applies."""
        if not premise.strip() or not hypothesis.strip():
            return 0.0, "empty text"
        found = entailment_evidence(parse_claim(premise), parse_claim(hypothesis))
        if 0.8 * found.coverage >= found.cap:
            # The cosine term only adds (it is clamped at 0), so the cap already decides the
            # score: skip the embedder. Same score as below, bit for bit, with no model call.
            return round(max(0.0, min(1.0, found.cap)), 4), found.reason
        cosine = max(self.cosine(premise, hypothesis), 0.0)
        raw = 0.8 * found.coverage + 0.2 * cosine
        score = min(found.cap, raw)
        return round(max(0.0, min(1.0, score)), 4), found.reason
