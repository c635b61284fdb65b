"""What every benchmark script shares: percentiles and the provenance of a run."""

from __future__ import annotations

import math
import os
import platform
import subprocess
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["Target", "check_targets", "machine", "percentile"]


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


@dataclass(frozen=True)
class Target:
    """A documented bound on one figure of a report; ``figure`` gives None when the run did not measure it."""

    name: str
    figure: Callable[[dict[str, Any]], float | None]
    bound: float
    op: str = "<="  # "<=", "<" or ">=": the figure must be at most / under / at least the bound
    unit: str = "ms"

    def met(self, value: float) -> bool:
        if self.op == ">=":
            return value >= self.bound
        return value <= self.bound if self.op == "<=" else value < self.bound


def check_targets(
    targets: Sequence[Target], report: dict[str, Any], out: Callable[[str], None] = print
) -> int:
    """One PASS / FAIL / not measured line per target; 1 when any measured figure misses its target.

    A figure this run did not measure (quick sizes, ``--only``) is reported, never failed: a
    quick run says nothing about a 50K-record target.
    """
    failed = False
    for target in targets:
        try:
            value = target.figure(report)
        except (KeyError, IndexError, TypeError):
            value = None
        bound = f"{target.op} {target.bound:g} {target.unit}".rstrip()
        if value is None or math.isnan(value):
            out(f"SKIP {target.name}: not measured (target {bound})")
            continue
        ok = target.met(value)
        failed |= not ok
        figure = f"{value:.2f} {target.unit}".rstrip()
        out(f"{'PASS' if ok else 'FAIL'} {target.name}: {figure} vs target {bound}".rstrip())
    return 1 if failed else 0
