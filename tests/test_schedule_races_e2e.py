"""Schedules against races and changed roles, through the real bot (fake Telegram, scripted model, real git and
bwrap): runs that come due together stay within MAX_WAITING_TASKS, a cancel and a run of one schedule take turns (the
cancel never says "it will not run again" before a run that then starts its task), and a schedule on the bot's own
code whose maker is no longer an owner is paused once instead of being refused, and the owners asked, at every run."""

from __future__ import annotations

import asyncio
import shutil
import sys
import threading

import pytest

from agents.core.models import Caller, TaskStatus
from tests.conftest import running_bot
from tests.fakes import anthropic_server as claude_says
from tests.scripted import RoleScript, spare
from tests.support.schedules import MEMBER, OWNER, SETTINGS, tasks_of
from tests.support.tasks import ended

pytestmark = [
    pytest.mark.skipif(
        shutil.which("bwrap") is None or not sys.platform.startswith("linux"),
        reason="bubblewrap (bwrap) is not installed",
    ),
    pytest.mark.quick_tests,
]

INSTRUCTIONS = "Run the tests and report whether anything is red."


async def make(bot, caller: Caller, workspace: str = "calc", **when: object) -> int:
    said = await bot.runtime.schedules.make(caller, workspace, "code", INSTRUCTIONS, **when)
    assert "made" in said, said
    live = await bot.runtime.store.schedules.live(caller.chat_id)
    return live[-1].stored_id


async def test_schedules_firing_together_stay_within_max_waiting_tasks(
    fake_telegram, fake_anthropic, model: RoleScript, tmp_path, workspace_root, bot_repo
) -> None:
    """MAX_WAITING_TASKS=1: two schedules of one chat come due at the same moment; one run starts, the other is
    refused ("the most (MAX_WAITING_TASKS)"), never both."""
    go = threading.Event()

    def held(body: dict) -> dict:
        go.wait(30)
        return claude_says.text("Ran the tests; nothing changed.")

    async with running_bot(
        fake_telegram, fake_anthropic, tmp_path, workspace_root, bot_repo, **SETTINGS, max_waiting_tasks=1
    ) as bot:
        owner = Caller(chat_id=OWNER, user_id=OWNER, user_name="@owner")
        first = await make(bot, owner, every_minutes=60)
        second = await make(bot, owner, every_minutes=60)
        model.add("code", held, spare(held, why="a second run must not start"))
        book = bot.runtime.schedules
        await asyncio.gather(book._fire(first), book._fire(second))  # what APScheduler does when both come due
        stored = await tasks_of(bot, OWNER)
        try:
            active = [t for t in stored if t.status in (TaskStatus.PENDING, TaskStatus.IN_PROGRESS)]
            assert len(active) <= 1, f"{len(active)} tasks waiting or running with MAX_WAITING_TASKS=1: " + "; ".join(
                f"#{t.id} {t.status.value}" for t in active
            )
        finally:
            go.set()
            for t in stored:
                await ended(bot, t.stored_id)


async def test_a_schedule_on_self_whose_maker_is_no_longer_an_owner_is_paused_not_asked_each_run(
    fake_telegram, fake_anthropic, model: RoleScript, tmp_path, workspace_root, bot_repo
) -> None:
    """An owner's schedule on the bot's own code; OWNER_USER_IDS changes and its maker is a member now. Its runs are
    refused (members reach none of `self`): the schedule is paused with one clear message, as when its maker or its
    workspace is gone, rather than refused anew at every run, each time handing the owners a request they cannot act
    on ("I've asked them")."""
    async with running_bot(fake_telegram, fake_anthropic, tmp_path, workspace_root, bot_repo, **SETTINGS) as bot:
        made = await make(
            bot, Caller(chat_id=OWNER, user_id=OWNER, user_name="@ana"), workspace="self", cron="0 3 * * *"
        )
    demoted = {**SETTINGS, "owner_user_ids": str(MEMBER)}
    async with running_bot(fake_telegram, fake_anthropic, tmp_path, workspace_root, bot_repo, **demoted) as bot:
        book = bot.runtime.schedules
        for _ in range(3):  # three nights
            assert await book.run(made) is None
        asked = [m.text for m in bot.tg.messages(MEMBER) if "asks" in (m.text or "")]
        told = [m.text for m in bot.tg.messages(OWNER) if f"Schedule #{made}" in (m.text or "")]
        stored = await bot.runtime.store.schedules.get(made)
        assert await tasks_of(bot, OWNER) == []
        assert asked == [] and len(told) == 1, (
            f"status {stored.status.value}; owners asked {len(asked)}x: {asked[:1]}; maker told {len(told)}x: {told[:1]}"
        )
        assert stored.status.value == "paused"
        assert "is paused: it works on the bot's own code, and its maker is no longer an owner" in told[0], told[0]


async def test_a_cancel_during_a_run_waits_for_it_and_names_its_task(
    fake_telegram, fake_anthropic, model: RoleScript, tmp_path, workspace_root, bot_repo
) -> None:
    """The owner taps Cancel while a run of the schedule is under way (its checks done, its task not yet stored).
    The two take turns: the cancel waits for the run, then says the task of that run goes on; nothing runs after."""
    async with running_bot(fake_telegram, fake_anthropic, tmp_path, workspace_root, bot_repo, **SETTINGS) as bot:
        owner = Caller(chat_id=OWNER, user_id=OWNER, user_name="@ana")
        made = await make(bot, owner, every_minutes=60)
        book = bot.runtime.schedules
        access = bot.runtime.crew.starts.access
        reached, release = asyncio.Event(), asyncio.Event()
        real_check = access.check_budget

        async def slow_check() -> None:  # the store is busy a moment at the run's budget check
            reached.set()
            await release.wait()
            await real_check()

        access.check_budget = slow_check
        model.add("code", claude_says.text("Ran the tests."))
        run = asyncio.create_task(book.run(made))
        await asyncio.wait_for(reached.wait(), 10)
        access.check_budget = real_check
        cancel = asyncio.create_task(book.cancel(owner, made))
        await asyncio.sleep(0.3)
        assert not cancel.done(), f"the cancel answered while a run was under way: {cancel.result()!r}"
        release.set()
        started, said = await asyncio.wait_for(asyncio.gather(run, cancel), 30)
        assert started is not None
        assert said == f"Schedule #{made} cancelled: it will not run again. Task #{started.id} of its last run goes on."
        assert await book.run(made) is None, "a cancelled schedule ran again"
        stored = await tasks_of(bot, OWNER)
        for t in stored:
            await ended(bot, t.stored_id)
        assert [t.id for t in stored] == [started.id]
