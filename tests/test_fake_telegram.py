"""The fake Telegram Bot API server, driven by the real python-telegram-bot client."""

from __future__ import annotations

import asyncio
import datetime as dtm
import io
import json
import struct
import threading
import urllib.error
import urllib.request
from collections.abc import AsyncIterator
from typing import Any

import pytest
from telegram import Bot, InlineKeyboardButton, InlineKeyboardMarkup, Update
from telegram.error import BadRequest, ChatMigrated, Conflict, EndPointNotFound, InvalidToken, RetryAfter
from telegram.ext import (
    ApplicationBuilder,
    CallbackQueryHandler,
    CommandHandler,
    ContextTypes,
    MessageHandler,
    filters,
)
from telegram.request import HTTPXRequest

from agents.core.tls import client_tls
from tests.fakes.telegram_server import FakeTelegram, fake_telegram  # noqa: F401 - fixture

USER = 4242
# Enough of a PNG for the fake's dimension sniffing: signature + IHDR (2x3).
PNG_2X3 = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + struct.pack(">II", 2, 3) + b"\x08\x02\x00\x00\x00"


def _keyboard(*callback_data: str) -> InlineKeyboardMarkup:
    return InlineKeyboardMarkup([[InlineKeyboardButton(d.title(), callback_data=d) for d in callback_data]])


def _make_bot(fake: FakeTelegram, token: str | None = None) -> Bot:
    tls = {"verify": client_tls()}  # one CA bundle load per process, not two per bot
    return Bot(
        token or fake.token,
        base_url=fake.base_url,
        base_file_url=fake.base_file_url,
        request=HTTPXRequest(httpx_kwargs=tls),
        get_updates_request=HTTPXRequest(httpx_kwargs=tls),
    )


@pytest.fixture
async def bot(fake_telegram: FakeTelegram) -> AsyncIterator[Bot]:  # noqa: F811
    async with _make_bot(fake_telegram) as client:
        yield client


async def test_get_me_matches_bot_user(fake_telegram: FakeTelegram, bot: Bot) -> None:  # noqa: F811
    me = await bot.get_me()
    assert me.id == fake_telegram.bot_user.id == 123456
    assert me.username == fake_telegram.bot_user.username
    assert me.is_bot


async def test_wrong_token_is_rejected(fake_telegram: FakeTelegram) -> None:  # noqa: F811
    with pytest.raises(InvalidToken):
        async with _make_bot(fake_telegram, token="999:WRONG"):
            pass


async def test_send_message_html_is_parsed_and_recorded(fake_telegram: FakeTelegram, bot: Bot) -> None:  # noqa: F811
    markup = _keyboard("yes", "no")
    sent = await bot.send_message(chat_id=USER, text="<b>Build</b> &amp; test", parse_mode="HTML", reply_markup=markup)
    assert sent.text == "Build & test"
    assert sent.reply_markup == markup
    [record] = fake_telegram.messages(USER)
    assert record.message_id == sent.message_id
    assert (record.kind, record.text, record.source, record.html) == (
        "text",
        "Build & test",
        "<b>Build</b> &amp; test",
        "<b>Build</b> &amp; test",
    )
    assert record.parse_mode == "HTML"
    assert record.reply_markup == markup.to_dict()
    assert record.callback_data == ["yes", "no"]
    call = fake_telegram.calls("sendMessage")[0]
    assert call.params["chat_id"] == USER  # form value "4242" decoded to an int

    second = await bot.send_message(chat_id=USER, text="plain", reply_to_message_id=sent.message_id)
    assert second.message_id == sent.message_id + 1
    assert second.reply_to_message.message_id == sent.message_id
    assert fake_telegram.messages(USER)[1].reply_to_message_id == sent.message_id


async def test_invalid_html_is_a_bad_request(fake_telegram: FakeTelegram, bot: Bot) -> None:  # noqa: F811
    with pytest.raises(BadRequest, match="(?i)can't parse entities"):
        await bot.send_message(chat_id=USER, text="<b>unclosed", parse_mode="HTML")
    # Without parse_mode the same text is just text.
    sent = await bot.send_message(chat_id=USER, text="<b>unclosed")
    assert sent.text == "<b>unclosed"
    assert [m.text for m in fake_telegram.messages(USER)] == ["<b>unclosed"]


