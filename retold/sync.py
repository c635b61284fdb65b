"""retold without ``await``: for scripts, notebooks and frameworks that only call synchronously.

    import retold
    from retold import Principal, Scope, SearchRequest

    with retold.open_runtime_sync("memory.sqlite") as rt:
        rt.host.provision_user("u1")
        rt.host.grant("planner", Scope("user", "u1"), read=True, write=True)
        p = Principal(agent_id="planner", user_id="u1", session_id="s1")
        rt.tools.call(p, "memory_write", {...})
        response = rt.search(p, SearchRequest(queries=["answer style"]))

The async :class:`~retold.runtime.Runtime` stays the engine and the primary API. This facade
opens it on a :class:`~retold.adapters.portal.RuntimePortal`: one long-lived event-loop thread
that owns the store for its whole life. Every call is handed to that loop and waited for, so
it is safe from any number of threads, from a notebook whose own loop is running, and from
code that never saw an event loop; nothing starts a loop per call. Adapters built on
``rt.runtime`` (``CrewAIMemory``, ``RetoldMiddleware``, ``RetoldStore``) find the portal's loop
by themselves.

A call racing :meth:`SyncRuntime.close` gets its result or :class:`~retold.errors.StoreClosedError`,
never a driver's error: ``close()`` first refuses new calls, then lets the calls in flight
finish before it closes the store (with ``cancel_background=True`` it does not wait, and a
call the close cuts short answers ``StoreClosedError`` instead of what the closed connection
raised).
"""

from __future__ import annotations

import inspect
import os
import threading
import weakref
from collections.abc import Awaitable, Callable
from types import TracebackType
from typing import TYPE_CHECKING, Any, TypeVar

from retold.adapters.portal import RuntimePortal, running_loop
from retold.errors import RetoldError, StoreClosedError, StoreError

if TYPE_CHECKING:
    from retold.config import Config
    from retold.ingest.extraction.run import ExtractionResult
    from retold.models import Principal, SearchRequest, SearchResponse, SessionKey
    from retold.runtime import Runtime

__all__ = ["Blocking", "SyncRuntime", "open_runtime_sync"]

T = TypeVar("T")
_CLOSED = "this retold runtime has been closed; open a new one with open_runtime_sync()"


async def _invoke(method: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """Call on the owning loop, awaiting what the call returns when it is awaitable."""
    result = method(*args, **kwargs)
    if inspect.isawaitable(result):
        result = await result
    return result


def _close_quietly(portal: RuntimePortal) -> None:
    """Close from a finalizer, which may run on any thread, the portal's own included."""
    if threading.current_thread() is portal._thread:
        portal.close_soon()  # collected on the loop's own thread: it cannot wait for itself
    else:
        portal.close()


class _Calls:
    """The facade's calls in flight: ``close()`` refuses new ones and lets these finish first.

    Without it a call racing a close met the store half-closed and raised whatever the driver
    raised there (``sqlite3.ProgrammingError``, aiosqlite's ``ValueError``, a cancelled future).
    """

    def __init__(self, portal: RuntimePortal) -> None:
        self._portal = portal
        self._changed = threading.Condition()
        self._in_flight = 0
        self._closing = False

    def run(self, awaitable: Awaitable[T]) -> T:
        """``portal.run(awaitable)`` unless closing; a failure the close caused is StoreClosedError."""
        with self._changed:
            refused = self._closing
            if not refused:
                self._in_flight += 1
        if refused:
            if inspect.iscoroutine(awaitable):
                awaitable.close()  # refused before it started: no "never awaited" warning
            raise StoreClosedError(_CLOSED)
        try:
            return self._portal.run(awaitable)
        except StoreClosedError:
            raise
        except Exception as exc:
            # The call's own refusal (bad input, not found) stands; a store or driver error,
            # or a cancelled future, while the store was closed under the call is the close's.
            if self._closing and (type(exc) is StoreError or not isinstance(exc, RetoldError)):
                raise StoreClosedError(_CLOSED) from exc
            raise
        finally:
            with self._changed:
                self._in_flight -= 1
                self._changed.notify_all()

    def close(self, *, wait: bool) -> None:
        """Refuse every later call; with ``wait``, block until the calls in flight have returned."""
        with self._changed:
            self._closing = True
            if wait:
                self._changed.wait_for(lambda: self._in_flight == 0)


class Blocking:
    """One of the runtime's services (``host``, ``hooks``, ``tools``, ``ops``) with blocking methods.

    Every method runs on the runtime's loop, sync ones included: the services share one store
    connection and its caches, which belong to that loop's thread. Plain attributes are read
    as they are.
    """

    def __init__(self, target: Any, portal: RuntimePortal, calls: _Calls | None = None) -> None:
        self._target = target
        self._portal = portal
        self._calls = calls if calls is not None else _Calls(portal)

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._target, name)
        if name.startswith("_") or not callable(value) or inspect.isclass(value):
            return value
        calls = self._calls

        def blocking(*args: Any, **kwargs: Any) -> Any:
            return calls.run(_invoke(value, args, kwargs))

        blocking.__name__ = name
        blocking.__doc__ = getattr(value, "__doc__", None)
        return blocking

    def __dir__(self) -> list[str]:
        return sorted(set(dir(self._target)) | set(super().__dir__()))

    def __repr__(self) -> str:
        return f"<blocking {type(self._target).__name__}>"


