"""A task still running is never merged, whichever way the merge is asked for: the orchestrator's merge_task tool and
the Merge button go through the one merge of the crew, which refuses an active task.

The button path is the one that can reach a running task: a member's request to discard a running task goes to the
owners with the task's Merge / Diff / Discard buttons, and an owner may press Merge there while the worker still
writes on the branch.
"""

from __future__ import annotations

import asyncio
import shutil
import sys
import threading
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from agents.core.errors import ToolError
from agents.core.models import Caller, TaskStatus
from tests.conftest import USER_ID, BotHarness, git, running_bot
from tests.fakes import anthropic_server as claude_says
from tests.fakes.anthropic_server import FakeAnthropic
from tests.fakes.telegram_server import FakeTelegram
from tests.scripted import RoleScript

# untested_calc: these tests look at neither the verdict nor the task's end, so calc has no tests (tests/conftest.py)
pytestmark = [
    pytest.mark.skipif(
        shutil.which("bwrap") is None or not sys.platform.startswith("linux"),
        reason="bubblewrap (bwrap) is not installed: scripts/install-system-deps.sh",
    ),
    pytest.mark.untested_calc,
]

GROUP = -1009200
MEMBER = 2002


@pytest.fixture
async def team_bot(
    fake_telegram: FakeTelegram, fake_anthropic: FakeAnthropic, tmp_path: Path, workspace_root: Path, bot_repo: Path
) -> AsyncIterator[BotHarness]:
    async with running_bot(
        fake_telegram,
        fake_anthropic,
        tmp_path,
        workspace_root,
        bot_repo,
        allowed_user_ids=f"{USER_ID},{MEMBER}",
        owner_user_ids=str(USER_ID),
    ) as bot:
        yield bot


async def running_task(bot: BotHarness, go: threading.Event) -> int:
    """A member's code task in the group, held in progress (its first model call waits for `go`)."""

    def held(body: dict[str, Any]) -> dict[str, Any]:
        go.wait(30)
        return claude_says.tool_use("edit_file", {"path": "calc.py", "old": "a - b", "new": "a + b"})

    model = RoleScript()
    model.add("code", held, claude_says.text("Fixed add()."))
    bot.claude.handler = model
    member = Caller(chat_id=GROUP, user_id=MEMBER, user_name="@member")
    await bot.runtime.crew.races.start_task(member, "calc", "code", "fix add", True)
    await bot.tg.await_for(lambda: len(model.requests["code"]) == 1, timeout=30)
    task = await bot.runtime.store.get_task(1)
    assert task.status is TaskStatus.IN_PROGRESS and task.branch, task
    return task.id


async def ended(bot: BotHarness, task_id: int) -> None:
    deadline = asyncio.get_running_loop().time() + 60
    while not (await bot.runtime.store.get_task(task_id)).status.is_final:
        assert asyncio.get_running_loop().time() < deadline, "the task did not end"
        await asyncio.sleep(0.05)


def merges(bot: BotHarness) -> str:
    return git(bot.settings.paths.workspace_path / "calc", "log", "--merges", "--format=%s", "main")


async def test_the_merge_button_of_a_running_task_is_refused(team_bot: BotHarness) -> None:
    bot, go = team_bot, threading.Event()
    try:
        task_id = await running_task(bot, go)
        member = Caller(chat_id=GROUP, user_id=MEMBER, user_name="@member")
        with pytest.raises(ToolError, match="only an owner can discard"):
            await bot.runtime.crew.branches.discard(member, task_id)
        request = await bot.tg.await_for(
            lambda: next(
                (m for m in bot.tg.messages(GROUP) if f"task:merge:{task_id}" in (m.callback_data or "")), None
            )
        )
        update = bot.tg.press_button(USER_ID, request.message_id, f"task:merge:{task_id}", chat_id=GROUP)
        await bot.tg.await_for(lambda: bot.tg.callback_answers.get(update["callback_query"]["id"]))
        said = await bot.tg.await_for(
            lambda: next((m.text for m in bot.tg.messages(GROUP) if "merge" in (m.text or "").lower()[:60]), None)
        )
        assert said.startswith(f"Task #{task_id} is still in_progress"), said
        assert (await bot.runtime.store.get_task(task_id)).status is TaskStatus.IN_PROGRESS
        assert merges(bot) == "", "a running task's branch was merged"
    finally:
        go.set()
    await ended(bot, task_id)


async def test_the_merge_tool_refuses_a_running_task(team_bot: BotHarness) -> None:
    bot, go = team_bot, threading.Event()
    try:
        task_id = await running_task(bot, go)
        owner = Caller(chat_id=GROUP, user_id=USER_ID, user_name="@boss")
        with pytest.raises(ToolError, match=f"task #{task_id} is still in_progress"):
            await bot.runtime.crew.attempts.merge_task(owner, task_id)
        assert merges(bot) == ""
    finally:
        go.set()
    await ended(bot, task_id)