async def test_text_limits(fake_telegram: FakeTelegram, bot: Bot) -> None:  # noqa: F811
    await bot.send_message(chat_id=USER, text="a" * 4096)
    # Tags do not count: only the parsed text is measured.
    await bot.send_message(chat_id=USER, text="<b>" + "a" * 4096 + "</b>", parse_mode="HTML")
    with pytest.raises(BadRequest, match="(?i)message is too long"):
        await bot.send_message(chat_id=USER, text="a" * 4097)
    # Length is counted in UTF-16 code units: 2049 emoji are 4098 units.
    with pytest.raises(BadRequest, match="(?i)message is too long"):
        await bot.send_message(chat_id=USER, text="\N{GRINNING FACE}" * 2049)
    with pytest.raises(BadRequest, match="(?i)message text is empty"):
        await bot.send_message(chat_id=USER, text="")
    with pytest.raises(BadRequest, match="(?i)message text is empty"):
        await bot.send_message(chat_id=USER, text="<b></b>", parse_mode="HTML")
    with pytest.raises(BadRequest, match="(?i)BUTTON_DATA_INVALID"):
        await bot.send_message(chat_id=USER, text="x", reply_markup=_keyboard("d" * 65))
    assert len(fake_telegram.messages(USER)) == 2


async def test_edit_message_text(fake_telegram: FakeTelegram, bot: Bot) -> None:  # noqa: F811
    sent = await bot.send_message(chat_id=USER, text="working", reply_markup=_keyboard("stop"))
    with pytest.raises(BadRequest, match="(?i)message is not modified"):
        await bot.edit_message_text(
            chat_id=USER, message_id=sent.message_id, text="working", reply_markup=_keyboard("stop")
        )
    edited = await bot.edit_message_text(
        chat_id=USER, message_id=sent.message_id, text="<i>done</i>", parse_mode="HTML"
    )
    assert edited.text == "done"
    assert edited.edit_date is not None
    [record] = fake_telegram.messages(USER)
    assert (record.text, record.source, record.reply_markup) == ("done", "<i>done</i>", None)
    assert [v.text for v in record.history] == ["working", "done"]
    assert record.edits[0].source == "<i>done</i>"
    assert record.history[0].reply_markup == _keyboard("stop").to_dict()

    await bot.edit_message_reply_markup(chat_id=USER, message_id=sent.message_id, reply_markup=_keyboard("again"))
    assert record.callback_data == ["again"]
    with pytest.raises(BadRequest, match="(?i)message to edit not found"):
        await bot.edit_message_text(chat_id=USER, message_id=999, text="nope")

    assert await bot.delete_message(chat_id=USER, message_id=sent.message_id)
    assert record.deleted
    with pytest.raises(BadRequest, match="(?i)message to edit not found"):
        await bot.edit_message_text(chat_id=USER, message_id=sent.message_id, text="gone")
    with pytest.raises(BadRequest, match="(?i)message to delete not found"):
        await bot.delete_message(chat_id=USER, message_id=sent.message_id)


async def test_send_document_upload_and_download(fake_telegram: FakeTelegram, bot: Bot) -> None:  # noqa: F811
    payload = b"line one\r\n\r\n--not-a-boundary\x00\xff binary tail"
    sent = await bot.send_document(
        chat_id=USER, document=payload, filename="report.txt", caption="<i>report</i>", parse_mode="HTML"
    )
    assert sent.document.file_name == "report.txt"
    assert sent.document.file_size == len(payload)
    assert sent.caption == "report"
    [record] = fake_telegram.messages(USER)
    assert (record.kind, record.data, record.filename, record.text) == ("document", payload, "report.txt", "report")
    upload = fake_telegram.calls("sendDocument")[0].params["document"]
    assert upload.data == payload and upload.filename == "report.txt"

    downloaded = await (await bot.get_file(sent.document.file_id)).download_as_bytearray()
    assert bytes(downloaded) == payload

    with pytest.raises(BadRequest, match="(?i)message caption is too long"):
        await bot.send_document(chat_id=USER, document=b"x", filename="x.txt", caption="c" * 1025)
    with pytest.raises(BadRequest, match="(?i)IMAGE_PROCESS_FAILED"):
        await bot.send_photo(chat_id=USER, photo=b"not an image")
    photo = await bot.send_photo(chat_id=USER, photo=PNG_2X3, caption="chart")
    assert (photo.photo[0].width, photo.photo[0].height, photo.caption) == (2, 3, "chart")
    assert [(m.kind, m.data) for m in fake_telegram.messages(USER)] == [("document", payload), ("photo", PNG_2X3)]


