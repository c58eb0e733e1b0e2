"""Which earlier message the user is replying to, as the adapter reports it, and how the orchestrator is told."""

from __future__ import annotations

import re
from dataclasses import dataclass

from agents.core.models import ChatMessage
from agents.store.database import Store
from agents.store.shown import PROPOSAL, TASK

QUOTE_CHARS = 300


@dataclass(frozen=True)
class ReplyTo:
    """The message a new message replies to: its id in the chat, its text, whether the bot sent it, and whether the
    user who replies wrote it (`theirs`; else `author` names who did: a stranger's words in a group, quoted by a
    reply, are never the user's own request)."""

    message_id: int
    text: str = ""
    from_bot: bool = False
    theirs: bool = False
    author: str = ""


def _plain(text: str) -> str:
    return " ".join(re.sub(r"[*_`~]", "", text).split())


async def _first_chunk_of(store: Store, chat_id: int, reply: ReplyTo) -> ChatMessage | None:
    """A long proposal or summary goes out in several messages and only the last one's id is stored: the user may
    reply to an earlier part. It is the next stored record after that message whose text holds the part's start."""
    record = await store.shown_record_from(chat_id, reply.message_id)
    start = _plain(reply.text)[:60]
    return record if record is not None and start and start in _plain(record.content) else None


def _quote(text: str) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= QUOTE_CHARS else flat[: QUOTE_CHARS - 1] + "…"


async def _shown_by(store: Store, chat_id: int, reply: ReplyTo) -> ChatMessage | None:
    """The stored record of the replied message (a proposal or a task's summary the bot showed, or a chat message)."""
    shown = await store.message_by_platform_id(chat_id, reply.message_id)
    if shown is None and reply.from_bot:
        shown = await _first_chunk_of(store, chat_id, reply)
    return shown


async def replied_item(store: Store, chat_id: int, reply: ReplyTo | None) -> tuple[str, int] | None:
    """The proposal or task whose message the user replies to, as (PROPOSAL, 3) or (TASK, 7): the bot's message
    showing a proposal, a task's summary or its progress message. None for any other message. A decision the model
    calls on another proposal or task is not decided by such a reply's words (agents/work/own_words.py)."""
    if reply is None:
        return None
    shown = await _shown_by(store, chat_id, reply)
    if shown is not None and shown.kind in (PROPOSAL, TASK) and shown.ref_id is not None:
        return shown.kind, shown.ref_id
    task = await store.task_by_message(chat_id, reply.message_id) if reply.from_bot else None
    return (TASK, task.id) if task is not None and task.id is not None else None


async def describe_reply(store: Store, chat_id: int, reply: ReplyTo | None) -> str | None:
    """One line for the context: 'replying to proposal #3 [pending]', 'replying to the progress of task #7', …"""
    if reply is None:
        return None
    shown = await _shown_by(store, chat_id, reply)
    if shown is not None and shown.kind == PROPOSAL and shown.ref_id is not None:
        proposal = await store.get_proposal(shown.ref_id)
        state = f" [{proposal.status.value}]" if proposal else ""
        return f"replying to: proposal #{shown.ref_id}{state} (the bot's message showing it)"
    if shown is not None and shown.kind == TASK and shown.ref_id is not None:
        task = await store.get_task(shown.ref_id)
        state = f" [{task.status.value}]" if task else ""
        return f"replying to: the summary of task #{shown.ref_id}{state}"
    task = await store.task_by_message(chat_id, reply.message_id) if reply.from_bot else None
    if task is not None:
        return f"replying to: the progress message of task #{task.id} [{task.status.value}]"
    if reply.from_bot:
        who = "your earlier message"
    elif reply.theirs:
        who = "their own earlier message"
    else:  # someone else's words: what the user asks about, never what the user asks
        who = f"a message of {_plain(reply.author)[:60] or 'someone else'} (their words, not the user's request)"
    return f"replying to {who}: «{_quote(reply.text)}»" if reply.text.strip() else f"replying to {who}"
