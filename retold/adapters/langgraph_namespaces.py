"""Where a LangGraph store namespace lives, and who is calling: the two facts every op starts from.

:class:`NamespaceMap` turns a namespace into a scope (and the user it belongs to); the caller's
run identity (thread id, user) is read where the call is made — a sync call hands it over
through a context variable, an async one reads its own run — never on the store's background
batch task, which belongs to no run. Split from :mod:`retold.adapters.langgraph_store`, which
executes the ops.
"""

from __future__ import annotations

import contextvars
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from langgraph.store.base import Op

from retold.models import Scope

__all__ = [
    "CALLER",
    "Call",
    "Caller",
    "NamespaceMap",
    "NamespaceTarget",
    "Outcome",
    "current_caller",
    "run_caller",
]

# --- namespaces ------------------------------------------------------------------------------


@dataclass(frozen=True)
class NamespaceTarget:
    """Where a namespace lives: its scope, the user it belongs to (None: the run's), its root."""

    scope: Scope
    user_id: str | None
    root: tuple[str, ...]


@dataclass(frozen=True)
class NamespaceMap:
    """The namespace → scope rule. The default is safe: a user's namespace is that user's scope.

    ``("<root>", <user_id>, ...)`` → ``user:<user_id>``;
    ``("<root>", "project", <project_id>, ...)`` → ``project:<project_id>``; nothing else maps.
    ``extra`` adds fixed namespaces, e.g. ``{("team_docs",): Scope("org", "acme")}`` (a prefix:
    deeper namespaces under it map there too). Subclass and override :meth:`target` for more.
    """

    root: str = "memories"
    project_label: str = "project"
    extra: Mapping[tuple[str, ...], Scope] = field(default_factory=dict)

    def target(self, namespace: tuple[str, ...]) -> NamespaceTarget | None:
        for prefix, scope in self.extra.items():
            if namespace[: len(prefix)] == tuple(prefix):
                user = scope.id if scope.kind == "user" else None
                return NamespaceTarget(scope, user, tuple(prefix))
        if len(namespace) < 2 or namespace[0] != self.root:
            return None
        if namespace[1] == self.project_label:
            if len(namespace) < 3:
                return None
            return NamespaceTarget(Scope("project", namespace[2]), None, namespace[:3])
        return NamespaceTarget(Scope("user", namespace[1]), namespace[1], namespace[:2])

    def namespace_for(self, scope: Scope) -> tuple[str, ...] | None:
        """The root namespace of a scope (where records without a key are listed)."""
        for prefix, fixed in self.extra.items():
            if fixed == scope:
                return tuple(prefix)
        if scope.kind == "user":
            return (self.root, scope.id)
        if scope.kind == "project":
            return (self.root, self.project_label, scope.id)
        return None


# --- identity of the caller, captured where the call is made ------------------------------------


class Caller(NamedTuple):
    """The run a store call came from."""

    thread_id: str | None
    user_id: str | None


CALLER: contextvars.ContextVar[Caller | None] = contextvars.ContextVar("retold_store_caller", default=None)


def current_caller() -> Caller:
    """The caller's run identity: handed over with a sync call, else read from this context's run."""
    handed = CALLER.get()
    return handed if handed is not None else run_caller()


def run_caller() -> Caller:
    """The run's thread id and user, read in the caller's context (a run's contextvars)."""
    try:
        from langgraph.config import get_config

        config = get_config()
    except (RuntimeError, KeyError, ImportError):
        return Caller(None, None)
    configurable = config.get("configurable") or {}
    user = configurable.get("user_id") or configurable.get("langgraph_user_id")
    if not user:
        from retold.adapters.common import current_context

        context = current_context()
        user = context.get("user_id") if isinstance(context, Mapping) else getattr(context, "user_id", None)
    thread = configurable.get("thread_id")
    return Caller(str(thread) if thread else None, str(user) if user else None)


class Call(NamedTuple):
    """An op with its caller, queued to the batch task; the answer is an :class:`Outcome`."""

    op: Op
    caller: Caller


class Outcome(NamedTuple):
    """A queued call's answer: its result, or the exception to raise in the caller."""

    result: Any
    error: BaseException | None
