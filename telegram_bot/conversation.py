"""Which conversation an update belongs to, and who sent it: a private chat, a group, or one topic of a forum group.

A topic is a conversation of its own (agents/store/conversations.py): its own history, proposals, tasks and
workspace. Telegram marks a message sent in a topic with `is_topic_message` and its `message_thread_id`; the
general topic and groups without topics are the chat itself.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from agents.core.models import Caller
from telegram_bot.updates import chat_of, message_of, runtime

if TYPE_CHECKING:
    from telegram import Message, Update, User

    from telegram_bot.state import Context


def topic_thread(message: Message | None) -> int | None:
    """The forum topic a message was sent in (None: a private chat, a plain group, the general topic)."""
    if message is None or not message.is_topic_message:
        return None
    return message.message_thread_id


def topic_name(message: Message) -> str:
    """The topic's name when the update carries it: the topic's creation, or the root every topic message points at."""
    if message.forum_topic_created is not None:
        return message.forum_topic_created.name
    root = message.reply_to_message
    if root is not None and root.forum_topic_created is not None:
        return root.forum_topic_created.name
    return ""


def _bots(message: Message, context: Context) -> bool:
    """Whether the bot itself sent `message` (only its own messages stand in for a topic)."""
    return message.from_user is not None and message.from_user.id == context.bot.id


def display_name(user: User | None) -> str | None:
    if user is None:
        return None
    return f"@{user.username}" if user.username else user.full_name


def known_conversation(update: Update, context: Context) -> int:
    """The conversation key without a database read (for ordering before the first await): a topic seen before, or
    the chat. A topic never seen has no turn running yet, so its chat's key stands in harmlessly."""
    chat_id = chat_of(update).id
    thread = topic_thread(update.effective_message)
    if thread is None:
        return chat_id
    return context.bot_data.topic_keys.get((chat_id, thread), chat_id)


async def conversation_of(update: Update, context: Context) -> int:
    """The conversation key of an update; a topic seen for the first time is recorded (and binds itself to a
    workspace of its name). In the general topic, a press on a message the bot posted there for a topic that was
    gone, or a reply to one, belongs to that topic's conversation."""
    chat_id = chat_of(update).id
    message = message_of(update)
    thread = topic_thread(message)
    if thread is None:
        pointed = message if update.callback_query is not None else message.reply_to_message
        if chat_id < 0 and pointed is not None and _bots(pointed, context):
            moved = await runtime(context).chat_actions.moved_from(chat_id, pointed.message_id)
            return moved if moved is not None else chat_id
        return chat_id
    known, named = context.bot_data.topic_keys.get((chat_id, thread)), context.bot_data.named_topics
    name = topic_name(message)
    # a topic first seen without its name (a reply to a teammate's message carries none) is recorded again once a
    # message carries it: the name is stored, and a topic named like a workspace binds to it then
    if known is not None and not message.forum_topic_created and (not name or (chat_id, thread) in named):
        return known
    key = await runtime(context).chat_actions.topic_conversation(chat_id, thread, name)
    context.bot_data.topic_keys[(chat_id, thread)] = key
    if name:
        named.add((chat_id, thread))
    return key


async def caller_of(update: Update, context: Context) -> Caller:
    """Who asks, where: the conversation, the message (a task started now replies under it) and the user."""
    message = update.effective_message
    user = update.effective_user
    return Caller(
        chat_id=await conversation_of(update, context),
        message_id=message.message_id if message else None,
        user_id=user.id if user else None,
        user_name=display_name(user),
    )
