"""What a chat turn sends the model: the history (compacted past its budget), the new message and its context."""

from __future__ import annotations

import asyncio
import logging
import math
from collections.abc import Awaitable
from typing import Any

import anthropic

from agents.chat.refusals import BlockOwners
from agents.chat.replying import ReplyTo, describe_reply
from agents.chat.symbol_hints import SymbolHints
from agents.core.errors import ToolError
from agents.core.models import (
    Attachment,
    ChatMessage,
    ConversationNote,
    InputMethod,
    Role,
    TaskStatus,
    WorkerKind,
    utcnow,
)
from agents.core.protocols import MessageModel
from agents.core.secrets_filter import SecretsFilter
from agents.core.settings import Settings
from agents.core.text import outside_text
from agents.inputs.attachments import Attachments
from agents.llm import prompts
from agents.llm.client import usage_record
from agents.llm.context_budget import is_prompt_too_long
from agents.llm.tool_loop import as_model
from agents.store.database import Store
from agents.store.shown import PROPOSAL, TASK
from agents.store.standing import StandingNotes, note_line
from agents.workspaces.folders import Workspaces

log = logging.getLogger(__name__)

EPHEMERAL = {"type": "ephemeral"}
COMPACT_INPUT_CHARS = 200_000  # the newest part of the turns to summarise, if they are longer
UNANSWERED = "(no answer: this turn failed before I could reply)"
LEFT_OUT = "the request would be too large with it; ask the user to send it again if you need it"
USER, ASSISTANT = str(Role.USER), str(Role.ASSISTANT)
PINNED_PER_KIND = 3  # proposals / task summaries kept whole past compaction
# The photos and files one request carries, base64 as sent (the new message's first, then the history's, newest
# first): the API refuses a request over 32 MB as a whole, and the text, the tools and the JSON around need room.
ATTACHMENT_REQUEST_BYTES = 20_000_000
NOT_SUMMARISED = "(Our conversation up to here grew too long for me to read, and could not be summarised.)"


def sent_bytes(attachment: Attachment) -> int:
    """What a photo or file adds to a request: its bytes in base64 (a refused one is sent as its label alone)."""
    return 0 if attachment.refused else 4 * math.ceil(attachment.size / 3)


def label_only(attachment: Attachment, why: str) -> list[dict[str, Any]]:
    """A history's photo or file left out of the request: its label, and why it is not shown."""
    return [
        {
            "type": "text",
            "text": f"[attachment #{attachment.id}: {attachment.name} ({attachment.kind.value}) is not shown again "
            f"here: {why}]",
        }
    ]


def history_messages(
    history: list[ChatMessage], attached: dict[int, list[dict[str, Any]]] | None = None
) -> list[dict[str, Any]]:
    """Stored turns as API messages: starts with the user; a user turn left unanswered (a failed turn) is marked so,
    never merged into the next one; the bot's neighbouring turns (an answer, then a proposal shown) are joined.

    `attached`: message id → the content blocks of its photos and files, shown before the message's text.
    """
    messages: list[dict[str, Any]] = []
    attached = attached or {}
    last_role = ""  # the role of messages[-1], as a plain str (a Role's `.value` is an enum look-up each time)
    for turn in history:
        role = str(turn.role)
        if not messages and role != USER:
            continue
        pictures = attached.get(turn.id) if attached and turn.id is not None else None
        text_block = {"type": "text", "text": turn.content}
        if role == last_role == USER:
            messages.append({"role": ASSISTANT, "content": [{"type": "text", "text": UNANSWERED}]})
            last_role = ASSISTANT
        if role == last_role:
            last = messages[-1]["content"][-1]
            if not pictures and last.get("type") == "text":
                last["text"] += "\n\n" + turn.content
            else:
                messages[-1]["content"] += [*(pictures or []), text_block]
        else:
            messages.append({"role": role, "content": [*pictures, text_block] if pictures else [text_block]})
            last_role = role
    return messages


def _mark_cache(message: dict[str, Any]) -> None:
    message["content"][-1]["cache_control"] = EPHEMERAL


