"""Photos and files end to end: the real bot downloads them from the fake Bot API, keeps them under the data folder,
and the orchestrator's request (as the fake Messages API sees it) carries an image / document / text beside the
caption; refusals are one sentence and the caption still gets through; a restart keeps them; workers get them."""

from __future__ import annotations

import asyncio
import base64
import io
import sqlite3

from PIL import Image

from agents.core.models import TaskStatus
from tests.conftest import USER_ID, BotHarness, make_settings, start_bot
from tests.fakes import anthropic_server as claude_says
from tests.scripted import RoleScript, last_user_text
from tests.support.attachments import answer_or_apology, answered, blocks_of, minimal_pdf


def jpeg(width: int, height: int, color: tuple[int, int, int] = (200, 40, 40)) -> bytes:
    out = io.BytesIO()
    Image.new("RGB", (width, height), color).save(out, "JPEG", quality=90)
    return out.getvalue()


def decoded_image(block: dict) -> Image.Image:
    return Image.open(io.BytesIO(base64.b64decode(block["source"]["data"])))


async def test_photo_reaches_the_orchestrator_as_an_image_beside_its_caption(
    bot: BotHarness, model: RoleScript, tmp_path
) -> None:
    model.add("orchestrator", claude_says.text("A red rectangle."))
    thumb = jpeg(90, 68)
    bot.tg.send_photo(
        USER_ID,
        jpeg(2560, 1920),
        width=2560,
        height=1920,
        caption="what is on this picture?",
        smaller=[(thumb, 90, 68), (jpeg(1280, 960), 1280, 960)],
    )
    await answered(bot, "A red rectangle.")
    content = blocks_of(model.requests["orchestrator"][0])
    kinds = [b["type"] for b in content]
    assert kinds[:3] == ["text", "image", "text"], kinds
    assert content[0]["text"].startswith("[attachment #1: photo.jpg (image)]")
    assert content[2]["text"] == "what is on this picture?"
    picture = decoded_image(content[1])
    assert content[1]["source"]["media_type"] == "image/jpeg"
    assert picture.size == (1568, 1176), "the largest size, scaled to the API's long-edge limit"
    assert bot.tg.calls("getFile")[0].params["file_id"] == "fake-file-id-3", "the full size was downloaded"

    stored = list((tmp_path / "data" / "attachments" / str(USER_ID)).iterdir())
    assert len(stored) == 1 and Image.open(stored[0]).size == (1568, 1176)
    with sqlite3.connect(tmp_path / "data" / "agentlab.db") as db:
        rows = db.execute("SELECT kind, name, path, size FROM attachments").fetchall()
        assert rows == [("image", "photo.jpg", f"{USER_ID}/{stored[0].name}", stored[0].stat().st_size)]
        everything = b"".join(
            str(r).encode()
            for table in ("messages", "attachments")
            for r in db.execute(f"SELECT * FROM {table}").fetchall()
        )
    assert content[1]["source"]["data"][:200].encode() not in everything, "no base64 in SQLite"


async def test_an_album_is_one_turn_with_every_picture_and_the_caption(bot: BotHarness, model: RoleScript) -> None:
    model.add("orchestrator", claude_says.text("Two screens."))
    bot.tg.send_photo(USER_ID, jpeg(400, 300), width=400, height=300, caption="compare these", media_group_id="a1")
    bot.tg.send_photo(USER_ID, jpeg(300, 400, (0, 0, 200)), width=300, height=400, media_group_id="a1")
    await answered(bot, "Two screens.")
    await asyncio.sleep(0.5)
    assert len(model.requests["orchestrator"]) == 1, "one answer for the album"
    content = blocks_of(model.requests["orchestrator"][0])
    assert [decoded_image(b).size for b in content if b["type"] == "image"] == [(400, 300), (300, 400)]
    assert any(b.get("text") == "compare these" for b in content)


async def test_albums_of_two_chats_with_one_album_id_stay_apart(bot: BotHarness, model: RoleScript) -> None:
    """An album's id is chosen by the sender's app: two albums in two chats that share one (a crafted app, the same
    album forwarded twice) are two albums. Gathered by the id alone, chat B's picture went into chat A's turn, under
    chat A's conversation, and chat B got no answer."""
    other = USER_ID + 1
    model.add("orchestrator", claude_says.text("Answered."), claude_says.text("Answered."))
    bot.tg.send_photo(USER_ID, jpeg(400, 300), width=400, height=300, caption="chat A", media_group_id="g1")
    bot.tg.send_photo(USER_ID, jpeg(300, 400), width=300, height=400, chat_id=other, caption="B", media_group_id="g1")
    await bot.tg.await_for(lambda: any(m.text == "Answered." for m in bot.tg.messages(other)), timeout=20)
    await answered(bot, "Answered.")
    requests = model.requests["orchestrator"]
    assert [sum(b["type"] == "image" for b in blocks_of(r)) for r in requests] == [1, 1], "one picture per turn"


