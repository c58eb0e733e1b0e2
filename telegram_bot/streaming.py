"""A streamed answer in the chat: a growing `sendMessageDraft` preview (private chats) or a preview message
edited in place (groups, or where drafts are refused), throttled; the finished answer is then sent as a
normal message by `replies.send_markdown`.

No frame before `first_frame_after` seconds from the turn's start: an answer that arrives whole within it goes out as
the final message alone (a draft right before it would only cost a Bot API call). A real model's first token comes
later than that, so a streamed answer's first words still show as soon as they exist.

`ChatDraft` is the Telegram side of `agents.llm.tool_loop.AnswerStream`. Every frame is rendered from the whole
Markdown written so far by the same renderer as the final answer, so a half-written code fence, link or
`<`/`&` still makes valid HTML; a frame longer than a message shows the part being written.

What a frame shows is masked before it is rendered, and the word still being written (the text after the last blank)
waits until the next one begins: a token or a secret value arrives over several deltas, and a frame drawn in between
would show its first characters before the filter can see it whole. So a word shows one token after it was written.
"""

from __future__ import annotations

import asyncio
import contextlib
import html
import logging

from telegram import Bot
from telegram.constants import ParseMode
from telegram.error import BadRequest, NetworkError, RetryAfter, TelegramError, TimedOut

from agents.core.secrets_filter import SecretsFilter
from telegram_bot.render.chunks import render_chunks
from telegram_bot.replies import (
    TELEGRAM_LIMIT,
    html_to_plain,
    is_entity_error,
    rendering_may_join,
    reply_parameters,
    shown_masked,
)
from telegram_bot.strangers import floods_raised

log = logging.getLogger(__name__)

STATUS_ROOM = 120  # characters kept free for the "reading calc.py…" line


def draft_html(markdown: str, status: str = "", limit: int = TELEGRAM_LIMIT) -> str:
    """One frame: the answer so far as Telegram HTML (its newest part if it is long), then what is being done."""
    status = " ".join(status.split())[: STATUS_ROOM - 10]
    parts = []
    if markdown.strip():
        chunks = render_chunks(markdown, limit - STATUS_ROOM)  # none for a lone opening fence
        if chunks:
            parts.append(("…\n" if len(chunks) > 1 else "") + chunks[-1])
    if status:
        parts.append(f"<i>{html.escape(status)}…</i>")
    return "\n\n".join(parts)


def settled(markdown: str) -> str:
    """The text up to its last blank (a space, a line break): the word after it may still be arriving."""
    end = max(markdown.rfind(blank) for blank in (" ", "\n", "\t"))
    return markdown[: end + 1] if end >= 0 else ""


