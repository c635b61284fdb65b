"""Which scopes a principal may read and write (spec §6.1).

The decision is a pure function over the principal and its grant rows
(:func:`scopes_from_grants`); :func:`readable_scopes` and :func:`writable_scopes`
only fetch the rows. Two safety belts keep one user's memory from another:

* a grant on ``user:X`` counts only while the principal's user is ``X``;
* a (legacy or direct-store) grant on a private ``agent:A/U`` scope counts only while
  the principal's user is ``U``. :class:`~retold.host.MemoryHost` refuses to create one.

Cross-user sharing therefore goes through ``org``, ``project`` or a plain ``agent:A`` grant.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Protocol

from retold.models import Grant, Principal, Scope

__all__ = ["readable_scopes", "scope_admits_principal", "scopes_from_grants", "writable_scopes"]


class _GrantSource(Protocol):
    async def grants_for(
        self, agent_id: str, *, can_read: bool | None = None, can_write: bool | None = None
    ) -> list[Grant]: ...


def scope_admits_principal(scope: Scope, principal: Principal) -> bool:
    """False for a user scope or private agent scope that belongs to a different user."""
    if scope.kind == "user":
        return scope.id == principal.user_id
    if scope.is_private:
        return scope.id.rsplit("/", 1)[1] == principal.user_id
    return True


def scopes_from_grants(principal: Principal, grants: Iterable[Grant], *, write: bool) -> list[Scope]:
    """The private scope first, then every granted scope that passes both safety belts."""
    scopes = [principal.private_scope]
    for grant in grants:
        if grant.agent_id != principal.agent_id:
            continue
        if not (grant.can_write if write else grant.can_read):
            continue
        if scope_admits_principal(grant.scope, principal) and grant.scope not in scopes:
            scopes.append(grant.scope)
    return scopes


async def readable_scopes(store: _GrantSource, principal: Principal) -> list[Scope]:
    grants = await store.grants_for(principal.agent_id, can_read=True)
    return scopes_from_grants(principal, grants, write=False)


async def writable_scopes(store: _GrantSource, principal: Principal) -> list[Scope]:
    grants = await store.grants_for(principal.agent_id, can_write=True)
    return scopes_from_grants(principal, grants, write=True)
