"""What a finished task's review page shows besides its diff: its verdict (a JSON record the work layer writes when
the task ends) and the pictures its worker took (screenshots, before/after), bounded per task."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from agents.core.models import utcnow

if TYPE_CHECKING:
    from agents.store.connection import Connection

PICTURES_PER_TASK = 24  # the newest ones are kept: a worker that screenshots in a loop does not fill the database
PICTURE_MAX_BYTES = 4 * 1024 * 1024


class TaskReviews:
    """Reads and writes of `task_reviews` and `task_pictures`; `Store.reviews` hands one out."""

    def __init__(self, store: Connection) -> None:
        self._store = store

    async def save(self, task_id: int, review: dict[str, Any]) -> None:
        await self._store.write(
            "INSERT INTO task_reviews (task_id, review, created_at) VALUES (?, ?, ?) "
            "ON CONFLICT (task_id) DO UPDATE SET review = excluded.review, created_at = excluded.created_at",
            (task_id, json.dumps(review), utcnow().isoformat()),
        )

    async def review(self, task_id: int) -> dict[str, Any] | None:
        rows = await self._store.rows("SELECT review FROM task_reviews WHERE task_id = ?", (task_id,))
        return json.loads(rows[0][0]) if rows else None

    async def add_picture(self, task_id: int, caption: str, png: bytes, kind: str = "screenshot") -> None:
        """Keep a picture of the task (a bigger one is not kept); past PICTURES_PER_TASK the oldest go."""
        if len(png) > PICTURE_MAX_BYTES:
            return
        await self._store.write(
            "INSERT INTO task_pictures (task_id, caption, kind, png, created_at) VALUES (?, ?, ?, ?, ?)",
            (task_id, caption[:300], kind, png, utcnow().isoformat()),
        )
        await self._store.write(
            "DELETE FROM task_pictures WHERE task_id = ? AND id NOT IN "
            "(SELECT id FROM task_pictures WHERE task_id = ? ORDER BY id DESC LIMIT ?)",
            (task_id, task_id, PICTURES_PER_TASK),
        )

    async def pictures(self, task_id: int) -> list[tuple[str, str, bytes]]:
        """(kind, caption, png) of the task's pictures, oldest first."""
        rows = await self._store.rows(
            "SELECT kind, caption, png FROM task_pictures WHERE task_id = ? ORDER BY id", (task_id,)
        )
        return [(str(r[0]), str(r[1]), bytes(r[2])) for r in rows]

    async def picture(self, task_id: int, index: int) -> bytes | None:
        """The task's picture number `index` (oldest first), or None."""
        if index < 0:
            return None
        rows = await self._store.rows(
            "SELECT png FROM task_pictures WHERE task_id = ? ORDER BY id LIMIT 1 OFFSET ?", (task_id, index)
        )
        return bytes(rows[0][0]) if rows else None

    async def captions(self, task_id: int) -> list[tuple[str, str]]:
        """(kind, caption) of the task's pictures, oldest first (the page lists them; each is fetched on its own)."""
        rows = await self._store.rows(
            "SELECT kind, caption FROM task_pictures WHERE task_id = ? ORDER BY id", (task_id,)
        )
        return [(str(r[0]), str(r[1])) for r in rows]
