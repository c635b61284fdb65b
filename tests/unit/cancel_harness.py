"""Cancel a write path at each of its awaits in turn, and check what it leaves behind (issue 15).

A :class:`Cut` names a suspension: the k-th time a call, or any task it starts (the
nodes of a LangGraph graph run in tasks of their own), yields to the event loop. At that
suspension the harness cancels the call's task, as ``asyncio.wait_for`` or a
``TaskGroup`` would while the call waits there; in the call's own task the cancellation
lands exactly at that await. :func:`sweep` runs a fresh call for k = 1, 2, ... until one
completes before its k-th suspension, twice: counting only the waits on transaction
control and the steps into and out of a transaction (:func:`at_transaction_control`), then
counting every suspension (``RETOLD_SLOW_TESTS=1``) or every ``STRIDE``-th one, which keeps
a default sweep to a second or two per path.

After each attempt:

* usable: its write connection is outside any transaction once the write lock is free, and
  a new ``memory_write``, a ``memory_search`` and the search's ``search_log`` row all land
  (this probe, a few times dearer than the rest, runs after every attempt that changed
  the store, after the first and the last, and after every ``PROBE_EVERY``-th: after
  every attempt under ``RETOLD_SLOW_TESTS=1``);
* consistent: ``rt.ops.check()`` finds nothing;
* the in-memory vector index, refreshed as every search refreshes it, holds exactly the
  stored vectors;
* all or nothing: the attempt's change to the database (rows added and removed per table)
  is either nothing or the change of the call that completed.

    attempts = await sweep(rt, principal, setup)
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import inspect
import itertools
from collections import Counter
from collections.abc import Awaitable, Callable, Generator, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

import retold
from retold.errors import StoreError
from retold.models import Principal

from .slow import SLOW

__all__ = [
    "PROBE_EVERY",
    "STRIDE",
    "Attempt",
    "Cut",
    "Point",
    "Shape",
    "assert_index_matches_store",
    "assert_usable",
    "at_transaction_control",
    "attempt",
    "counting_tasks",
    "database_rows",
    "every_stride",
    "every_suspension",
    "settle",
    "shape",
    "sweep",
]

Shape = dict[str, tuple[int, int]]
"""Per table: (rows added, rows removed); an updated row counts once in each."""

Call = Callable[[], Awaitable[Any]]
Check = Callable[["Attempt"], Awaitable[None] | None]
Eligible = Callable[["Point"], bool]
"""Whether to cancel at a suspension."""

PROBE_EVERY = 1 if SLOW else 8
STRIDE = 5
_LIMIT = 5000  # suspensions; a path that never completes below this is a bug in the path
_TOKENS = itertools.count(1)
# Work the store runs to its end whatever its caller does (COMMIT, ROLLBACK, RELEASE):
# its awaits are not the call's, so they are not counted.
_SHIELDED_PREFIX = "Database."


@dataclass(frozen=True)
class Point:
    """One suspension: its number, and where the suspended task stands."""

    n: int
    inside: bool  # inside a store transaction
    was_inside: bool  # inside one at the task's previous suspension
    control: bool  # waiting for the write lock or a BEGIN, COMMIT, ROLLBACK, SAVEPOINT or RELEASE


def every_suspension(point: Point) -> bool:
    return True


def every_stride(point: Point) -> bool:
    """Every ``STRIDE``-th suspension, from the first."""
    return point.n % STRIDE == 1


def at_transaction_control(point: Point) -> bool:
    """Every wait for the write lock, BEGIN, COMMIT, ROLLBACK, SAVEPOINT or RELEASE, and
    every first suspension inside or after a transaction."""
    return point.control or point.inside != point.was_inside


# The frames of retold.store.database that wait on transaction control.
_CONTROL = frozenset({"transaction", "_savepoint", "_begin", "_rollback", "_on_writer", "run_to_completion"})


def _waits_on_control(coro: Any) -> bool:
    """Whether the await chain of a suspended coroutine ends in transaction control.

    An ``asynccontextmanager``'s ``__aenter__``/``__aexit__`` wait on its generator, which
    the chain does not name; the walk steps into the generator there.
    """
    node = coro
    while node is not None:
        code = (
            getattr(node, "cr_code", None) or getattr(node, "ag_code", None) or getattr(node, "gi_code", None)
        )
        if code is not None and code.co_name in _CONTROL and code.co_filename.endswith("database.py"):
            return True
        frame = getattr(node, "cr_frame", None)
        manager = frame.f_locals.get("self") if frame is not None and code is not None else None
        if code is not None and code.co_name in ("__aenter__", "__aexit__") and hasattr(manager, "gen"):
            node = manager.gen
            continue
        node = (
            getattr(node, "cr_await", None)
            or getattr(node, "ag_await", None)
            or getattr(node, "gi_yieldfrom", None)
        )
    return False


@dataclass(eq=False)
class Cut:
    """Where one attempt is cancelled: the k-th suspension that ``eligible`` accepts.

    Suspensions are counted over the call's task and every task it starts. Counting only
    the eligible ones keeps a transaction's BEGIN the same k from one attempt to the next
    even when an earlier read is skipped (a cache hit). ``action`` replaces the
    cancellation (to close a runtime while the call waits there, say); ``k=0`` only counts.
    """

    k: int
    eligible: Eligible = every_suspension
    in_transaction: Callable[[], bool] = lambda: False
    action: Callable[[], object] | None = None
    target: asyncio.Task[Any] | None = None  # the call's task, cancelled at the cut
    tasks: list[asyncio.Task[Any]] = field(default_factory=list)  # the call's tasks (roots)
    suspensions: int = 0
    seen: int = 0  # eligible suspensions so far
    fired_at: int = 0  # the suspension it cancelled at; 0 while it has not

    @property
    def fired(self) -> bool:
        return self.fired_at > 0

    def inside(self) -> bool:
        try:
            return self.in_transaction()
        except StoreError:  # a task the transaction's owner started: it is inside one
            return True

    def suspended(self, coro: Any, was_inside: bool) -> bool:
        """Count one suspension of the current task; cancel here if it is the cut."""
        self.suspensions += 1
        n, inside = self.suspensions, self.inside()
        if (
            self.k <= 0
            or self.fired
            or not self.eligible(Point(n, inside, was_inside, _waits_on_control(coro)))
        ):
            return inside
        self.seen += 1
        if self.seen == self.k:
            self.fired_at = n
            if self.action is not None:
                self.action()
            else:
                target = self.target or asyncio.current_task()
                assert target is not None
                target.cancel()
        return inside


_CUT: contextvars.ContextVar[Cut | None] = contextvars.ContextVar("cancel_harness_cut", default=None)


class _Counted:
    """``await _Counted(coro, cut)``: every value ``coro`` yields to the loop counts as a suspension."""

    def __init__(self, coro: Awaitable[Any], cut: Cut) -> None:
        self._coro = coro
        self._cut = cut
        self.started = False

    def close(self) -> None:
        """Close the coroutine when its task was cancelled before it ever ran (as asyncio would)."""
        if not self.started and inspect.iscoroutine(self._coro):
            self._coro.close()

    def __await__(self) -> Generator[Any, Any, Any]:
        self.started = True
        inner = self._coro.__await__()
        sent: Any = None
        thrown: BaseException | None = None
        was_inside = False
        while True:
            try:
                yielded = inner.send(sent) if thrown is None else inner.throw(thrown)
            except StopIteration as stop:
                return stop.value
            was_inside = self._cut.suspended(self._coro, was_inside)
            try:
                sent, thrown = (yield yielded), None
            except BaseException as exc:  # forwarded into the coroutine, as `await` does
                sent, thrown = None, exc


async def _run(counted: _Counted, cut: Cut, *, root: bool) -> Any:
    if root:
        cut.target = asyncio.current_task()
    _CUT.set(cut)  # tasks this one starts inherit it, and are counted too
    return await counted


def _start(loop: asyncio.AbstractEventLoop, coro: Any, cut: Cut, *, root: bool) -> asyncio.Task[Any]:
    counted = _Counted(coro, cut)
    task = loop.create_task(_run(counted, cut, root=root))
    task.add_done_callback(lambda _: counted.close())
    return task


@contextlib.contextmanager
def counting_tasks(roots: Mapping[str, Cut] | None = None) -> Iterator[None]:
    """While open, tasks started by a counted task are counted too, and a coroutine whose
    ``__qualname__`` is in ``roots`` (work the runtime starts on its own, like the
    extraction ``on_session_end`` schedules) is counted as the root of that cut."""
    loop = asyncio.get_running_loop()
    previous = loop.get_task_factory()
    roots = dict(roots or {})

    def factory(loop: asyncio.AbstractEventLoop, coro: Any, **kwargs: Any) -> asyncio.Future[Any]:
        name = str(getattr(coro, "__qualname__", ""))
        root = roots.get(name)
        context = kwargs.get("context")
        cut = root or (context.get(_CUT) if context is not None else _CUT.get())
        counted = None
        if cut is not None and not name.startswith(_SHIELDED_PREFIX):
            counted = _Counted(coro, cut)
            coro = _run(counted, cut, root=root is not None)
        if previous is not None:
            task = previous(loop, coro, **kwargs)
        else:
            task = asyncio.Task(coro, loop=loop, **kwargs)
        if counted is not None:
            task.add_done_callback(lambda _: counted.close())
        if root is not None:
            root.tasks.append(task)  # type: ignore[arg-type]
        return task

    loop.set_task_factory(factory)  # type: ignore[arg-type]
    try:
        yield
    finally:
        loop.set_task_factory(previous)


@dataclass
class Attempt:
    """One call of a path, cancelled at its ``k``-th eligible suspension unless it finished first."""

    k: int
    cancelled: bool
    suspensions: int
    result: Any = None
    change: Shape = field(default_factory=dict)
    at: int = 0  # the suspension it was cancelled at
    kind: str = ""  # which suspensions the sweep counted


def outcome(cut: Cut, task: asyncio.Task[Any]) -> Attempt:
    """The attempt a finished task made. A call must end in the cancellation it was given:
    one that swallows it (returns, or raises something else) would let a timed-out
    caller carry on unaware."""
    at = cut.fired_at
    if task.cancelled():
        assert cut.fired, f"the call was cancelled by something else at suspension {cut.suspensions}"
        return Attempt(cut.k, True, cut.suspensions, at=at)
    error = task.exception()
    if error is not None:
        raise AssertionError(
            f"the call raised {type(error).__name__} instead of the cancellation at suspension {at}"
            if cut.fired
            else f"the call failed without any cancellation: {error!r}"
        ) from error
    assert not cut.fired, f"the path swallowed the cancellation at suspension {at} and returned"
    return Attempt(cut.k, False, cut.suspensions, task.result())


async def attempt(call: Call, cut: Cut) -> Attempt:
    """Run ``call()`` in a task of its own, cancelled at ``cut``."""
    with counting_tasks():
        task = _start(asyncio.get_running_loop(), call(), cut, root=True)
        await asyncio.wait((task,))
    return outcome(cut, task)


async def database_rows(rt: retold.Runtime) -> dict[str, Counter[tuple[Any, ...]]]:
    """Every row of every table, FTS rows included (not the FTS shadow tables)."""
    rows: dict[str, Counter[tuple[Any, ...]]] = {}
    for table in await rt.store.tables():
        select = "SELECT rowid, *" if table == "records_fts" else "SELECT *"
        found = await rt.store.db.fetchall(f"{select} FROM {table}")
        rows[table] = Counter(tuple(r) for r in found)
    return rows


def shape(before: dict[str, Counter[tuple[Any, ...]]], after: dict[str, Counter[tuple[Any, ...]]]) -> Shape:
    """Rows added and removed per table between two :func:`database_rows` reads."""
    out: Shape = {}
    for table in sorted(set(before) | set(after)):
        old, new = before.get(table, Counter()), after.get(table, Counter())
        added, removed = sum((new - old).values()), sum((old - new).values())
        if added or removed:
            out[table] = (added, removed)
    return out


async def settle(rt: retold.Runtime) -> None:
    """Wait for the write lock, then check that the write connection is outside any transaction.

    A rollback behind a cancelled ``BEGIN`` may still hold the lock; once it is free the
    connection must be back in autocommit mode, or the next write would wedge on it.
    """
    db = rt.store.db
    async with db._write_lock:  # the invariant under test is internal to Database
        assert db._writer is not None
        assert not db._writer.in_transaction, "the write connection was left inside a transaction"


async def assert_index_matches_store(rt: retold.Runtime) -> None:
    """After the refresh every search starts with, the index's live rows are exactly the
    stored compatible vectors of undeleted records."""
    await rt.index.refresh(rt.store, rt.config.embedding.incremental_reload_max)
    rows = await rt.store.load_vectors(rt.index.model, rt.index.version, rt.index.dims)
    blobs = zip(rows.ids, rows.blobs, strict=True)
    expected = {record_id: np.frombuffer(blob, dtype=np.float32) for record_id, blob in blobs}
    live = {record_id for record_id, alive in zip(rt.index.ids, rt.index.live, strict=True) if alive}
    assert live == set(expected), (sorted(live - set(expected)), sorted(set(expected) - live))
    for record_id, vector in expected.items():
        held = rt.index.vector_for(record_id)
        assert held is not None
        np.testing.assert_allclose(held, vector / np.linalg.norm(vector), atol=1e-6)


async def assert_usable(rt: retold.Runtime, principal: Principal) -> None:
    """A fresh write, a search that finds it and the search's log row all land."""
    n = next(_TOKENS)
    # Three words of its own: with one, a hash collision in FakeEmbedder can make two probes
    # identical vectors, and duplicate collapse then shows only one of them.
    words = f"probe{n}alpha probe{n}bravo probe{n}charlie"
    written = await rt.tools.call(
        principal, "memory_write", {"type": "episodic", "content": f"The agent noted {words}."}
    )
    assert written["ok"], written
    logged = await rt.store.db.fetchval("SELECT count(*) FROM search_log")
    found = await rt.tools.call(principal, "memory_search", {"queries": [words]})
    assert found["ok"], found
    assert written["record_id"] in str(found), found
    assert await rt.store.db.fetchval("SELECT count(*) FROM search_log") == logged + 1


