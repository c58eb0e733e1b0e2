"""Photos and files sent to the bot: download (≤ 20 MB), keep them (agents/attachments), then route the caption
with them to the orchestrator. A file that cannot be taken gets one sentence; its caption still goes through."""

from __future__ import annotations

import logging

from telegram import PhotoSize, Update
from telegram.error import TelegramError
from telegram.ext import ContextTypes

from agents.attachments import API_IMAGE_MAX_EDGE, AttachmentRefused, Attachments
from agents.models import Attachment, InputMethod
from telegram_bot.handlers import STOPPING, chat_lock, converse, runtime

log = logging.getLogger(__name__)

MAX_DOWNLOAD_BYTES = 20 * 1024 * 1024  # the Bot API's getFile limit
NO_CAPTION = "(sent without a caption)"


def pick_photo(sizes: tuple[PhotoSize, ...]) -> PhotoSize:
    """The largest size within the API's pixel limit and the Bot API's download limit (scaled down later if needed)."""
    fitting = [p for p in sizes
               if max(p.width, p.height) <= API_IMAGE_MAX_EDGE and (p.file_size or 0) <= MAX_DOWNLOAD_BYTES]
    return max(fitting or [min(sizes, key=lambda p: p.width * p.height)], key=lambda p: p.width * p.height)


async def on_attachment(update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
    """A photo, or a file sent as a document: shown to the orchestrator beside its caption and kept with the message."""
    message = update.effective_message
    chat_id = update.effective_chat.id
    caption = (message.caption or "").strip()
    async with chat_lock(context, chat_id):
        if context.application.bot_data.get("stopping"):
            await message.reply_text(STOPPING)
            return
        media = pick_photo(message.photo) if message.photo else message.document
        name = (getattr(media, "file_name", None) or ("photo.jpg" if message.photo else "file"))[:120]
        attachments: list[Attachment] = []
        problem = ""
        try:
            if media.file_size and media.file_size > MAX_DOWNLOAD_BYTES:
                raise AttachmentRefused(f"{name} is {media.file_size / 1e6:.0f} MB, and Telegram lets bots download "
                                        "files of at most 20 MB")
            data = bytes(await (await media.get_file()).download_as_bytearray())
            keeper = Attachments.from_settings(runtime(context).settings)
            attachments.append(await keeper.accept(chat_id, data, name, image_only=bool(message.photo)))
        except AttachmentRefused as err:
            problem = str(err).rstrip(".")
        except TelegramError as err:
            log.warning("chat %s: could not download %s: %s", chat_id, name, err)
            problem = f"I couldn't download {name} from Telegram (please send it again)"
        if problem:  # one sentence
            await message.reply_text(problem + (" — I'm answering your message without it." if caption else "."),
                                     do_quote=True)
            if not caption:
                return
            text = f"{caption}\n\n[The user also sent {name}, which could not be read: {problem}]"
        else:
            text = caption or NO_CAPTION
        await converse(update, context, text, InputMethod.TEXT, attachments)
