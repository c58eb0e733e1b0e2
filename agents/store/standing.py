"""Two small tables that outlive a restart: users' standing notes, and the questions workers asked them (ask_user).

`StandingNotes(store)` and `AskedQuestions(store)` read and write them on the store's one connection.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import datetime
from enum import StrEnum
from typing import TYPE_CHECKING

from pydantic import BaseModel, Field

from agents.core.models import utcnow
from agents.core.text import outside_text

if TYPE_CHECKING:
    import aiosqlite

    from agents.store.connection import Connection


class StandingNote(BaseModel):
    """A user's note that applies to their later requests: in one workspace, or in all (workspace None)."""

    id: int | None = None
    user_id: int | None = None
    user_name: str | None = None
    workspace: str | None = None
    text: str
    created_at: datetime = Field(default_factory=utcnow)

    @property
    def scope(self) -> str:
        return f"in {self.workspace}" if self.workspace else "everywhere"


class StandingNotes:
    """The `standing_notes` table, oldest first (the order in which they apply: a later note wins over an earlier)."""

    def __init__(self, store: Connection) -> None:
        self._store = store

    async def add(self, note: StandingNote) -> StandingNote:
        rows = await self._store.write(
            "INSERT INTO standing_notes (user_id, user_name, workspace, text, created_at) VALUES (?, ?, ?, ?, ?) "
            "RETURNING id",
            (note.user_id, note.user_name, note.workspace, note.text, note.created_at.isoformat()),
        )
        return note.model_copy(update={"id": int(rows[0][0])})

    async def all(self) -> list[StandingNote]:
        rows = await self._store.rows("SELECT * FROM standing_notes ORDER BY id")
        return [StandingNote.model_validate(dict(row)) for row in rows]

    async def of_user(self, user_id: int | None) -> list[StandingNote]:
        rows = await self._store.rows("SELECT * FROM standing_notes WHERE user_id IS ? ORDER BY id", (user_id,))
        return [StandingNote.model_validate(dict(row)) for row in rows]

    async def get(self, note_id: int) -> StandingNote | None:
        rows = await self._store.rows("SELECT * FROM standing_notes WHERE id = ?", (note_id,))
        return StandingNote.model_validate(dict(rows[0])) if rows else None

    async def applying(
        self,
        user_id: int | None,
        is_owner: Callable[[int | None], bool],
        workspace: str | None = None,
        *,
        about_self: Callable[[str], bool],
        every: bool = False,
    ) -> list[StandingNote]:
        """The notes that apply to `user_id`'s requests, oldest first: their own and the owners' (`is_owner`), those
        for `workspace` and for all (`every`: for any workspace); to a member, none for a workspace that is the bot's
        own code (`about_self`: an owner's note there says how `self` works, and members reach none of it)."""
        owner = is_owner(user_id)
        return [
            n
            for n in await self.all()
            if (n.user_id == user_id or is_owner(n.user_id))
            and (every or n.workspace is None or n.workspace == workspace)
            and (owner or n.workspace is None or not about_self(n.workspace))
        ]

    async def delete(self, note_id: int) -> bool:
        return bool(await self._store.write("DELETE FROM standing_notes WHERE id = ? RETURNING id", (note_id,)))


class QuestionStatus(StrEnum):
    OPEN = "open"  # waiting for the user
    ANSWERED = "answered"  # the worker got the answer
    LATE = "late"  # answered after the wait ended with the bot (a restart): the resumed worker gets it
    TIMED_OUT = "timed_out"  # nobody answered within ASK_TIMEOUT_SECONDS
    CLOSED = "closed"  # the task went on or ended without it


class AskedQuestion(BaseModel):
    id: int | None = None
    task_id: int
    chat_id: int
    user_id: int | None = None
    user_name: str | None = None
    question: str
    options: list[str] = Field(default_factory=list)
    message_id: int | None = None
    status: QuestionStatus = QuestionStatus.OPEN
    answer: str | None = None
    answered_by: int | None = None
    asked_at: datetime = Field(default_factory=utcnow)
    answered_at: datetime | None = None


def _question(row: aiosqlite.Row) -> AskedQuestion:
    data = dict(row)
    data["options"] = json.loads(data.get("options") or "[]")
    return AskedQuestion.model_validate(data)


class AskedQuestions:
    """The `asked_questions` table."""

    def __init__(self, store: Connection) -> None:
        self._store = store

    async def add(self, q: AskedQuestion) -> AskedQuestion:
        rows = await self._store.write(
            "INSERT INTO asked_questions (task_id, chat_id, user_id, user_name, question, options, status, asked_at) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?) RETURNING id",
            (
                q.task_id,
                q.chat_id,
                q.user_id,
                q.user_name,
                q.question,
                json.dumps(q.options),
                q.status.value,
                q.asked_at.isoformat(),
            ),
        )
        return q.model_copy(update={"id": int(rows[0][0])})

    async def get(self, question_id: int) -> AskedQuestion | None:
        rows = await self._store.rows("SELECT * FROM asked_questions WHERE id = ?", (question_id,))
        return _question(rows[0]) if rows else None

    async def by_message(self, chat_id: int, message_id: int) -> AskedQuestion | None:
        rows = await self._store.rows(
            "SELECT * FROM asked_questions WHERE chat_id = ? AND message_id = ? ORDER BY id DESC LIMIT 1",
            (chat_id, message_id),
        )
        return _question(rows[0]) if rows else None

    async def set_message(self, question_id: int, message_id: int | None) -> None:
        await self._store.write("UPDATE asked_questions SET message_id = ? WHERE id = ?", (message_id, question_id))

    async def settle(
        self, question_id: int, status: QuestionStatus, answer: str | None = None, by: int | None = None
    ) -> bool:
        """Close an open question (answered, late, timed out, closed); False when it was no longer open."""
        rows = await self._store.write(
            "UPDATE asked_questions SET status = ?, answer = ?, answered_by = ?, answered_at = ? "
            "WHERE id = ? AND status = ? RETURNING id",
            (status.value, answer, by, utcnow().isoformat(), question_id, QuestionStatus.OPEN.value),
        )
        return bool(rows)

    async def of_task(self, task_id: int, status: QuestionStatus) -> list[AskedQuestion]:
        rows = await self._store.rows(
            "SELECT * FROM asked_questions WHERE task_id = ? AND status = ? ORDER BY id", (task_id, status.value)
        )
        return [_question(row) for row in rows]

    async def waiting_in(self, chat_id: int) -> bool:
        """Whether a question in the conversation still waits for its answer."""
        rows = await self._store.rows(
            "SELECT 1 FROM asked_questions WHERE chat_id = ? AND status = ? LIMIT 1",
            (chat_id, QuestionStatus.OPEN.value),
        )
        return bool(rows)

    async def count_of_task(self, task_id: int) -> int:
        """How many questions the task has asked, in all its runs."""
        rows = await self._store.rows("SELECT COUNT(*) FROM asked_questions WHERE task_id = ?", (task_id,))
        return int(rows[0][0])

    async def mark(self, question_id: int, status: QuestionStatus) -> None:
        await self._store.write("UPDATE asked_questions SET status = ? WHERE id = ?", (status.value, question_id))


def note_line(note: StandingNote, user_id: int | None = None) -> str:
    """`note #3 (in site): we use pnpm`, naming the author when it is not `user_id`."""
    by = note.user_name if note.user_id != user_id else None
    author = f" · by {outside_text(by, markdown=False)}" if by else ""
    return f"note #{note.id} ({note.scope}{author}): {outside_text(note.text, markdown=False, one_line=True)}"
