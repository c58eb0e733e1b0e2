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


async def download(media: Voice | Audio | Document | PhotoSize) -> bytes:
    """The file's bytes; the last TelegramError when every try failed (a BadRequest or Forbidden at once: trying
    again would not change Telegram's answer)."""
    for attempt, delay in enumerate((*RETRY_DELAYS, None)):
        try:
            return bytes(await (await media.get_file()).download_as_bytearray())
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
