"""The chat messages on their way to an answer: a row from the moment one arrives (before it waits for its chat's
turn, is downloaded or transcribed) until its answer, or the reply that says why there is none, is out. A row left
at start-up is a message a stop or a crash cut short: its chat is told, so a message is never dropped without a word
(it is not answered again: Telegram may have confirmed its update already, and a turn cut short may have started
work)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pydantic import BaseModel

from agents.core.models import Delivery, utcnow
from agents.store.connection import insert_sql, to_db

if TYPE_CHECKING:
    from agents.store.connection import Connection

ASKED_CHARS = 200  # what the notice quotes of the message


class OpenTurn(BaseModel):
    chat_id: int
    kind: str  # "message", "voice note", "photo or file": what the user sent
    asked: str  # its words (typed, or a caption), '' when it has none


class OpenTurns:
    """Reads and writes of the `open_turns` table; `Store.open_turns` hands one out."""

    def __init__(self, store: Connection) -> None:
        self._store = store

    async def begin(self, chat_id: int, kind: str, asked: str) -> int:
        """A `kind` of message of `chat_id` arrived (`asked`: its words); the row's id, for `end`."""
        rows = await self._store.write(
            "INSERT INTO open_turns (chat_id, kind, asked, started_at) VALUES (?, ?, ?, ?) RETURNING id",
            (chat_id, kind, asked[:ASKED_CHARS], utcnow().isoformat()),
        )
        return int(rows[0][0])

    async def end(self, turn_id: int) -> None:
        await self._store.write("DELETE FROM open_turns WHERE id = ?", (turn_id,))

    async def cut_short(self) -> list[tuple[int, OpenTurn]]:
        """At start-up: the messages a stop or a crash cut short, oldest first, with their row ids (for `told`)."""
        rows = await self._store.rows("SELECT id, chat_id, kind, asked FROM open_turns ORDER BY id")
        return [(int(row[0]), OpenTurn(chat_id=row[1], kind=row[2], asked=row[3])) for row in rows]

    async def told(self, turn_id: int, notice: Delivery) -> Delivery:
        """The turn's notice put in the outbox and the turn forgotten, in one transaction: a stop while the notices
        go out loses none (a turn not yet told is told at the next start; one told is sent from the outbox)."""
        async with self._store.transaction() as db:
            data = {k: to_db(v) for k, v in notice.model_dump().items() if k != "id"}
            rows = await db.execute_fetchall(insert_sql("deliveries", data) + " RETURNING id", tuple(data.values()))
            notice.id = int(next(iter(rows))[0])
            await db.execute_fetchall("DELETE FROM open_turns WHERE id = ?", (turn_id,))
        return notice