async def test_pdf_and_log_file_arrive_as_documents(bot: BotHarness, model: RoleScript) -> None:
    model.add("orchestrator", claude_says.text("It is a one-page spec."), claude_says.text("The log shows a crash."))
    bot.tg.send_document(USER_ID, minimal_pdf(), "spec.pdf", "application/pdf", caption="summarise this")
    await answered(bot, "It is a one-page spec.")
    content = blocks_of(model.requests["orchestrator"][0])
    document = next(b for b in content if b["type"] == "document")
    assert document["source"]["media_type"] == "application/pdf"
    assert base64.b64decode(document["source"]["data"]) == minimal_pdf()
    assert any(b["type"] == "text" and b["text"] == "summarise this" for b in content)

    log = "2026-11-22 10:00:01 INFO start\n2026-11-22 10:00:02 ERROR KeyError: 'user_id' in handlers.py:42\n"
    bot.tg.send_document(USER_ID, log.encode(), "app.log", "text/plain", caption="why does it crash?")
    await answered(bot, "The log shows a crash.")
    content = blocks_of(model.requests["orchestrator"][1])
    file_block = next(b for b in content if b["type"] == "document" and b.get("title") == "app.log")
    assert file_block["source"] == {"type": "text", "media_type": "text/plain", "data": log}
    assert "[attachment #2: app.log (text)]" in content[content.index(file_block) - 1]["text"]
    assert content[content.index(file_block) + 1]["text"] == "why does it crash?"
    history = model.requests["orchestrator"][1]["messages"][0]["content"]
    assert any(b["type"] == "document" for b in history), "the PDF stays in the conversation"


async def test_an_image_sent_as_a_file_arrives_as_an_image(bot: BotHarness, model: RoleScript) -> None:
    model.add("orchestrator", claude_says.text("A screenshot."))
    out = io.BytesIO()
    Image.new("RGBA", (3000, 1500), (0, 0, 255, 100)).save(out, "PNG")
    bot.tg.send_document(USER_ID, out.getvalue(), "screen.png", "image/png", caption="this is what I see")
    await answered(bot, "A screenshot.")
    content = blocks_of(model.requests["orchestrator"][0])
    image = next(b for b in content if b["type"] == "image")
    assert image["source"]["media_type"] == "image/png" and decoded_image(image).size == (1568, 784)
    assert content[0]["text"] == "[attachment #1: screen.png (image)]"


async def test_wrong_type_and_oversized_files_get_one_sentence_and_the_caption_goes_through(
    bot: BotHarness, model: RoleScript
) -> None:
    model.add(
        "orchestrator",
        claude_says.text("Answer one."),
        claude_says.text("Answer two."),
        claude_says.text("Answer three."),
    )
    bot.tg.send_document(
        USER_ID, b"PK\x03\x04\x00\x00binary\x00zip", "site.zip", "application/zip", caption="deploy what is in the zip"
    )
    refusal = await bot.tg.await_for(
        lambda: next((m for m in bot.tg.messages(USER_ID) if "site.zip" in (m.text or "")), None)
    )
    assert "PDFs and text files" in refusal.text and refusal.text.count(".") <= 4 and len(refusal.text) < 220
    await answered(bot, "Answer one.")
    first = blocks_of(model.requests["orchestrator"][0])
    assert first[0]["text"].startswith("deploy what is in the zip") and "site.zip" in first[0]["text"]
    assert not any(b["type"] in ("image", "document") for b in first)

    bot.tg.send_document(USER_ID, b"x" * 300_000, "huge.log", "text/plain", caption="look at the end of this log")
    too_big = await bot.tg.await_for(
        lambda: next((m for m in bot.tg.messages(USER_ID) if "huge.log" in (m.text or "")), None)
    )
    assert "300 KB" in too_big.text and "200 KB" in too_big.text
    await answered(bot, "Answer two.")
    assert blocks_of(model.requests["orchestrator"][1])[0]["text"].startswith("look at the end of this log")

    bot.tg.send_document(USER_ID, b"\xff\xd8\xff\xe0garbage-not-a-jpeg", "broken.jpg", "image/jpeg")
    no_caption = await bot.tg.await_for(
        lambda: next((m for m in bot.tg.messages(USER_ID) if "broken.jpg" in (m.text or "")), None)
    )
    assert "Traceback" not in no_caption.text
    bot.tg.send_document(USER_ID, b"\0" * (20 * 1024 * 1024 + 1), "dump.bin", caption="and this?")
    await bot.tg.await_for(lambda: any("20 MB" in (m.text or "") for m in bot.tg.messages(USER_ID)))
    await answered(bot, "Answer three.")
    assert len(model.requests["orchestrator"]) == 3, "a refused file without a caption starts no turn"
    assert blocks_of(model.requests["orchestrator"][2])[0]["text"].startswith("and this?")


