"""Telegram delivering the same update again does nothing the second time, through the real bot: a webhook re-delivery
(at once), long polling after a restart (the offset never confirmed), a button press delivered twice, and an edited
command. Each waits until the bot has seen the repeat (its log line) or acted on it (a second model call, a second
answer), then counts what happened."""

from __future__ import annotations

import contextlib
import logging
import socket
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest

from agents.core.models import Caller
from tests.conftest import USER_ID, make_settings, running_bot
from tests.fakes import anthropic_server as claude_says
from tests.fakes.anthropic_server import FakeAnthropic
from tests.fakes.telegram_server import FakeTelegram
from tests.scripted import spare
from tests.support.sandbox import PROBE

SECRET = "s3cret_Token-42"
SECRET_HEADER = "X-Telegram-Bot-Api-Secret-Token"
REPEAT = "was delivered again"
SORRY = "something went wrong"


def repeats(caplog: pytest.LogCaptureFixture) -> int:
    return sum(REPEAT in r.getMessage() for r in caplog.records)


@pytest.fixture(autouse=True)
def _log(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="telegram_bot.handlers")


@contextlib.asynccontextmanager
async def webhook_bot(tg: FakeTelegram, claude: FakeAnthropic, tmp_path: Path, workspace_root: Path) -> AsyncIterator:
    from telegram_bot.app import build_application, stop_application
    from telegram_bot.webhook import start_webhook

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    settings = make_settings(
        tg,
        claude,
        tmp_path,
        workspace_root,
        webhook_url="https://bot.example.com/agentlab/",
        webhook_listen="127.0.0.1",
        webhook_port=port,
        webhook_path="/tg/updates/",
        webhook_secret_token=SECRET,
    )
    app = build_application(settings)
    app.bot_data.sandbox_probe = PROBE
    await start_webhook(app, settings)
    url = f"http://127.0.0.1:{settings.telegram.webhook_port}/tg/updates"

    async def post(update: dict) -> int:
        async with httpx.AsyncClient(timeout=5) as client:
            return (await client.post(url, json=update, headers={SECRET_HEADER: SECRET})).status_code

    try:
        yield app, post
    finally:
        await stop_application(app)


@pytest.mark.quick_tests  # the verdict is not what this test is about
async def test_a_webhook_redelivery_is_one_turn_and_one_task(
    fake_telegram, fake_anthropic, model, tmp_path, workspace_root, caplog
) -> None:
    start = claude_says.tool_use(
        "start_task", {"workspace": "calc", "worker": "code", "instructions": "Fix add()", "background": True}
    )
    model.add("orchestrator", start, claude_says.text("Started task #1."))
    background = "the task's worker: the test may end before it asks"
    model.add(
        "code",
        spare(claude_says.tool_use("edit_file", {"path": "calc.py", "old": "a - b", "new": "a + b"}), why=background),
        spare(claude_says.text("Fixed add()."), why=background),
    )
    async with webhook_bot(fake_telegram, fake_anthropic, tmp_path, workspace_root) as (app, post):
        store = app.bot_data.runtime.store
        update = fake_telegram.send_text(USER_ID, "fix add() in calc")
        assert await post(update) == 200
        await fake_telegram.await_for(
            lambda: any(m.text == "Started task #1." for m in fake_telegram.messages(USER_ID))
        )
        assert await post(update) == 200  # Telegram did not get (or did not wait for) the first answer
        await fake_telegram.await_for(lambda: repeats(caplog) or len(model.requests["orchestrator"]) > 2)
        assert len(model.requests["orchestrator"]) == 2, "the repeat was a second turn"
        assert len(await store.list_tasks(USER_ID, limit=10)) == 1
        asked = [m for m in await store.all_messages(USER_ID) if m.content == "fix add() in calc"]
        assert len(asked) == 1, "the request was stored twice"
        answers = [m for m in fake_telegram.messages(USER_ID) if m.text == "Started task #1."]
        assert len(answers) == 1


