"""Impatient users and a team acting on one task's branch at the same moment, through the real bot (fake Telegram,
scripted model): Merge and Discard pressed at once have one outcome, Discard after a Merge is refused (the work is in
the base branch, not thrown away), and a Discard racing a follow-up on the branch leaves one of them refused.
A Resume of an interrupted task takes the same turns: pressed twice it runs the task once, it waits for a Merge's git
and is refused beside a follow-up on the branch, after a Merge, and past MAX_WAITING_TASKS; a follow-up is refused on
an interrupted task's branch (its Resume would run beside it) and on a merged one."""

from __future__ import annotations

import asyncio
import shutil
import sys
import threading
from pathlib import Path

import pytest

from agents.core.errors import ToolError
from agents.core.models import Caller, Task, TaskStatus
from tests.conftest import USER_ID, BotHarness, git
from tests.fakes import anthropic_server as claude_says
from tests.scripted import RoleScript, spare
from tests.support.resumes import HeldModel, interrupted_task, status_is
from tests.support.tasks import ended, fixed_add, until

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


# ---- Resume beside other work on the task ---------------------------------------------------------------------------
async def test_resume_pressed_twice_at_once_runs_the_task_once(bot: BotHarness) -> None:
    """Two presses of Resume (two people, or the chat's two copies of the buttons): the second, slowed at its budget
    look-up until the first has the task running, finds it no longer interrupted and leaves it alone."""
    model = HeldModel(threading.Event())  # the first run stays in its first model call
    bot.claude.handler = model
    task = await interrupted_task(bot)
    access = bot.runtime.crew.access
    real_check, calls = access.check_budget, []

    async def slow_second_check() -> None:
        calls.append(1)
        if len(calls) == 2:  # the second press: its look-up is slow (a busy database)
            await until(lambda: status_is(bot, task.stored_id, TaskStatus.IN_PROGRESS))
            await until(model.working)
        await real_check()

    access.check_budget = slow_second_check  # type: ignore[method-assign]  # a slow database, for the second press
    try:
        answers = await asyncio.gather(
            bot.runtime.crew.branches.resume(OWNER, task.stored_id),
            bot.runtime.crew.branches.resume(OWNER, task.stored_id),
        )
        await asyncio.sleep(1)  # a second claim, had the task gone back to pending, would start its run now
    finally:
        model.release()
        access.check_budget = real_check  # type: ignore[method-assign]  # the real check again
    await ended(bot, task.stored_id)
    assert sorted(answers) == [
        f"Task #{task.id} is in_progress; only an interrupted task can be resumed.",
        f"Task #{task.id} resumed on its branch.",
    ], answers
    assert model.runs() == 1, f"task #{task.id} ran {model.runs()} times"


async def interrupted_fix(bot: BotHarness) -> Task:
    """Task #1 (add() fixed, on its branch) as a restart in its middle would have left it."""
    task = await fixed_add(bot, OWNER)
    await bot.runtime.store.update_task(task.stored_id, status=TaskStatus.INTERRUPTED)
    return task


async def test_a_follow_up_is_refused_on_an_interrupted_tasks_branch(bot: BotHarness) -> None:
    """The interrupted task keeps its worktree for its Resume: a follow-up (Fix CI, a mention on its pull request)
    there would share it, and a Resume pressed later would put a second worker on the branch."""
    task = await interrupted_fix(bot)
    bot.claude.handler = HeldModel()
    with pytest.raises(ToolError, match=f"task #{task.id} was interrupted; Resume or Discard it first"):
        follow = await bot.runtime.crew.starts.continue_task(OWNER, task.stored_id, "also handle floats")
        pytest.fail(f"follow-up #{follow.id} started on interrupted task #{task.id}'s branch")


async def test_a_follow_up_is_refused_while_an_interrupted_follow_up_waits_on_the_branch(bot: BotHarness) -> None:
    """Task #1 ended; its follow-up #2 was interrupted by a restart. A new follow-up of #1 would work in the worktree
    #2's Resume goes on in."""
    first = await fixed_add(bot, OWNER)
    model = HeldModel(threading.Event())
    bot.claude.handler = model
    try:
        follow = await bot.runtime.crew.starts.continue_task(OWNER, first.stored_id, "also handle floats")
        await until(model.working)
    finally:
        model.release()
    await ended(bot, follow.stored_id)
    await bot.runtime.store.update_task(follow.stored_id, status=TaskStatus.INTERRUPTED)
    with pytest.raises(ToolError, match=rf"task #{follow.id} \(interrupted\) is still on task #1's branch"):
        again = await bot.runtime.crew.starts.continue_task(OWNER, first.stored_id, "and negative numbers")
        pytest.fail(f"follow-up #{again.id} started beside interrupted follow-up #{follow.id}")


