"""The ambient profile through :class:`~retold.adapters.langgraph_store.RetoldStore` (spec §8.2).

Two read-only ways, so LangMem and Deep Agents code that only holds a ``BaseStore`` can put
the profile in its own prompt:

* ``store.profile(user_id)`` / ``await store.aprofile(user_id, project_id=...)``: the block of
  :meth:`~retold.runtime.Runtime.profile` for the store's agent and that user ("" when
  nothing they may read is ambient). Inside a run that names its user, that user is the
  caller, as for every namespace: naming another user reads "".
* The reserved key :data:`PROFILE_KEY` (``"_retold_profile"``; also ``"/_retold_profile"``,
  the path Deep Agents' ``StoreBackend`` reads a file ``/_retold_profile`` under) in any
  namespace the store maps: ``get`` answers an item whose value is ``{"content": <block>,
  "_retold": {"kind": "profile", "read_only": True}}`` for the principal that namespace acts
  as (a project namespace adds its project), or None when the block is empty or the
  namespace unreadable. It is never listed or searched; a ``put`` or ``delete`` of it raises
  :class:`~retold.adapters.langgraph_values.StoreRefusedError` (``invalid_input``): the
  profile changes only through memory writes and the activation policy.

Neither depends on ``activation.profile_in_prompt``, which governs what the adapters add to
a prompt on their own; these are reads the host asked for.
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any

from langgraph.store.base import Item

from retold.adapters.langgraph_values import RESERVED_KEY, StoreArgumentError, StoreRefusedError
from retold.errors import InvalidArgumentError
from retold.models import Principal

if TYPE_CHECKING:
    from retold.runtime import Runtime

__all__ = [
    "PROFILE_FILE",
    "PROFILE_KEY",
    "ProfileAccess",
    "is_profile_key",
    "profile_item",
    "profile_refused",
]

PROFILE_KEY = "_retold_profile"
"""The reserved, read-only key under which a namespace shows its principal's profile."""
PROFILE_FILE = f"/{PROFILE_KEY}"
"""The same key as Deep Agents' ``StoreBackend`` spells a file path."""


def is_profile_key(key: Any) -> bool:
    return isinstance(key, str) and key in (PROFILE_KEY, PROFILE_FILE)


def profile_refused(key: str) -> StoreRefusedError:
    return StoreRefusedError(
        "invalid_input",
        f"key {key!r} is retold's read-only profile; it changes only through memory writes",
    )


def profile_item(text: str, namespace: tuple[str, ...], key: str, now: datetime) -> Item:
    """The profile as a store item, rendered now."""
    value = {"content": text, RESERVED_KEY: {"kind": "profile", "read_only": True}}
    return Item(value=value, key=key, namespace=tuple(namespace), created_at=now, updated_at=now)


class ProfileAccess:
    """What :class:`~retold.adapters.langgraph_store.RetoldStore` adds for the profile (a mixin)."""

    _rt: Runtime
    agent_id: str
    default_user_id: str | None

    async def _profile_for(
        self, user_id: str | None, project_id: str | None, run_user: str | None, run_thread: str | None
    ) -> str:
        """The block for ``user_id`` (``run_user``, the run's own, wins; another user reads "")."""
        for name, given in (("user_id", user_id), ("project_id", project_id)):
            if given is not None and not isinstance(given, str):
                raise StoreArgumentError(f"{name} must be a string or None")
        if run_user and user_id and user_id != run_user:
            return ""  # as another user's namespace reads inside a run: empty
        user = run_user or user_id or self.default_user_id
        if not user:
            raise StoreArgumentError(
                "the profile needs a user: pass store.profile(user_id), run with "
                'config={"configurable": {"user_id": ...}} or set RetoldStore(default_user_id=...)'
            )
        try:
            principal = Principal(
                agent_id=self.agent_id,
                user_id=user,
                session_id=run_thread or self._rt.config.integrations.default_session_id,
                project_id=project_id or None,
            )
        except InvalidArgumentError as exc:
            raise StoreArgumentError(f"profile: {exc}") from None
        return await self._rt.profile(principal)

    async def _profile_get(self, principal: Principal, namespace: tuple[str, ...], key: str) -> Item | None:
        """The reserved key's item for a principal already allowed to read the namespace."""
        text = await self._rt.profile(principal)
        return profile_item(text, namespace, key, self._rt.clock.now()) if text else None
