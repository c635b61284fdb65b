"""``retold search``: one search as an agent would run it, or a replay of a logged one.

Prints the rendered result and the search_log row together, so an operator tuning the
gate sees what the agent saw and why in one place; ``--json`` prints the structured result
instead (each result's id, score and full explanation, as ``memory_search`` with
``explain: "full"`` returns it) with the row in one object.
"""

from __future__ import annotations

import asyncio
from typing import Any

import click

from retold.cli.common import common_options, echo_json, json_option, jsonable, reported_errors
from retold.errors import RetoldError
from retold.models import Principal, SearchRequest
from retold.runtime import open_runtime
from retold.tools.payloads import search_payload
from retold.util import maybe_json

__all__ = ["search"]


@click.command()
@click.argument("queries", nargs=-1)
@click.option("--agent", "agent_id", help="The agent searching (required unless --replay).")
@click.option("--user", "user_id", help="The user the agent works for (required unless --replay).")
@click.option("--session", "session_id", default=None, help="Session id recorded in the log.")
@click.option("--project", "project_id", default=None, help="The principal's current project.")
@click.option("--type", "types", multiple=True, type=click.Choice(["semantic", "episodic", "procedural"]))
@click.option("--k", "k", type=int, default=None, help="Results to return (default retrieval.default_k).")
@click.option("--history", is_flag=True, help="Include superseded and expired records.")
@click.option("--replay", "replay_id", default=None, help="Re-decide a logged search's gate with --config.")
@json_option
@common_options
def search(
    queries: tuple[str, ...],
    agent_id: str | None,
    user_id: str | None,
    session_id: str | None,
    project_id: str | None,
    types: tuple[str, ...],
    k: int | None,
    history: bool,
    replay_id: str | None,
    as_json: bool,
    store_path: str,
    config_path: str | None,
    actor: str,
) -> None:
    """Run one search as AGENT for USER and print the result and its search_log row.

    With --replay SEARCH_ID, re-decide that logged search's gate under the floors of
    --config, from the logged candidate scores alone, and print the decision.

    --json prints one object: ok, search_id, rendered, results (each with record_id,
    short_id, score, explanation and explanation_full), empty_reason, the queries, and
    search_log (the logged row); with --replay, ok and the replayed decision.

    Example:

        retold search --agent planner --user u1 "answer style" "preferred tone"

        retold search --replay 0190c3a4-5b6e-7c8d-9e0f-123456789abc --config stricter.yaml
    """
    if replay_id is not None:

        async def replay() -> Any:
            from retold.retrieve.replay import replay_gate

            async with open_runtime(store_path, config_path) as rt:
                return await replay_gate(rt.store, replay_id, rt.config)

        with reported_errors(as_json):
            decided = asyncio.run(replay())
        echo_json({"ok": True, **jsonable(decided)} if as_json else decided)
        return
    if not agent_id or not user_id or not queries:
        raise click.UsageError("a search needs --agent, --user and at least one query (or --replay ID)")
    try:
        principal = Principal(
            agent_id=agent_id, user_id=user_id, session_id=session_id, project_id=project_id
        )
    except RetoldError as exc:
        raise click.BadParameter(str(exc)) from exc
    request = SearchRequest(queries=list(queries), types=list(types) or None, k=k, include_history=history)

    async def go() -> tuple[dict[str, Any], Any]:
        async with open_runtime(store_path, config_path) as rt:
            response = await rt.search(principal, request)
            retrieval = rt.config.retrieval
            payload = search_payload(
                response, explain="full", rrf_k=retrieval.rrf_k, similarity_weight=retrieval.similarity_weight
            )
            return payload, await rt.store.search_log(response.search_id)

    with reported_errors(as_json):
        payload, row = asyncio.run(go())
    logged = {key: maybe_json(value) for key, value in (row or {}).items()}
    if as_json:
        echo_json({**payload, "search_log": logged})
        return
    click.echo(payload["rendered"])
    click.echo("\nsearch_log:")
    echo_json(logged)
