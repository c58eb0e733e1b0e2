"""Photos and files sent to the bot: download (≤ 20 MB), keep them (agents/inputs/attachments.py), then route the
caption with them to the orchestrator. A file that cannot be taken gets one sentence; its caption still goes through."""

from __future__ import annotations

import asyncio
import logging

from telegram import Document, Message, PhotoSize, Update
from telegram.error import TelegramError

from agents.core.models import Attachment, InputMethod
from agents.inputs.attachments import API_IMAGE_MAX_EDGE, AttachmentRefused, Attachments, file_name
from telegram_bot.conversation import conversation_of
from telegram_bot.downloads import MAX_DOWNLOAD_BYTES, TooLargeToDownload, download
from telegram_bot.handlers import STOPPING, chat_lock, converse, message_arrived, on_record
from telegram_bot.replies import notice
from telegram_bot.state import AlbumKey, Context
from telegram_bot.updates import message_of, runtime

log = logging.getLogger(__name__)

NO_CAPTION = "(sent without a caption)"
ALBUM_WAIT = 1.0  # seconds to gather the items of an album (media group) into one turn
# what the files of one message may hold together, roughly (the model's window is 200k tokens, and the question, the
# history and the tools need room too): an album of ten text files each under its own limit would pass it
TURN_ATTACHMENT_TOKENS = 120_000


def pick_photo(sizes: tuple[PhotoSize, ...]) -> PhotoSize:
    """The largest size within the API's pixel limit and the Bot API's download limit (scaled down later if needed)."""
    fitting = [
        p for p in sizes if max(p.width, p.height) <= API_IMAGE_MAX_EDGE and (p.file_size or 0) <= MAX_DOWNLOAD_BYTES
    ]
    return max(fitting or [min(sizes, key=lambda p: p.width * p.height)], key=lambda p: p.width * p.height)


async def _keep(context: Context, message: Message, conversation: int) -> Attachment:
    """Download one photo or document and keep it; raises AttachmentRefused with one sentence."""
    if message.video is not None or message.animation is not None:
        raise AttachmentRefused("I can't watch videos: send a screenshot, or say what happens in it")
    media: PhotoSize | Document | None = pick_photo(message.photo) if message.photo else message.document
    if media is None:  # the handler's filter lets photos, documents and videos through only
        raise AttachmentRefused("that message holds no photo or file")
    name = "photo.jpg" if isinstance(media, PhotoSize) else file_name(media.file_name)  # shown in replies and logs
    if media.file_size and media.file_size > MAX_DOWNLOAD_BYTES:
        raise AttachmentRefused(
            f"{name} is {media.file_size / 1e6:.0f} MB, and Telegram lets bots download files of at most 20 MB"
        )
    try:
        data = await download(media)
    except TooLargeToDownload as err:
        raise AttachmentRefused(f"{name} is {err.size / 1e6:.0f} MB, and I download files of at most 20 MB") from None
    except TelegramError as err:
        log.warning("chat %s: could not download %s: %s", message.chat_id, name, err)
        raise AttachmentRefused(f"I couldn't download {name} from Telegram (please send it again)") from err
    keeper = Attachments.from_settings(runtime(context).settings)
    try:
        return await keeper.accept(conversation, data, name, image_only=bool(message.photo))
    except AttachmentRefused as err:
        raise AttachmentRefused(str(err).rstrip(".")) from None


async def on_attachment(update: Update, context: Context) -> None:
    """A photo, or a file sent as a document (or an album of them): shown to the orchestrator beside the caption and
    kept with the message."""
    message = message_of(update)
    album: list[Message] = [message]
    # Telegram sends an album as one message per item; the first handler takes them all. The album's id is the
    # sender's app's to choose: it is one album only with the same chat, topic and sender.
    sender = message.from_user.id if message.from_user else None
    key: AlbumKey = (message.chat.id, message.message_thread_id, sender, message.media_group_id)
    if message.media_group_id:
        albums: dict[AlbumKey, list[Message]] = context.bot_data.albums
        album = albums.setdefault(key, [])
        album.append(message)
        if len(album) > 1:
            return
    message_arrived(update, context)
    caption_said = (message.caption or "").strip()
    async with on_record(update, context, "photo or file", caption_said) as record, chat_lock(update, context):
        conversation = await conversation_of(update, context)
        if message.media_group_id:
            await asyncio.sleep(ALBUM_WAIT)
            album = context.bot_data.albums.pop(key)
        if context.bot_data.stopping:
            await notice(message, STOPPING)
            return
        caption = next((m.caption.strip() for m in album if m.caption and m.caption.strip()), "")
        attachments: list[Attachment] = []
        problems: list[str] = []
        for item in album:
            try:
                kept = await _keep(context, item, conversation)
                if sum(a.tokens for a in attachments) + kept.tokens > TURN_ATTACHMENT_TOKENS:
                    raise AttachmentRefused(
                        f"{kept.name} would take the files of this message past about {TURN_ATTACHMENT_TOKENS:,} "
                        "tokens together, more than I can read at once: send it in a message of its own"
                    )
                attachments.append(kept)
            except AttachmentRefused as err:
                problems.append(str(err))
                going_on = caption or len(problems) < len(album)
                await notice(item, str(err) + (" — I'm answering your message without it." if going_on else "."))
        if not attachments and not caption:
            return
        text = caption or NO_CAPTION
        if problems:
            text += "\n\n" + "\n".join(f"[The user also sent a file that could not be read: {p}]" for p in problems)
        await converse(update, context, text, InputMethod.TEXT, attachments, record=record)
