"""Inline buttons: approve/reject proposals; cancel, resume, merge, diff and discard tasks; allow/deny network."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

from telegram import Update
from telegram.error import BadRequest

from agents.core.actions import Action, parse_action
from agents.core.errors import ToolError
from agents.core.models import Caller, ChatMessage, Role
from agents.git.runner import GitError
from agents.sandbox.network_gate import CHOICES
from telegram_bot.handlers import runtime
from telegram_bot.replies import send_markdown
from telegram_bot.state import Context

log = logging.getLogger(__name__)

if TYPE_CHECKING:
    from agents.work.crew import Crew


Handler = Callable[["Crew", int, int], Awaitable[str]]

# What each task/proposal button does (the network buttons answer a waiting worker instead: see on_button).
DISPATCH: dict[Action, Handler] = {
    Action.APPROVE: lambda crew, chat, item: crew.approve_proposal(Caller(chat_id=chat), item),
    Action.REJECT: lambda crew, chat, item: crew.reject_proposal(
        Caller(chat_id=chat), item, "rejected with the button"
    ),
    Action.CANCEL: lambda crew, chat, item: crew.cancel_task(Caller(chat_id=chat), item),
    Action.RESUME: lambda crew, chat, item: crew.resume(chat, item),
    Action.MERGE: lambda crew, chat, item: crew.merge(chat, item),
    Action.DISCARD: lambda crew, chat, item: crew.discard(chat, item),
}


async def on_button(update: Update, context: Context) -> None:
    """Route a button's callback data (`agents.core.actions.Action`) to the crew and say what happened."""
    query = update.callback_query
    chat_id = update.effective_chat.id
    rt = runtime(context)
    parsed = parse_action(query.data)
    if parsed is None:
        await query.answer("This button is no longer valid.")
        return
    action, item_id = parsed
    await query.answer()
    if action in CHOICES:  # a worker's request for network access (agents/sandbox/network_gate.py)
        text = rt.executor.network.decide(chat_id, item_id, CHOICES[action])
        with contextlib.suppress(BadRequest):
            await query.edit_message_reply_markup(None)
        await send_markdown(context.bot, chat_id, text)
        return
    try:
        if action is Action.DIFF:
            data, caption = await rt.crew.diff(chat_id, item_id)
            await rt.notifier.send_document(chat_id, f"task-{item_id}.diff", data or b"(empty diff)\n", caption=caption)
            return
        text = await DISPATCH[action](rt.crew, chat_id, item_id)
    except (ToolError, GitError) as err:
        text = str(err)[:1].upper() + str(err)[1:]
    if action.about_proposal:  # the decision is part of the conversation the orchestrator reads
        await rt.store.add_message(ChatMessage(chat_id=chat_id, role=Role.ASSISTANT, content=f"[button] {text}"))
        with contextlib.suppress(BadRequest):
            await query.edit_message_reply_markup(None)
    await send_markdown(context.bot, chat_id, text)