async def test_resume_is_refused_while_a_follow_up_works_on_its_branch(bot: BotHarness) -> None:
    """However a follow-up came to run on an interrupted task's branch (an older bot let it start), Resume waits for
    it, as Merge and Discard do: two workers in one worktree is what the branch's lock is for."""
    first = await fixed_add(bot, OWNER)
    model = HeldModel(threading.Event())
    bot.claude.handler = model
    try:
        follow = await bot.runtime.crew.starts.continue_task(OWNER, first.stored_id, "also handle floats")
        await until(model.working)
        await bot.runtime.store.update_task(first.stored_id, status=TaskStatus.INTERRUPTED)
        with pytest.raises(ToolError, match=f"task #{follow.id} is still working on task #1's branch; resume it"):
            said = await bot.runtime.crew.branches.resume(OWNER, first.stored_id)
            pytest.fail(f"task #1 resumed beside follow-up #{follow.id}: {said}")
        assert (await bot.runtime.store.get_task(first.stored_id)).status is TaskStatus.INTERRUPTED
    finally:
        model.release()
    await ended(bot, follow.stored_id)


async def test_resume_waits_for_a_merge_of_its_branch(bot: BotHarness) -> None:
    """A Merge holds the branch's lock while its git runs: a Resume pressed meanwhile waits for it."""
    task = await interrupted_fix(bot)
    bot.claude.handler = HeldModel()
    async with bot.runtime.crew.starts.branch_locks.of((task.workspace, task.branch)):  # a Merge's git runs
        resume = asyncio.ensure_future(bot.runtime.crew.branches.resume(OWNER, task.stored_id))
        await asyncio.sleep(1)
        assert not resume.done(), resume
        assert (await bot.runtime.store.get_task(task.stored_id)).status is TaskStatus.INTERRUPTED
    assert await resume == f"Task #{task.id} resumed on its branch."
    await ended(bot, task.stored_id)


async def test_resume_after_the_interrupted_task_was_merged_is_refused(bot: BotHarness) -> None:
    """The owner merged the interrupted task (Merge is allowed on it): that decided its branch, and a worker resumed
    there would add work to a branch already in main."""
    task = await interrupted_fix(bot)
    assert "merged" in await bot.runtime.crew.branches.merge(OWNER, task.stored_id)
    model = HeldModel()
    bot.claude.handler = model
    with pytest.raises(ToolError, match=f"task #{task.id} was merged into main already; start a new task"):
        said = await bot.runtime.crew.branches.resume(OWNER, task.stored_id)
        pytest.fail(f"merged task #{task.id} resumed: {said}")
    await asyncio.sleep(1)
    assert (await bot.runtime.store.get_task(task.stored_id)).status is TaskStatus.INTERRUPTED
    assert not model.runs()


async def test_a_follow_up_of_a_merged_task_is_refused(bot: BotHarness) -> None:
    """A merged task's branch stays: a follow-up (a mention on its pull request, Fix CI pressed late) would put new,
    unjudged commits on a branch whose work is in main already, shown as that task's."""
    task = await fixed_add(bot, OWNER)
    assert "merged" in await bot.runtime.crew.branches.merge(OWNER, task.stored_id)
    bot.claude.handler = HeldModel()
    with pytest.raises(ToolError, match=f"task #{task.id} was merged into main already; start a new task"):
        follow = await bot.runtime.crew.starts.continue_task(OWNER, task.stored_id, "more")
        pytest.fail(f"follow-up #{follow.id} started on merged task #{task.id}'s branch")


@pytest.mark.settings(max_waiting_tasks=1, max_concurrent_tasks=1)
async def test_resume_counts_toward_max_waiting_tasks(bot: BotHarness) -> None:
    """MAX_WAITING_TASKS caps the conversation's tasks waiting or running for every start: a Resume adds one too."""
    model = HeldModel(threading.Event())
    bot.claude.handler = model
    try:
        await bot.runtime.crew.races.start_task(OWNER, "group-therapy", "code", "hold the slot", True)
        await until(model.working)
        task = await interrupted_task(bot)
        with pytest.raises(ToolError, match=r"\(MAX_WAITING_TASKS\)"):
            said = await bot.runtime.crew.branches.resume(OWNER, task.stored_id)
            pytest.fail(f"resumed past MAX_WAITING_TASKS=1: {said}")
        assert (await bot.runtime.store.get_task(task.stored_id)).status is TaskStatus.INTERRUPTED
    finally:
        model.release()
    await ended(bot, 1)
