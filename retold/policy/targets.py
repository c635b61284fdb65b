"""Symbolic write targets (spec §8.1 step 2): the only destinations a model may name.

The model never supplies a scope id. The host offers names, and this pure function
keeps the ones the principal can actually write:

* ``personal`` → ``user:<user_id>``, only with a host-provisioned read-write grant;
* ``current_project`` → ``project:<project_id>``, only with a current project and a write grant;
* any name the host adds (for example the private ``agent:<agent_id>/<user_id>`` scope),
  only when it resolves to a writable scope.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from retold.models import Principal, Scope

__all__ = ["TargetResolver", "write_targets"]

TargetResolver = Callable[[Principal], Scope | None]


def write_targets(
    principal: Principal,
    writable: Sequence[Scope],
    offered: Mapping[str, TargetResolver] | None = None,
) -> dict[str, Scope]:
    """Name → scope for every offered target this principal can write; the first is the default."""
    candidates: dict[str, Scope | None] = {
        "personal": principal.user_scope,
        "current_project": Scope("project", principal.project_id) if principal.project_id else None,
    }
    for name, resolve in (offered or {}).items():
        candidates[name] = resolve(principal)
    allowed = set(writable)
    return {name: scope for name, scope in candidates.items() if scope is not None and scope in allowed}
