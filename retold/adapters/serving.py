"""Serving an ASGI app with uvicorn until cancelled: `retold mcp --http` and `retold ui` share it."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

__all__ = ["serve_uvicorn"]


async def serve_uvicorn(
    app: Any, *, host: str, port: int, on_ready: Callable[[int], None] | None = None
) -> None:
    """Serve ``app`` on ``host``:``port`` (0: any free port) until stopped.

    ``on_ready`` gets the bound port once the server (and the app's lifespan) has started.
    Cancelling this coroutine shuts the server down gracefully: the lifespan's shutdown
    runs before it returns. The caller imports what ``app`` needs first (uvicorn included)
    so a missing extra is reported in its own words.
    """
    import uvicorn

    server = uvicorn.Server(
        uvicorn.Config(app, host=host, port=port, lifespan="on", log_level="warning", access_log=False)
    )
    task = asyncio.ensure_future(server.serve())
    try:
        while not server.started:
            if task.done():
                break
            await asyncio.sleep(0.02)
        else:
            if on_ready is not None:
                on_ready(server.servers[0].sockets[0].getsockname()[1])
        await asyncio.shield(task)
    finally:
        if not task.done():
            server.should_exit = True
            await task
