"""How torch's threads wait for work, set before torch loads: ``OMP_WAIT_POLICY=PASSIVE``.

torch's OpenMP threads spin while they wait for the next operation (libgomp's default wait
policy). Beside other busy processes that spinning takes the cores the other threads need: a
single query embedding with two threads went from 14 ms to 660–810 ms on a shared two-core
machine, where one thread, or two that sleep while they wait (``PASSIVE``), took 15–50 ms
(``benchmarks/cold_start.py``; docs/decisions.md). ``PASSIVE`` keeps torch's thread count,
so a batch still runs on every core.

libgomp reads the policy once, when torch loads it, so :func:`configure_torch_threads` runs
before retold's first import of torch (the servers' entry points, the embedder's load), and
does nothing to a torch the application imported itself: its settings are the application's.

* ``OMP_WAIT_POLICY`` already set: left as it is.
* ``RETOLD_TORCH_THREADS=N``: also run torch on ``N`` intra-op threads (``torch.set_num_threads``),
  even when torch is already loaded; ``0`` leaves every torch setting alone (no policy either).
"""

from __future__ import annotations

import os
import sys

from retold.errors import ConfigError

__all__ = ["THREADS_ENV", "WAIT_POLICY", "configure_torch_threads"]

THREADS_ENV = "RETOLD_TORCH_THREADS"
WAIT_POLICY = "PASSIVE"


def configure_torch_threads() -> None:
    """Apply the settings above; cheap and idempotent, safe to call before every model load.

    Raises :class:`~retold.errors.ConfigError` naming ``RETOLD_TORCH_THREADS`` when it is not a
    number of threads.
    """
    raw = os.environ.get(THREADS_ENV, "").strip()
    try:
        threads = int(raw) if raw else None
    except ValueError:
        threads = -1
    if threads is not None and threads < 0:
        raise ConfigError(f"{THREADS_ENV} must be a number of threads (0: torch's own), got {raw!r}")
    if threads == 0:
        return
    if "torch" not in sys.modules:  # libgomp reads it when torch loads it, never again
        os.environ.setdefault("OMP_WAIT_POLICY", WAIT_POLICY)
    if threads is not None:
        import torch

        if torch.get_num_threads() != threads:
            torch.set_num_threads(threads)
