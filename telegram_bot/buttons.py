"""Inline buttons: approve/reject proposals; cancel, resume, merge, diff, discard tasks and open their pull requests;
allow/deny network."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

from telegram import Update
from telegram.error import BadRequest

from agents.core.actions import Action, parse_action
from agents.core.errors import ToolError
from agents.core.models import Caller
from agents.git.command import GitError
from agents.review.pages import flag_masked, is_long, standalone_html
from telegram_bot.conversation import caller_of
from telegram_bot.handlers import say
from telegram_bot.state import Context
from telegram_bot.updates import query_of, runtime

log = logging.getLogger(__name__)

if TYPE_CHECKING:
    from agents.work.crew import Crew


Handler = Callable[["Crew", Caller, int, bool], Awaitable[str]]

# What each task/proposal button does (the network and question buttons answer a waiting worker instead, through the
# runtime's chat actions: see on_button). Merge,
# Discard and Diff reach a task of another conversation only when an owner presses them on a request handed to them
# (`handed`: the pressed message is one, as the bot recorded when it sent it).
DISPATCH: dict[Action, Handler] = {
    Action.APPROVE: lambda crew, caller, item, _handed: crew.proposals.approve(caller, item),
    Action.REJECT: lambda crew, caller, item, _handed: crew.proposals.reject(caller, item, "rejected with the button"),
    Action.CANCEL: lambda crew, caller, item, _handed: crew.attempts.cancel_task(caller, item),
    Action.RESUME: lambda crew, caller, item, _handed: crew.branches.resume(caller, item),
    Action.MERGE: lambda crew, caller, item, handed: crew.attempts.merge_task(caller, item, anywhere=handed),
    Action.DISCARD: lambda crew, caller, item, handed: crew.branches.discard(caller, item, anywhere=handed),
    Action.CANCEL_SCHEDULE: lambda crew, caller, item, _handed: crew.schedules.cancel(caller, item),
    Action.NOTE_FORGET: lambda crew, caller, item, _handed: crew.notes.forget(caller, item),
    Action.OPEN_PR: lambda crew, caller, item, handed: crew.branches.open_pr(caller, item, anywhere=handed),
    Action.FIX_CI: lambda crew, caller, item, _handed: crew.branches.fix_ci(caller, item),
    Action.MERGE_ATTEMPTS: lambda crew, caller, item, handed: crew.attempts.merge(caller, item, anywhere=handed),
    Action.DISCARD_ATTEMPTS: lambda crew, caller, item, handed: crew.attempts.discard(caller, item, anywhere=handed),
}


async def on_button(update: Update, context: Context) -> None:
    """Route a button's callback data (`agents.core.actions.Action`) to the crew or the chat actions and say what
    happened."""
    query = query_of(update)
    rt = runtime(context)
    chat = rt.chat_actions
    parsed = parse_action(query.data)
    if parsed is None:
        await query.answer("This button is no longer valid.")
        return
    action, item_id = parsed
    message = query.message
    # honoured only as shown: the very message pressed carried this very button (a client can send any data)
    handed = (
        await chat.button_shown(message.chat.id, message.message_id, query.data)
        if message is not None and query.data is not None
        else None
    )
    if handed is None:
        await query.answer("This button is no longer valid.")
        return
    caller = await caller_of(update, context)
    if chat.answers_network(action):  # a worker's request for network access (agents/sandbox/network_gate.py)
        if not rt.crew.access.is_owner(caller):
            await query.answer("Only an owner can answer this; the question is with them.", show_alert=True)
            return
        await query.answer()
        text = chat.decide_network(caller, item_id, action)
        with contextlib.suppress(BadRequest):
            await query.edit_message_reply_markup(None)
        await say(update, context, text)
        return
    if action is Action.ASK_OPTION:  # an option of a worker's question (agents/work/questions.py)
        await query.answer()
        await say(update, context, await chat.answer_option(caller, item_id))
        return
    await query.answer()
    try:
        if action is Action.DIFF:
            data, caption = await rt.crew.branches.diff(caller, item_id, anywhere=handed)
            # masked once, before any HTML is drawn from it: the page's highlighting cuts a token into spans and
            # escapes `&` and quotes, so a mask run over the page's HTML would miss what it must hide
            data, caption = flag_masked(await rt.secrets.mask_bytes_soon(data), caption)
            await rt.notifier.send_document(
                caller.chat_id, f"task-{item_id}.diff", data or b"(empty diff)\n", caption=caption, literal=True
            )
            if not rt.settings.review.review_url and is_long(data):  # no review page: the diff as a page a phone opens
                shown = rt.secrets.mask(caption)
                page = await asyncio.to_thread(standalone_html, f"Task #{item_id}", shown, data)
                await rt.notifier.send_document(
                    caller.chat_id, f"task-{item_id}.html", page, caption=f"{caption}, as a page", literal=True
                )
            return
        text = await DISPATCH[action](rt.crew, caller, item_id, handed)
    except (ToolError, GitError) as err:
        text = str(err)[:1].upper() + str(err)[1:]
    if action.about_proposal:  # the decision is part of the conversation the orchestrator reads
        await chat.record_decision(caller, text)
        with contextlib.suppress(BadRequest):
            await query.edit_message_reply_markup(None)
    await say(update, context, text)
