"""Conversations finer than a chat: the topics of forum groups, and the workspace a conversation is bound to.

A conversation is what the rest of agents/ calls `chat_id`. A private chat or a group without topics is keyed by
its chat id; a topic of a forum group by TOPIC_BASE + its row in `topics` (far above any Telegram chat id, whose
size stays below 2**42), so history, compaction, proposals and tasks are per topic with no change elsewhere. The
adapter turns a key back into its `Place` (chat + thread) to send there. A topic closed or deleted gets its messages
in the group's general topic; those messages are remembered as the topic's (`moved_here`), so a button pressed on
one, or a reply to one, acts in the topic's conversation (its tasks, questions and proposals).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from agents.core.models import utcnow

if TYPE_CHECKING:
    from agents.store.connection import Connection

TOPIC_BASE = 2**52


@dataclass(frozen=True)
class Place:
    """Where a conversation's messages go: a chat, and in a forum group the topic's thread."""

    chat_id: int
    thread_id: int | None = None
    topic_name: str = ""


def is_topic(conversation: int) -> bool:
    return conversation >= TOPIC_BASE


class Conversations:
    """Reads and writes of the topics and bindings tables; `Store.conversations` hands one out (places cached)."""

    def __init__(self, store: Connection, cache: dict[int, Place], bindings: dict[int, str | None]) -> None:
        self._store = store
        self._places = cache  # a topic's place never changes; its name may, which only labels
        self._bindings = bindings  # conversation → its workspace (None: none), read once: every turn asks

    async def topic(self, chat_id: int, thread_id: int, name: str = "") -> int:
        """The conversation key of a topic, made on first sight; a name learnt later fills an empty one."""
        await self._store.write(
            "INSERT INTO topics (chat_id, thread_id, name) VALUES (?, ?, ?) "
            "ON CONFLICT (chat_id, thread_id) DO UPDATE SET name = excluded.name "
            "WHERE excluded.name != '' AND topics.name = ''",
            (chat_id, thread_id, name),
        )
        rows = await self._store.rows(
            "SELECT id, name FROM topics WHERE chat_id = ? AND thread_id = ?", (chat_id, thread_id)
        )
        key = TOPIC_BASE + int(rows[0][0])
        self._places[key] = Place(chat_id, thread_id, rows[0][1])
        return key

    async def place(self, conversation: int) -> Place:
        """Where to send a conversation's messages (a chat's own key is its place)."""
        if not is_topic(conversation):
            return Place(conversation)
        if (known := self._places.get(conversation)) is not None:
            return known
        rows = await self._store.rows(
            "SELECT chat_id, thread_id, name FROM topics WHERE id = ?", (conversation - TOPIC_BASE,)
        )
        if not rows:  # not ours: send nowhere rather than to a wrong chat
            raise LookupError(f"no topic is known for conversation {conversation}")
        place = self._places[conversation] = Place(int(rows[0][0]), int(rows[0][1]), rows[0][2])
        return place

    async def bind(self, conversation: int, workspace: str) -> None:
        """Make `workspace` the default of the conversation's messages (replaces an earlier binding)."""
        await self._store.write(
            "INSERT INTO conversation_workspaces (conversation, workspace, bound_at) VALUES (?, ?, ?) "
            "ON CONFLICT (conversation) DO UPDATE SET workspace = excluded.workspace, bound_at = excluded.bound_at",
            (conversation, workspace, utcnow().isoformat()),
        )
        self._bindings[conversation] = workspace

    async def moved_here(self, chat_id: int, message_id: int, conversation: int) -> None:
        """A message of `conversation` (a topic that is gone) was posted in its group's general topic instead."""
        await self._store.write(
            "INSERT OR REPLACE INTO moved_messages (chat_id, message_id, conversation) VALUES (?, ?, ?)",
            (chat_id, message_id, conversation),
        )

    async def moved_from(self, chat_id: int, message_id: int) -> int | None:
        """The conversation a message of the general topic stands in for (a topic that was gone), else None."""
        rows = await self._store.rows(
            "SELECT conversation FROM moved_messages WHERE chat_id = ? AND message_id = ?", (chat_id, message_id)
        )
        return int(rows[0][0]) if rows else None

    async def bound_workspace(self, conversation: int) -> str | None:
        if conversation in self._bindings:  # the store's one process writes every binding (bind), so this stays true
            return self._bindings[conversation]
        rows = await self._store.rows(
            "SELECT workspace FROM conversation_workspaces WHERE conversation = ?", (conversation,)
        )
        workspace = self._bindings[conversation] = rows[0][0] if rows else None
        return workspace
