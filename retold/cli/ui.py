"""``retold ui``: the memory inspector in the browser, served by uvicorn on 127.0.0.1."""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from retold.cli.common import run_async, store_options
from retold.errors import InvalidArgumentError

if TYPE_CHECKING:
    from retold.ui.security import UiSettings

__all__ = ["DEFAULT_PORT", "ui"]

DEFAULT_PORT = 8766


@click.command()
@store_options
@click.option(
    "--host", default="127.0.0.1", show_default=True, help="Bind address; off loopback needs --token."
)
@click.option(
    "--port",
    default=DEFAULT_PORT,
    show_default=True,
    type=click.IntRange(0, 65535),
    help="Port (0: any free).",
)
@click.option(
    "--token",
    envvar="RETOLD_UI_TOKEN",
    default=None,
    help="Require this token on every request ($RETOLD_UI_TOKEN); required off loopback.",
)
@click.option("--allow-admin", is_flag=True, help="Offer forget and erase, each behind a confirmation form.")
@click.option(
    "--operator",
    "--as",
    "operator",
    default=None,
    help="The name admin actions are audited under (default: the OS user).",
)
def ui(
    store_path: str,
    config_path: str | None,
    host: str,
    port: int,
    token: str | None,
    allow_admin: bool,
    operator: str | None,
) -> None:
    """Inspect a store in the browser: scopes, records, entities, sessions, audit, searches, plots.

    Read-only unless --allow-admin. Serves http://127.0.0.1:PORT/ by default; on any other
    --host it refuses to start without --token (or RETOLD_UI_TOKEN), and with a token every
    request must carry it (open /?token=TOKEN once, or send Authorization: Bearer TOKEN).

    Example:

        retold ui --store memory.sqlite

        retold ui --store memory.sqlite --allow-admin --operator dpo --port 8800
    """
    from retold.ui.security import UiSettings, default_operator

    try:
        settings = UiSettings(
            host=host, token=token, allow_admin=allow_admin, operator=operator or default_operator()
        )
    except InvalidArgumentError as exc:
        raise click.UsageError(str(exc)) from exc
    run_async(_serve(store_path, config_path, settings, port))


async def _serve(store_path: str, config_path: str | None, settings: UiSettings, port: int) -> None:
    from retold.index.threads import configure_torch_threads
    from retold.runtime import open_runtime
    from retold.ui.app import create_app, serve

    configure_torch_threads()  # before the warm-up imports torch
    async with open_runtime(store_path, config_path) as rt:
        app = create_app(rt, settings, warm_report=lambda line: click.echo(line, err=True))

        def ready(bound: int) -> None:
            shown = f"[{settings.host}]" if ":" in settings.host else settings.host
            click.echo(f"retold ui: serving on http://{shown}:{bound}/", err=True)

        await serve(app, host=settings.host, port=port, on_ready=ready)
