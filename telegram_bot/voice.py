"""Voice notes and audio files: download, transcribe with the resident whisper model, echo, then route like text."""

from __future__ import annotations

import asyncio
import datetime
import html
import logging
import warnings

from telegram import Audio, Document, Update, Voice
from telegram.constants import ParseMode
from telegram.error import TelegramError
from telegram.warnings import PTBDeprecationWarning

from agents.core.models import InputMethod
from agents.inputs.audio import DURATION_GRACE_SECONDS, TOO_LONG_MESSAGE, format_duration
from telegram_bot.downloads import MAX_DOWNLOAD_BYTES, TooLargeToDownload, download
from telegram_bot.handlers import STOPPING, chat_lock, converse, message_arrived, on_record
from telegram_bot.replies import notice
from telegram_bot.state import Context
from telegram_bot.updates import UnexpectedUpdate, message_of, runtime

log = logging.getLogger(__name__)

ECHO_LIMIT = 3500  # a long note's echo is trimmed (Telegram's limit is 4096); the orchestrator gets it all


async def on_voice(update: Update, context: Context) -> None:
    """A voice note, audio file, or audio sent as a document: transcribed at once, beside the turn the chat may
    have in flight (never behind it), then routed in its place in the chat's order."""
    message = message_of(update)
    message_arrived(update, context)
    media = message.voice or message.audio or message.document
    if media is None:  # the handler's filter lets voice notes, audio and audio documents through only
        raise UnexpectedUpdate(f"update {update.update_id} carries no audio")
    heard = asyncio.ensure_future(_transcribe(update, context, media))
    turn = asyncio.current_task()
    if turn is not None:  # a stop cancels it, transcription and all (the note stays on record: told at the next start)
        context.bot_data.turns.add(turn)
    caption = (message.caption or "").strip()  # an audio file's caption: what to do with the recording
    try:
        # the lock is taken before the first await: the note keeps its place in order
        async with on_record(update, context, "voice note", caption) as record, chat_lock(update, context):
            text = await heard
            if text is None:  # the user has been told why; their typed words still go through
                if caption and not context.bot_data.stopping:
                    note = "[The recording sent with it could not be transcribed; the user was told why.]"
                    await converse(update, context, f"{caption}\n\n{note}", InputMethod.TEXT, record=record)
                return
            shown = text if len(text) <= ECHO_LIMIT else text[:ECHO_LIMIT].rstrip() + "…"
            await notice(message, f"🎙 I heard: <i>{html.escape(shown)}</i>", parse_mode=ParseMode.HTML)
            if caption:
                text = f"{caption}\n\n[The recording sent with it says:]\n{text}"
            await converse(update, context, text, InputMethod.VOICE, record=record)
    finally:
        heard.cancel()  # done by now, unless this turn was cancelled (a shutdown)
        context.bot_data.turns.discard(turn)


async def _transcribe(update: Update, context: Context, media: Voice | Audio | Document) -> str | None:
    """The note's text; None when it has none (the user has been told why)."""
    message = message_of(update)
    if context.bot_data.stopping:
        await notice(message, STOPPING)
        return None
    if media.file_size and media.file_size > MAX_DOWNLOAD_BYTES:
        await notice(
            message,
            f"That file is {media.file_size / 1e6:.0f} MB; Telegram lets bots download at most "
            "20 MB. Send a shorter note.",
        )
        return None
    most = runtime(context).settings.voice.voice_max_seconds
    stated = _stated_seconds(media)
    if stated and stated > most + DURATION_GRACE_SECONDS:  # refused before it is downloaded and decoded
        await notice(message, TOO_LONG_MESSAGE.format(length=format_duration(stated), limit=format_duration(most)))
        return None
    transcriber = runtime(context).transcriber
    if transcriber is None:
        await notice(
            message, "Voice notes are not available on this bot (speech model not installed); please type instead."
        )
        return None
    from agents.core.protocols import ModelState
    from agents.inputs.voice import VoiceError

    if transcriber.state is ModelState.not_loaded:
        transcriber.start_loading()
    if transcriber.state is ModelState.loading:
        await notice(message, "Loading the speech model… your note will be transcribed as soon as it's ready.")
    try:
        data = await download(media)
    except TooLargeToDownload as err:
        await notice(
            message,
            f"That file is {err.size / 1e6:.0f} MB; I download at most {MAX_DOWNLOAD_BYTES / 1e6:.0f} MB. Send a "
            "shorter note.",
        )
        return None
    except TelegramError as err:
        log.warning("chat %s: could not download a voice note: %s", message.chat_id, err)
        await notice(message, "I couldn't download that note from Telegram; please send it again.")
        return None
    try:
        transcript = await transcriber.transcribe(data)
    except VoiceError as err:
        await notice(message, err.user_message)
        return None
    text = transcript.text.strip()
    if not text:
        await notice(message, "I couldn't make out any words in that note; could you say it again or type it?")
        return None
    return text


def _stated_seconds(media: Voice | Audio | Document) -> float | None:
    """Telegram's own figure for a voice note's or an audio file's length (a document states none)."""
    with warnings.catch_warnings():  # python-telegram-bot's notice that it will become a timedelta
        warnings.simplefilter("ignore", PTBDeprecationWarning)
        stated = getattr(media, "duration", None)
    if isinstance(stated, datetime.timedelta):
        return stated.total_seconds()
    return float(stated) if isinstance(stated, (int, float)) else None
