"""A group upgraded to a supergroup, through the real bot and the fake Bot API: the team turns on topics ("a topic per
project"), Telegram upgrades the group to a supergroup under a new chat id, and the old id refuses every later call.

The bot hears it from Telegram's two service messages, or (when it missed them, being down) from the first call the
old id refuses; either way the group's work goes on in the supergroup: a task running across the upgrade reports
there with buttons that work there, a schedule made in the group fires there, and the conversation keeps its history
and workspace. Claude is scripted per role (tests/scripted.py); the workspaces are real git repositories.
"""

from __future__ import annotations

import shutil
import sys
import threading
from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from agents.core.models import Proposal, TaskStatus
from agents.work.schedule_book import job_id
from tests.conftest import BotHarness, make_settings, running_bot, start_bot, text_now
from tests.fakes import anthropic_server as claude_says
from tests.fakes.anthropic_server import FakeAnthropic
from tests.fakes.telegram_server import FakeTelegram
from tests.scripted import RoleScript, last_user_text
from tests.support.schedules import confirm, schedule
from tests.support.tasks import HANG_GUARD, all_updates_handled, ended, start_task
from tests.support.team import MEMBER, OWNER, said

# quick_tests: what these tests check is not the verdict, so calc's tests are one quick check (tests/conftest.py)
pytestmark = [
    pytest.mark.skipif(
        shutil.which("bwrap") is None or not sys.platform.startswith("linux"),
        reason="bubblewrap (bwrap) is not installed: scripts/install-system-deps.sh",
    ),
    pytest.mark.quick_tests,
]

GROUP = -4242  # a basic group (Telegram's supergroup ids start with -100)
SUPERGROUP = -1004242  # what the group becomes
SETTINGS = dict(allowed_user_ids=f"{OWNER},{MEMBER}", owner_user_ids=str(OWNER), sandbox_network="off")


@pytest.fixture
async def bot(
    fake_telegram: FakeTelegram, fake_anthropic: FakeAnthropic, tmp_path: Path, workspace_root: Path, bot_repo: Path
) -> AsyncIterator[BotHarness]:
    async with running_bot(fake_telegram, fake_anthropic, tmp_path, workspace_root, bot_repo, **SETTINGS) as harness:
        yield harness


def held(reply: dict[str, Any], go: threading.Event) -> Callable[[dict[str, Any]], dict[str, Any]]:
    """A model reply that waits for `go`: the worker is busy until the test lets it go on."""

    def answer(body: dict[str, Any]) -> dict[str, Any]:
        go.wait(HANG_GUARD)
        return reply

    return answer


def summaries(bot: BotHarness, chat: int, task_id: int) -> list[Any]:
    """The task's summaries in `chat` (each with its Merge button), as each was sent."""
    return [
        m for m in bot.tg.messages(chat) if f"task:merge:{task_id}" in m.callback_data and "Files:" in (m.text or "")
    ]


async def bind_calc(bot: BotHarness) -> None:
    bot.tg.send_command(OWNER, "/workspace calc", chat_id=GROUP)
    await bot.tg.await_for(lambda: said(bot, GROUP, "calc"))


@pytest.mark.parametrize("announced", [True, False], ids=["service-messages", "service-messages-missed"])
async def test_a_task_running_across_the_upgrade_reports_in_the_supergroup(
    bot: BotHarness, model: RoleScript, workspace_root: Path, announced: bool
) -> None:
    repo = workspace_root / "calc"
    await bind_calc(bot)
    go = threading.Event()
    model.add("orchestrator", start_task("", "Fix add() in calc.py."), claude_says.text("Started task #1."))
    edit = claude_says.tool_use("edit_file", {"path": "calc.py", "old": "a - b", "new": "a + b"})
    model.add("code", held(edit, go), claude_says.text("Fixed add()."))
    bot.tg.send_text(MEMBER, "@test_bot fix the failing test in calc", chat_id=GROUP, username="mia")
    try:
        await bot.tg.await_for(lambda: said(bot, GROUP, "Started task #1."), timeout=HANG_GUARD)
        await bot.tg.await_for(lambda: model.requests["code"], timeout=HANG_GUARD)  # the worker is at it
        notices = bot.tg.migrate_group(GROUP, SUPERGROUP, OWNER, forum=True, announce=announced)
        await all_updates_handled(bot)
    finally:
        go.set()

    task = await ended(bot, 1)
    assert task.status is not TaskStatus.FAILED, task
    summary = (await bot.tg.await_for(lambda: summaries(bot, SUPERGROUP, 1), timeout=HANG_GUARD))[0]
    assert summary.text.startswith("✔ Task #1 done · calc")
    if not announced:  # Telegram's notices come late (the bot was down when they were sent): nothing changes twice
        for notice in notices:
            bot.tg.deliver_again(notice)
        await all_updates_handled(bot)

    bot.tg.press_button(MEMBER, summary.message_id, "task:merge:1", chat_id=SUPERGROUP, username="mia")
    refusal = await bot.tg.await_for(lambda: said(bot, SUPERGROUP, "Only an owner can merge"))
    assert refusal.text.startswith("Only an owner can merge"), "the member's press acts on the task, by its roles"
    bot.tg.press_button(OWNER, summary.message_id, "task:merge:1", chat_id=SUPERGROUP)
    await bot.tg.await_for(lambda: "a + b" in text_now(repo / "calc.py"), timeout=HANG_GUARD)

    bot.tg.send_command(OWNER, "/tasks", chat_id=SUPERGROUP)  # the task is the supergroup's
    listing = await bot.tg.await_for(lambda: said(bot, SUPERGROUP, "#1"))
    assert "No tasks" not in listing.text
    assert len(summaries(bot, SUPERGROUP, 1)) == 1, "the summary was sent once"
    assert summaries(bot, GROUP, 1) == [], "nothing was shown in the old group after the upgrade"
    bot.tg.send_command(OWNER, "/task 1", chat_id=SUPERGROUP)  # shown again, with its buttons
    await bot.tg.await_for(lambda: len(summaries(bot, SUPERGROUP, 1)) == 2)


