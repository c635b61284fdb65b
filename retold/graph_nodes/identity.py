"""Who is calling a graph that a LangGraph server serves (``langgraph dev``, a deployment).

Identity comes from the server's authenticated user whenever one exists: the ``Auth``
handler's user (``config["configurable"]["langgraph_auth_user"]``) gives the user id (its
``identity``) and the agent id (its ``retold_agent_id`` field, else ``$RETOLD_AGENT_ID``).
Input that names someone else is refused, never silently replaced. Without an
authenticated user, identity is read from the JSON input only in local development mode,
``RETOLD_GRAPH_IDENTITY=input``: otherwise anyone who can reach the server could read any
user's memory by naming them. A run is served when the server's keys are in its config
(:func:`is_served`); graphs and tools invoked in-process by the host's own code keep taking
identity from what that code passes. LangGraph Studio's own user (``StudioUser``) is a developer
of the deployment, not an end user, so it counts as no user here.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from retold.errors import IdentityError
from retold.models import Principal

__all__ = [
    "IDENTITY_ENV",
    "authenticated_identity",
    "authenticated_user",
    "development_mode",
    "is_served",
    "served_principal",
]

IDENTITY_ENV = "RETOLD_GRAPH_IDENTITY"
AGENT_ENV = "RETOLD_AGENT_ID"


def is_served(configurable: Mapping[str, Any]) -> bool:
    """Whether a LangGraph server runs this graph: it stamps every run's config with these keys."""
    return any(key in configurable for key in ("langgraph_request_id", "langgraph_auth_user"))


def authenticated_user(configurable: Mapping[str, Any]) -> Any:
    """The server's authenticated end user for this run, or None."""
    user = configurable.get("langgraph_auth_user")
    if user is None or not getattr(user, "is_authenticated", False):
        return None
    if type(user).__name__ == "StudioUser" or _field(user, "kind") == "StudioUser":
        return None
    return user


def _field(user: Any, key: str) -> Any:
    try:
        return user[key]
    except (KeyError, TypeError, IndexError, NotImplementedError):
        return getattr(user, key, None)


def _identity(user: Any) -> str | None:
    try:
        value = user.identity
    except (AttributeError, NotImplementedError):
        value = _field(user, "identity")
    return str(value) if value not in (None, "") else None


def authenticated_identity(configurable: Mapping[str, Any]) -> str | None:
    """The authenticated end user's id for this run (its ``identity``), or None when nobody is.

    Raises :class:`~retold.errors.IdentityError` for an authenticated user without an identity.
    """
    user = authenticated_user(configurable)
    if user is None:
        return None
    user_id = _identity(user)
    if user_id is None:
        raise IdentityError("the authenticated user has no identity")
    return user_id


def development_mode() -> bool:
    """``RETOLD_GRAPH_IDENTITY=input``: a served run without an authenticated user names its own."""
    return os.environ.get(IDENTITY_ENV) == "input"


def _text(value: Any) -> str | None:
    return str(value) if isinstance(value, str | int) and str(value).strip() else None


def served_principal(fields: Mapping[str, Any], configurable: Mapping[str, Any] | None) -> Principal:
    """The principal of one served run; ``fields`` is the run's input (or context).

    Raises :class:`~retold.errors.IdentityError` when nobody is authenticated outside
    local development mode, or when the input names another user or agent than the
    authenticated one.
    """
    user = authenticated_user(configurable or {})
    session_id, project_id = _text(fields.get("session_id")), _text(fields.get("project_id"))
    if user is not None:
        user_id = authenticated_identity(configurable or {})  # raises when it has no identity
        agent_id = _text(_field(user, "retold_agent_id")) or _text(os.environ.get(AGENT_ENV))
        if user_id is None:
            raise IdentityError("the authenticated user has no identity")  # unreachable; for the type
        if agent_id is None:
            raise IdentityError(
                f"the authenticated user names no agent: return retold_agent_id from the Auth handler "
                f"or set ${AGENT_ENV} on the server"
            )
        for key, mine in (("user_id", user_id), ("agent_id", agent_id)):
            given = fields.get(key)
            if given not in (None, "") and str(given) != mine:
                raise IdentityError(f"{key} comes from the authenticated user; the input names another")
        return Principal(agent_id=agent_id, user_id=user_id, session_id=session_id, project_id=project_id)
    if not development_mode():
        raise IdentityError(
            "no authenticated user on this run: configure LangGraph auth (an Auth handler), or for "
            f"local development only set {IDENTITY_ENV}=input to take agent_id and user_id from the input"
        )
    agent_id, user_id = _text(fields.get("agent_id")), _text(fields.get("user_id"))
    if agent_id is None or user_id is None:
        raise IdentityError("local development mode reads agent_id and user_id from the input: give both")
    return Principal(agent_id=agent_id, user_id=user_id, session_id=session_id, project_id=project_id)
