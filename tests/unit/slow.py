"""The ``RETOLD_SLOW_TESTS=1`` switch, shared by the property and fuzz tests.

A default run keeps each property test to its own small example count; the slow run
gives every test that asks :func:`examples` at least :data:`SLOW_EXAMPLES`. The figures
of one slow run are recorded in docs/reliability.md.

    @settings(max_examples=examples(30), deadline=None)
"""

from __future__ import annotations

import os

__all__ = ["SLOW", "SLOW_EXAMPLES", "examples"]

SLOW = os.environ.get("RETOLD_SLOW_TESTS") == "1"
SLOW_EXAMPLES = 10_000


def examples(default: int) -> int:
    """``default`` examples in an ordinary run, at least ``SLOW_EXAMPLES`` in a slow one."""
    return max(default, SLOW_EXAMPLES) if SLOW else default