async def test_injected_voice_is_downloadable(fake_telegram: FakeTelegram, bot: Bot) -> None:  # noqa: F811
    audio = b"OggS\x00\x02" + bytes(range(256)) * 4
    injected = fake_telegram.send_voice(USER, audio, duration=3)
    assert injected["message"]["voice"]["duration"] == 3
    voice = Update.de_json(injected, bot).message.voice
    assert (voice.mime_type, voice.file_size) == ("audio/ogg", len(audio))
    tg_file = await bot.get_file(voice.file_id)
    assert tg_file.file_size == len(audio)
    assert tg_file.file_path.startswith(fake_telegram.base_file_url)
    assert tg_file.file_path.endswith(".oga") and "/voice/file_" in tg_file.file_path
    buffer = io.BytesIO()
    await tg_file.download_to_memory(buffer)
    assert buffer.getvalue() == audio
    with pytest.raises(BadRequest, match="(?i)invalid file_id"):
        await bot.get_file("no-such-file")


async def test_every_injected_kind_arrives_through_get_updates(fake_telegram: FakeTelegram, bot: Bot) -> None:  # noqa: F811
    group = -1001234
    fake_telegram.send_text(USER, "in a group", chat_id=group, username="alice")
    fake_telegram.send_audio(USER, b"ID3 audio", duration=4, filename="song.mp3", title="Song")
    fake_telegram.send_document(USER, b"%PDF-1.4", "spec.pdf", "application/pdf", caption="see")
    fake_telegram.send_photo(USER, PNG_2X3, width=2, height=3)
    fake_telegram.send_sticker(USER)
    fake_telegram.send_location(USER, 52.52, 13.405)
    updates = await bot.get_updates(timeout=0)
    assert len(updates) == 6
    text, audio, document, photo, sticker, location = (u.message for u in updates)
    assert (text.chat.type, text.chat.id, text.from_user.username) == ("supergroup", group, "alice")
    assert (audio.audio.file_name, audio.audio.title) == ("song.mp3", "Song")
    assert (document.document.mime_type, document.caption) == ("application/pdf", "see")
    assert (photo.photo[-1].width, photo.photo[-1].height) == (2, 3)
    assert sticker.sticker.emoji and sticker.sticker.type == "regular"
    assert (location.location.latitude, location.location.longitude) == (52.52, 13.405)
    # Private-chat messages share one message_id counter per chat.
    assert [m.message_id for m in (audio, document, photo, sticker, location)] == [1, 2, 3, 4, 5]
    pdf = await (await bot.get_file(document.document.file_id)).download_as_bytearray()
    assert bytes(pdf) == b"%PDF-1.4"


@pytest.mark.filterwarnings("ignore::telegram.warnings.PTBDeprecationWarning")
async def test_flood_control_raises_retry_after(fake_telegram: FakeTelegram, bot: Bot) -> None:  # noqa: F811
    fake_telegram.fail_next("sendMessage", error_code=429, retry_after=3)
    with pytest.raises(RetryAfter) as caught:
        await bot.send_message(chat_id=USER, text="hi")
    retry_after = caught.value.retry_after
    seconds = retry_after.total_seconds() if isinstance(retry_after, dtm.timedelta) else retry_after
    assert seconds == 3
    assert fake_telegram.messages(USER) == []
    await bot.send_message(chat_id=USER, text="hi")  # the fault was used up
    assert [m.text for m in fake_telegram.messages(USER)] == ["hi"]
    assert len(fake_telegram.calls("sendMessage")) == 2

    fake_telegram.fail_next("sendChatAction", error_code=403, times=2)
    for _ in range(2):
        with pytest.raises(Exception, match="Forbidden"):
            await bot.send_chat_action(chat_id=USER, action="typing")
    assert await bot.send_chat_action(chat_id=USER, action="typing")
    assert fake_telegram.chat_actions == [(USER, "typing")]


