"""Sending the model's Markdown so Telegram always accepts it: HTML chunks, plain-text fallback, long answers as
documents."""

from __future__ import annotations

import logging

from telegram import Bot, InlineKeyboardButton, InlineKeyboardMarkup, InputFile, Message, ReplyParameters
from telegram.constants import ParseMode
from telegram.error import BadRequest

from agents.core.actions import Buttons
from agents.core.secrets_filter import mask
from telegram_bot.render.chunks import html_to_text, render_chunks, split_plain, summarize_for_document

log = logging.getLogger(__name__)

TELEGRAM_LIMIT = 4096
DOCUMENT_THRESHOLD = 3 * TELEGRAM_LIMIT  # longer answers go as a .md document with a short summary


def reply_parameters(reply_to: int | None) -> ReplyParameters | None:
    """Reply to a message, but still send if the user deleted it meanwhile."""
    return ReplyParameters(message_id=reply_to, allow_sending_without_reply=True) if reply_to else None


def keyboard(buttons: Buttons | None) -> InlineKeyboardMarkup | None:
    if not buttons:
        return None
    return InlineKeyboardMarkup([[InlineKeyboardButton(b.label, callback_data=b.data) for b in row] for row in buttons])


def html_to_plain(chunk: str) -> str:
    """The plain text an HTML chunk shows (the one HTML-to-text: render.html_to_text)."""
    return html_to_text(chunk)


def is_entity_error(err: BadRequest) -> bool:
    return "can't parse entities" in str(err).lower() or "can't find end" in str(err).lower()


async def send_html_or_plain(
    bot: Bot, chat_id: int, chunk: str, *, reply_to: int | None = None, markup: InlineKeyboardMarkup | None = None
) -> Message:
    """One HTML chunk; if Telegram still refuses the entities, the same text as plain text."""
    try:
        return await bot.send_message(
            chat_id,
            chunk,
            parse_mode=ParseMode.HTML,
            reply_markup=markup,
            reply_parameters=reply_parameters(reply_to),
            disable_web_page_preview=True,
        )
    except BadRequest as err:
        if not is_entity_error(err):
            raise
        log.warning("chat %s: Telegram refused HTML (%s); resending as plain text", chat_id, err)
        plain = html_to_plain(chunk)
        last = None
        for part in split_plain(plain, TELEGRAM_LIMIT):
            last = await bot.send_message(
                chat_id, part, reply_markup=markup, reply_parameters=reply_parameters(reply_to)
            )
        return last


async def send_markdown(
    bot: Bot, chat_id: int, markdown: str, *, reply_to: int | None = None, buttons: Buttons | None = None
) -> Message | None:
    """Send an answer of any length; returns the last message (the one carrying the buttons). Known secrets are
    masked (agents/core/secrets_filter.py): the chat sees no token a tool or command printed."""
    markdown = mask(markdown)
    markup = keyboard(buttons)
    if len(markdown) > DOCUMENT_THRESHOLD:
        summary = summarize_for_document(markdown)
        await bot.send_document(
            chat_id,
            InputFile(markdown.encode("utf-8"), filename="answer.md"),
            caption=f"The full answer ({len(markdown):,} characters) is in the file.",
            reply_parameters=reply_parameters(reply_to),
        )
        markdown = summary
    chunks = render_chunks(markdown.strip() or "(empty)", TELEGRAM_LIMIT)
    last = None
    for i, chunk in enumerate(chunks):
        is_last = i == len(chunks) - 1
        last = await send_html_or_plain(
            bot, chat_id, chunk, reply_to=reply_to if i == 0 else None, markup=markup if is_last else None
        )
    return last


async def edit_markdown(bot: Bot, chat_id: int, message_id: int, markdown: str, buttons: Buttons | None = None) -> None:
    """Edit a progress message in place (first chunk only); 'not modified' is not an error."""
    markdown = mask(markdown)
    chunk = render_chunks(markdown.strip() or "(empty)", TELEGRAM_LIMIT)[0]
    markup = keyboard(buttons)
    try:
        await bot.edit_message_text(
            chunk,
            chat_id=chat_id,
            message_id=message_id,
            parse_mode=ParseMode.HTML,
            reply_markup=markup,
            disable_web_page_preview=True,
        )
    except BadRequest as err:
        if "not modified" in str(err).lower():
            return
        if not is_entity_error(err):
            raise
        await bot.edit_message_text(
            html_to_plain(chunk)[:TELEGRAM_LIMIT], chat_id=chat_id, message_id=message_id, reply_markup=markup
        )


class TelegramNotifier:
    """agents.core.actions.Notifier over a PTB Bot."""

    def __init__(self, bot: Bot) -> None:
        self.bot = bot

    async def send(
        self, chat_id: int, markdown: str, *, buttons: Buttons | None = None, reply_to: int | None = None
    ) -> int | None:
        message = await send_markdown(self.bot, chat_id, markdown, reply_to=reply_to, buttons=buttons)
        return message.message_id if message else None

    async def edit(self, chat_id: int, message_id: int, markdown: str, *, buttons: Buttons | None = None) -> None:
        await edit_markdown(self.bot, chat_id, message_id, markdown, buttons)

    async def send_document(self, chat_id: int, filename: str, data: bytes, caption: str = "") -> None:
        try:  # a text document (a log, a diff, the history) is masked like every message
            data = mask(data.decode("utf-8")).encode("utf-8")
        except UnicodeDecodeError:
            pass
        await self.bot.send_document(chat_id, InputFile(data, filename=filename), caption=mask(caption)[:1000] or None)

    async def send_photo(self, chat_id: int, data: bytes, caption: str = "") -> None:
        await self.bot.send_photo(
            chat_id, InputFile(data, filename="screenshot.png"), caption=mask(caption)[:1000] or None
        )