class ChatDraft:
    """Shows an answer while it is written; `stop` before sending the final message, `discard` after it."""

    def __init__(
        self,
        bot: Bot,
        secrets: SecretsFilter,
        chat_id: int,
        *,
        private: bool,
        draft_id: int,
        reply_to: int | None = None,
        thread_id: int | None = None,
        draft_interval: float = 0.4,
        edit_interval: float = 1.5,
        first_frame_after: float = 0.3,
    ) -> None:
        self.bot, self.chat_id, self.reply_to = bot, chat_id, reply_to
        self.thread_id = (
            thread_id  # a forum topic: the preview goes there even when the reply cannot (its message gone)
        )
        self.secrets = secrets  # every frame shown passes the bot's output filter
        self.use_drafts = private  # Telegram shows drafts in private chats only
        self.draft_id = draft_id or 1
        self.draft_interval, self.edit_interval = draft_interval, edit_interval
        self._first_frame_at = asyncio.get_running_loop().time() + first_frame_after
        self.markdown = ""
        self.status = ""
        self.preview_id: int | None = None  # the edited preview message (edit mode)
        self.frames = 0
        self._new_paragraph = False
        self._status_shown = False
        self._shown = ""
        self._dirty = asyncio.Event()
        self._closing = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    # ---- agents.llm.tool_loop.AnswerStream ----------------------------------------------------
    async def text(self, delta: str) -> None:
        if self._new_paragraph and self.markdown.strip():
            self.markdown = self.markdown.rstrip() + "\n\n"
        self._new_paragraph = False
        if self._status_shown:  # a tool's line stays until one frame has shown it
            self.status = ""
        self.markdown += delta
        self._changed()

    async def activity(self, description: str) -> None:
        self.status, self._new_paragraph, self._status_shown = description, True, False
        self._changed()

    # ---- lifecycle --------------------------------------------------------------------------
    def _changed(self) -> None:
        if self._closing.is_set():
            return
        if self._task is None:
            self._task = asyncio.create_task(self._run())
        self._dirty.set()

    async def stop(self) -> None:
        """No frame after this returns (the final message must come last)."""
        self._closing.set()
        self._dirty.set()
        if self._task is not None:
            with contextlib.suppress(Exception, asyncio.CancelledError):
                async with asyncio.timeout(5):
                    await self._task

    async def discard(self) -> None:
        """Delete the preview message once the final answer is in the chat (drafts vanish by themselves)."""
        if self.preview_id is not None:
            with contextlib.suppress(TelegramError):
                await self.bot.delete_message(self.chat_id, self.preview_id)
            self.preview_id = None

    async def _run(self) -> None:
        wait = self._first_frame_at - asyncio.get_running_loop().time()
        if wait > 0:  # an answer finished by then is sent whole, with no frame before it
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(wait):
                    await self._closing.wait()
        while not self._closing.is_set():
            await self._dirty.wait()
            if self._closing.is_set():
                return
            self._dirty.clear()
            status = self.status
            frame = self.frame_for(status)
            if not frame or frame == self._shown:
                continue  # nothing new to show (the first word is still being written): no interval to wait out
            await self._show(frame)
            if status and status == self.status:
                self._status_shown = True
            interval = self.draft_interval if self.use_drafts else self.edit_interval
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(interval):
                    await self._closing.wait()

    # ---- frames -----------------------------------------------------------------------------
    def frame_for(self, status: str) -> str:
        """The frame for the answer so far, drawn from masked text (the one output filter,
        agents/core/secrets_filter.py): masked before it becomes HTML, whose escaping turns a value's `&` or `<` into
        entities the filter would not find; and without the word still being written, so that a token or a value
        that is still arriving is never shown in part (its first characters before the filter can see all of it);
        the whole text once a tool call ended it."""
        # once a tool's line is up, the text before it has ended: its last word is whole, and shown
        shown = self.secrets.mask(self.markdown if self._new_paragraph else settled(self.markdown))
        frame = draft_html(shown, self.secrets.mask(status))
        return shown_masked(frame, self.secrets) if rendering_may_join(shown, self.secrets) else frame

    async def _show(self, frame: str) -> None:
        """Send a new frame (`_run` leaves out an empty or unchanged one)."""
        try:
            with floods_raised():  # in the chat's flood wait a frame is skipped, never waited for
                if self.use_drafts:
                    await self._send_draft(frame)
                else:
                    await self._edit_preview(frame)
            self._shown = frame
            self.frames += 1
        except TelegramError as err:
            if isinstance(err, (RetryAfter, TimedOut)) or (
                isinstance(err, NetworkError) and not isinstance(err, BadRequest)
            ):
                log.debug("chat %s: preview frame skipped: %s", self.chat_id, err)  # the next frame has every word
                return
            if self.use_drafts:  # an older server, or a chat without drafts: edits show the same words
                log.info("chat %s: drafts refused (%s); previewing by edits", self.chat_id, err)
                self.use_drafts = False
                await self._show(frame)
            else:
                log.warning("chat %s: preview stopped: %s", self.chat_id, err)
                self._closing.set()

    async def _send_draft(self, frame: str) -> None:
        try:
            await self.bot.send_message_draft(self.chat_id, self.draft_id, frame, parse_mode=ParseMode.HTML)
        except BadRequest as err:
            if not is_entity_error(err):
                raise
            await self.bot.send_message_draft(self.chat_id, self.draft_id, html_to_plain(frame)[-TELEGRAM_LIMIT:])

    async def _edit_preview(self, frame: str) -> None:
        try:
            if self.preview_id is None:
                message = await self.bot.send_message(
                    self.chat_id,
                    frame,
                    parse_mode=ParseMode.HTML,
                    disable_web_page_preview=True,
                    disable_notification=True,
                    reply_parameters=reply_parameters(self.reply_to),
                    message_thread_id=self.thread_id,
                )
                self.preview_id = message.message_id
            else:
                await self.bot.edit_message_text(
                    frame,
                    chat_id=self.chat_id,
                    message_id=self.preview_id,
                    parse_mode=ParseMode.HTML,
                    disable_web_page_preview=True,
                )
        except BadRequest as err:
            if "not modified" in str(err).lower():
                return
            if not is_entity_error(err):
                raise
            plain = html_to_plain(frame)[-TELEGRAM_LIMIT:]
            if self.preview_id is None:
                sent = await self.bot.send_message(
                    self.chat_id,
                    plain,
                    reply_parameters=reply_parameters(self.reply_to),
                    message_thread_id=self.thread_id,
                )
                self.preview_id = sent.message_id
            else:
                await self.bot.edit_message_text(plain, chat_id=self.chat_id, message_id=self.preview_id)
