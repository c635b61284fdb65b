"""``retold copy``: a whole store into a new one (SQLite ⇄ PostgreSQL), then verified.

Above the runtime (it opens one on the destination to check it), so that nothing the
runtime imports has to import the runtime back.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from retold.config import Config, load_config
from retold.errors import StoreError
from retold.runtime import missing_store_file, open_runtime, store_location
from retold.store import Store
from retold.store.copy import copy_store as copy_rows
from retold.store.copy import table_counts
from retold.store.maintenance import Finding

__all__ = ["CopyResult", "copy_store"]


@dataclass
class CopyResult:
    """What ``retold copy`` did and whether the destination matches its source."""

    report: Any  # retold.store.copy.CopyReport
    counts: dict[str, tuple[int, int]]  # table -> (rows copied, rows in the destination)
    findings: list[Finding]

    @property
    def verified(self) -> bool:
        return not self.findings and all(copied == counted for copied, counted in self.counts.values())


async def copy_store(
    source: str | os.PathLike[str],
    destination: str | os.PathLike[str],
    config: Config | str | os.PathLike[str] | None = None,
    *,
    progress: Any = None,
) -> CopyResult:
    """Copy a whole store into a new, empty one (SQLite ⇄ PostgreSQL), then verify it.

    A SQLite source must exist (a missing one raises :class:`~retold.errors.StoreError` before
    anything is created); the destination is created when it is missing. The destination
    is written in one transaction (all or nothing). Verification compares
    every table's row count and runs :meth:`Operations.check` on the destination, with
    ``config``'s embedding settings judging the vectors.
    """
    settings = config if isinstance(config, Config) else load_config(config)
    origin = store_location(source, settings)
    missing = missing_store_file(origin)
    if missing is not None:  # opening it would create an empty store and "verify" its copy
        raise StoreError(f"no store at {str(missing)!r}: the source file does not exist (nothing was copied)")
    src = await Store.open(origin)
    try:
        dst = await Store.open(store_location(destination, settings))
        try:
            report = await copy_rows(src, dst, progress=progress)
            present = await table_counts(dst, list(report.rows))
            counts = {table: (copied, present[table]) for table, copied in report.rows.items()}
        finally:
            await dst.close()
    finally:
        await src.close()
    async with open_runtime(destination, settings, allow_embedding_mismatch=True) as rt:
        findings = (await rt.ops.check()).findings
    return CopyResult(report, counts, findings)
