"""Inline buttons: approve/reject proposals; cancel, resume, merge, diff and discard tasks; allow/deny network."""

from __future__ import annotations

import contextlib
import logging

from telegram import Update
from telegram.error import BadRequest
from telegram.ext import ContextTypes

from agents.git_repo import GitError
from agents.ids import parse_id
from agents.models import ChatMessage, Role
from agents.network_gate import BUTTON_KIND
from agents.workspaces import ToolError
from telegram_bot.handlers import runtime
from telegram_bot.replies import send_markdown

log = logging.getLogger(__name__)


async def on_button(update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
    """Route `kind:action:id` callback data to the crew and say what happened."""
    query = update.callback_query
    chat_id = update.effective_chat.id
    rt = runtime(context)
    try:
        kind, action, raw_id = (query.data or "").split(":")
    except ValueError:
        kind = action = raw_id = ""
    item_id = parse_id(raw_id)
    if item_id is None:
        await query.answer("This button is no longer valid.")
        return
    await query.answer()
    crew = rt.crew
    if kind == BUTTON_KIND:  # a worker's request for network access (agents/network_gate.py)
        text = rt.executor.network.decide(chat_id, item_id, action)
        with contextlib.suppress(BadRequest):
            await query.edit_message_reply_markup(None)
        await send_markdown(context.bot, chat_id, text)
        return
    try:
        if kind == "proposal" and action == "approve":
            text = await crew.approve_proposal(chat_id, item_id)
        elif kind == "proposal" and action == "reject":
            text = await crew.reject_proposal(chat_id, item_id, "rejected with the button")
        elif kind == "task" and action == "cancel":
            text = await crew.cancel_task(chat_id, item_id)
        elif kind == "task" and action == "resume":
            text = await crew.resume(chat_id, item_id)
        elif kind == "task" and action == "merge":
            text = await crew.merge(chat_id, item_id)
        elif kind == "task" and action == "discard":
            text = await crew.discard(chat_id, item_id)
        elif kind == "task" and action == "diff":
            data, caption = await crew.diff(chat_id, item_id)
            await rt.notifier.send_document(chat_id, f"task-{item_id}.diff", data or b"(empty diff)\n", caption=caption)
            return
        else:
            text = "This button is no longer valid."
    except (ToolError, GitError) as err:
        text = str(err)[:1].upper() + str(err)[1:]
    if kind == "proposal":  # the decision is part of the conversation the orchestrator reads
        await rt.store.add_message(ChatMessage(chat_id=chat_id, role=Role.ASSISTANT, content=f"[button] {text}"))
        with contextlib.suppress(BadRequest):
            await query.edit_message_reply_markup(None)
    await send_markdown(context.bot, chat_id, text)
