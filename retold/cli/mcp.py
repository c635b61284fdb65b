"""``retold mcp``: serve one store's memory to any MCP client, over stdio or streamable HTTP.

Identity is configuration, never a request's choice: over stdio the whole process is the
``--agent``/``--user`` principal; over HTTP each request's bearer token picks its principal
from ``--tokens``. Everything the server says goes over the transport (stdio: stdout), so
this command prints nothing to stdout of its own.
"""

from __future__ import annotations

import click

from retold.cli.common import common_options, run_async
from retold.errors import RetoldError
from retold.models import Principal
from retold.util import new_id

__all__ = ["mcp"]

DEFAULT_PORT = 8765


@click.command()
@click.option(
    "--agent", "agent_id", default=None, help="The agent the client is (stdio; HTTP without --tokens)."
)
@click.option("--user", "user_id", default=None, help="The user it works for (stdio; HTTP without --tokens).")
@click.option("--project", "project_id", default=None, help="The principal's current project.")
@click.option("--session", "session_id", default=None, help="Session id (default: mcp-<new id> per run).")
@click.option(
    "--http", "http", is_flag=True, help="Serve streamable HTTP at http://HOST:PORT/mcp, not stdio."
)
@click.option("--host", default="127.0.0.1", show_default=True, help="HTTP bind address.")
@click.option(
    "--port", default=DEFAULT_PORT, show_default=True, type=click.IntRange(0, 65535), help="HTTP port."
)
@click.option(
    "--tokens",
    "tokens_path",
    default=None,
    type=click.Path(exists=True, dir_okay=False),
    help="YAML: bearer token -> {agent, user, project?}. Required off loopback.",
)
@common_options
def mcp(
    agent_id: str | None,
    user_id: str | None,
    project_id: str | None,
    session_id: str | None,
    http: bool,
    host: str,
    port: int,
    tokens_path: str | None,
    store_path: str,
    config_path: str | None,
    actor: str,
) -> None:
    """Serve memory to an MCP client: the five tools, the memory policy prompt, records as resources.

    Over stdio (the default) the process serves one principal, AGENT for USER, and one
    session. With --http, each request's bearer token picks its principal from --tokens; on
    127.0.0.1 without --tokens every request is AGENT for USER, and any other --host is
    refused without --tokens. Grant the agent its scopes first (retold grant). What the
    client does is recorded as its agent; --as is not used.

    Example:

        retold grant claude user:u1 --read --write --store memory.sqlite

        retold mcp --store memory.sqlite --user u1 --agent claude

        retold mcp --http --port 8765 --tokens tokens.yaml --store memory.sqlite
    """
    from retold.adapters.mcp_http import TokenMap, is_loopback

    session = session_id or f"mcp-{new_id()}"
    tokens = None
    if http and tokens_path is not None:
        try:
            tokens = TokenMap.load(tokens_path)
        except RetoldError as exc:
            raise click.BadParameter(str(exc), param_hint="--tokens") from exc
    elif http and not is_loopback(host):
        raise click.UsageError(
            f"refusing to serve memory on {host} without --tokens: bind to 127.0.0.1, or pass a "
            "tokens file mapping bearer tokens to principals"
        )
    elif tokens_path is not None:
        raise click.UsageError("--tokens applies to --http only; over stdio the principal is --agent/--user")
    principal = None
    if tokens is None:
        if not agent_id or not user_id:
            raise click.UsageError("retold mcp needs --agent and --user (or --http with --tokens)")
        try:
            principal = Principal(
                agent_id=agent_id, user_id=user_id, session_id=session, project_id=project_id
            )
        except RetoldError as exc:
            raise click.BadParameter(str(exc)) from exc
    run_async(_serve(store_path, config_path, principal, tokens, session, http, host, port))


async def _serve(
    store_path: str,
    config_path: str | None,
    principal: Principal | None,
    tokens: object,
    session: str,
    http: bool,
    host: str,
    port: int,
) -> None:
    from retold.adapters.mcp import serve_stdio
    from retold.adapters.mcp_http import HttpMemoryServer, TokenMap, serve_http
    from retold.index.threads import configure_torch_threads
    from retold.runtime import open_runtime

    configure_torch_threads()  # before the warm-up imports torch

    def say(line: str) -> None:
        click.echo(line, err=True)  # stderr only: stdout is the stdio transport

    async with open_runtime(store_path, config_path) as rt:
        if not http:
            assert principal is not None
            # The first tool call would otherwise pay the model's load (seconds).
            rt.warm_in_background(say)
            await serve_stdio(rt, principal)
            return
        app = HttpMemoryServer(
            rt,
            session_id=session,
            tokens=tokens if isinstance(tokens, TokenMap) else None,
            principal=principal,
            host=host,
        )

        def ready(bound: int) -> None:
            say(f"retold mcp: serving on http://{host}:{bound}/mcp")  # the first line, as before
            rt.warm_in_background(say)

        await serve_http(app, port=port, on_ready=ready)