class TurnContext:
    """Builds one turn's request messages for a chat: its history (a compact note of older turns, the newest turns in
    HISTORY_TOKEN_BUDGET), their photos and files, the new message and the per-turn <context> block."""

    def __init__(
        self,
        settings: Settings,
        store: Store,
        client: anthropic.AsyncAnthropic | MessageModel,  # the model that summarises older turns
        workspaces: Workspaces,
        secrets: SecretsFilter,
        hints: SymbolHints | None = None,
    ) -> None:
        self.settings = settings
        self.store = store
        self.client = client
        # the stored turns are the user's own words and files, unmasked: the summary's request is a request to the
        # model like any turn's, masked as the orchestrator masks its own
        self.secrets = secrets
        self.workspaces = workspaces
        self.hints = hints
        self.attachments = Attachments.from_settings(settings)

    async def context_block(
        self,
        chat_id: int,
        input_method: InputMethod,
        text: str = "",
        reply_to: ReplyTo | None = None,
        user_id: int | None = None,
        *,
        owner: bool = False,
        confined_to: str | None = None,
    ) -> str:
        """The per-turn facts the seed design gives the orchestrator: input method, workspaces, tasks, proposals.
        `owner`: the user is an owner (a member's hints leave out the bot's own code). `confined_to`: a request from
        outside the chat (models.Caller) sees that workspace alone, with its notes and definitions, and none of the
        conversation's tasks, proposals and schedules."""
        lines = [f"input_method: {input_method.value}"]
        if input_method is InputMethod.VOICE:
            lines.append("(this message is a speech transcript: be lenient with misheard words and names)")
        workspaces = self.workspaces.all()
        if confined_to is not None:
            try:
                workspaces = [self.workspaces.confined(confined_to, None)]
                confined_to = workspaces[0].name
            except ToolError:  # gone since the request came: its name alone, and nothing else
                workspaces = []
        # The store's reads go out together: its thread answers them back to back (one hand-over, not six).
        replying, own, active, pending, schedules, standing = await asyncio.gather(
            describe_reply(self.store, chat_id, reply_to),
            self.store.conversations.bound_workspace(chat_id),
            self.store.list_tasks(chat_id, statuses=TaskStatus.cancellable(), limit=20),
            self.store.pending_proposals(chat_id),
            self.store.schedules.live(chat_id),
            self._standing_notes(user_id, confined_to),
        )
        if confined_to is not None:
            # none of the conversation's work either, even in this workspace: its titles and requests are the chat's
            replying, own, active, pending, schedules = "", confined_to, [], [], []
        if replying:
            lines.append(replying)
        lines.append("workspaces:")
        for ws in workspaces:
            lines.append(f"- {ws.name}" + (" (this bot's own code)" if ws.is_self else ""))
        if own:  # a topic bound with /workspace (or named like a workspace): its requests need not name it
            lines.append(f"workspace of this conversation: {own} (meant when a request names none)")
        lines.append("active tasks:" if active else "active tasks: none")
        for t in active:
            lines.append(f"- #{t.id} [{t.status.value}] {t.worker.value} in {t.workspace}: {t.title}")
        lines.append("pending proposals:" if pending else "pending proposals: none")
        for p in pending:  # shown whole in the conversation above; get_proposal(id) gives it again
            lines.append(f"- proposal #{p.id} for {p.workspace} (request: {' '.join(p.request.split())[:200]})")
        researching = [t for t in active if t.worker is WorkerKind.RESEARCH and t.status.is_active]
        if researching:
            lines.append(
                "proposals still being written: " + ", ".join(f"research #{t.id} in {t.workspace}" for t in researching)
            )
        if schedules:  # "stop the nightly run" names one of these
            lines.append("schedules of this conversation:")
            for s in schedules:
                when = (
                    f"cron {s.cron}"
                    if s.cron
                    else f"at {s.at:%Y-%m-%d %H:%M} UTC"
                    if s.at
                    else f"every {s.every_minutes} min"
                )
                what = outside_text(" ".join(s.instructions.split())[:120], markdown=False)  # a member's words
                lines.append(f"- schedule #{s.id} [{s.status.value}] {when}, {s.worker.value} in {s.workspace}: {what}")
        zone = self.settings.schedules.zone  # "tomorrow at 7" needs today's date; schedules are read in this zone
        lines.append(f"now: {utcnow().astimezone(zone).strftime('%a %Y-%m-%d %H:%M %Z')} (time zone {zone})")
        lines += standing
        definitions = await self.hints.hints(text, owner=owner, only=own if confined_to else None) if self.hints else []
        if definitions:
            lines.append("definitions of code names in this message (from the repository index):")
            lines += [f"- {d}" for d in definitions]
        return "<context>\n" + "\n".join(lines) + "\n</context>"

    async def _standing_notes(self, user_id: int | None, confined_to: str | None = None) -> list[str]:
        """The user's standing notes that apply to this request (a confined one, in the workspace named
        `confined_to`: those for it and for all). They sit in the per-turn context, after the cached prefix, so
        adding or forgetting one never changes what the cache holds."""
        notes = await StandingNotes(self.store).applying(
            user_id,
            self.settings.users.is_owner,
            confined_to,
            about_self=self.workspaces.is_self,
            every=confined_to is None,
        )
        if not notes:
            return []
        return [
            "standing notes that apply to this user's requests (follow them; a later note wins over an earlier one; "
            "workers get the notes of their workspace themselves; forget(note_id) deletes one):",
            *(f"- {note_line(n, user_id)}" for n in notes),
        ]

    def _fit_for_model(self, text: str) -> str:
        limit = self.settings.orchestrator.max_message_chars
        if len(text) <= limit:
            return text
        return (
            f"{text[:limit]}\n\n[The user's message was {len(text):,} characters long; only the first {limit:,} "
            "are shown here. Say so briefly in your reply.]"
        )

    async def _history(self, chat_id: int, note: ConversationNote | None, shorter: bool = False) -> list[ChatMessage]:
        """The conversation as the model sees it: a compact note of older turns (`note`, the chat's latest), then the
        newest turns in the budget.

        When the unsummarised turns pass the budget, the older ones (all but the newest half-budget) are
        summarised by the model into a note kept in the store; the turns themselves stay stored (/history). The
        proposals still pending and the newest task summaries among the turns out of view are kept whole, also when
        the summary could not be made (the turn then says the earlier conversation is not shown). `shorter`: the
        API found the request too long although the estimate fit (a dense script such as Chinese is about a token
        a character, not a quarter): the newest turns get half of what they would, the rest is summarised, and the
        note keeps the next turns smaller too.
        """
        budget = self.settings.orchestrator.history_token_budget
        turns = await self.store.messages_after(chat_id, note.up_to_message_id if note else 0)
        hidden_up_to = note.up_to_message_id if note else 0  # the turns up to this one are out of the model's view
        total = sum(t.tokens for t in turns)
        shown = budget // 2 if total > budget else total  # what the newest turns may take
        if shorter:
            shown //= 2
        if shown < total:
            keep: list[ChatMessage] = []
            used = 0
            for turn in reversed(turns):
                if keep and used + turn.tokens > shown:
                    break
                keep.append(turn)
                used += turn.tokens
            keep.reverse()
            older = turns[: len(turns) - len(keep)]
            summary = await self._summarise(chat_id, note.summary if note else None, older) if older else None
            if summary:
                note = await self.store.add_note(
                    ConversationNote(chat_id=chat_id, up_to_message_id=older[-1].id, summary=summary)
                )
            if older:  # dropped from view whether or not they were summarised (a failed summary keeps the last note)
                hidden_up_to = older[-1].id or hidden_up_to
            turns = keep
        if not hidden_up_to:
            return turns
        pinned = await self._still_relevant(chat_id, hidden_up_to)
        earlier = (
            f"[Summary of our earlier conversation]\n{note.summary}"
            if note is not None
            else "[Our earlier conversation is not shown: it could not be summarised]"
        )
        return [ChatMessage(chat_id=chat_id, role=Role.USER, content=earlier), *pinned, *turns]

    async def _history_once_stored(
        self, chat_id: int, stored: Awaitable[ChatMessage] | None, shorter: bool = False
    ) -> list[ChatMessage]:
        """The history, read once the turn's question is stored: a read of the conversation that overlapped one of
        its writes is not kept for the next turn (kept_messages.py), so it waits for the write. The latest note is
        read meanwhile, with the write (notes are written only by this chat's turns, one at a time, never by the
        question's storing): it reaches the store's thread with the question and the context's reads, one hand-over
        fewer before the model is asked."""
        if stored is None:
            return await self._history(chat_id, await self.store.latest_note(chat_id), shorter)
        note, _ = await asyncio.gather(self.store.latest_note(chat_id), stored)
        return await self._history(chat_id, note, shorter)

    async def put_behind(self, chat_id: int, asked: ChatMessage) -> bool:
        """After a turn whose request could not be made to fit even smaller: the conversation up to `asked` goes
        behind a note (summarised by the model when it can be), so the next turn starts from that note instead of
        failing the same way. Whether it was summarised."""
        note = await self.store.latest_note(chat_id)
        turns = [
            t
            for t in await self.store.messages_after(chat_id, note.up_to_message_id if note else 0)
            if t.id is not None and t.id <= (asked.id or 0)
        ]
        if not turns:
            return False
        summary = await self._summarise(chat_id, note.summary if note else None, turns)
        text = summary or (note.summary + "\n\n" + NOT_SUMMARISED if note else NOT_SUMMARISED)
        await self.store.add_note(ConversationNote(chat_id=chat_id, up_to_message_id=turns[-1].id, summary=text))
        return summary is not None

    async def _still_relevant(self, chat_id: int, up_to_id: int) -> list[ChatMessage]:
        """Proposals still pending and the newest task summaries, kept whole although older turns were summarised."""
        shown = await self.store.shown_records_up_to(chat_id, up_to_id)
        pending = {p.id for p in await self.store.pending_proposals(chat_id)}
        proposals = [m for m in shown if m.kind == PROPOSAL and m.ref_id in pending][-PINNED_PER_KIND:]
        tasks = [m for m in shown if m.kind == TASK][-PINNED_PER_KIND:]
        return sorted(proposals + tasks, key=lambda m: m.id or 0)

    async def _summarise(self, chat_id: int, previous: str | None, turns: list[ChatMessage]) -> str | None:
        later = await self.secrets.mask_soon(
            "\n\n".join(
                f"{t.role.value}: {t.content}" + "".join(f" [sent {a.name}]" for a in t.attachments) for t in turns
            )[-COMPACT_INPUT_CHARS:]
        )
        while True:
            transcript = f"(summary so far)\n{previous}\n\n(later turns)\n{later}" if previous else later
            try:
                response = await as_model(self.client).create(
                    model=self.settings.orchestrator.orchestrator_model,
                    max_tokens=1024,
                    system=prompts.COMPACTOR,
                    messages=[{"role": "user", "content": transcript}],
                )
                break
            except anthropic.APIError as err:
                # COMPACT_INPUT_CHARS is far inside the window for English, not for a script of a token a character:
                # the newer half is summarised then (down to a quarter of it)
                if is_prompt_too_long(err) and len(later) > COMPACT_INPUT_CHARS // 4:
                    later = later[len(later) // 2 :]
                    continue
                log.warning("chat %s: could not compact the history: %s", chat_id, err)  # the newest turns go on
                return None
        await self.store.record_usage(usage_record(response, "compactor", chat_id, None))
        return "".join(b.text for b in response.content if b.type == "text").strip() or None

    async def request_messages(
        self,
        chat_id: int,
        asked: ChatMessage,
        text: str,
        input_method: InputMethod,
        reply_to: ReplyTo | None,
        attachments: list[Attachment],
        owners: BlockOwners,
        user_id: int | None = None,
        owner: bool = False,
        stored: Awaitable[ChatMessage] | None = None,
        confined_to: str | None = None,
        *,
        shorter: bool = False,
        without_files: bool = False,
    ) -> list[dict[str, Any]]:
        """The turn's messages: history (with its photos and files), then the new message with its context.
        `owners` is filled with which attachment each image/document block shows (to find one the API refuses).
        `stored`: the storing of `asked` when it is still under way (its id is needed; the reads need not wait).
        `confined_to`: a request from outside the chat (models.Caller) goes without the conversation's history.
        The history's photos and files go within ATTACHMENT_REQUEST_BYTES, newest first; older ones, and all of
        them `without_files` (the API found the request too large or too long), are shown by their labels alone.
        `shorter`: the API found the request too long: the history is halved (`_history`)."""

        async def blocks_of(items: list[Attachment]) -> list[dict[str, Any]]:
            blocks: list[dict[str, Any]] = []
            for attachment in items:
                for block in await self.attachments.blocks(attachment):
                    owners[id(block)] = attachment
                    blocks.append(block)
            return blocks

        # the context's reads go to the store together with the question's write (see context_block)
        history, context = await asyncio.gather(
            self._history_once_stored(chat_id, stored, shorter),
            self.context_block(
                chat_id, input_method, text[:2000], reply_to, user_id, owner=owner, confined_to=confined_to
            ),
        )
        earlier = [t for t in history if confined_to is None and (t.id is None or t.id < (asked.id or 0))]
        room = 0 if without_files else ATTACHMENT_REQUEST_BYTES - sum(sent_bytes(a) for a in attachments)
        attached: dict[int, list[dict[str, Any]]] = {}
        for turn in reversed(earlier):  # the newest first: the conversation is most likely about them
            if not turn.attachments or turn.id is None:
                continue
            shown: list[dict[str, Any]] = []
            for attachment in turn.attachments:
                room -= sent_bytes(attachment)
                shown += await blocks_of([attachment]) if room >= 0 else label_only(attachment, LEFT_OUT)
            attached[turn.id] = shown
        messages = history_messages(earlier, attached)
        if len(messages) >= 2:  # cache breakpoint at the end of the previous turn's user message
            for m in reversed(messages):
                if m["role"] == "user":
                    _mark_cache(m)
                    break
        current = {
            "role": "user",
            "content": [
                *await blocks_of(attachments),
                {"type": "text", "text": self._fit_for_model(text), "cache_control": EPHEMERAL},
                {"type": "text", "text": context},
            ],
        }
        if messages and messages[-1]["role"] == "user":
            messages.append({"role": "assistant", "content": [{"type": "text", "text": UNANSWERED}]})
        messages.append(current)
        return messages
