"""A button is honoured only on the message the bot showed it on: forged callbacks through the real bot.

A Telegram client can send any callback data for any message. An owner's forged `task:discard:N` in their private
chat must not reach a task of a group; a member's request handed to the owners keeps working from the owners' copy.
"""

from __future__ import annotations

import shutil
import sys

import pytest

from agents.core.models import Caller
from tests.conftest import USER_ID, BotHarness, git
from tests.support.tasks import fixed_add

# untested_calc: these tests look at neither the verdict nor the task's end, so calc has no tests (tests/conftest.py)
pytestmark = [
    pytest.mark.skipif(
        shutil.which("bwrap") is None or not sys.platform.startswith("linux"),
        reason="bubblewrap (bwrap) is not installed: scripts/install-system-deps.sh",
    ),
    pytest.mark.untested_calc,
]

GROUP = -1009100


async def group_task(bot: BotHarness) -> int:
    """A finished code task of the group, with a branch (what Discard would delete)."""
    return (await fixed_add(bot, Caller(chat_id=GROUP, user_id=USER_ID))).stored_id


async def branch_kept(bot: BotHarness, task_id: int) -> bool:
    task = await bot.runtime.store.get_task(task_id)
    return bool(git(bot.settings.paths.workspace_path / "calc", "branch", "--list", task.branch).strip())


async def press(bot: BotHarness, chat: int, message_id: int, data: str) -> str:
    update = bot.tg.press_button(USER_ID, message_id, data, chat_id=chat, strict=False)
    query_id = update["callback_query"]["id"]
    answer = await bot.tg.await_for(lambda: bot.tg.callback_answers.get(query_id))
    return answer.get("text", "")


async def test_an_owners_forged_discard_from_another_chat_does_nothing(bot: BotHarness) -> None:
    task_id = await group_task(bot)
    await bot.runtime.notifier.send(USER_ID, "a message of the private chat")
    [mine] = [m for m in bot.tg.messages(USER_ID) if m.text == "a message of the private chat"]
    said = await press(bot, USER_ID, mine.message_id, f"task:discard:{task_id}")
    assert "no longer valid" in said, said
    assert await branch_kept(bot, task_id), "a forged button discarded a group's task"
    assert not [m for m in bot.tg.messages(USER_ID) if "discarded" in (m.text or "")]


async def test_a_button_is_honoured_only_on_the_message_that_carried_it(bot: BotHarness) -> None:
    task_id = await group_task(bot)
    summary = await bot.tg.await_for(
        lambda: next((m for m in bot.tg.messages(GROUP) if m.callback_data and "Fixed add" in (m.text or "")), None)
    )
    assert f"task:discard:{task_id}" in summary.callback_data
    await bot.runtime.notifier.send(GROUP, "another message of the group")
    [other] = [m for m in bot.tg.messages(GROUP) if m.text == "another message of the group"]
    said = await press(bot, GROUP, other.message_id, f"task:discard:{task_id}")
    assert "no longer valid" in said, said
    assert await branch_kept(bot, task_id), "a button pressed on a message that never carried it discarded the task"
