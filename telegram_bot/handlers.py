"""PTB handlers: plain module-level `async def handler(update, context)`, each a thin call into agents/."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import time
from collections.abc import AsyncIterator

from telegram import Update
from telegram.constants import ChatAction, ChatType
from telegram.error import BadRequest, NetworkError
from telegram.ext import ApplicationHandlerStop

from agents.chat.replying import ReplyTo
from agents.core.models import Attachment, InputMethod
from telegram_bot.conversation import caller_of, conversation_of, known_conversation, topic_thread
from telegram_bot.replies import is_topic_gone, send_markdown
from telegram_bot.state import Context
from telegram_bot.strangers import REFUSAL_LANE
from telegram_bot.streaming import ChatDraft
from telegram_bot.updates import chat_of, event_keys, forwarded_note, message_of, runtime, text_of

log = logging.getLogger(__name__)

COMMANDS: list[tuple[str, str]] = [
    ("start", "what this bot is"),
    ("help", "what I can do and how to ask"),
    ("status", "workspaces, tasks, proposals"),
]

HELP = """\
I'm **agentlab**: a crew of Claude agents working in your repositories.

Talk to me in plain words, typed or as a voice note:
• ask anything: "what does `auth.py` do in group-therapy?"
• ask for an improvement: "improve the error handling in the API": I research it and show a **proposal**; approve with the button or "go ahead"
• ask for work: "fix the failing test in calc", "add a /restart command to your code", "build a portfolio page": a worker does it on its own git branch, runs the tests and reports back
• send a photo, screenshot, PDF or log file with a caption: "make the page look like this", "why does this crash?"
• reply to a task's progress message to tell its worker something while it works
• "remember that in site we use pnpm": a standing note for later requests and their workers (/notes lists them)
• schedule work: "every weekday at 9 run the tests in calc", "tomorrow at 7 update the dependencies"; /schedules lists them"""  # the commands follow it


STOPPING = "I'm restarting right now; please send that again in a minute."
TYPING_DELAY = 0.3  # seconds before "typing…" shows; Claude's answers take longer, so it appears for them


ALBUM_MEMORY_SECONDS = 60.0  # how long an album addressed to the bot lets its later items through


def addressed_to_bot(update: Update, context: Context) -> bool:
    """In a group the bot answers messages that mention it, reply to it, or are commands (as Telegram's privacy
    mode delivers them); buttons and service messages always pass."""
    message = update.message
    if message is None or chat_of(update).type == ChatType.PRIVATE:
        return True
    if message.forum_topic_created is not None:
        return True
    replied = message.reply_to_message
    if replied is not None and replied.from_user is not None and replied.from_user.id == context.bot.id:
        return True
    text = message.text or message.caption or ""
    username = context.bot.username
    if text.startswith("/"):
        return for_this_bot(text, username)
    addressed = bool(username) and f"@{username.lower()}" in text.lower()
    if message.media_group_id is not None:  # an album's caption (the mention) is on one item: the others are the same
        album = f"{chat_of(update).id}:{message.media_group_id}"
        albums = context.bot_data.addressed_albums
        now = time.monotonic()
        for old in [k for k, at in albums.items() if now - at > ALBUM_MEMORY_SECONDS]:
            del albums[old]
        if addressed:
            albums[album] = now
        return album in albums
    return addressed


def for_this_bot(command_text: str, username: str | None) -> bool:
    """Whether a command is this bot's: `/cmd`, or `/cmd@ThisBot` in any case. `/cmd@other_bot` names another bot
    of the group, and is left to it in silence (as PTB's CommandHandler leaves it, for the commands it knows)."""
    _, at, suffix = (command_text.split(maxsplit=1) or [""])[0].partition("@")
    return not at or (bool(username) and suffix.lower() == (username or "").lower())


async def chat_heard(update: Update, context: Context) -> None:
    """Runs first, for every update: a chat that is heard from can be written to (its user unblocked the bot and wrote,
    the bot was added back to the group), so what the outbox kept for it while it refused the bot goes out now. Only
    an in-memory look-up unless the chat had refused the bot: a stranger's update costs nothing."""
    if update.effective_chat is not None:
        runtime(context).deliveries.chat_heard(update.effective_chat.id)


async def guard(update: Update, context: Context) -> None:
    """Runs before every other handler: strangers never reach Claude or a tool, and get one refusal per period (in
    a private chat; in a group they are ignored). In groups, only what is addressed to the bot goes on.

    It fails closed: python-telegram-bot hands an error raised here to `on_error` and goes on with the next handler
    groups, so any error but the stop itself is logged and turned into the stop (nothing past the guard runs)."""
    try:
        await _guard(update, context)
    except ApplicationHandlerStop:
        raise
    except Exception:
        log.exception("the allow-list guard failed on update %s: the update stops there", update.update_id)
        user = update.effective_user
        if user is not None and user.id in runtime(context).settings.users.allowed_user_ids:
            await _apologize(update, context)  # a stranger gets nothing
        raise ApplicationHandlerStop from None


async def _guard(update: Update, context: Context) -> None:
    user = update.effective_user
    allowed = runtime(context).settings.users.allowed_user_ids
    if user is not None and user.id in allowed:
        if not addressed_to_bot(update, context):
            raise ApplicationHandlerStop  # group chatter among the team: not for the bot
        return
    if update.effective_chat is not None and chat_of(update).type != ChatType.PRIVATE:
        log.info("ignored a group message from user %s, who is not allowed", user.id if user else "unknown")
        raise ApplicationHandlerStop  # a stranger in a group: no answer at all (the group is not theirs to page us)
    if not await context.bot_data.strangers.should_refuse(user.id if user else None):
        raise ApplicationHandlerStop  # refused already this period, or a flood: silence, and no queue
    who = f"{user.id} (@{user.username})" if user else "unknown"
    log.warning("refused update from user %s; add the id to ALLOWED_USER_IDS to allow them", who)
    if update.callback_query:
        with contextlib.suppress(Exception):
            await context.bot.answer_callback_query(
                update.callback_query.id, "Not allowed.", rate_limit_args=REFUSAL_LANE
            )
    elif user is not None and (update.message or update.edited_message) and chat_of(update).id == user.id:
        # only into the stranger's own chat with the bot: a business or guest-mode message names a chat of the
        # stranger's choosing (one whose id is an allowed user's), where a refusal would post into their chat
        with contextlib.suppress(Exception):
            await context.bot.send_message(user.id, "Sorry, this is a private bot.", rate_limit_args=REFUSAL_LANE)
    raise ApplicationHandlerStop


async def drop_repeats(update: Update, context: Context) -> None:
    """Runs after the guard, before every handler: an update the bot has acted on before (Telegram delivered it again:
    a webhook re-delivery, or long polling after a crash or restart fetching it before its offset was confirmed) is
    acknowledged and does nothing, quietly: no second turn or task, no answer to a button pressed once."""
    if await runtime(context).chat_actions.first_time(event_keys(update)):
        return
    log.info("update %s was delivered again (or edits a message already handled): nothing done", update.update_id)
    raise ApplicationHandlerStop


@contextlib.asynccontextmanager
async def typing(context: Context, chat_id: int, thread_id: int | None = None) -> AsyncIterator[None]:
    """Keep the 'typing…' indicator up (Telegram drops it after ~5 s) while the body runs."""

    async def keep_typing() -> None:
        await asyncio.sleep(TYPING_DELAY)  # an instant answer needs no indicator (and no extra Bot API call)
        while True:
            with contextlib.suppress(Exception):
                await context.bot.send_chat_action(chat_id, ChatAction.TYPING, message_thread_id=thread_id)
            await asyncio.sleep(4.5)

    task = asyncio.create_task(keep_typing())
    try:
        yield
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


@contextlib.asynccontextmanager
async def on_record(update: Update, context: Context, kind: str, asked: str = "") -> AsyncIterator[asyncio.Future[int]]:
    """The message on record from its arrival until the body ends (its answer owed, or the reply saying why there is
    none): one a stop or a crash cuts short (waiting for its chat's turn, downloaded, transcribed or being answered)
    is told at the next start, never dropped without a word (agents/store/open_turns.py). Nothing is awaited before
    the body runs, so a message keeps its place in its chat's order (`chat_lock`). Yields the record's id (to come):
    `converse` takes the message off the record as it puts the answer in the outbox."""
    actions = runtime(context).chat_actions
    opening = asyncio.ensure_future(actions.message_arrived(known_conversation(update, context), kind, asked))
    try:
        yield opening
    except asyncio.CancelledError:
        raise  # a stop: the message stays on record, cut short
    except BaseException:
        await actions.message_done(await opening)  # `on_error` apologises for it
        raise
    await actions.message_done(await opening)


def chat_lock(update: Update, context: Context) -> asyncio.Lock:
    """One turn at a time per conversation (a chat, or a topic of a forum group), taken before the first await so
    messages are answered in arrival order."""
    key = (chat_of(update).id, topic_thread(update.effective_message) or 0)
    return context.bot_data.chat_locks.setdefault(key, asyncio.Lock())


async def converse(
    update: Update,
    context: Context,
    text: str,
    method: InputMethod,
    attachments: list[Attachment] | None = None,
    record: asyncio.Future[int] | None = None,
) -> None:
    """Route text (typed or transcribed, with any photos/files) through the orchestrator and send its reply; the
    message's `record` (`on_record`) ends as the reply is put in the outbox."""
    if context.bot_data.stopping:
        await message_of(update).reply_text(STOPPING)
        return
    caller = await caller_of(update, context)
    if context.bot.username and chat_of(update).type != ChatType.PRIVATE:  # "@bot fix it" → "fix it"
        text = re.sub(rf"@{re.escape(context.bot.username)}\b", "", text, flags=re.IGNORECASE).strip() or text
    said = text  # the user's own words: what alone decides a merge, an approval, … (agents/work/own_words.py)
    if (forwarded := forwarded_note(message_of(update))) is not None:  # someone else's words, shown as such
        text, said = f"{forwarded}\n{text}", ""
    turns = context.bot_data.turns
    turn = asyncio.current_task()
    if turn is not None:  # PTB runs each handler in a task of its own
        turns.add(turn)  # cancelled on SIGTERM so shutdown never waits on a long turn
    draft = answer_preview(update, context)
    try:
        try:
            async with typing(context, chat_of(update).id, topic_thread(update.effective_message)):
                reply = await runtime(context).orchestrator.handle(
                    caller.chat_id,
                    text,
                    method,
                    reply_to_of(update, context),
                    attachments,
                    answer=draft,
                    message_id=caller.message_id,
                    user_id=caller.user_id,
                    user_name=caller.user_name,
                    said=said,
                )
        finally:
            turns.discard(turn)
            if draft is not None:
                await draft.stop()  # no preview frame may follow the final message
        # the answer is stored already; a Telegram 5xx now means "retry, then the outbox", never "lost"
        reply_to = message_of(update).message_id
        if record is None:
            await runtime(context).deliveries.deliver(caller.chat_id, reply.text, reply_to=reply_to, kind="answer")
        else:
            entry = await runtime(context).chat_actions.answer_owed(await record, caller.chat_id, reply.text, reply_to)
            await runtime(context).deliveries.send_stored(entry)
    finally:
        # The preview goes however the turn ended: after its answer, or when the turn failed (an error, a stop) with
        # half an answer shown, which left in the chat would read as the answer. The chat's next turn need not wait.
        if draft is not None and draft.preview_id is not None:
            context.application.create_task(draft.discard(), update=update, name="discard-preview")


def reply_to_of(update: Update, context: Context) -> ReplyTo | None:
    """The message this one replies to, in the core's terms (no Telegram types past this point)."""
    replied = message_of(update).reply_to_message
    if replied is None or replied.forum_topic_created is not None:  # a topic's messages all point at its root
        return None
    sender, user = replied.from_user, update.effective_user
    posted_as = replied.sender_chat  # an anonymous admin or a channel: nobody's own words but the chat's
    return ReplyTo(
        message_id=replied.message_id,
        text=replied.text or replied.caption or "",
        from_bot=bool(sender and sender.id == context.bot.id),
        theirs=bool(sender and user and sender.id == user.id and posted_as is None),
        author=(posted_as.title or "a chat") if posted_as else (sender.full_name if sender else "") or "",
    )


def message_arrived(update: Update, context: Context) -> None:
    """Before queueing behind the chat's lock: a turn waiting on a foreground task stops waiting."""
    app_runtime = context.bot_data.runtime
    if app_runtime is not None and update.effective_chat is not None:
        app_runtime.orchestrator.message_arrived(known_conversation(update, context))


def answer_preview(update: Update, context: Context) -> ChatDraft | None:
    """Where the answer grows while Claude writes it: a draft in private chats, an edited message in groups."""
    settings = runtime(context).settings
    if not settings.streaming.stream_answers:
        return None
    private = chat_of(update).type == ChatType.PRIVATE
    return ChatDraft(
        context.bot,
        runtime(context).secrets,
        chat_of(update).id,
        private=private,
        draft_id=message_of(update).message_id,
        reply_to=message_of(update).message_id,
        thread_id=topic_thread(message_of(update)),
        draft_interval=settings.streaming.stream_draft_interval_seconds,
        edit_interval=settings.streaming.stream_edit_interval_seconds
        if private
        else settings.streaming.stream_group_edit_interval_seconds,
        first_frame_after=settings.streaming.stream_first_frame_seconds,
    )


async def on_text(update: Update, context: Context) -> None:
    """A typed message."""
    message_arrived(update, context)
    async with on_record(update, context, "message", text_of(update)) as record, chat_lock(update, context):
        await converse(update, context, text_of(update), InputMethod.TEXT, record=record)


async def on_chat_migrated(update: Update, context: Context) -> None:
    """Telegram's service message that a group was upgraded to a supergroup under a new chat id (turning on its topics
    does it): `migrate_to_chat_id` in the old group, `migrate_from_chat_id` in the supergroup; either moves what the
    bot keeps of the group to the new id (the other, or a repeat, finds it moved). Only Telegram sets these fields, so
    no user's message can move a chat. Nothing else is done with the update (the allow-list would drop it)."""
    message, chat = message_of(update), chat_of(update).id
    if message.migrate_to_chat_id is not None:
        old, new = chat, message.migrate_to_chat_id
    else:
        old, new = message.migrate_from_chat_id or chat, chat
    if old >= 0 or new >= 0 or old == new:  # only a group becomes a supergroup (Telegram's group ids are negative)
        log.warning("ignored a chat migration from %s to %s: not a group's", old, new)
    else:
        await runtime(context).chat_actions.chat_moved(old, new)
    raise ApplicationHandlerStop


async def on_topic_created(update: Update, context: Context) -> None:
    """A new forum topic: recorded as a conversation of its own; named like a workspace, it binds itself."""
    await conversation_of(update, context)


async def status(update: Update, context: Context) -> None:
    """/status: workspaces, active tasks, pending proposals."""
    await say(update, context, await runtime(context).status_text(await conversation_of(update, context)))


async def say(update: Update, context: Context, markdown: str) -> None:
    """Answer a command or button where it was used: the chat, and in a forum group the topic; in a topic closed or
    deleted since, the general topic with a note (the notifier's way for the bot's other messages), so the answer to
    a press (a merge done, a question answered) is never lost to a topic that cannot be written to."""
    thread = topic_thread(update.effective_message)
    try:
        await send_markdown(context.bot, runtime(context).secrets, chat_of(update).id, markdown, thread_id=thread)
    except BadRequest as err:
        if thread is None or not is_topic_gone(err):
            raise
        await runtime(context).notifier.send(await conversation_of(update, context), markdown)


async def unknown_command(update: Update, context: Context) -> None:
    """A command I don't have; one addressed to another bot (`/start@other_bot`) gets no reply at all."""
    text = message_of(update).text or ""
    if not for_this_bot(text, context.bot.username):
        return
    command = text.split()[0]
    await message_of(update).reply_text(f"I don't know {command}. /help lists what I understand.")


async def unsupported(update: Update, context: Context) -> None:
    """Stickers, locations, contacts…: one line, nothing else."""
    await message_of(update).reply_text(
        "I work with text and voice notes, photos and files (PDFs, code, logs, "
        "JSON, CSV, Markdown); please type or say what you need."
    )


async def on_error(update: object, context: Context) -> None:
    """Log the error and tell the user something short and true. A failed `getUpdates` (no update: Telegram
    unreachable, timing out or answering 5xx while the bot polls) is one line, not a traceback: the updater tries
    again by itself, with a growing pause, and an outage would otherwise fill the log with the same stack."""
    if update is None and isinstance(context.error, NetworkError):
        log.warning("Telegram could not be reached while polling for updates (%s); trying again", context.error)
        return
    log.error("error while handling an update", exc_info=context.error)
    if isinstance(update, Update):
        await _apologize(update, context)


async def _apologize(update: Update, context: Context) -> None:
    """Something short and true to the chat an update came from, when handling it failed: in the topic it came from,
    or the general topic when that topic is gone (as `say`)."""
    if update.effective_chat:
        with contextlib.suppress(Exception):
            await say(update, context, "Sorry, something went wrong on my side; it is logged. Please try again.")
