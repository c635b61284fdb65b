"""Entity administration: ``retold entity merge``.

The operator's counterpart of ``memory_revise`` with action ``merge_entities``. An
operator holds no grants, so in place of the tool's "both writable by the caller" check
the two entities must share one scope: a merge unions aliases and re-keys records, and
across scopes that would carry one tenant's names into another's. Every other check is
the library's (:func:`retold.ingest.write.entities.merge_entities`): same kind, not itself.
"""

from __future__ import annotations

import asyncio
from typing import Any

import click

from retold.cli.common import common_options, echo_json, json_option, reported_errors
from retold.errors import InvalidArgumentError, NotFoundError
from retold.ingest.write.entities import merge_entities
from retold.runtime import open_runtime
from retold.store import Store

__all__ = ["entity", "merge"]


@click.group()
def entity() -> None:
    """Entity administration.

    Example:

        retold entity merge ent_a1 ent_b2 --reason "same person" --store memory.sqlite --as ops
    """


async def operator_merge(
    store: Store, entity_id: str, into_id: str, *, actor: str, reason: str
) -> dict[str, Any]:
    """Check both entities as an operator may (exist, not deleted, one scope), then merge; refusals raise."""
    resolved = []
    for ref in (entity_id, into_id):
        found = await store.follow_merges(ref.strip())
        if found is None or found.status == "deleted":
            raise NotFoundError(f"entity {ref.strip()!r} not found")
        resolved.append(found)
    source, target = resolved
    if source.scope != target.scope:
        raise InvalidArgumentError(
            f"entity {source.id!r} is in {source.scope} and {target.id!r} in {target.scope}: "
            "only entities of one scope can be merged"
        )
    survivor = await merge_entities(store, source.id, target.id, actor=actor, reason=reason)
    return {
        "ok": True,
        "action": "merge",
        "entity_id": source.id,
        "merged_into": survivor.id,
        "scope": str(survivor.scope),
        "canonical": survivor.canonical,
        "aliases": list(survivor.aliases),
        "actor": actor,
    }


@entity.command()
@click.argument("entity_id")
@click.argument("into_id")
@click.option("--reason", required=True, help="Why; recorded on the entity.merged event.")
@json_option
@common_options
def merge(
    entity_id: str,
    into_id: str,
    reason: str,
    as_json: bool,
    store_path: str,
    config_path: str | None,
    actor: str,
) -> None:
    """Merge ENTITY_ID into INTO_ID: links, aliases and current-fact subjects move to INTO_ID.

    Both must exist, be of one kind and one scope, and differ (merged ids resolve to
    their survivor). One entity.merged event, with --as as its actor. A refusal changes
    nothing and exits 1.

    Example:

        retold entity merge ent_a1 ent_b2 --reason "same person" --store memory.sqlite --as ops
    """
    if not reason.strip():
        raise click.BadParameter("must not be blank", param_hint="--reason")

    async def go() -> dict[str, Any]:
        async with open_runtime(store_path, config_path) as rt:
            return await operator_merge(rt.store, entity_id, into_id, actor=actor, reason=reason.strip())

    with reported_errors(as_json):
        result = asyncio.run(go())
    if as_json:
        echo_json(result)
        return
    aliases = ", ".join(result["aliases"]) or "-"
    click.echo(
        f"merged {result['entity_id']} into {result['merged_into']} ({result['canonical']}; "
        f"aliases: {aliases}) in {result['scope']} as {actor}"
    )
