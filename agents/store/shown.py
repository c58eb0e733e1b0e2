"""What the bot showed in a chat about its crew's work (proposals, task summaries, failures) becomes the bot's turn
in that chat's history, so the orchestrator can answer about it; replies to such a message are recognised."""

from __future__ import annotations

from agents.core.models import ChatMessage, Role
from agents.core.text import estimate_tokens, keep_head_and_tail
from agents.store.database import Store

PROPOSAL = "proposal"
TASK = "task"


async def remember_shown(store: Store, chat_id: int, kind: str, ref_id: int, text: str, limit: int) -> ChatMessage:
    """Store `text` (trimmed head-and-tail to `limit` characters) as an assistant turn of the chat. Called before
    the message is sent, so a quick reply to it already finds it; its outbox entry names it (`shown_record`), and
    the outbox records the chat message's id on it once the message is sent, whichever path sends it."""
    content = keep_head_and_tail(text.strip(), limit, "message")
    return await store.add_message(
        ChatMessage(
            chat_id=chat_id,
            role=Role.ASSISTANT,
            content=content,
            tokens=estimate_tokens(content),
            kind=kind,
            ref_id=ref_id,
        )
    )


async def shown_as(store: Store, record: ChatMessage, platform_message_id: int | None) -> None:
    """The chat message's id set on `record` directly, for a caller that shows it without the outbox (an eval)."""
    if platform_message_id is not None and record.id is not None:
        await store.set_platform_message_id(record.id, platform_message_id)
