"""SQL behind the operator commands of spec §16: expiry, retention, erasure, re-embedding, checks, snapshots.

:class:`MaintenanceMixin` gathers them onto :class:`~retold.store.Store` as one base, so the
store's class lists the operator surface in one place; each concern lives in its own module
(:mod:`~retold.store.retention`, :mod:`~retold.store.erase`, :mod:`~retold.store.reembed`,
:mod:`~retold.store.integrity`, :mod:`~retold.store.snapshots`). :mod:`retold.operations`
decides what to do with them and imports their result types from here.
"""

from __future__ import annotations

from retold.store.erase import ERASED_PAYLOAD, EraseMixin, ErasureSet
from retold.store.integrity import Finding, IntegrityMixin
from retold.store.reembed import ReembedMixin
from retold.store.retention import RetentionMixin
from retold.store.snapshots import SnapshotInfo, SnapshotMixin, read_snapshot_info, restore_snapshot

__all__ = [
    "ERASED_PAYLOAD",
    "ErasureSet",
    "Finding",
    "MaintenanceMixin",
    "SnapshotInfo",
    "read_snapshot_info",
    "restore_snapshot",
]


class MaintenanceMixin(RetentionMixin, EraseMixin, ReembedMixin, IntegrityMixin, SnapshotMixin):
    """Every operator command's store access, in the order spec §16 lists the commands."""
