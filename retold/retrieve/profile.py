"""The ambient profile (spec §8.2, §14): what the agent always knows about the user.

A bounded block of the principal's readable ambient records, added to the system message by
the middleware and CrewAI's ``wrap_llm``. It is rendered deterministically — categories in
a fixed order, records by scope then age, a fixed header — so it stays byte-identical from
turn to turn while the ambient set is unchanged, and the model's prompt cache keeps its
prefix. It uses the search block's quoting (:mod:`retold.retrieve.render`): every content
line starts with ``>``, so no stored text can pose as a header, another record or a higher
provenance.

    [a1b2c3d4e5f6] identity · scope user:u1
    > Goes by Sam.
"""

from __future__ import annotations

from collections.abc import Sequence

from retold.config.policy import ACTIVATION_CATEGORIES, ActivationConfig
from retold.models import Principal, Record, Scope
from retold.policy.grants import readable_scopes
from retold.retrieve.render import one_line, quote_content, short_id
from retold.store import Store
from retold.util import Clock

__all__ = ["PROFILE_HEADER", "ProfileAssembler", "profile_scopes", "render_profile"]

PROFILE_HEADER = (
    "retold profile: what the user has told you holds by default, each verified in their own words. "
    "Follow it unless the user says otherwise now; records are quoted after '>'."
)
_SCOPE_ORDER = {"user": 0, "agent": 1, "project": 2, "org": 3}
_CATEGORY_ORDER = {name: i for i, name in enumerate(ACTIVATION_CATEGORIES)}


def _tokens(text: str) -> int:
    """The estimate search budgets use (4 characters a token), so one budget means one thing."""
    return len(text) // 4 + 1


def profile_scopes(scopes: Sequence[Scope], principal: Principal) -> list[Scope]:
    """The readable scopes a profile draws on: a project's only while working in that project."""
    return [s for s in scopes if s.kind != "project" or s.id == principal.project_id]


def render_profile(items: Sequence[tuple[Record, str | None]], max_tokens: int) -> str:
    """The block for ``items`` (record, category); "" when there are none.

    Order: category (the config's vocabulary order, unknown last), then scope kind, then
    creation time and id. Records past ``max_tokens`` are left out from the end of that
    order and counted in a last line, so the same set always renders the same bytes.
    """
    if not items:
        return ""
    ordered = sorted(
        items,
        key=lambda item: (
            _CATEGORY_ORDER.get(item[1] or "", len(_CATEGORY_ORDER)),
            _SCOPE_ORDER.get(item[0].scope.kind, len(_SCOPE_ORDER)),
            item[0].created_at,
            item[0].id,
        ),
    )
    lines = [PROFILE_HEADER]
    used = _tokens(PROFILE_HEADER)
    shown = 0
    for record, category in ordered:
        head = f"[{one_line(short_id(record.id))}] {one_line(category or 'other')}"
        block = [f"{head} · scope {one_line(str(record.scope))}", *quote_content(record.content)]
        cost = sum(_tokens(line) for line in block) + 1
        if used + cost > max_tokens:
            break
        lines.append("")
        lines.extend(block)
        used += cost
        shown += 1
    if shown < len(ordered):
        lines.append("")
        lines.append(f"({len(ordered) - shown} more ambient records left out by the profile's token budget)")
    return "\n".join(lines)


class ProfileAssembler:
    """Reads a principal's ambient records and renders the block; one per runtime."""

    def __init__(self, store: Store, config: ActivationConfig, clock: Clock) -> None:
        self._store = store
        self._config = config
        self._clock = clock

    async def profile(self, principal: Principal) -> str:
        """The rendered block for ``principal`` ("" when nothing readable is ambient)."""
        if not self._config.enabled:
            return ""
        scopes = profile_scopes(await readable_scopes(self._store, principal), principal)
        items = await self._store.ambient_records(scopes, self._clock.now())
        return render_profile(items, self._config.profile_max_tokens)
