"""A conversation's history: its messages (stored with their attachments), its compacted notes, and where it began.

`/new` starts a conversation afresh in the same chat (`chats.conversation_started_at`): reads of the history see
only what came after. Messages the bot showed about its crew's work (kind 'proposal' or 'task', see shown.py) are
part of the history and can be found again by the chat message they were sent as.
"""

from __future__ import annotations

from agents.core.models import Attachment, ChatMessage, ConversationNote, utcnow
from agents.store.connection import Connection, to_db
from agents.store.kept_messages import KeptMessages


class ChatHistory(Connection):
    """The `chats`, `messages` and `conversation_notes` tables; a part of `Store`, which sets the caches below."""

    _conversation_starts: dict[int, str]  # chat id → start of its current conversation ('' = always)
    _kept: KeptMessages  # the newest `messages_after` answer per conversation

    async def _conversation_start(self, chat_id: int) -> str:
        if chat_id not in self._conversation_starts:
            rows = await self.rows("SELECT conversation_started_at FROM chats WHERE id = ?", (chat_id,))
            self._conversation_starts[chat_id] = rows[0][0] if rows and rows[0][0] else ""
        return self._conversation_starts[chat_id]

    async def add_message(self, message: ChatMessage) -> ChatMessage:
        if message.chat_id not in self._conversation_starts:
            await self.write(
                "INSERT OR IGNORE INTO chats (id, created_at) VALUES (?, ?)", (message.chat_id, to_db(utcnow()))
            )
            await self._conversation_start(message.chat_id)
        with self._kept.writing(message.chat_id):
            message.id = await self.insert("messages", message)
            for attachment in message.attachments:
                attachment.message_id = message.id
                attachment.id = await self.insert("attachments", attachment)
            self._kept.add(message)
        return message

    async def messages_after(self, chat_id: int, after_id: int) -> list[ChatMessage]:
        """Messages of the current conversation with id > after_id, oldest first, with their attachments (the
        store's own records: read them, do not change them)."""
        since = await self._conversation_start(chat_id)
        kept = self._kept.after(chat_id, since, after_id)
        if kept is not None:
            return kept
        writes = self._kept.writes(chat_id)
        messages = await self.fetch(
            ChatMessage,
            "SELECT * FROM messages WHERE chat_id = ? AND id > ? AND created_at >= ? ORDER BY id",
            (chat_id, after_id, since),
        )
        if messages:
            by_id = {m.id: m for m in messages}
            for attachment in await self.fetch(
                Attachment,
                "SELECT * FROM attachments WHERE chat_id = ? AND message_id >= ? ORDER BY id",
                (chat_id, messages[0].id),
            ):
                if attachment.message_id in by_id:
                    by_id[attachment.message_id].attachments.append(attachment)
        self._kept.read(chat_id, after_id, since, messages, writes)
        return list(messages)

    async def add_note(self, note: ConversationNote) -> ConversationNote:
        note.id = await self.insert("conversation_notes", note)
        return note

    async def latest_note(self, chat_id: int) -> ConversationNote | None:
        """The newest compacted summary of the current conversation, if any."""
        since = await self._conversation_start(chat_id)
        return await self.fetch_one(
            ConversationNote,
            "SELECT * FROM conversation_notes WHERE chat_id = ? AND created_at >= ? ORDER BY id DESC LIMIT 1",
            (chat_id, since),
        )

    async def message_by_platform_id(self, chat_id: int, platform_message_id: int) -> ChatMessage | None:
        return await self.fetch_one(
            ChatMessage,
            "SELECT * FROM messages WHERE chat_id = ? AND platform_message_id = ? ORDER BY id DESC LIMIT 1",
            (chat_id, platform_message_id),
        )

    async def set_platform_message_id(self, message_id: int, platform_message_id: int) -> None:
        await self.update("messages", message_id, {"platform_message_id": platform_message_id})
        self._kept.set_platform_message_id(message_id, platform_message_id)

    async def shown_record_from(self, chat_id: int, platform_message_id: int) -> ChatMessage | None:
        """The first proposal or task summary sent at or after this chat message."""
        return await self.fetch_one(
            ChatMessage,
            "SELECT * FROM messages WHERE chat_id = ? AND kind != 'chat' AND platform_message_id >= ? "
            "ORDER BY platform_message_id LIMIT 1",
            (chat_id, platform_message_id),
        )

    async def bot_message_about(self, chat_id: int, kind: str, ref_id: int) -> ChatMessage | None:
        """The newest message the bot showed about one proposal or task."""
        return await self.fetch_one(
            ChatMessage,
            "SELECT * FROM messages WHERE chat_id = ? AND kind = ? AND ref_id = ? ORDER BY id DESC LIMIT 1",
            (chat_id, kind, ref_id),
        )

    async def shown_records_up_to(self, chat_id: int, up_to_id: int) -> list[ChatMessage]:
        """Proposals and task summaries of the current conversation with id <= up_to_id, oldest first."""
        since = await self._conversation_start(chat_id)
        return await self.fetch(
            ChatMessage,
            "SELECT * FROM messages WHERE chat_id = ? AND id <= ? AND kind != 'chat' AND created_at >= ? ORDER BY id",
            (chat_id, up_to_id, since),
        )

    async def all_messages(self, chat_id: int) -> list[ChatMessage]:
        return await self.fetch(ChatMessage, "SELECT * FROM messages WHERE chat_id = ? ORDER BY id", (chat_id,))

    async def start_new_conversation(self, chat_id: int) -> None:
        now = to_db(utcnow())
        await self.write(
            "INSERT INTO chats (id, created_at, conversation_started_at) VALUES (?, ?, ?) "
            "ON CONFLICT(id) DO UPDATE SET conversation_started_at = excluded.conversation_started_at",
            (chat_id, now, now),
        )
        self._conversation_starts[chat_id] = now
        self._kept.forget(chat_id)