async def test_a_group_upgraded_to_a_supergroup_refuses_its_old_id(fake_telegram: FakeTelegram, bot: Bot) -> None:  # noqa: F811
    group, supergroup = -4242, -1004242
    fake_telegram.send_text(USER, "in the group", chat_id=group)
    sent = await bot.send_message(chat_id=group, text="hello group")
    fake_telegram.migrate_group(group, supergroup, USER, forum=True)
    updates = await bot.get_updates(timeout=0)
    notices = [u.message for u in updates[1:]]
    assert [(m.chat.id, m.migrate_to_chat_id, m.migrate_from_chat_id) for m in notices] == [
        (group, supergroup, None),
        (supergroup, None, group),
    ]
    assert notices[1].chat.type == "supergroup" and notices[1].chat.is_forum
    for call in (
        bot.send_message(chat_id=group, text="too late"),
        bot.edit_message_text("edited", chat_id=group, message_id=sent.message_id),
        bot.send_chat_action(chat_id=group, action="typing"),
    ):
        with pytest.raises(ChatMigrated) as caught:
            await call
        assert caught.value.new_chat_id == supergroup
    assert [m.text for m in fake_telegram.messages(group)] == ["hello group"]
    assert (await bot.send_message(chat_id=supergroup, text="hello supergroup")).chat.id == supergroup
    with pytest.raises(ValueError, match="upgraded"):
        fake_telegram.send_text(USER, "nobody writes in the old group", chat_id=group)
    quiet, later = -4343, -1004343  # the bot was down: no notice reaches it, a test may deliver them later
    fake_telegram.migrate_group(quiet, later, USER, announce=False)
    assert await bot.get_updates(offset=updates[-1].update_id + 1, timeout=0) == ()


async def test_unknown_method_is_not_found(bot: Bot) -> None:
    with pytest.raises(EndPointNotFound):
        await bot.do_api_request("sendTeleportation", api_kwargs={"chat_id": USER})


async def test_get_updates_long_polls_and_confirms(fake_telegram: FakeTelegram, bot: Bot) -> None:  # noqa: F811
    assert await bot.get_updates(timeout=dtm.timedelta(seconds=0.2)) == ()
    timer = threading.Timer(0.2, fake_telegram.send_text, args=(USER, "late"))
    timer.start()
    loop = asyncio.get_running_loop()
    started = loop.time()
    updates = await bot.get_updates(timeout=5)
    assert loop.time() - started < 3
    assert [u.message.text for u in updates] == ["late"]
    # Not confirmed yet: delivered again, then confirmed by offset.
    again = await bot.get_updates(timeout=0)
    assert [u.update_id for u in again] == [updates[0].update_id]
    assert await bot.get_updates(offset=updates[0].update_id + 1, timeout=0) == ()
    assert fake_telegram.pending_updates == []


async def test_concurrent_get_updates_conflict(fake_telegram: FakeTelegram) -> None:  # noqa: F811
    async with _make_bot(fake_telegram) as first, _make_bot(fake_telegram) as second:
        held = asyncio.create_task(first.get_updates(timeout=5))
        await fake_telegram.wait_for_request("getUpdates")
        await second.get_updates(timeout=0)
        with pytest.raises(Conflict, match="terminated by other getUpdates request"):
            await asyncio.wait_for(held, 3)


def test_raw_json_and_form_bodies(fake_telegram: FakeTelegram) -> None:  # noqa: F811
    def post(method: str, body: bytes, content_type: str) -> tuple[int, dict[str, Any]]:
        request = urllib.request.Request(
            f"{fake_telegram.base_url}{fake_telegram.token}/{method}",
            data=body,
            headers={"Content-Type": content_type},
        )
        try:
            with urllib.request.urlopen(request, timeout=5) as response:
                return response.status, json.loads(response.read())
        except urllib.error.HTTPError as error:
            return error.code, json.loads(error.read())

    status, reply = post("sendMessage", json.dumps({"chat_id": 7, "text": "123"}).encode(), "application/json")
    assert status == 200 and reply["result"]["text"] == "123" and reply["result"]["chat"]["id"] == 7
    status, reply = post("SENDMESSAGE", b"chat_id=7&text=%22quoted%22", "application/x-www-form-urlencoded")
    assert status == 200 and reply["result"]["text"] == '"quoted"'  # method names are case-insensitive
    assert [m.message_id for m in fake_telegram.messages(7)] == [1, 2]
    status, reply = post("fooBar", b"{}", "application/json")
    assert (status, reply) == (404, {"ok": False, "error_code": 404, "description": "Not Found: method not found"})
    fake_telegram.fail_next("sendMessage", retry_after=5)
    status, reply = post("sendMessage", b"chat_id=7&text=x", "application/x-www-form-urlencoded")
    assert status == 429
    assert reply == {
        "ok": False,
        "error_code": 429,
        "description": "Too Many Requests: retry after 5",
        "parameters": {"retry_after": 5},
    }
    assert fake_telegram.wait_for(lambda: len(fake_telegram.messages(7)) == 2, timeout=1)


