"""What a request may carry: every path id, query parameter and form field, checked and bounded.

An id in a URL that no one could have written is a :class:`~retold.errors.NotFoundError`
(a 404, like an unknown one); a parameter or field that cannot be used is :class:`BadInput`
(a 400 page that names it). Nothing here touches the store.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Any

from retold.errors import InvalidArgumentError, NotFoundError
from retold.models import Principal
from retold.models import validate_id as _validate_id
from retold.ui import stages
from retold.ui.views import Viewer

__all__ = [
    "MAX_PAGE", "BadInput", "Forbidden", "acting_as", "choice", "floors_of", "page_of", "search_principal",
    "text", "url_id", "whole",
]  # fmt: skip

MAX_PAGE = 10_000
_BAD_TEXT = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f\ud800-\udfff]")


class BadInput(InvalidArgumentError):
    """A query parameter or form field that cannot be used: a 400 page that names it."""


class Forbidden(Exception):
    """Read-only mode, or a form without this process's CSRF token: a 403 page."""


def url_id(value: str, what: str, *, slash: bool = False) -> str:
    """An id taken from a URL path: one retold could have written, or a 404."""
    try:
        _validate_id(what, value, allow_slash=slash, max_len=200)
    except InvalidArgumentError as exc:
        raise NotFoundError(f"no {what} {value[:80]!r}") from exc
    return value


def text(params: Mapping[str, Any], name: str, *, max_len: int = 200) -> str | None:
    """A bounded, printable text field; None when absent or blank."""
    value = params.get(name)
    if value is None or not str(value).strip():
        return None
    value = str(value).strip()
    if len(value) > max_len:
        raise BadInput(f"{name} is {len(value)} characters long; at most {max_len} are accepted")
    if _BAD_TEXT.search(value):
        raise BadInput(f"{name} contains a control character")
    return value


def choice(params: Mapping[str, Any], name: str, allowed: tuple[str, ...]) -> str | None:
    value = text(params, name)
    if value is not None and value not in allowed:
        raise BadInput(f"{name} must be one of {', '.join(allowed)}, got {value[:40]!r}")
    return value


def whole(params: Mapping[str, Any], name: str, low: int, high: int, default: int | None) -> int | None:
    value = text(params, name, max_len=12)
    if value is None:
        return default
    if not value.isascii() or not value.isdigit() or not low <= int(value) <= high:
        raise BadInput(f"{name} must be a whole number from {low} to {high}, got {value!r}")
    return int(value)


def page_of(params: Mapping[str, Any]) -> int:
    return whole(params, "page", 1, MAX_PAGE, 1) or 1


def acting_as(params: Mapping[str, Any]) -> Principal | None:
    """``as=agent_id/user_id``: the principal whose view to draw (none: the operator's)."""
    value = text(params, "as")
    if value is None:
        return None
    agent, sep, user = value.partition("/")
    if not sep:
        raise BadInput(f"as must be written agent_id/user_id, got {value[:80]!r}")
    try:
        return Principal(agent_id=agent, user_id=user)
    except InvalidArgumentError as exc:
        raise BadInput(f"as: {exc}") from exc


def floors_of(params: Mapping[str, Any]) -> stages.Floors | None:
    """The replay form's floors (``replay=1``), each a finite number; absent ones are not changed."""
    if params.get("replay") is None:
        return None
    values: dict[str, float | int] = {}
    for name, _ in stages.FLOOR_FIELDS:
        raw = text(params, name, max_len=32)
        if raw is None:
            continue
        try:
            number = int(raw) if name in ("lexical_min_matched_terms", "companion_rank") else float(raw)
        except ValueError as exc:
            raise BadInput(f"{name} must be a number, got {raw!r}") from exc
        if not math.isfinite(number):
            raise BadInput(f"{name} must be a finite number, got {raw!r}")
        values[name] = number
    return stages.Floors(values)


def search_principal(form: Mapping[str, Any], who: Viewer) -> Principal:
    """The principal a live search runs as: the viewer's own when acting as one, else the form's."""
    agent = who.principal.agent_id if who.principal else text(form, "agent")
    user = who.principal.user_id if who.principal else text(form, "user")
    if not agent or not user:
        raise BadInput("agent and user: a search runs as one principal; give both")
    try:
        return Principal(
            agent_id=agent, user_id=user, session_id=text(form, "session"), project_id=text(form, "project")
        )
    except InvalidArgumentError as exc:
        raise BadInput(str(exc)) from exc
