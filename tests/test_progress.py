"""A task's progress message: through the real bot and the fake Telegram, a step held back by the edit interval still
shows within that interval, without waiting for the worker's next step or the elapsed-time refresh; and with no
steps, the elapsed time is refreshed."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from agents.core.models import Caller, Task, TaskStatus, WorkerKind
from agents.store.database import Store
from agents.work.progress import Progress
from tests.conftest import USER_ID, BotHarness, make_settings, start_bot
from tests.fakes import anthropic_server as claude_says
from tests.fakes.anthropic_server import FakeAnthropic
from tests.fakes.telegram_server import FakeTelegram
from tests.scripted import RoleScript

INTERVAL = 1.0  # PROGRESS_INTERVAL_SECONDS here: short, so the test is quick
HANG_GUARD = 30.0  # far above INTERVAL: only a step that is never shown fails the test


@pytest.fixture
async def bot(
    fake_telegram: FakeTelegram, fake_anthropic: FakeAnthropic, tmp_path: Path, workspace_root: Path, bot_repo: Path
) -> AsyncIterator[BotHarness]:
    from telegram_bot.app import stop_application

    settings = make_settings(
        fake_telegram,
        fake_anthropic,
        tmp_path,
        workspace_root,
        bot_repository=bot_repo,
        progress_interval_seconds=INTERVAL,
        progress_refresh_seconds=3600,  # the elapsed-time refresh must not be what shows the step
    )
    harness = await start_bot(settings, fake_telegram, fake_anthropic)
    try:
        yield harness
    finally:
        await stop_application(harness.app)


def held_until(go: threading.Event, reply: dict):
    def answer(body: dict) -> dict:
        go.wait(HANG_GUARD)
        return reply

    return answer


async def test_a_step_right_after_an_edit_shows_within_the_interval(bot: BotHarness) -> None:
    model = RoleScript()
    bot.claude.handler = model
    go = threading.Event()
    model.add(
        "code",
        # two steps back to back: the first edits the message, the second falls inside the interval
        claude_says.tool_uses([("read_file", {"path": "app.py"}), ("read_file", {"path": "README.md"})]),
        held_until(go, claude_says.text("Done.")),  # then the worker waits: no later step pushes an edit out
    )
    store = bot.runtime.store
    try:
        await bot.runtime.crew.races.start_task(
            Caller(chat_id=USER_ID),
            workspace="group-therapy",
            worker="code",
            instructions="Read things.",
            background=True,
        )
        await bot.tg.await_for(lambda: len(model.requests["code"]) == 2, timeout=HANG_GUARD)
        progress = bot.tg.message(USER_ID, (await store.get_task(1)).progress_message_id)
        shown = await bot.tg.await_for(
            lambda: next((v.text for v in progress.history if "reading README.md" in (v.text or "")), None),
            timeout=HANG_GUARD,
        )
        assert shown.splitlines()[-2:] == ["• reading app.py", "• reading README.md"]
        assert not go.is_set() and len(model.requests["code"]) == 2, "shown while the worker waited for its answer"
    finally:
        go.set()
    await bot.tg.await_for(lambda: "Task #1" in (progress.text or "") and "⏳" not in (progress.text or ""))
    assert (await store.get_task(1)).status is TaskStatus.UNVERIFIED  # ended; group-therapy has no tests


class RecordingNotifier:
    def __init__(self) -> None:
        self.texts: list[str] = []

    async def send(self, chat_id: int, markdown: str, *, buttons=None, reply_to=None) -> int:
        self.texts.append(markdown)
        return 7

    async def edit(self, chat_id: int, message_id: int, markdown: str, *, buttons=None) -> None:
        self.texts.append(markdown)


async def test_with_no_steps_the_elapsed_time_is_refreshed_and_a_held_step_shows(tmp_path: Path) -> None:
    store = await Store.open(tmp_path / "db.sqlite")
    task = await store.add_task(Task(chat_id=1, workspace="calc", worker=WorkerKind.CODE, title="t", instructions="i"))
    notifier = RecordingNotifier()
    progress = Progress(notifier, store, task, interval=0.2, refresh=0.3)
    await progress.open()
    try:
        async with asyncio.timeout(HANG_GUARD):
            while len(notifier.texts) < 2:
                await asyncio.sleep(0.01)
        assert notifier.texts[0].splitlines()[-1] == "• starting"
        assert notifier.texts[1].splitlines()[-1] == "• starting", "a refresh with no step"
        await progress.update("reading calc.py")
        await progress.update("editing calc.py")  # inside the interval: held back, then shown by the ticker
        async with asyncio.timeout(HANG_GUARD):
            while "editing calc.py" not in notifier.texts[-1]:
                await asyncio.sleep(0.01)
        assert notifier.texts[-1].splitlines()[-2:] == ["• reading calc.py", "• editing calc.py"]
    finally:
        progress.stop()
        await store.close()
