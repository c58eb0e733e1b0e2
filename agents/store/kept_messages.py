"""The newest chat history read of each conversation, kept in memory and up to date with the store's own writes.

Every turn reads the messages after the last compacted one (`Store.messages_after`); most turns ask again for what
the previous read answered plus the messages written since. The bot is the only writer of its database, so the
answer can be kept and extended as messages are stored, instead of read again. A read that overlapped a write of
the same conversation is not kept (it may miss that message).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from agents.core.models import ChatMessage
from agents.store.connection import to_db


class KeptMessages:
    """Per conversation: (after id, conversation start, its messages after that id), and the message writes under
    way (begun, not yet finished), by which a read knows whether a write overlapped it."""

    def __init__(self) -> None:
        self._kept: dict[int, tuple[int, str, list[ChatMessage]]] = {}
        self._writes: dict[int, tuple[int, int]] = {}

    @contextlib.contextmanager
    def writing(self, chat_id: int) -> Iterator[None]:
        """Around one message write of the conversation."""
        begun, unfinished = self._writes.get(chat_id, (0, 0))
        self._writes[chat_id] = (begun + 1, unfinished + 1)
        try:
            yield
        finally:
            begun, unfinished = self._writes[chat_id]
            self._writes[chat_id] = (begun, unfinished - 1)

    def writes(self, chat_id: int) -> tuple[int, int]:
        """(begun, unfinished) message writes of the conversation: taken before a read, compared after it."""
        return self._writes.get(chat_id, (0, 0))

    def after(self, chat_id: int, since: str, after_id: int) -> list[ChatMessage] | None:
        """The kept messages with id > after_id, when what is kept covers them; None when the store must read."""
        kept = self._kept.get(chat_id)
        if kept is None or kept[1] != since or kept[0] > after_id:
            return None
        messages = [m for m in kept[2] if (m.id or 0) > after_id]
        if after_id > kept[0]:
            self._kept[chat_id] = (after_id, since, messages)
        return list(messages)

    def read(
        self, chat_id: int, after_id: int, since: str, messages: list[ChatMessage], before: tuple[int, int]
    ) -> None:
        """Keep what a read answered, unless a write of the conversation was under way or began during it
        (`before`: `writes` taken before the read)."""
        if before[1] == 0 and self.writes(chat_id) == before:
            self._kept[chat_id] = (after_id, since, messages)
        else:
            self._kept.pop(chat_id, None)

    def add(self, message: ChatMessage) -> None:
        """Add a stored message to its conversation's kept messages (in id order, once)."""
        kept = self._kept.get(message.chat_id)
        if kept is None or to_db(message.created_at) < kept[1] or message.id is None:
            return
        messages = kept[2]
        if any(m.id == message.id for m in messages[-8:]):
            return
        copy = message.model_copy(update={"attachments": [a.model_copy() for a in message.attachments]})
        messages.append(copy)
        if len(messages) > 1 and (messages[-2].id or 0) > message.id:  # two writes finished out of order
            messages.sort(key=lambda m: m.id or 0)

    def forget(self, chat_id: int) -> None:
        """The conversation started afresh: nothing kept is in it."""
        self._kept.pop(chat_id, None)

    def refuse_attachment(self, attachment_id: int, reason: str) -> None:
        for _, _, messages in self._kept.values():
            for attachment in (a for m in messages for a in m.attachments if a.id == attachment_id):
                attachment.refused = reason

    def set_platform_message_id(self, message_id: int, platform_message_id: int) -> None:
        for message in (m for _, _, messages in self._kept.values() for m in messages if m.id == message_id):
            message.platform_message_id = platform_message_id
