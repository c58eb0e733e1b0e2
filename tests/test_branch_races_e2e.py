"""Impatient users and a team acting on one task's branch at the same moment, through the real bot (fake Telegram,
scripted model): Merge and Discard pressed at once have one outcome, Discard after a Merge is refused (the work is in
the base branch, not thrown away), and a Discard racing a follow-up on the branch leaves one of them refused."""

from __future__ import annotations

import asyncio
import shutil
import sys
from pathlib import Path

import pytest

from agents.core.errors import ToolError
from agents.core.models import Caller
from tests.conftest import USER_ID, BotHarness, git
from tests.fakes import anthropic_server as claude_says
from tests.scripted import RoleScript, spare
from tests.support.tasks import ended, fixed_add

pytestmark = [
    pytest.mark.skipif(
        shutil.which("bwrap") is None or not sys.platform.startswith("linux"),
        reason="bubblewrap (bwrap) is not installed",
    ),
    pytest.mark.untested_calc,
]

OWNER = Caller(chat_id=USER_ID, user_id=USER_ID)


def calc(bot: BotHarness) -> Path:
    return bot.settings.paths.workspace_path / "calc"


def merges(bot: BotHarness) -> list[str]:
    return git(calc(bot), "log", "--merges", "--format=%s", "main").split("\n")[:-1]


def branch_exists(bot: BotHarness, branch: str) -> bool:
    return bool(git(calc(bot), "branch", "--list", branch).strip())


async def finished_task(bot: BotHarness) -> tuple[int, object]:
    task = await fixed_add(bot, OWNER)
    summary = await bot.tg.await_for(
        lambda: next((m for m in bot.tg.messages(USER_ID) if f"task:merge:{task.id}" in (m.callback_data or "")), None)
    )
    return task.id, summary


async def press(bot: BotHarness, message_id: int, data: str) -> None:
    update = bot.tg.press_button(USER_ID, message_id, data, chat_id=USER_ID)
    query_id = update["callback_query"]["id"]
    await bot.tg.await_for(lambda: bot.tg.callback_answers.get(query_id))


def said(bot: BotHarness, needle: str) -> list[str]:
    return [m.text for m in bot.tg.messages(USER_ID) if needle in (m.text or "")]


# ---- Merge and Discard pressed at once ------------------------------------------------------------------------------
async def test_merge_and_discard_pressed_at_once_have_one_outcome(bot: BotHarness) -> None:
    task_id, summary = await finished_task(bot)
    branch = (await bot.runtime.store.get_task(task_id)).branch
    await asyncio.gather(
        press(bot, summary.message_id, f"task:merge:{task_id}"),
        press(bot, summary.message_id, f"task:discard:{task_id}"),
    )

    def two_replies() -> list[str] | None:
        replies = [m.text or "" for m in bot.tg.messages(USER_ID) if m.message_id > summary.message_id]
        return replies if len(replies) >= 2 else None

    replies = await bot.tg.await_for(two_replies, timeout=60)
    if merges(bot):  # the merge came first: the work is in main, and Discard says so
        assert not said(bot, "was discarded") and said(bot, "merged into main already"), replies
    else:  # the discard came first: nothing was merged, the branch is gone
        assert said(bot, "was discarded") and not branch_exists(bot, branch), replies


async def test_discard_tool_after_merge_tool_in_one_turn_is_refused(bot: BotHarness) -> None:
    """The orchestrator's model calls merge_task and discard_task in the same turn (parallel tool calls): the
    Discard is refused, saying the work was merged."""
    task_id, _ = await finished_task(bot)
    model = RoleScript()
    bot.claude.handler = model
    model.add(
        "orchestrator",
        claude_says.tool_uses([("merge_task", {"task_id": task_id}), ("discard_task", {"task_id": task_id})]),
        claude_says.text("Done both."),
    )
    bot.say("merge task 1 and also discard it")
    await bot.tg.await_for(lambda: said(bot, "Done both."), timeout=30)
    results = [
        str(b.get("content"))
        for b in model.requests["orchestrator"][-1]["messages"][-1]["content"]
        if b.get("type") == "tool_result"
    ]
    merged = bool(merges(bot))
    assert merged, results
    assert not any("was discarded" in r for r in results), results
    assert any("merged into main already: there is nothing to discard" in r for r in results), results


# ---- Discard while a follow-up on the same branch starts ------------------------------------------------------------
async def test_discard_and_a_follow_up_on_its_branch_at_once(bot: BotHarness) -> None:
    """Discard and a follow-up (Fix CI, a mention on its pull request) at once: one goes ahead, the other is
    refused; never a follow-up said to continue a branch that was deleted under it."""
    task_id, _ = await finished_task(bot)
    branch = (await bot.runtime.store.get_task(task_id)).branch
    model = RoleScript()
    bot.claude.handler = model
    model.add("code", spare(claude_says.text("Follow-up done."), why="the follow-up may be refused"))
    discard, follow = await asyncio.gather(
        bot.runtime.crew.branches.discard(OWNER, task_id),
        bot.runtime.crew.starts.continue_task(OWNER, task_id, "also handle floats"),
        return_exceptions=True,
    )
    outcomes = (discard, follow)
    assert sum(isinstance(o, ToolError) for o in outcomes) == 1, f"not one outcome: {outcomes!r} ({branch})"
    if isinstance(follow, ToolError):  # the discard came first: the follow-up has no branch to continue
        assert "no longer exists" in str(follow) and not branch_exists(bot, branch), outcomes
    else:  # the follow-up came first: the branch is in use, Discard waits for it
        assert "is still working on task #1's branch" in str(discard), outcomes
        await ended(bot, follow.stored_id)
