"""The outside events the bot has already acted on, one key each (Telegram's `update_id`, a button press's id): an
event delivered again, at once or after a restart, is known by its key and does nothing. Keys older than Telegram
keeps an update (a day) are dropped at start-up, so the table stays small."""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING

from agents.core.models import utcnow

if TYPE_CHECKING:
    from agents.store.connection import Connection


class SeenEvents:
    """Reads and writes of the `seen_events` table; `Store.seen_events` hands one out."""

    def __init__(self, store: Connection) -> None:
        self._store = store

    async def first_time(self, keys: list[str]) -> bool:
        """Record `keys` (the names of one event); False when any of them was recorded before: the event is a repeat.
        One statement, atomic on its own (so two copies handled at once cannot both be the first), and one trip to
        SQLite's thread: this runs before every message's answer."""
        distinct = list(dict.fromkeys(keys))
        if not distinct:
            return True
        now = utcnow().isoformat()
        rows = await self._store.write(
            "INSERT INTO seen_events (key, seen_at) VALUES "
            + ", ".join("(?, ?)" for _ in distinct)
            + " ON CONFLICT (key) DO NOTHING RETURNING key",
            [value for key in distinct for value in (key, now)],
        )
        return len(rows) == len(distinct)

    async def forget_before(self, when: datetime) -> None:
        await self._store.write("DELETE FROM seen_events WHERE seen_at < ?", (when.isoformat(),))