async def test_an_image_stays_in_the_history_across_a_restart(
    fake_telegram, fake_anthropic, tmp_path, workspace_root
) -> None:
    from telegram_bot.app import stop_application

    settings = make_settings(fake_telegram, fake_anthropic, tmp_path, workspace_root)
    model = RoleScript()
    fake_anthropic.handler = model
    model.add("orchestrator", claude_says.text("Nice sketch."), claude_says.text("Still the same sketch."))
    bot = await start_bot(settings, fake_telegram, fake_anthropic)
    try:
        bot.tg.send_photo(USER_ID, jpeg(400, 300, (10, 200, 10)), width=400, height=300, caption="my sketch")
        await answered(bot, "Nice sketch.")
    finally:
        await stop_application(bot.app)
    sent = next(b for b in blocks_of(model.requests["orchestrator"][0]) if b["type"] == "image")

    bot = await start_bot(settings, fake_telegram, fake_anthropic)
    try:
        bot.say("what colour was it?")
        await answered(bot, "Still the same sketch.")
    finally:
        await stop_application(bot.app)
    history = model.requests["orchestrator"][1]["messages"]
    assert history[0]["role"] == "user"
    kept = [b for b in history[0]["content"] if b["type"] == "image"]
    assert kept and kept[0]["source"] == sent["source"], "the same picture, read back from the data folder"
    assert any(b.get("text") == "my sketch" for b in history[0]["content"])


async def test_start_task_hands_the_picture_to_the_frontend_worker_and_saves_it_when_asked(
    bot: BotHarness, model: RoleScript
) -> None:
    model.add(
        "orchestrator",
        claude_says.tool_use(
            "start_task",
            {
                "workspace": "group-therapy",
                "worker": "frontend",
                "instructions": "Make the page look like the picture.",
                "background": True,
                "attachments": [1],
                "save_attachments": True,
            },
        ),
        claude_says.text("Started #1."),
    )
    model.add(
        "frontend",
        claude_says.tool_use("run_command", {"command": "ls .agentlab/attachments; git status --short"}),
        claude_says.text("Matched the picture."),
    )
    bot.tg.send_photo(USER_ID, jpeg(800, 600), width=800, height=600, caption="make the page look like this")
    await answered(bot, "Started #1.")
    await bot.tg.await_for(
        lambda: any("Task #1" in (m.text or "") and "Files:" in (m.text or "") for m in bot.tg.messages(USER_ID)),
        timeout=60,
    )
    first = model.requests["frontend"][0]["messages"][0]["content"]
    image = next(b for b in first if b["type"] == "image")
    assert decoded_image(image).size == (800, 600)
    assert ".agentlab/attachments/1-photo.jpg" in first[-1]["text"]
    listing = last_user_text(model.requests["frontend"][1])
    assert "1-photo.jpg" in listing and "??" not in listing, "the file is there and git ignores it"
    assert (await bot.runtime.store.get_task(1)).status is TaskStatus.UNVERIFIED  # ended; no tests in group-therapy


async def test_start_task_refuses_an_attachment_of_another_chat(bot: BotHarness, model: RoleScript) -> None:
    model.add(
        "orchestrator",
        claude_says.tool_use(
            "start_task",
            {"workspace": "calc", "worker": "code", "instructions": "x", "background": True, "attachments": [7]},
        ),
        claude_says.text("No such picture."),
    )
    bot.say("use the picture")
    await answered(bot, "No such picture.")
    result = model.requests["orchestrator"][1]["messages"][-1]["content"][0]
    assert result["is_error"] and "no attachment #7" in result["content"]
    assert await bot.runtime.store.list_tasks(USER_ID) == []


async def test_a_5xx_on_a_refused_files_sentence_does_not_lose_its_caption(bot: BotHarness) -> None:
    """A video with a caption: Telegram answers 502 once, to the sentence that refuses the video. The caption (the
    user's request) must still be answered."""
    bot.tg.fail_next("sendMessage", error_code=502, when=lambda p: str(p.get("text", "")).startswith("I can't watch"))
    bot.claude.script(claude_says.text("Looking at calc."))
    fields = bot.tg.file_fields(b"\x00\x00\x00\x18ftypmp42", "videos", "mp4", "video/mp4")
    video = {**fields, "width": 640, "height": 480, "duration": 3, "mime_type": "video/mp4"}
    bot.tg.send_content(USER_ID, {"video": video, "caption": "please fix the crash in calc"})
    said = await answer_or_apology(bot, "Looking at calc.")
    assert "Looking at calc." in said, f"the caption was lost after a 502 on the refusal sentence: {said}"
