"""``retold ui``: a local memory inspector in the browser (``docs/ui.md``).

Server-rendered pages over one store: scopes and records (evidence in its transcript turn,
lineage, conflicts, entity links, events), entities, sessions, the audit trail, and every
logged search stage by stage with an offline gate replay. Read-only unless started with
``--allow-admin``. Starlette, Jinja2 and uvicorn are the ``ui`` extra and load only when
the app is built (:func:`create_app`), so ``import retold`` never pays for them.

    from retold.ui import UiSettings, create_app
    app = create_app(lambda: retold.open_runtime("memory.sqlite"), UiSettings())
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from retold.ui.security import UiSettings

if TYPE_CHECKING:
    from retold.ui.app import create_app

__all__ = ["UiSettings", "create_app"]


def __getattr__(name: str) -> Any:
    if name == "create_app":
        from retold.ui.app import create_app

        return create_app
    raise AttributeError(f"module 'retold.ui' has no attribute {name!r}")
