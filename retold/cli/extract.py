"""Commands that run the ingest pipeline by hand: extract one session, flag records due for review.

Normally a host triggers both; these let an operator run them now and see the result,
with the same skip and failure reasons the host would log.
"""

from __future__ import annotations

from typing import Any

import click

from retold.cli.common import CommandFailed, common_options, json_option, operation, run_async
from retold.runtime import open_runtime

__all__ = ["extract", "review_due_command"]


_SKIPPED = {
    "not_ended": "session {id} has not ended yet; end it (on_session_end) before extracting it",
    "already_extracted": "session {id} was already extracted; pass --force to run it again",
    "claimed_by_other": "another worker is extracting session {id} (its claim lasts "
    "ingestion.extraction_claim_timeout_minutes); try again later",
}


# The counts the summary line names, in this order, when not zero ("considered" always).
_SUMMARY_COUNTS = ("considered", "created", "reinforced", "already_reinforced", "superseded", "conflicting",
                   "rejected")  # fmt: skip


@click.command()
@click.argument("session_id")
@click.option("--force", is_flag=True, help="Run again on a session that was already extracted.")
@json_option
@common_options
def extract(
    session_id: str, force: bool, as_json: bool, store_path: str, config_path: str | None, actor: str
) -> None:
    """Extract SESSION_ID now: candidates through review, one session summary, one extraction.run.

    Needs an extractor (ingestion.extraction_enabled and the provider's API key). Prints
    one line per candidate and a summary line; --json prints the whole run as one object.
    Exits 1 when the session was skipped (not ended, already extracted without --force,
    claimed by another worker) or the run failed closed (nothing written; the claim
    expires after ingestion.extraction_claim_timeout_minutes). A forced re-run over
    unchanged output reports already_reinforced and changes nothing.

    Example:

        retold extract s1 --config retold.yaml
    """
    with operation("extracting", as_json) as op:

        async def go() -> Any:
            from retold.ingest.extraction.run import reporting_stages

            async with open_runtime(store_path, config_path) as rt:
                with reporting_stages(op.progress):
                    return await rt.extract_session(session_id, force=force, actor=actor)

        result = op.run(go())
        failure = None
        if result.status == "skipped":
            template = _SKIPPED.get(result.reason or "", "session {id} was skipped: " + str(result.reason))
            failure = CommandFailed(template.format(id=session_id), code="skipped")
        elif result.status == "failed":
            failure = CommandFailed(
                f"extraction of {session_id} failed closed ({result.reason}); nothing was written. "
                "See its extraction.failed event; run it again after the claim expires.",
                code="failed",
            )
        counts = ", ".join(
            f"{result.counts.get(name, 0)} {name.replace('_', ' ')}"
            for name in _SUMMARY_COUNTS
            if result.counts.get(name) or name == "considered"
        )
        op.finish(
            result.as_dict(),
            f"{result.status} session {result.session_id}"
            + (f" ({result.reason})" if result.reason else "")
            + (f": {counts}" if result.status != "skipped" else "")
            + (f", summary {result.summary['outcome']}" if result.summary else ""),
            details=(
                f"  #{c['index']} {c['type']} {c['record_id'] or '-'}: {c['outcome'] or c['status']}"
                + (f" ({c['reason']})" if c.get("reason") else "")
                for c in result.candidates
            ),
            failure=failure,
        )


@click.command("review-due")
@common_options
def review_due_command(store_path: str, config_path: str | None, actor: str) -> None:
    """Flag one bounded batch of records whose review_at has arrived.

    At most ingestion.temporal_review_batch_size records; each gets review_flagged_at and
    one record.review_due event in the same transaction, and nothing else about it
    changes. Safe to run from several processes at once: a record is flagged once.

    Example:

        retold review-due --store memory.sqlite --as cron
    """
    from retold.ingest.write.temporal_review import review_due

    async def go() -> Any:
        async with open_runtime(store_path, config_path, allow_embedding_mismatch=True) as rt:
            return await review_due(rt.store, rt.config, rt.clock, operator=actor)

    flagged = run_async(go())
    click.echo(f"flagged {len(flagged)} record(s) for review")
    for item in flagged:
        review_at = item.review_at.isoformat() if item.review_at else "-"
        click.echo(f"  {item.record_id}  review_at {review_at}")
