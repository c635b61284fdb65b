"""A :class:`~retold.adapters.langgraph_store.RetoldStore` for ``langgraph dev`` / LangGraph server.

``langgraph.json``: ``"store": {"path": "./retold/adapters/langgraph_store_dev.py:make_store"}``.
The server calls ``make_store()`` and enters the returned async context manager once per
process; the store then replaces the server's own store for graphs (``runtime.store``) and for
the HTTP ``/store`` API.

* Runtime: the one ``langgraph dev`` graphs of this repository use (``RETOLD_STORE`` /
  ``RETOLD_CONFIG``, opened once per process on a portal: :mod:`retold.graph_nodes.studio`).
* Agent: ``RETOLD_STORE_AGENT`` (default ``"langgraph"``); give it grants first, e.g.
  ``retold grant langgraph user:u1 --read --write --store memory.sqlite``.
* User for project namespaces outside a run: ``RETOLD_STORE_USER`` (optional).
* Who is calling: with an ``Auth`` handler, a served run (and a ``/store`` API request) by an
  authenticated user acts as that user and may name only their namespaces; without one, a
  served run is refused unless ``RETOLD_GRAPH_IDENTITY=input``, and the ``/store`` API is
  outside a run (the namespace names the user): keep such a server on localhost.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from retold.adapters.langgraph_store import RetoldStore

__all__ = ["make_store"]

DEFAULT_AGENT = "langgraph"


@asynccontextmanager
async def make_store() -> AsyncIterator[RetoldStore]:
    """The server's store: agent ``RETOLD_STORE_AGENT`` over the studio runtime."""
    from retold.graph_nodes.studio import runtime

    rt = await runtime()  # opened in a worker thread, owned by its portal's loop
    yield RetoldStore(
        rt,
        agent_id=os.environ.get("RETOLD_STORE_AGENT") or DEFAULT_AGENT,
        default_user_id=os.environ.get("RETOLD_STORE_USER") or None,
    )
