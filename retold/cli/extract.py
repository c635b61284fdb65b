"""Commands that run the ingest pipeline by hand: extract one session, flag records due for review.

Normally a host triggers both; these let an operator run them now and see the result,
with the same skip and failure reasons the host would log.
"""

from __future__ import annotations

from typing import Any

import click

from retold.cli.common import common_options, echo_json, run_async
from retold.runtime import open_runtime

__all__ = ["extract", "review_due_command"]


_SKIPPED = {
    "not_ended": "session {id} has not ended yet; end it (on_session_end) before extracting it",
    "already_extracted": "session {id} was already extracted; pass --force to run it again",
    "claimed_by_other": "another worker is extracting session {id} (its claim lasts "
    "ingestion.extraction_claim_timeout_minutes); try again later",
}


@click.command()
@click.argument("session_id")
@click.option("--force", is_flag=True, help="Run again on a session that was already extracted.")
@common_options
def extract(session_id: str, force: bool, store_path: str, config_path: str | None, actor: str) -> None:
    """Extract SESSION_ID now: candidates through review, one session summary, one extraction.run.

    Needs an extractor (ingestion.extraction_enabled and the provider's API key). Prints
    the run as JSON. Exits 1 when the session was skipped (not ended, already extracted
    without --force, claimed by another worker) or the run failed closed (nothing
    written; the claim expires after ingestion.extraction_claim_timeout_minutes). A
    forced re-run over unchanged output reports already_reinforced and changes nothing.

    Example:

        retold extract s1 --config retold.yaml
    """

    async def go() -> Any:
        async with open_runtime(store_path, config_path) as rt:
            return await rt.extract_session(session_id, force=force, actor=actor)

    result = run_async(go())
    echo_json(result.as_dict())
    if result.status == "skipped":
        template = _SKIPPED.get(result.reason or "", "session {id} was skipped: " + str(result.reason))
        raise click.ClickException(template.format(id=session_id))
    if result.status == "failed":
        raise click.ClickException(
            f"extraction of {session_id} failed closed ({result.reason}); nothing was written. "
            "See its extraction.failed event; run it again after the claim expires."
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
    from retold.ingest.temporal import review_due

    async def go() -> Any:
        async with open_runtime(store_path, config_path, allow_embedding_mismatch=True) as rt:
            return await review_due(rt.store, rt.config, rt.clock, operator=actor)

    flagged = run_async(go())
    click.echo(f"flagged {len(flagged)} record(s) for review")
    for item in flagged:
        review_at = item.review_at.isoformat() if item.review_at else "-"
        click.echo(f"  {item.record_id}  review_at {review_at}")