class SyncRuntime:
    """The runtime's API without ``await``: what :func:`open_runtime_sync` returns.

    ``rt.search``, ``rt.extract_session``, ``rt.host.*``, ``rt.hooks.*``, ``rt.tools.*`` and
    ``rt.ops.*`` take the same arguments as on :class:`~retold.runtime.Runtime` and return the
    same values; errors are the same exceptions. ``rt.runtime`` is the async runtime itself, for
    adapters and for :meth:`run`.
    """

    def __init__(self, portal: RuntimePortal) -> None:
        if portal.runtime is None:
            raise ValueError("the portal has no open runtime")
        self._portal = portal
        self._calls = _Calls(portal)
        self.runtime: Runtime = portal.runtime
        self.host = Blocking(self.runtime.host, portal, self._calls)
        self.hooks = Blocking(self.runtime.hooks, portal, self._calls)
        self.tools = Blocking(self.runtime.tools, portal, self._calls)
        self.ops = Blocking(self.runtime.ops, portal, self._calls)
        # An unclosed facade still closes its store (and stops its thread) when collected or at exit.
        self._finalizer = weakref.finalize(self, _close_quietly, portal)

    @property
    def config(self) -> Config:
        return self.runtime.config

    @property
    def closed(self) -> bool:
        return self.runtime.closed

    @property
    def search_graph(self) -> Any:
        return self.runtime.search_graph

    @property
    def extraction_graph(self) -> Any:
        return self.runtime.extraction_graph

    def run(self, awaitable: Any) -> Any:
        """Await anything on the runtime's loop, e.g. ``rt.run(rt.runtime.search_graph.ainvoke(...))``."""
        return self._calls.run(awaitable)

    def search(self, principal: Principal, request: SearchRequest) -> SearchResponse:
        """:meth:`Runtime.search <retold.runtime.Runtime.search>`, blocking."""
        response: SearchResponse = self._calls.run(self.runtime.search(principal, request))
        return response

    def profile(self, principal: Principal) -> str:
        """:meth:`Runtime.profile <retold.runtime.Runtime.profile>`, blocking: the ambient profile block."""
        block: str = self._calls.run(self.runtime.profile(principal))
        return block

    def extract_session(
        self, session_id: str | SessionKey, *, force: bool = False, actor: str | None = None
    ) -> ExtractionResult:
        """:meth:`Runtime.extract_session <retold.runtime.Runtime.extract_session>`, blocking."""
        result: ExtractionResult = self._calls.run(
            self.runtime.extract_session(session_id, force=force, actor=actor)
        )
        return result

    def join_background(self) -> None:
        """Wait until every extraction scheduled so far has finished."""
        self._calls.run(self.runtime.join_background())

    def warm(self) -> None:
        """Load the embedder and the vector index now, so the first search pays nothing."""
        self._calls.run(self.runtime.warm())

    def __getattr__(self, name: str) -> Any:
        # Runtime methods added later (and any not spelled out above) block the same way.
        if name.startswith("_"):
            raise AttributeError(name)
        return getattr(Blocking(self.runtime, self._portal, self._calls), name)

    def close(self, *, cancel_background: bool = False) -> None:
        """Finish (or cancel) scheduled extractions, close the store, stop the loop thread.

        Calls made from now on answer :class:`~retold.errors.StoreClosedError`. Calls already
        in flight on other threads finish first (with ``cancel_background``, they are not
        waited for, and answer ``StoreClosedError`` if the close cuts them short). Calling it
        again does nothing.
        """
        if self._portal.loop.is_closed():
            return
        if running_loop() is self._portal.loop:  # it would wait for the very call it runs in
            raise RuntimeError("SyncRuntime.close was called on the runtime's own loop; await it instead")
        self._calls.close(wait=not cancel_background)
        try:
            if not self.runtime.closed:
                self._portal.run(self.runtime.close(cancel_background=cancel_background))
        finally:
            self._finalizer()

    def __enter__(self) -> SyncRuntime:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close(cancel_background=exc is not None)

    def __repr__(self) -> str:
        return f"<SyncRuntime {'closed' if self.closed else 'open'} store={self.runtime.store!r}>"


def open_runtime_sync(
    path: str | os.PathLike[str] | None = None,
    config: Config | str | os.PathLike[str] | None = None,
    **kwargs: Any,
) -> SyncRuntime:
    """:func:`retold.open_runtime` for synchronous code: the same arguments, a :class:`SyncRuntime`.

    Use it as a context manager, or call :meth:`SyncRuntime.close` when done.
    """
    return SyncRuntime(RuntimePortal.open(path, config, **kwargs))
