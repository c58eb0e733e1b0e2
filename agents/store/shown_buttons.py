"""The inline buttons the bot showed, message by message: a press is honoured only for a button that message carried.

A Telegram client can send any callback data for any message of a chat; the bot answers only data it put on that
very message (recorded when it was sent or edited), so a forged press never reaches another chat's task or a button
the message never had. `handed`: the message is a request handed to the owners (their private chats, or a group
naming them), whose Merge/Discard/Diff act on a task of the conversation the request came from.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from agents.store.connection import Connection


class ShownButtons:
    """Reads and writes of the `shown_buttons` table; `Store.shown_buttons` hands one out."""

    def __init__(self, store: Connection) -> None:
        self._store = store

    async def record(self, chat_id: int, message_id: int, data: Iterable[str], handed: bool = False) -> None:
        for one in dict.fromkeys(data):
            await self._store.write(
                "INSERT INTO shown_buttons (chat_id, message_id, data, handed) VALUES (?, ?, ?, ?) "
                "ON CONFLICT (chat_id, message_id, data) DO UPDATE SET handed = max(handed, excluded.handed)",
                (chat_id, message_id, one, int(handed)),
            )

    async def forget(self, chat_id: int, message_id: int) -> None:
        """The message lost its buttons (an edit without them)."""
        await self._store.write("DELETE FROM shown_buttons WHERE chat_id = ? AND message_id = ?", (chat_id, message_id))

    async def shown(self, chat_id: int, message_id: int, data: str) -> bool | None:
        """None: that message never carried that button; else whether it is on a request handed to the owners."""
        rows = await self._store.rows(
            "SELECT handed FROM shown_buttons WHERE chat_id = ? AND message_id = ? AND data = ?",
            (chat_id, message_id, data),
        )
        return bool(rows[0][0]) if rows else None
