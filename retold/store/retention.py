"""Time-based forgetting: records past ``expires_at`` and transcripts past ``sessions.retain_days``.

Both run from cron-style commands (``retold expire``, ``retold retain``) on stores that
hosts keep writing, so each query is a plain read or one short transaction.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import Any

from retold.models import SessionKey
from retold.store.database import Database
from retold.store.rows import TURN_KEY_SQL
from retold.util import format_ts

__all__ = ["RetentionMixin"]

_TURN_OF_S = "t.agent_id = s.agent_id AND t.user_id = s.user_id AND t.session_id = s.id"


class RetentionMixin:
    """The rows :mod:`retold.operations` expires or blanks; it records the events."""

    db: Database

    async def expirable_ids(self, now: datetime) -> list[str]:
        """Active records whose ``expires_at`` has passed (spec §6.5), oldest id first."""
        rows = await self.db.fetchall(
            """SELECT id FROM records WHERE status IN ('provisional', 'confirmed')
                 AND expires_at IS NOT NULL AND expires_at <= ? ORDER BY id""",
            (format_ts(now),),
        )
        return [r[0] for r in rows]

    async def retainable_sessions(self, ended_before: datetime) -> list[dict[str, Any]]:
        """Extracted sessions that ended before the cutoff and still hold transcript text."""
        rows = await self.db.fetchall(
            f"""SELECT s.id, s.agent_id, s.user_id, s.ended_at, s.extracted_at,
                       (SELECT count(*) FROM session_turns t WHERE {_TURN_OF_S} AND t.content != '') AS turns
                  FROM sessions s
                 WHERE s.extracted_at IS NOT NULL AND s.ended_at IS NOT NULL AND s.ended_at <= ?
                   AND EXISTS (SELECT 1 FROM session_turns t WHERE {_TURN_OF_S} AND t.content != '')
                 ORDER BY s.id, s.agent_id, s.user_id""",
            (format_ts(ended_before),),
        )
        return [dict(r) for r in rows]

    async def blank_turns(self, keys: Iterable[SessionKey]) -> int:
        """Empty the text of every turn of the sessions; the rows stay so source refs resolve."""
        async with self.db.transaction(), self.db.temp_ids(str(k) for k in keys) as sessions:
            return await self.db.execute(
                f"UPDATE session_turns SET content = '' WHERE content != '' "
                f"AND {TURN_KEY_SQL} IN (SELECT id FROM {sessions})"
            )
