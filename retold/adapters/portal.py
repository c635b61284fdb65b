"""One event loop owns a runtime; adapters find it and hand their calls to it from anywhere.

retold's store (its aiosqlite connection, its asyncio locks, the background extractions) belongs
to the event loop that opened it. Frameworks call from elsewhere: CrewAI's sync tools on worker
threads, LangChain's sync hooks under ``invoke()``, ``langgraph dev`` running graph invocations
on alternating event-loop threads. Every adapter therefore runs its retold calls on the owning
loop, found by :func:`owning_loop`, through a :class:`LoopBridge`; nothing starts a loop per call.

* A sync host opens the runtime with :meth:`RuntimePortal.open`: a dedicated, long-lived
  event-loop thread that owns it and is remembered as its owner.
* An async host opens it with ``retold.open_runtime`` and builds its adapters inside that loop
  (or passes ``loop=``); the running loop is then the owner.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import inspect
import threading
import weakref
from collections.abc import Awaitable, Callable
from types import TracebackType
from typing import TYPE_CHECKING, Any, TypeVar

import anyio.from_thread

from retold.errors import InvalidArgumentError, StoreClosedError

if TYPE_CHECKING:
    from retold.runtime import Runtime

__all__ = ["LoopBridge", "RuntimePortal", "owning_loop", "running_loop"]

T = TypeVar("T")

# Which loop owns a runtime opened by a RuntimePortal; adapters built on it look it up here.
_RUNTIME_LOOPS: weakref.WeakKeyDictionary[Any, asyncio.AbstractEventLoop] = weakref.WeakKeyDictionary()


def running_loop() -> asyncio.AbstractEventLoop | None:
    """The event loop running in this thread, or None in plain sync code."""
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


def owning_loop(
    runtime: Runtime | None, loop: asyncio.AbstractEventLoop | None = None
) -> asyncio.AbstractEventLoop | None:
    """The loop that owns ``runtime``: ``loop``, else its :class:`RuntimePortal`'s, else the running one."""
    return loop or (_RUNTIME_LOOPS.get(runtime) if runtime is not None else None) or running_loop()


async def _await(awaitable: Awaitable[T]) -> T:
    return await awaitable


def _adopt_thread() -> tuple[asyncio.AbstractEventLoop, threading.Thread]:
    """Run on a new portal's thread: name it, and return its asyncio loop and the thread itself."""
    thread = threading.current_thread()
    thread.name = "retold-portal"
    return asyncio.get_running_loop(), thread


class RuntimePortal:
    """A long-lived event-loop thread that opens and owns a runtime, for sync hosts.

        with RuntimePortal.open("memory.sqlite") as portal:
            portal.run(portal.runtime.host.grant("planner", Scope("user", "u1"), read=True, write=True))
            memory = CrewAIMemory(portal.runtime, inputs, "Planner")      # or RetoldMiddleware(...)

    The runtime lives on this thread's loop for its whole life; :meth:`run` and every adapter
    built on ``portal.runtime`` hand their calls to it, from any thread or event loop.

    The thread is anyio's blocking portal (``start_blocking_portal``, asyncio backend), whose
    loop runs under ``asyncio.run``: its main task lives as long as the portal, so anyio's
    worker threads (``anyio.to_thread``, which embeds and judges) are reused from call to call,
    and stopping it cancels what is left, closes async generators and joins the executor.
    Calls are still handed over with ``asyncio.run_coroutine_threadsafe``, as
    :class:`LoopBridge` hands them: the portal's own ``call`` costs more per call
    (``benchmarks/portal_overhead.py``; docs/decisions.md).
    """

    def __init__(self) -> None:
        self._exit = contextlib.ExitStack()
        portal = self._exit.enter_context(anyio.from_thread.start_blocking_portal("asyncio"))
        self.loop, self._thread = portal.call(_adopt_thread)
        self.runtime: Runtime | None = None
        self._closing: asyncio.Task[None] | None = None

    @classmethod
    def open(cls, *args: Any, **kwargs: Any) -> RuntimePortal:
        """Start the thread and ``retold.open_runtime(*args, **kwargs)`` on it."""
        from retold.runtime import open_runtime

        portal = cls()
        try:
            portal.runtime = portal.run(open_runtime(*args, **kwargs))
        except BaseException:
            portal._stop()
            raise
        _RUNTIME_LOOPS[portal.runtime] = portal.loop
        return portal

    def run(self, awaitable: Awaitable[T]) -> T:
        """Await ``awaitable`` on the portal's loop and return its result (blocking)."""
        refusal: Exception | None = None
        if self.loop.is_closed():
            refusal = StoreClosedError("this retold runtime has been closed; open a new one")
        elif running_loop() is self.loop:
            refusal = RuntimeError("RuntimePortal.run was called on the portal's own loop; await it instead")
        if refusal is not None:
            if inspect.iscoroutine(awaitable):
                awaitable.close()  # refused before it started: no "never awaited" warning
            raise refusal
        return asyncio.run_coroutine_threadsafe(_await(awaitable), self.loop).result()

    def close(self) -> None:
        """Close the runtime (waiting for scheduled extractions), then stop the thread."""
        if self.loop.is_closed():
            return
        try:
            if self.runtime is not None and not self.runtime.closed:
                self.run(self.runtime.close())
        finally:
            self._stop()

    def close_soon(self) -> None:
        """:meth:`close` from the portal's own thread (a finalizer run there), without waiting.

        That thread cannot wait for itself: the runtime closes in a task on the loop, then a
        short-lived thread stops the portal and joins this one. A loop already stopping is
        left to finish.
        """
        if not self.loop.is_running():
            return

        async def close_then_stop() -> None:
            try:
                if self.runtime is not None and not self.runtime.closed:
                    await self.runtime.close()
            finally:
                threading.Thread(target=self._stop, name="retold-portal-stop", daemon=True).start()

        self._closing = self.loop.create_task(close_then_stop())

    def _stop(self) -> None:
        """Stop the portal: its loop finishes as ``asyncio.run`` does, then the thread is joined."""
        self._exit.close()

    def __enter__(self) -> RuntimePortal:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()


