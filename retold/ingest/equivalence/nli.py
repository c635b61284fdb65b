"""An equivalence judge backed by a local sentence-transformers NLI cross-encoder.

Why a module of its own: :class:`NLICrossEncoderJudge` is the model-backed alternative to
the conservative judge, for users who have an NLI checkpoint (such as
``cross-encoder/nli-deberta-v3-small``) in their model cache. It shares nothing with the
rule-based judge but the verdict type, and it keeps the optional ``sentence-transformers``
dependency in one place: the library is imported only when the model first loads, so
importing this module (or :mod:`retold.ingest.equivalence.judge`) loads no model library.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable
from typing import Any

import numpy as np

from retold.errors import ConfigError, MissingExtraError
from retold.ingest.equivalence.conservative import CONSERVATIVE_MODEL
from retold.ingest.equivalence.verdicts import JudgeDecision
from retold.models import Verdict

__all__ = ["NLICrossEncoderJudge"]


def _load_cross_encoder(model: str, device: str | None) -> Any:
    try:
        from sentence_transformers import CrossEncoder
    except ImportError as exc:  # pragma: no cover - exercised where the extra is missing
        raise MissingExtraError("sentence-transformers", "local", "The NLI judge") from exc
    return CrossEncoder(model, device=device)


def _label_indices(encoder: Any, model: str) -> tuple[int, int]:
    """``(entailment, contradiction)`` output indices, read from the model's ``id2label``."""
    config = getattr(encoder, "config", None)
    if config is None:
        config = getattr(getattr(encoder, "model", None), "config", None)
    id2label = getattr(config, "id2label", None) or {}
    entail = contradict = None
    for index, label in id2label.items():
        name = str(label).lower()
        if name.startswith("entail"):
            entail = int(index)
        elif name.startswith("contradict"):
            contradict = int(index)
    if entail is None or contradict is None:
        raise ConfigError(
            f"{model!r} does not look like an NLI model: its config id2label is {dict(id2label)!r}, "
            "with no 'entailment' and 'contradiction' labels. Set ingestion.equivalence.model to an "
            "NLI cross-encoder such as cross-encoder/nli-deberta-v3-small, or to "
            f"{CONSERVATIVE_MODEL!r}.",
            key="ingestion.equivalence.model",
        )
    return entail, contradict


class NLICrossEncoderJudge:
    """A local NLI cross-encoder (e.g. ``cross-encoder/nli-deberta-v3-small``) scoring both directions.

    ``same`` when entailment is at least ``entail_floor`` in both directions; ``contradicts``
    when contradiction is at least ``contradict_floor`` in either direction (it wins over
    ``same``); ``distinct`` otherwise. Label order differs between NLI checkpoints, so it
    is read from the model config's ``id2label``, never assumed. The model loads on first
    use; ``loader(model, device)`` replaces the sentence-transformers loader in tests.
    """

    name = "nli-cross-encoder"

    def __init__(
        self,
        model: str,
        *,
        entail_floor: float = 0.7,
        contradict_floor: float = 0.7,
        device: str | None = "cpu",
        loader: Callable[[str, str | None], Any] | None = None,
    ) -> None:
        self.model = model
        self.entail_floor = entail_floor
        self.contradict_floor = contradict_floor
        self.device = device
        self._loader = loader or _load_cross_encoder
        self._encoder: Any = None
        self._labels: tuple[int, int] | None = None
        self._lock = threading.Lock()  # guards loading, and predict: fast tokenizers are not re-entrant

    def __repr__(self) -> str:
        return f"NLICrossEncoderJudge(model={self.model!r})"

    @property
    def is_loaded(self) -> bool:
        return self._encoder is not None

    def _probabilities(self, pairs: list[tuple[str, str]]) -> tuple[np.ndarray, int, int]:
        with self._lock:
            if self._encoder is None:
                encoder = self._loader(self.model, self.device)
                self._labels = _label_indices(encoder, self.model)
                self._encoder = encoder
            assert self._labels is not None
            raw = np.asarray(
                self._encoder.predict(pairs, apply_softmax=True, show_progress_bar=False), dtype=np.float64
            )
        raw = raw.reshape(len(pairs), -1)
        sums = raw.sum(axis=1)
        if np.any(raw < 0) or np.any(raw > 1) or not np.allclose(sums, 1.0, atol=1e-3):
            shifted = np.exp(raw - raw.max(axis=1, keepdims=True))  # logits: softmax them
            raw = shifted / shifted.sum(axis=1, keepdims=True)
        entail, contradict = self._labels
        return raw, entail, contradict

    def judge(self, a: str, b: str) -> Verdict:
        return self.judge_with_reason(a, b).verdict

    def judge_with_reason(self, a: str, b: str) -> JudgeDecision:
        """Both directed NLI scores; the floors are compared before the scores are rounded."""
        probs, ei, ci = self._probabilities([(a, b), (b, a)])
        entail_ab, entail_ba = float(probs[0, ei]), float(probs[1, ei])
        contra_ab, contra_ba = float(probs[0, ci]), float(probs[1, ci])
        scores = {
            "entail_ab": round(entail_ab, 4),
            "entail_ba": round(entail_ba, 4),
            "contradict_ab": round(contra_ab, 4),
            "contradict_ba": round(contra_ba, 4),
        }
        contradiction = max(contra_ab, contra_ba)
        if contradiction >= self.contradict_floor:
            direction = "a->b" if contra_ab >= contra_ba else "b->a"
            reason = f"nli contradiction {contradiction:.2f} ({direction})"
            return JudgeDecision("contradicts", reason, scores)
        entailment = min(entail_ab, entail_ba)
        if entailment >= self.entail_floor:
            return JudgeDecision("same", f"nli entailment {entailment:.2f} both ways", scores)
        return JudgeDecision("distinct", None, scores)

    def entails(self, premise: str, hypothesis: str) -> float:
        probs, ei, _ = self._probabilities([(premise, hypothesis)])
        value = float(probs[0, ei])
        return 0.0 if math.isnan(value) else value
