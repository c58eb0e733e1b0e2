"""The chat turns under way: a row while the orchestrator answers a message, gone once the answer (or the error it
met) is there. A row left at start-up is a turn a stop or a crash cut short: its chat is told, so a question is
never dropped without a word (the update itself is not answered again: Telegram may have confirmed it already, and
a turn cut short may have started work)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pydantic import BaseModel

from agents.core.models import utcnow

if TYPE_CHECKING:
    from agents.store.connection import Connection

ASKED_CHARS = 200  # what the notice quotes of the question


class OpenTurn(BaseModel):
    chat_id: int
    asked: str


class OpenTurns:
    """Reads and writes of the `open_turns` table; `Store.open_turns` hands one out."""

    def __init__(self, store: Connection) -> None:
        self._store = store

    async def begin(self, chat_id: int, asked: str) -> None:
        """A turn of `chat_id` begins (turns of one chat never overlap: one row per chat)."""
        await self._store.write(
            "INSERT INTO open_turns (chat_id, asked, started_at) VALUES (?, ?, ?) "
            "ON CONFLICT (chat_id) DO UPDATE SET asked = excluded.asked, started_at = excluded.started_at",
            (chat_id, asked[:ASKED_CHARS], utcnow().isoformat()),
        )

    async def end(self, chat_id: int) -> None:
        await self._store.write("DELETE FROM open_turns WHERE chat_id = ?", (chat_id,))

    async def cut_short(self) -> list[OpenTurn]:
        """At start-up: the turns a stop or a crash cut short (each chat's, once: read and forgotten at once)."""
        rows = await self._store.write("DELETE FROM open_turns RETURNING chat_id, asked")
        return [OpenTurn(chat_id=row[0], asked=row[1]) for row in rows]