async def _maybe(value: Awaitable[None] | None) -> None:
    if inspect.isawaitable(value):
        await value


async def sweep(
    rt: retold.Runtime,
    principal: Principal,
    setup: Callable[[int], Awaitable[Call]],
    *,
    check: Check | None = None,
    recover: Check | None = None,
    run: Callable[[Call, Cut], Awaitable[Attempt]] = attempt,
    scaled: bool = False,
    partial: Callable[[Shape], bool] | None = None,
) -> list[Attempt]:
    """Cancel a fresh call at k = 1, 2, ... until one completes; check the runtime after each.

    ``setup(k)`` prepares attempt k's own payload (not swept) and returns the call to
    sweep; ``run(call, cut)`` makes the attempt (:func:`attempt` unless the work runs
    elsewhere).
    ``recover`` runs before the consistency checks (to finish what a path leaves for
    its next run by design), ``check`` after them. The change each cancelled attempt
    made must be nothing or the completed call's change, table by table: counted
    exactly, or (``scaled``, for a path whose change grows with the store, like
    re-embedding every record) as the same tables. ``partial`` accepts a change that a
    path makes by design in a transaction of its own (a claim that expires).
    """
    attempts: list[Attempt] = []
    db = rt.store.db
    phases = [at_transaction_control, every_suspension if SLOW else every_stride]
    for eligible in phases:
        for k in range(1, _LIMIT):
            call = await setup(len(attempts) + 1)
            before = await database_rows(rt)
            result = await run(call, Cut(k, eligible, lambda: db.in_transaction))
            result.kind = eligible.__name__
            await settle(rt)
            result.change = shape(before, await database_rows(rt))
            if recover is not None:
                await _maybe(recover(result))
            findings = (await rt.ops.check()).findings
            assert not findings, f"inconsistent after a cancellation at suspension {result.at}: {findings}"
            await assert_index_matches_store(rt)
            if check is not None:
                await _maybe(check(result))
            if not attempts or len(attempts) % PROBE_EVERY == 0 or result.change or not result.cancelled:
                await assert_usable(rt, principal)
            attempts.append(result)
            if not result.cancelled:
                break
        else:
            raise AssertionError(f"the path did not complete within {_LIMIT} suspensions")
    full = attempts[-1].change
    assert full, "the completed call changed nothing: the sweep cannot tell all from nothing"

    def same(change: Shape) -> bool:
        return set(change) == set(full) if scaled else change == full

    for each in attempts[:-1]:
        assert not each.change or same(each.change) or (partial is not None and partial(each.change)), (
            f"cancelled at suspension {each.at}, the path left part of its write: {each.change} "
            f"(the completed call changes {full})"
        )
    return attempts