async def test_a_schedule_made_in_the_group_fires_into_the_supergroup(bot: BotHarness, model: RoleScript) -> None:
    model.add("orchestrator", schedule(every_minutes=60), confirm)
    bot.tg.send_text(OWNER, "@test_bot every hour run the tests in calc", chat_id=GROUP)
    await bot.tg.await_for(lambda: said(bot, GROUP, "Schedule #1 set"), timeout=HANG_GUARD)
    bot.tg.migrate_group(GROUP, SUPERGROUP, OWNER, forum=True)
    await all_updates_handled(bot)

    model.add("code", claude_says.text("Ran the tests; nothing changed."))
    bot.runtime.schedules.firing.scheduler.modify_job(job_id(1), next_run_time=datetime.now(UTC))  # its slot is now
    task = await ended(bot, 1)
    assert task.schedule_id == 1
    run = await bot.tg.await_for(lambda: said(bot, SUPERGROUP, "Run of schedule #1"), timeout=HANG_GUARD)
    assert "Task #1" in run.text
    bot.tg.send_command(OWNER, "/schedules", chat_id=SUPERGROUP)
    listing = await bot.tg.await_for(lambda: said(bot, SUPERGROUP, "Schedules"))
    assert "#1 [active] every hour" in listing.text and listing.callback_data == ["schedule:cancel:1"]


async def test_the_conversation_and_its_workspace_carry_over_with_a_restart_between_the_notices(
    fake_telegram: FakeTelegram,
    fake_anthropic: FakeAnthropic,
    tmp_path: Path,
    workspace_root: Path,
    bot_repo: Path,
    model: RoleScript,
) -> None:
    from telegram_bot.app import stop_application

    settings = make_settings(
        fake_telegram, fake_anthropic, tmp_path, workspace_root, bot_repository=bot_repo, **SETTINGS
    )
    bot = await start_bot(settings, fake_telegram, fake_anthropic)
    try:
        await bind_calc(bot)
        model.add("orchestrator", claude_says.text("Noted: the release is called PELICAN."))
        bot.tg.send_text(MEMBER, "@test_bot our next release is called PELICAN", chat_id=GROUP, username="mia")
        await bot.tg.await_for(lambda: said(bot, GROUP, "Noted: the release"), timeout=HANG_GUARD)
        proposal = Proposal(chat_id=GROUP, workspace="calc", request="speed up add()", body="## Plan\n1. Cache.")
        await bot.runtime.store.add_proposal(proposal)  # what a research task of the group left pending
        in_group, in_supergroup = fake_telegram.migrate_group(GROUP, SUPERGROUP, OWNER, forum=True, announce=False)
        fake_telegram.deliver_again(in_group)  # the old group's notice; the bot stops before the supergroup's
        await all_updates_handled(bot)
    finally:
        await stop_application(bot.app)

    bot = await start_bot(settings, fake_telegram, fake_anthropic)
    try:
        fake_telegram.deliver_again(in_supergroup)
        await all_updates_handled(bot)
        model.add("orchestrator", claude_says.text("It is PELICAN."))
        bot.tg.send_text(MEMBER, "@test_bot what is our next release called?", chat_id=SUPERGROUP, username="mia")
        await bot.tg.await_for(lambda: said(bot, SUPERGROUP, "It is PELICAN."), timeout=HANG_GUARD)
        asked = model.requests["orchestrator"][-1]
        assert "our next release is called PELICAN" in str(asked["messages"][:-1]), "the group's history came along"
        assert "workspace of this conversation: calc" in last_user_text(asked), "and its workspace"
        assert "- proposal #1 for calc (request: speed up add())" in last_user_text(asked), "and its pending proposal"
        bot.tg.send_command(OWNER, "/workspace", chat_id=SUPERGROUP)
        assert await bot.tg.await_for(lambda: said(bot, SUPERGROUP, "This conversation works in calc"))
    finally:
        await stop_application(bot.app)
