"""A file a user sent (a voice note, a photo, a document), downloaded from Telegram: tried again when Telegram is
unwell for a moment (a 5xx, a timeout, flood control), so one bad answer does not lose what the user sent."""

from __future__ import annotations

import asyncio
import logging

from telegram import Audio, Document, PhotoSize, Voice
from telegram.error import BadRequest, Forbidden, NetworkError, RetryAfter

log = logging.getLogger(__name__)

RETRY_DELAYS = (1.0, 3.0)  # seconds before the second and the third try
MAX_RETRY_AFTER = 30.0  # flood control asking for longer than this is not waited out


MAX_DOWNLOAD_BYTES = 20 * 1024 * 1024  # the Bot API's getFile limit (a local Bot API server serves up to 2 GB)


class TooLargeToDownload(ValueError):
    """The file is larger than the bot downloads (`size`: its size in bytes, as known)."""

    def __init__(self, size: int) -> None:
        super().__init__(f"{size} bytes")
        self.size = size


async def download(media: Voice | Audio | Document | PhotoSize, max_bytes: int = MAX_DOWNLOAD_BYTES) -> bytes:
    """The file's bytes; the last TelegramError when every try failed (a BadRequest or Forbidden at once: trying
    again would not change Telegram's answer). TooLargeToDownload past `max_bytes`: a message need not state its
    file's size, so the size getFile gives is checked before the download, and the bytes after it."""
    for attempt, delay in enumerate((*RETRY_DELAYS, None)):
        try:
            file = await media.get_file()
            if file.file_size and file.file_size > max_bytes:
                raise TooLargeToDownload(file.file_size)
            data = bytes(await file.download_as_bytearray())
            if len(data) > max_bytes:
                raise TooLargeToDownload(len(data))
            return data
        except (BadRequest, Forbidden):
            raise
        except RetryAfter as err:
            wait = err.retry_after if isinstance(err.retry_after, (int, float)) else err.retry_after.total_seconds()
            if delay is None or wait > MAX_RETRY_AFTER:
                raise
            await asyncio.sleep(wait)
        except NetworkError as err:  # a 5xx, a timeout (TimedOut is one)
            if delay is None:
                raise
            log.warning("a download from Telegram failed (try %d), trying again: %s", attempt + 1, err)
            await asyncio.sleep(delay)
    raise AssertionError("unreachable: the last try returns or raises")
