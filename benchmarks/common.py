"""What every benchmark script shares: percentiles and the provenance of a run."""

from __future__ import annotations

import os
import platform
import subprocess
import sys
from typing import Any

__all__ = ["machine", "percentile"]


def percentile(values: list[float], q: float) -> float:
    """Nearest-rank percentile; NaN for no values."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))]


def machine() -> dict[str, Any]:
    """Where and on what code a figure was measured."""
    try:
        commit = subprocess.run(
            ["git", "rev-parse", "HEAD"], capture_output=True, text=True, check=True
        ).stdout
    except (OSError, subprocess.CalledProcessError):
        commit = "unknown"
    return {"machine": platform.platform(), "python": sys.version.split()[0], "cpus": os.cpu_count(),
            "commit": commit.strip()}  # fmt: skip