async def test_long_polling_after_a_restart_does_not_handle_an_update_again(
    fake_telegram, fake_anthropic, model, tmp_path, workspace_root, bot_repo, caplog
) -> None:
    model.add("orchestrator", claude_says.text("Hello."))
    async with running_bot(fake_telegram, fake_anthropic, tmp_path, workspace_root, bot_repo) as bot:
        update = bot.tg.send_text(USER_ID, "hello")
        await bot.tg.wait_for_message(USER_ID, count=1)
    fake_telegram.deliver_again(update)  # the bot crashed before its offset moved past the update
    async with running_bot(fake_telegram, fake_anthropic, tmp_path, workspace_root, bot_repo) as bot:
        await bot.tg.await_for(lambda: repeats(caplog) or len(model.requests["orchestrator"]) > 1)
        assert len(model.requests["orchestrator"]) == 1, "the update was handled again after the restart"
        said = [m for m in await bot.runtime.store.all_messages(USER_ID) if m.content == "hello"]
        assert len(said) == 1
        assert [m.text for m in bot.tg.messages(USER_ID)] == ["Hello."]


@pytest.mark.quick_tests  # the verdict is not what this test is about
async def test_a_button_press_delivered_twice_acts_once_and_answers_nothing_wrong(
    fake_telegram, fake_anthropic, model, tmp_path, workspace_root, caplog
) -> None:
    model.add(
        "code",
        claude_says.tool_use("edit_file", {"path": "calc.py", "old": "a - b", "new": "a + b"}),
        claude_says.text("Fixed add()."),
    )
    async with webhook_bot(fake_telegram, fake_anthropic, tmp_path, workspace_root) as (app, post):
        crew = app.bot_data.runtime.crew
        await crew.races.start_task(
            Caller(chat_id=USER_ID, user_id=USER_ID), "calc", "code", "Fix add()", background=True
        )
        summary = await fake_telegram.await_for(
            lambda: next((m for m in fake_telegram.messages(USER_ID) if "task:merge:1" in m.callback_data), None),
            timeout=60,
        )
        press = fake_telegram.press_button(USER_ID, summary.message_id, "task:merge:1")
        assert await post(press) == 200
        merged = await fake_telegram.await_for(
            lambda: next((m for m in fake_telegram.messages(USER_ID) if "merged" in (m.text or "").lower()), None)
        )
        assert await post(press) == 200  # the same press, delivered again
        await fake_telegram.await_for(
            lambda: repeats(caplog) or any(SORRY in (m.text or "") for m in fake_telegram.messages(USER_ID))
        )
        texts = [m.text or "" for m in fake_telegram.messages(USER_ID)]
        assert not any(SORRY in t for t in texts), "the repeat was answered with an error that invites a second press"
        assert sum("merged" in t.lower() for t in texts) == 1, merged.text


async def test_an_edited_command_does_not_run_again(bot, caplog) -> None:
    sent = bot.tg.send_command(USER_ID, "/new")
    await bot.tg.wait_for_message(USER_ID, count=1)
    bot.tg.edit_message(USER_ID, sent["message"]["message_id"], "/new ")

    def fresh() -> list:
        return [m for m in bot.tg.messages(USER_ID) if (m.text or "").startswith("Fresh start")]

    await bot.tg.await_for(lambda: repeats(caplog) or len(fresh()) > 1)
    assert len(fresh()) == 1, "the edited /new ran again"


async def test_seen_keys_are_one_event_each_and_old_ones_are_dropped(tmp_path: Path) -> None:
    from datetime import timedelta

    from agents.core.models import utcnow
    from agents.store.database import Store

    store = await Store.open(tmp_path / "seen.db")
    try:
        seen = store.seen_events
        assert await seen.first_time(["telegram:update:1", "telegram:callback:a"])
        assert not await seen.first_time(["telegram:update:2", "telegram:callback:a"]), "the same press, another id"
        assert not await seen.first_time(["telegram:update:2"]), "recorded with the repeat it came in"
        await seen.forget_before(utcnow() - timedelta(days=2))
        assert not await seen.first_time(["telegram:update:1"]), "a fresh key is kept"
        await seen.forget_before(utcnow() + timedelta(seconds=1))
        assert await seen.first_time(["telegram:update:1"]), "an old key is dropped"
    finally:
        await store.close()
