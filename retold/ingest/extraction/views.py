"""What each extraction stage decided, as small JSON for Studio's node view and traces.

The extraction graph publishes these, one channel per stage, instead of the run (which
holds the transcript and the model's raw output). Candidate content is cut to a short
text; at most :data:`MAX_SHOWN` candidates are listed per stage.
"""

from __future__ import annotations

from typing import Any

from retold.ingest.extraction.run import CandidateState, ExtractionRun
from retold.retrieve.stage_views import snippet

__all__ = ["STAGE_VIEWS"]

MAX_SHOWN = 30


def _candidates(run: ExtractionRun, row: Any) -> dict[str, Any]:
    return {"total": len(run.candidates), "shown": [row(s) for s in run.candidates[:MAX_SHOWN]]}


def _verdict(s: CandidateState) -> dict[str, Any]:
    return {"index": s.index, "status": s.status, "reason": s.reason}


def claim(run: ExtractionRun) -> dict[str, Any]:
    c = run.claim
    return {
        "session": str(run.key),
        "claim": None if c is None else {"status": c.status, "rerun": c.rerun, "reclaimed": c.reclaimed},
    }


def load_transcript(run: ExtractionRun) -> dict[str, Any]:
    return {"transcript": {"turns": len(run.turns), "summary_only": run.summary_only}}


def build_context(run: ExtractionRun) -> dict[str, Any]:
    return {
        "extraction_context": {
            "readable_scopes": [str(s) for s in run.readable[:50]],
            "destination": str(run.destination) if run.destination else None,
        }
    }


def extract(run: ExtractionRun) -> dict[str, Any]:
    def row(s: CandidateState) -> dict[str, Any]:
        turn = s.proposed.evidence_turn
        return {
            "index": s.index, "type": s.proposed.type, "text": snippet(s.proposed.content),
            "evidence_turn": turn if isinstance(turn, int) else None,
        }  # fmt: skip

    summary = run.output.summary if run.output is not None else None
    return {
        "extracted": {
            **_candidates(run, row),
            "over_cap": run.over_cap,
            "ignored_summary_only": run.ignored_candidates,
            "summary": snippet(getattr(summary, "content", None)),
        }
    }


def validate(run: ExtractionRun) -> dict[str, Any]:
    return {"validated": _candidates(run, _verdict)}


def review(run: ExtractionRun) -> dict[str, Any]:
    def row(s: CandidateState) -> dict[str, Any]:
        verdict = s.review or {}
        return {**_verdict(s), "action": verdict.get("action"), "why": snippet(verdict.get("reason"))}

    return {"reviewed": _candidates(run, row)}


def revalidate(run: ExtractionRun) -> dict[str, Any]:
    return {"revalidated": _candidates(run, _verdict)}


def write(run: ExtractionRun) -> dict[str, Any]:
    def row(s: CandidateState) -> dict[str, Any]:
        return {**_verdict(s), "outcome": s.outcome, "record_id": s.record_id}

    summary = run.summary_result
    return {
        "written": {
            **_candidates(run, row),
            "summary": None
            if summary is None
            else {"outcome": summary.outcome, "record_id": summary.record_id},
        }
    }


STAGE_VIEWS = {
    "claim": claim,
    "load_transcript": load_transcript,
    "build_context": build_context,
    "extract": extract,
    "validate": validate,
    "review": review,
    "revalidate": revalidate,
    "write": write,
}
"""Each stage's view of the run, by stage name."""
