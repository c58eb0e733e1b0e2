"""Replies to a task's progress message: a note for the task's running worker (agents/work/steering.py)."""

from __future__ import annotations

from telegram import Update

from agents.core.errors import ToolError
from agents.core.models import InputMethod
from telegram_bot.conversation import caller_of
from telegram_bot.handlers import chat_lock, converse, message_arrived, on_text, runtime
from telegram_bot.state import Context


async def on_reply(update: Update, context: Context) -> None:
    """A typed reply: to a progress message it steers that task; a reply to anything else is a normal message."""
    message = update.effective_message
    rt = runtime(context)
    caller = await caller_of(update, context)
    task = await rt.store.task_by_progress_message(caller.chat_id, message.reply_to_message.message_id)
    if task is None:
        await on_text(update, context)
        return
    try:
        answer = await rt.crew.message_task(caller, task.id, message.text)
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
                f"[In reply to the progress message of task #{task.id}]\n{message.text}",
                InputMethod.TEXT,
            )
        return
    await message.reply_text(f"📝 {answer}", do_quote=True)