class LoopBridge:
    """Runs an adapter's retold calls on the loop that owns the runtime, from any thread or loop.

    ``sync_use`` / ``async_use`` name the host's two entry points (``"crew.kickoff()"``,
    ``"await crew.akickoff()"``) so a refusal says which one to use instead. The owner is
    :func:`owning_loop` at build time; a bridge built in sync code with no portal adopts the
    loop of its first async call.
    """

    def __init__(
        self,
        runtime: Runtime | None,
        loop: asyncio.AbstractEventLoop | None = None,
        *,
        who: str = "retold",
        sync_use: str = "the sync API",
        async_use: str = "the async API",
    ) -> None:
        self.runtime = runtime
        self.loop = owning_loop(runtime, loop)
        self._who, self._sync_use, self._async_use = who, sync_use, async_use

    def on_owner(self) -> bool:
        """Whether this code runs on the owning loop (where calls are awaited, never handed over)."""
        return self.loop is not None and running_loop() is self.loop

    def require_owner(self) -> asyncio.AbstractEventLoop:
        """The owning loop, or a clear :class:`InvalidArgumentError` saying how to provide one."""
        if self.loop is None:
            raise InvalidArgumentError(self._no_owner())
        return self.loop

    def submit(self, factory: Callable[[], Awaitable[T]]) -> concurrent.futures.Future[T]:
        """Start ``factory()`` on the owning loop from another thread; its future, not its result.

        ``factory`` is called here, after the checks, so a refused call has no side effects.
        """
        loop = self.loop
        if loop is None:
            raise RuntimeError(self._no_owner())
        if loop.is_closed() or not loop.is_running():
            raise RuntimeError(f"the event loop that owns the retold runtime is not running; {self._fix()}")
        return asyncio.run_coroutine_threadsafe(_await(factory()), loop)

    def call(self, factory: Callable[[], Awaitable[T]]) -> T:
        """Run on the owning loop and wait: for a framework's sync side."""
        if self.on_owner():
            raise RuntimeError(
                f"a synchronous retold call was made on the event loop that owns the runtime, where it "
                f"would block; use {self._async_use} there (or call from another thread)"
            )
        return self.submit(factory).result()

    async def acall(self, factory: Callable[[], Awaitable[T]]) -> T:
        """Await on the owning loop: directly when already there, else handed over and awaited here."""
        if self.loop is None:
            self.loop = running_loop()  # the first async caller of a bridge built in sync code
        if self.on_owner():
            return await factory()
        return await asyncio.wrap_future(self.submit(factory))

    def _fix(self) -> str:
        return (
            f"open the runtime with RuntimePortal.open(...) for {self._sync_use}, use {self._async_use} "
            f"inside the loop that opened it, or pass loop="
        )

    def _no_owner(self) -> str:
        return f"{self._who} needs the event loop that owns the runtime: {self._fix()}"
