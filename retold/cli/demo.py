"""``retold demo``: the quickstart story, runnable without a config or an API key."""

from __future__ import annotations

import click

__all__ = ["demo"]


@click.command()
@click.option(
    "--store",
    "store_path",
    default=None,
    type=click.Path(dir_okay=False),
    help="Keep the demo store here (a new file); a temporary one is used otherwise.",
)
def demo(store_path: str | None) -> None:
    """Run the quickstart story offline: tools, evidence, supersession, search, forget."""
    from retold.quickstart import main as quickstart

    quickstart([store_path] if store_path else [])