async def test_application_polls_echoes_and_handles_buttons(fake_telegram: FakeTelegram) -> None:  # noqa: F811
    async def echo(update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
        await update.message.reply_text(
            f"echo: {update.message.text}", do_quote=True, reply_markup=_keyboard("again", "stop")
        )

    async def show_help(update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
        await update.message.reply_text(f"help for {context.args}")

    async def on_button(update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
        query = update.callback_query
        await query.answer(f"got {query.data}")
        await query.edit_message_text(f"pressed <b>{query.data}</b>", parse_mode="HTML")

    app = (
        ApplicationBuilder()
        .token(fake_telegram.token)
        .base_url(fake_telegram.base_url)
        .base_file_url(fake_telegram.base_file_url)
        .build()
    )
    app.add_handler(CommandHandler("help", show_help))
    app.add_handler(MessageHandler(filters.TEXT & ~filters.COMMAND, echo))
    app.add_handler(CallbackQueryHandler(on_button))
    async with app:
        await app.start()
        await app.updater.start_polling(poll_interval=0, timeout=1)
        try:
            incoming = fake_telegram.send_text(USER, "hello")
            [reply] = await fake_telegram.wait_for_message(USER, count=1, timeout=5)
            assert reply.text == "echo: hello"
            assert reply.reply_to_message_id == incoming["message"]["message_id"]
            assert reply.message_id == incoming["message"]["message_id"] + 1

            fake_telegram.press_button(USER, reply.message_id, "stop")
            answer = await fake_telegram.wait_for_request("answerCallbackQuery", timeout=5)
            assert answer.params["text"] == "got stop"
            await fake_telegram.await_for(lambda: reply.edits, timeout=5)
            assert (reply.text, reply.html, reply.reply_markup) == ("pressed stop", "pressed <b>stop</b>", None)
            with pytest.raises(ValueError, match="no button"):
                fake_telegram.press_button(USER, reply.message_id, "stop")  # keyboard is gone

            fake_telegram.send_command(USER, "/help agents git")
            messages = await fake_telegram.wait_for_message(USER, count=2, timeout=5)
            assert messages[1].text == "help for ['agents', 'git']"
        finally:
            await app.updater.stop()
            await app.stop()
    assert [c.method for c in fake_telegram.requests[:2]] == ["getMe", "deleteWebhook"]
    assert fake_telegram.pending_updates == []  # the updater confirmed everything it handled


async def test_send_message_draft_has_telegrams_limits(fake_telegram: FakeTelegram) -> None:
    async with _make_bot(fake_telegram) as bot:
        assert await bot.send_message_draft(42, 7, "<b>half</b> an answer", parse_mode="HTML") is True
        assert await bot.send_message_draft(42, 7, "") is True  # "Thinking…"
        with pytest.raises(BadRequest, match="(?i)textdraft_peer_invalid"):
            await bot.send_message_draft(-100123, 7, "groups get no drafts")
        with pytest.raises(BadRequest, match="(?i)can't parse entities"):
            await bot.send_message_draft(42, 7, "<b>unclosed", parse_mode="HTML")
        with pytest.raises(BadRequest, match="(?i)too long"):
            await bot.send_message_draft(42, 7, "x" * 4097)
        with pytest.raises(BadRequest, match="(?i)non-zero"):
            await bot.send_message_draft(42, 0, "x")
    assert [(d.chat_id, d.draft_id, d.text) for d in fake_telegram.drafts] == [(42, 7, "half an answer"), (42, 7, "")]
    assert [r.method for r in fake_telegram.refused] == ["sendMessageDraft"] * 4
    assert fake_telegram.messages(42) == [], "a draft is not a message"
