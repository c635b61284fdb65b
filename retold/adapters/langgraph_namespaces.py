"""Where a LangGraph store namespace lives, and who is calling: the two facts every op starts from.

:class:`NamespaceMap` turns a namespace into a scope (and the user it belongs to); the caller's
run identity (thread id, user) is read where the call is made — a sync call hands it over
through a context variable, an async one reads its own run — never on the store's background
batch task, which belongs to no run. Split from :mod:`retold.adapters.langgraph_store`, which
executes the ops.
"""

from __future__ import annotations

import contextvars
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from langgraph.store.base import Op

from retold.adapters.langgraph_values import identity_refused
from retold.errors import IdentityError
from retold.graph_nodes.identity import authenticated_identity, development_mode, is_served
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
    """The run a store call came from.

    ``authenticated``: ``user_id`` is the authenticated user of a LangGraph server's request
    (a served run, or the server's ``/store`` API), so a namespace may only name that user.
    """

    thread_id: str | None
    user_id: str | None
    authenticated: bool = False


CALLER: contextvars.ContextVar[Caller | None] = contextvars.ContextVar("retold_store_caller", default=None)


def current_caller() -> Caller:
    """The caller's run identity: handed over with a sync call, else read from this context's run.

    Raises :class:`~retold.adapters.langgraph_values.StoreIdentityError` for a served run that
    names another user than its authenticated one, or that has no authenticated user outside
    local development mode (:mod:`retold.graph_nodes.identity`).
    """
    handed = CALLER.get()
    return handed if handed is not None else run_caller()


def run_caller() -> Caller:
    """The run's thread id and user, read in the caller's context (a run's contextvars).

    * A run a LangGraph server serves (:func:`~retold.graph_nodes.identity.is_served`) acts as
      the server's authenticated user, exactly as the middleware and tools do: a
      ``configurable.user_id`` / ``langgraph_user_id`` or context ``user_id`` naming anyone
      else is refused, and so is a served run nobody is authenticated on, unless
      ``RETOLD_GRAPH_IDENTITY=input`` (local development: the run names its user, as below).
    * Any other run (a graph the host's own code invokes) names its user in
      ``configurable.user_id`` / ``langgraph_user_id`` or its context's ``user_id``.
    * Outside a graph (no run at all, or a LangChain runnable invoked on its own) there is no
      run context: a user its config names still counts, else none does. The server's
      ``/store`` HTTP API is no run either; a request there by an authenticated user acts as them.
    """
    try:
        from langgraph.config import get_config

        config = get_config()
    except (RuntimeError, KeyError, ImportError):
        return _request_caller()
    configurable = config.get("configurable") or {}
    thread = configurable.get("thread_id")
    thread_id = str(thread) if thread else None
    named = [
        str(value)
        for value in (configurable.get("user_id"), configurable.get("langgraph_user_id"), _context_user())
        if value not in (None, "")
    ]
    if is_served(configurable):
        try:
            user = authenticated_identity(configurable)
        except IdentityError as exc:
            raise identity_refused("unauthenticated", str(exc)) from None
        if user is not None:
            if any(name != user for name in named):
                raise identity_refused(
                    "identity_mismatch",
                    "this run's user comes from the server's authenticated user; the run names another",
                )
            return Caller(thread_id, user, authenticated=True)
        if not development_mode():
            raise identity_refused(
                "unauthenticated",
                "no authenticated user on this served run: configure LangGraph auth (an Auth handler), "
                "or for local development only set RETOLD_GRAPH_IDENTITY=input to let the run name its user",
            )
    return Caller(thread_id, named[0] if named else None)


def _context_user() -> Any:
    """The run context's ``user_id``: None outside a graph (a runnable has config but no runtime)."""
    from retold.adapters.common import current_context  # langchain's tool layer: loaded on use

    context = current_context()
    return context.get("user_id") if isinstance(context, Mapping) else getattr(context, "user_id", None)


def _request_caller() -> Caller:
    """No run: the caller of a LangGraph server's own request (its ``/store`` API), if authenticated."""
    utils = sys.modules.get("langgraph_api.utils")  # loaded only inside a LangGraph server
    get_auth_ctx = getattr(utils, "get_auth_ctx", None)
    context = get_auth_ctx() if callable(get_auth_ctx) else None
    if context is None:
        return Caller(None, None)
    try:
        user = authenticated_identity({"langgraph_auth_user": getattr(context, "user", None)})
    except IdentityError as exc:
        raise identity_refused("unauthenticated", str(exc)) from None
    return Caller(None, user, authenticated=True) if user is not None else Caller(None, None)


class Call(NamedTuple):
    """An op with its caller, queued to the batch task; the answer is an :class:`Outcome`."""

    op: Op
    caller: Caller


class Outcome(NamedTuple):
    """A queued call's answer: its result, or the exception to raise in the caller."""

    result: Any
    error: BaseException | None
