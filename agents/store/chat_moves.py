"""Chats that moved to a new id: Telegram upgrades a group to a supergroup (turning its topics on does it), and the
group goes on under a new chat id for good, its old id refusing every later message.

`ChatMoves.move` carries everything the store keeps under the old id to the new one, in one transaction: the history
and its notes, tasks, proposals, schedules, the outbox, questions, attempts, the conversation's workspace and topics.
It is idempotent (Telegram sends a service message in both chats, a refused send says it again, a restart may come
between them): each run carries what is still under the old id, so a late write under it (a running task that read
its chat before the move) is carried by the next. The move is remembered (`chat_moves`), so a message still addressed
to the old id is sent to the new one (`moved_to`).

Message ids name messages of the old chat, which stay there; the supergroup numbers its messages afresh, so an old id
would name another message there. A moved row forgets them (a task's progress message and the message it replies to,
a question's message, the outbox's reply target, the chat message a history record was shown as), and the buttons
shown (`shown_buttons`) and topic messages posted elsewhere (`moved_messages`) stay under the old chat, where their
messages are.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from agents.core.models import utcnow
from agents.store.connection import Connection, to_db
from agents.store.kept_messages import KeptMessages

log = logging.getLogger(__name__)

# table → the columns naming a message of the chat, forgotten as the row moves (their messages stay in the old chat)
MOVED: dict[str, tuple[str, ...]] = {
    "messages": ("platform_message_id",),
    "conversation_notes": (),
    "attachments": (),
    "proposals": (),
    "tasks": ("reply_to_message_id", "progress_message_id"),
    "tool_calls": (),
    "usage": (),
    "deliveries": ("reply_to",),
    "schedules": (),
    "asked_questions": ("message_id",),
    "attempt_groups": ("progress_message_id",),
    "open_turns": (),
}
# tables keyed by a message of the chat: they stay under the old chat, where those messages are
KEPT = frozenset({"shown_buttons", "moved_messages"})


@dataclass
class MovedChats:
    """The moves known (old chat id → new chat id), read from the store once; shared by every `ChatMoves`."""

    to: dict[int, int] | None = None


class ChatMoves:
    """The `chat_moves` table and the move itself; `Store.chat_moves` hands one out."""

    def __init__(
        self, store: Connection, known: MovedChats, kept: KeptMessages, forget: Callable[[Iterable[int]], None]
    ) -> None:
        self._store = store
        self._known = known
        self._kept = kept  # the kept history of both chats changes under the move
        self._forget = forget  # the store's other caches of a chat (its conversation start, workspace, topics)

    async def _moves(self) -> dict[int, int]:
        if self._known.to is None:
            rows = await self._store.rows("SELECT old_chat_id, new_chat_id FROM chat_moves")
            self._known.to = {int(old): int(new) for old, new in rows}
        return self._known.to

    async def moved_to(self, chat_id: int) -> int | None:
        """The chat's id now, when it moved (None: it never did)."""
        moves = await self._moves()
        now, seen = chat_id, {chat_id}
        while (later := moves.get(now)) is not None and later not in seen:  # a chain, should one ever move again
            now = later
            seen.add(now)
        return None if now == chat_id else now

    async def move(self, old: int, new: int) -> dict[str, int]:
        """Carry what is kept under chat `old` to chat `new`, remembered as moved; how many rows of each table moved
        (none: all of it had moved already). See the module's docstring for what moves and what stays."""
        if old == new:
            return {}
        moves = await self._moves()
        moved: dict[str, int] = {}
        with self._kept.writing(old), self._kept.writing(new):  # a history read meanwhile is not kept
            async with self._store.transaction() as db:
                cursor = await db.execute(
                    "INSERT INTO chat_moves (old_chat_id, new_chat_id, moved_at) VALUES (?, ?, ?) "
                    "ON CONFLICT (old_chat_id) DO UPDATE SET new_chat_id = excluded.new_chat_id, "
                    "moved_at = excluded.moved_at WHERE chat_moves.new_chat_id != excluded.new_chat_id",
                    (old, new, to_db(utcnow())),
                )
                first = cursor.rowcount > 0  # not known before (both notices may be handled at once)
                for table, message_ids in MOVED.items():
                    sets = ", ".join(["chat_id = ?", *(f"{column} = NULL" for column in message_ids)])
                    cursor = await db.execute(f"UPDATE {table} SET {sets} WHERE chat_id = ?", (new, old))
                    if cursor.rowcount:
                        moved[table] = cursor.rowcount
                # a topic the supergroup has already is kept as it is there (a basic group has none anyway)
                cursor = await db.execute("UPDATE OR IGNORE topics SET chat_id = ? WHERE chat_id = ?", (new, old))
                if cursor.rowcount:
                    moved["topics"] = cursor.rowcount
                # the conversation's start (/new) and workspace: the supergroup's own, where it has one already
                await db.execute(
                    "INSERT INTO chats (id, conversation_started_at, created_at) "
                    "SELECT ?, conversation_started_at, created_at FROM chats WHERE id = ? ON CONFLICT (id) DO NOTHING",
                    (new, old),
                )
                cursor = await db.execute("DELETE FROM chats WHERE id = ?", (old,))
                if cursor.rowcount:
                    moved["chats"] = cursor.rowcount
                await db.execute(
                    "INSERT INTO conversation_workspaces (conversation, workspace, bound_at) "
                    "SELECT ?, workspace, bound_at FROM conversation_workspaces WHERE conversation = ? "
                    "ON CONFLICT (conversation) DO UPDATE SET workspace = excluded.workspace, bound_at = "
                    "excluded.bound_at WHERE excluded.bound_at > conversation_workspaces.bound_at",
                    (new, old),
                )
                cursor = await db.execute("DELETE FROM conversation_workspaces WHERE conversation = ?", (old,))
                if cursor.rowcount:
                    moved["conversation_workspaces"] = cursor.rowcount
            moves[old] = new
            self._kept.forget(old)
            self._kept.forget(new)
            self._forget((old, new))
        if first or moved:
            what = ", ".join(f"{count} {table}" for table, count in moved.items()) or "nothing kept under it"
            log.info("chat %s moved to %s (a group upgraded to a supergroup): carried %s", old, new, what)
        return moved
