"""What a handler reads from an update, typed as the handler's registration guarantees it.

PTB types every part of an `Update` as optional (an update is a message, or a button press, or a member change…).
A handler registered for messages (a `MessageHandler`'s filter, a `CommandHandler`) always gets a message and its
chat; a `CallbackQueryHandler` always gets a query. These functions say so once, and fail loudly on an update
that breaks it, instead of each handler re-checking or assuming.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from telegram import CallbackQuery, Chat, Message, Update

    from agents.runtime import Runtime
    from telegram_bot.state import Context


class UnexpectedUpdate(TypeError):
    """A handler got an update of a kind it is not registered for (a wiring bug, never a user's doing)."""


def message_of(update: Update) -> Message:
    """The message of an update a message or command handler got."""
    if update.effective_message is None:
        raise UnexpectedUpdate(f"update {update.update_id} carries no message")
    return update.effective_message


def text_of(update: Update) -> str:
    """The text of the message a handler filtered on `filters.TEXT` got."""
    text = message_of(update).text
    if text is None:
        raise UnexpectedUpdate(f"update {update.update_id} carries no text")
    return text


def forwarded_note(message: Message) -> str | None:
    """For a forwarded message, a line saying whose words it carries (they are not the user's own request); None
    for the user's own message."""
    origin = message.forward_origin
    if origin is None:
        return None
    who = (
        getattr(getattr(origin, "sender_user", None), "full_name", None)
        or getattr(origin, "sender_user_name", None)
        or getattr(getattr(origin, "sender_chat", None), "title", None)
        or getattr(getattr(origin, "chat", None), "title", None)
        or "someone"
    )
    who = " ".join(str(who).split())[:64]
    return f"[Forwarded by the user: the words of {who}, not the user's own request]"


def replied_of(update: Update) -> Message:
    """The message that the message a handler filtered on `filters.REPLY` got replies to."""
    replied = message_of(update).reply_to_message
    if replied is None:
        raise UnexpectedUpdate(f"update {update.update_id} replies to nothing")
    return replied


def chat_of(update: Update) -> Chat:
    """The chat of an update a message, command or button handler got."""
    if update.effective_chat is None:
        raise UnexpectedUpdate(f"update {update.update_id} has no chat")
    return update.effective_chat


def query_of(update: Update) -> CallbackQuery:
    """The button press of an update a callback query handler got."""
    if update.callback_query is None:
        raise UnexpectedUpdate(f"update {update.update_id} is no button press")
    return update.callback_query


def event_keys(update: Update) -> list[str]:
    """The names one outside event is known by, to tell it from a repeat: Telegram's `update_id` (the same for a
    webhook re-delivery and for long polling that fetches an unconfirmed update again), a button press's own id, and a
    user's message by its chat and id (its edit is the same message, not a new request: an edited /cancel runs
    nothing)."""
    keys = [f"telegram:update:{update.update_id}"]
    if update.callback_query is not None:
        keys.append(f"telegram:callback:{update.callback_query.id}")
    message = update.message or update.edited_message
    if message is not None:
        keys.append(f"telegram:message:{message.chat.id}:{message.message_id}")
    return keys


def runtime(context: Context) -> Runtime:
    """The bot's runtime: PTB runs post_init (which sets it) before the first update."""
    app_runtime = context.bot_data.runtime
    if app_runtime is None:
        raise RuntimeError("the runtime is not started yet")
    return app_runtime
