"""Voice notes and audio files: download, transcribe with the resident whisper model, echo, then route like text."""

from __future__ import annotations

import html
import logging

from telegram import Update

from agents.core.models import InputMethod
from telegram_bot.handlers import STOPPING, chat_lock, converse, message_arrived, runtime
from telegram_bot.state import Context
from telegram_bot.updates import UnexpectedUpdate, message_of

log = logging.getLogger(__name__)

MAX_DOWNLOAD_BYTES = 20 * 1024 * 1024  # the Bot API's getFile limit
ECHO_LIMIT = 3500  # a long note's echo is trimmed (Telegram's limit is 4096); the orchestrator gets it all


async def on_voice(update: Update, context: Context) -> None:
    """A voice note, audio file, or audio sent as a document."""
    message = message_of(update)
    message_arrived(update, context)
    async with chat_lock(update, context):
        if context.bot_data.stopping:
            await message.reply_text(STOPPING)
            return
        media = message.voice or message.audio or message.document
        if media is None:  # the handler's filter lets voice notes, audio and audio documents through only
            raise UnexpectedUpdate(f"update {update.update_id} carries no audio")
        if media.file_size and media.file_size > MAX_DOWNLOAD_BYTES:
            await message.reply_text(
                f"That file is {media.file_size / 1e6:.0f} MB; Telegram lets bots download at most "
                "20 MB. Send a shorter note."
            )
            return
        transcriber = runtime(context).transcriber
        if transcriber is None:
            await message.reply_text(
                "Voice notes are not available on this bot (speech model not installed); please type instead."
            )
            return
        from agents.core.protocols import ModelState
        from agents.inputs.voice import VoiceError

        if transcriber.state is ModelState.not_loaded:
            transcriber.start_loading()
        if transcriber.state is ModelState.loading:
            await message.reply_text("Loading the speech model… your note will be transcribed as soon as it's ready.")
        data = bytes(await (await media.get_file()).download_as_bytearray())
        try:
            transcript = await transcriber.transcribe(data)
        except VoiceError as err:
            await message.reply_text(err.user_message)
            return
        text = transcript.text.strip()
        if not text:
            await message.reply_text("I couldn't make out any words in that note; could you say it again or type it?")
            return
        shown = text if len(text) <= ECHO_LIMIT else text[:ECHO_LIMIT].rstrip() + "…"
        await message.reply_html(f"🎙 I heard: <i>{html.escape(shown)}</i>", do_quote=True)
        await converse(update, context, text, InputMethod.VOICE)
