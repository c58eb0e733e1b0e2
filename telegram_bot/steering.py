"""Replies to a task's progress message: a note for the task's running worker (agents/work/steering.py); replies to a
worker's question (ask_user): its answer in words (agents/work/questions.py)."""

from __future__ import annotations

from telegram import Update

from agents.core.errors import NotAllowed, ToolError
from agents.core.models import InputMethod
from telegram_bot.conversation import caller_of
from telegram_bot.handlers import chat_lock, converse, message_arrived, on_text
from telegram_bot.state import Context
from telegram_bot.updates import message_of, replied_of, runtime, text_of


async def on_reply(update: Update, context: Context) -> None:
    """A typed reply: to a progress message it steers that task; a reply to anything else is a normal message."""
    message, text, replied = message_of(update), text_of(update), replied_of(update)
    rt = runtime(context)
    caller = await caller_of(update, context)
    said = await rt.chat_actions.answer_in_words(caller, replied.message_id, text)
    if said is not None:  # an answer in words to a worker's question
        await message.reply_text(said, do_quote=True)
        return
    task = await rt.chat_actions.task_of_progress_message(caller, replied.message_id)
    if task is None:
        await on_text(update, context)
        return
    try:
        answer = await rt.crew.attempts.message_task(caller, task.stored_id, text)
    except NotAllowed as err:  # not the caller's to steer: one sentence, and nothing else happens
        reason = str(err)
        await message.reply_text(f"{reason[:1].upper()}{reason[1:]}.", do_quote=True)
        return
    except ToolError as err:  # not running: say so, and lose nothing: the orchestrator gets the message
        reason = str(err).split(";")[0]
        await message.reply_text(
            f"{reason[:1].upper()}{reason[1:]}. I'll answer it as a normal message instead.", do_quote=True
        )
        message_arrived(update, context)
        async with chat_lock(update, context):
            await converse(
                update,
                context,
                f"[In reply to the progress message of task #{task.id}]\n{text}",
                InputMethod.TEXT,
            )
        return
    await message.reply_text(f"📝 {answer}", do_quote=True)
