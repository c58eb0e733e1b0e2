"""Schedules through the real bot: made in words (the orchestrator's schedule_task), listed with /schedules, fired by
APScheduler on the bot's loop, cancelled with the button; a restart between runs, an overlapping run, roles.

Telegram and Claude are the loopback fakes; the workspaces are real git repositories, the tasks run for real (their
tests in the sandbox). A slot a minute away is brought forward by moving the scheduler's own job to now (what
APScheduler does when the minute comes), so the interval tests take seconds, not minutes.
"""

from __future__ import annotations

import asyncio
import re
import shutil
import sqlite3
import sys
import threading
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta

import pytest

from agents.core.models import Caller, Schedule, ScheduleStatus, TaskStatus, WorkerKind
from agents.work.schedule_book import job_id
from tests.conftest import BotHarness, running_bot
from tests.fakes import anthropic_server as claude_says
from tests.scripted import RoleScript, last_user_text, spare
from tests.support.schedules import MEMBER, OWNER, SETTINGS, ZONE, confirm, said, schedule, tasks_of
from tests.support.tasks import HANG_GUARD, ended, until

# quick_tests: what these tests check is not the verdict, so calc's tests are one quick check (tests/conftest.py)
pytestmark = [
    pytest.mark.skipif(
        shutil.which("bwrap") is None or not sys.platform.startswith("linux"),
        reason="bubblewrap (bwrap) is not installed: scripts/install-system-deps.sh",
    ),
    pytest.mark.quick_tests,
]

GROUP = -1009100


@pytest.fixture
async def bot(fake_telegram, fake_anthropic, tmp_path, workspace_root, bot_repo) -> AsyncIterator[BotHarness]:
    async with running_bot(fake_telegram, fake_anthropic, tmp_path, workspace_root, bot_repo, **SETTINGS) as harness:
        yield harness


def report(text: str = "Ran the tests; nothing changed.") -> dict:
    return claude_says.text(text)


def fire_now(bot: BotHarness, schedule_id: int) -> None:
    """The schedule's next slot is now: its APScheduler job fires as it would when the time comes."""
    bot.runtime.schedules.firing.scheduler.modify_job(job_id(schedule_id), next_run_time=datetime.now(UTC))


def transcript(bot: BotHarness, chat: int, sent: list[tuple[int, str]]) -> str:
    """The chat as a reader saw it: what the user sent and what the bot answered, in order (message ids)."""
    lines = [(mid, f"> {text}") for mid, text in sent]
    for m in bot.tg.messages(chat):
        if m.text is None or m.deleted:
            continue
        buttons = f"   [{' | '.join(b['text'] for b in m.buttons)}]" if m.buttons else ""
        lines.append((m.message_id, "  " + m.text.replace("\n", "\n  ") + buttons))
    return "\n".join(text for _, text in sorted(lines, key=lambda pair: pair[0]))


def user_says(bot: BotHarness, text: str, sent: list, user: int = OWNER) -> None:
    update = bot.tg.send_text(user, text) if not text.startswith("/") else bot.tg.send_command(user, text)
    sent.append((update["message"]["message_id"], text))


async def test_made_in_words_listed_run_and_cancelled_from_schedules(bot: BotHarness, model: RoleScript) -> None:
    sent: list[tuple[int, str]] = []
    model.add("orchestrator", schedule(every_minutes=60), confirm)
    user_says(bot, "every hour run the tests in calc and tell me if anything is red", sent)
    confirmation = await bot.tg.await_for(lambda: said(bot, OWNER, "Schedule #1 set"))
    assert re.fullmatch(r"Schedule #1 set \(every hour\); next: \w{3} \d\d \w{3} \d\d:\d\d CET\.", confirmation.text)
    context = last_user_text(model.requests["orchestrator"][0])
    assert f"(time zone {ZONE})" in context, "the orchestrator is told the time in the owner's zone"
    stored = await bot.runtime.store.schedules.get(1)
    assert stored.user_id == OWNER and stored.workspace == "calc" and stored.every_minutes == 60
    assert abs((stored.next_run_at - stored.created_at) - timedelta(hours=1)) < timedelta(seconds=1)

    user_says(bot, "/schedules", sent)
    listing = await bot.tg.await_for(lambda: said(bot, OWNER, "Schedules"))
    assert "#1 [active] every hour · code in calc" in listing.text and "last none yet" in listing.text
    assert listing.callback_data == ["schedule:cancel:1"]

    model.add("code", report())
    fire_now(bot, 1)
    task = await ended(bot, 1)
    assert task.schedule_id == 1 and task.user_id == OWNER and task.title.startswith("schedule #1:")
    summary = await bot.tg.await_for(lambda: said(bot, OWNER, "Run of schedule #1"))
    first, second = summary.text.splitlines()[:2]
    assert first[0] in "✔✗⚠" and "Task #1" in first and second == "⏰ Run of schedule #1."
    assert await bot.runtime.schedules.next_run(1) > datetime.now(UTC) + timedelta(minutes=59), "the next slot follows"

    user_says(bot, "/schedules", sent)
    mark = {TaskStatus.COMPLETED: "✔", TaskStatus.UNVERIFIED: "⚠", TaskStatus.BLOCKED: "✗"}[task.status]
    listing = await bot.tg.await_for(lambda: said(bot, OWNER, f"last {mark} task #1"))
    bot.tg.press_button(OWNER, listing.message_id, "schedule:cancel:1")
    sent.append((listing.message_id + 0.5, "[taps ✖ Cancel #1]"))
    await bot.tg.await_for(lambda: said(bot, OWNER, "Schedule #1 cancelled"))
    assert (await bot.runtime.store.schedules.get(1)).status is ScheduleStatus.CANCELLED
    assert bot.runtime.schedules.firing.scheduler.get_job(job_id(1)) is None, "no job is left to fire"
    user_says(bot, "/schedules", sent)
    await bot.tg.await_for(lambda: said(bot, OWNER, "No schedules here"))
    print("\n--- transcript ---\n" + transcript(bot, OWNER, sent))


async def test_a_one_off_at_runs_once_by_itself_then_is_done(bot: BotHarness, model: RoleScript) -> None:
    soon = (datetime.now(UTC) + timedelta(seconds=2)).isoformat(timespec="seconds")
    model.add("orchestrator", schedule(worker="research", at=soon), confirm)
    model.add("research", report("## Summary\nAll fine.\n## Plan\n1. Nothing to do."))
    bot.say("in two seconds research calc")
    await bot.tg.await_for(lambda: said(bot, OWNER, "(once); next:"))
    proposal = await bot.tg.await_for(lambda: said(bot, OWNER, "Proposal #1"), timeout=HANG_GUARD)
    assert "⏰ Run of schedule #1." in proposal.text.splitlines()[0]
    done = await bot.runtime.store.schedules.get(1)
    assert done.status is ScheduleStatus.DONE and done.last_task_id == 1
    assert (await bot.runtime.store.get_task(1)).schedule_id == 1
    assert bot.runtime.schedules.firing.scheduler.get_job(job_id(1)) is None


async def test_bad_input_gets_one_sentence_and_nothing_is_stored(bot: BotHarness, model: RoleScript) -> None:
    past = (datetime.now(UTC) - timedelta(hours=1)).isoformat(timespec="seconds")
    for when in ({"cron": "0 25 * * *"}, {"at": past}, {"every_minutes": 0}):
        model.add("orchestrator", schedule(**when), confirm)
    for n in range(3):
        bot.say(f"schedule attempt {n}")
        await bot.tg.await_for(lambda n=n: len([m for m in bot.tg.messages(OWNER) if "could not" in m.text]) > n)
    refusals = [m.text for m in bot.tg.messages(OWNER) if "could not make it" in m.text]
    assert "invalid cron expression '0 25 * * *'" in refusals[0]
    assert "is in the past" in refusals[1] and "at least 1" in refusals[2]
    assert await bot.runtime.store.schedules.live(OWNER) == []


async def test_times_out_of_range_get_one_sentence_and_listing_keeps_working(
    bot: BotHarness, model: RoleScript
) -> None:
    """A time near year 9999 (with a zone), an interval of 1e400 minutes, a cron that never fires within a year: each
    one sentence, nothing stored, and the listing (the tool and /schedules) still answers."""
    sent: list[tuple[int, str]] = []
    bad = ({"at": "9999-12-31T23:30Z"}, {"every_minutes": float("inf")}, {"cron": "59 23 31 2,4,6,9,11 *"})
    for when in bad:
        model.add("orchestrator", schedule(**when), confirm)
    for n in range(len(bad)):
        user_says(bot, f"schedule attempt {n}", sent)
        await bot.tg.await_for(lambda n=n: len([m for m in bot.tg.messages(OWNER) if "could not" in m.text]) > n)
    refusals = [m.text for m in bot.tg.messages(OWNER) if "could not make it" in m.text]
    assert "'9999-12-31T23:30Z' is too far ahead" in refusals[0]
    assert "must be a finite number of minutes" in refusals[1]
    assert "never matches a time within a year" in refusals[2]
    assert await bot.runtime.store.schedules.live(OWNER) == [], "nothing stored"

    model.add(
        "orchestrator",
        claude_says.tool_use("list_schedules", {}),
        lambda body: claude_says.text(f"Listed: {last_user_text(body)}"),
    )
    user_says(bot, "what schedules are there?", sent)
    assert await bot.tg.await_for(lambda: said(bot, OWNER, "Listed: No schedules in this conversation."))
    user_says(bot, "/schedules", sent)
    assert await bot.tg.await_for(lambda: said(bot, OWNER, "No schedules")), transcript(bot, OWNER, sent)


async def test_the_per_chat_limit_is_one_sentence(
    fake_telegram, fake_anthropic, model: RoleScript, tmp_path, workspace_root, bot_repo
) -> None:
    async with running_bot(
        fake_telegram, fake_anthropic, tmp_path, workspace_root, bot_repo, **SETTINGS, schedules_max=1
    ) as bot:
        model.add("orchestrator", schedule(every_minutes=60), confirm, schedule(every_minutes=30), confirm)
        bot.say("every hour run the tests")
        await bot.tg.await_for(lambda: said(bot, OWNER, "Schedule #1 set"))
        bot.say("and every half hour too")
        refusal = await bot.tg.await_for(lambda: said(bot, OWNER, "could not make it"))
        assert "already has 1 schedules, the most allowed (SCHEDULES_MAX)" in refusal.text
        assert len(await bot.runtime.store.schedules.live(OWNER)) == 1


async def test_a_run_missed_while_the_bot_was_down_runs_once_at_start(
    fake_telegram, fake_anthropic, model: RoleScript, tmp_path, workspace_root, bot_repo
) -> None:
    model.add("orchestrator", schedule(every_minutes=1), confirm)
    async with running_bot(fake_telegram, fake_anthropic, tmp_path, workspace_root, bot_repo, **SETTINGS) as bot:
        bot.say("every minute run the tests in calc")
        await bot.tg.await_for(lambda: said(bot, OWNER, "Schedule #1 set"))
        model.add("code", report())
        fire_now(bot, 1)  # a first run while the bot is up
        await ended(bot, 1)
    # down for five slots: the stored next slot is five minutes old when the bot starts again (and the first run,
    # before it, older still)
    database = sqlite3.connect(tmp_path / "data" / "agentlab.db")
    missed = (datetime.now(UTC) - timedelta(minutes=5)).isoformat()
    first_run = (datetime.now(UTC) - timedelta(minutes=6)).isoformat()
    with database:
        database.execute("UPDATE schedules SET next_run_at = ? WHERE id = 1", (missed,))
        database.execute("UPDATE tasks SET created_at = ? WHERE id = 1", (first_run,))
    database.close()

    model.add("code", report(), spare(report(), why="a second catch-up run would take it: none may start"))
    async with running_bot(fake_telegram, fake_anthropic, tmp_path, workspace_root, bot_repo, **SETTINGS) as bot:
        await ended(bot, 2)
        await asyncio.sleep(1.0)  # a second catch-up run would have started by now
        runs = [t.id for t in await tasks_of(bot, OWNER)]
        assert runs == [2, 1], "the missed slots ran once, not once each"
        assert said(bot, OWNER, "skipped") is None, "no second run even tried"
        upcoming = await bot.runtime.schedules.next_run(1)
        assert datetime.now(UTC) < upcoming <= datetime.now(UTC) + timedelta(minutes=1), "then the next slot"
        stored = await bot.runtime.store.schedules.get(1)
        assert stored.last_task_id == 2 and stored.next_run_at == upcoming


async def test_a_run_whose_previous_run_is_still_going_is_skipped(bot: BotHarness, model: RoleScript) -> None:
    go = threading.Event()

    def held(body: dict) -> dict:
        go.wait(30)
        return report()

    model.add("orchestrator", schedule(every_minutes=5), confirm)
    bot.say("every 5 minutes run the tests in calc")
    await bot.tg.await_for(lambda: said(bot, OWNER, "Schedule #1 set"))
    model.add("code", held)
    fire_now(bot, 1)
    await bot.tg.await_for(lambda: len(model.requests["code"]) == 1, timeout=HANG_GUARD)
    fire_now(bot, 1)
    skipped = await bot.tg.await_for(lambda: said(bot, OWNER, "skipped this run"))
    assert "task #1 of its previous run is still in progress" in skipped.text and "Next run:" in skipped.text
    go.set()
    await ended(bot, 1)
    assert [t.id for t in await tasks_of(bot, OWNER)] == [1]
    assert "skipped" in (await bot.runtime.store.schedules.get(1)).note


async def test_a_missing_workspace_pauses_the_schedule_with_one_message(
    bot: BotHarness, model: RoleScript, workspace_root
) -> None:
    model.add("orchestrator", schedule(workspace="group therapy", every_minutes=5), confirm)
    bot.say("every 5 minutes run the tests in group therapy")
    await bot.tg.await_for(lambda: said(bot, OWNER, "Schedule #1 set"))
    shutil.rmtree(workspace_root / "group-therapy")
    fire_now(bot, 1)
    paused = await bot.tg.await_for(lambda: said(bot, OWNER, "is paused"))
    assert "its workspace group-therapy no longer exists" in paused.text
    stored = await bot.runtime.store.schedules.get(1)
    assert stored.status is ScheduleStatus.PAUSED and bot.runtime.schedules.firing.scheduler.get_job(job_id(1)) is None
    assert await tasks_of(bot, OWNER) == []
    assert await bot.runtime.schedules.run(1) is None, "a paused schedule does not run"
    assert len([m for m in bot.tg.messages(OWNER) if "is paused" in m.text]) == 1, "one message"
    listing = await bot.runtime.schedules.list_text(Caller(chat_id=OWNER, user_id=OWNER))
    assert "[paused]" in listing and "paused (its workspace `group-therapy` no longer exists)" in listing


async def test_a_members_schedule_is_bounded_by_the_members_role(bot: BotHarness, model: RoleScript) -> None:
    bot.tg.send_command(OWNER, "/start", chat_id=GROUP)  # a group the owner and the member share
    await bot.tg.await_for(lambda: bot.tg.messages(GROUP))
    model.add("orchestrator", schedule(workspace="self", every_minutes=60), confirm)
    bot.tg.send_text(MEMBER, "@test_bot every hour tidy up your own code", chat_id=GROUP, username="mia")
    refusal = await bot.tg.await_for(lambda: said(bot, GROUP, "could not make it"))
    assert "only an owner can work on the bot's own code" in refusal.text
    assert await bot.runtime.store.schedules.live(GROUP) == []

    model.add("orchestrator", schedule(workspace="calc", every_minutes=60), confirm)
    bot.tg.send_text(MEMBER, "@test_bot every hour run the tests in calc", chat_id=GROUP, username="mia")
    await bot.tg.await_for(lambda: said(bot, GROUP, "Schedule #1 set"))
    model.add("code", report())
    fire_now(bot, 1)
    task = await ended(bot, 1)
    assert task.user_id == MEMBER and task.user_name == "@mia", "the run acts as the member who made it"

    model.add("orchestrator", schedule(workspace="calc", every_minutes=30), confirm)
    bot.tg.send_text(OWNER, "@test_bot every half hour run the tests in calc", chat_id=GROUP)
    await bot.tg.await_for(lambda: said(bot, GROUP, "Schedule #2 set"))
    context = last_user_text(model.requests["orchestrator"][4])  # the turn that made #2 knew of #1
    assert "- schedule #1 [active] every 60 min, code in calc: Run the tests" in context
    bot.tg.send_command(MEMBER, "/schedules", chat_id=GROUP)
    listing = await bot.tg.await_for(lambda: said(bot, GROUP, "Schedules"))
    assert listing.callback_data == ["schedule:cancel:1", "schedule:cancel:2"]
    bot.tg.press_button(MEMBER, listing.message_id, "schedule:cancel:2", chat_id=GROUP, username="mia")
    refused = await bot.tg.await_for(lambda: said(bot, GROUP, "only the member who made it or an owner"))
    assert refused.text.startswith("Schedule #2 is @user1001's")
    assert (await bot.runtime.store.schedules.get(2)).status is ScheduleStatus.ACTIVE
    bot.tg.press_button(OWNER, listing.message_id, "schedule:cancel:1", chat_id=GROUP)  # owners cancel anyone's
    await bot.tg.await_for(lambda: said(bot, GROUP, "Schedule #1 cancelled"))


async def test_a_slot_whose_run_was_started_before_a_kill_does_not_run_again(
    fake_telegram, fake_anthropic, tmp_path, workspace_root, bot_repo, model: RoleScript
) -> None:
    """A run stores its task, then notes it on the schedule (its last task, its next slot). A kill between the two
    leaves the schedule due at a slot whose task exists: after the restart the slot is noted, not run again."""
    model.add("orchestrator", schedule(every_minutes=60), confirm)
    async with running_bot(fake_telegram, fake_anthropic, tmp_path, workspace_root, bot_repo, **SETTINGS) as bot:
        bot.say("every hour run the tests in calc")
        await bot.tg.await_for(lambda: said(bot, OWNER, "Schedule #1 set"))
        model.add("code", report())
        slot = datetime.now(UTC)
        fire_now(bot, 1)
        await ended(bot, 1)
    with sqlite3.connect(tmp_path / "data" / "agentlab.db") as db:  # what the kill leaves: the record as before
        db.execute(
            "UPDATE schedules SET next_run_at = ?, last_task_id = NULL, last_run_at = NULL, note = NULL WHERE id = 1",
            (slot.isoformat(),),
        )
    async with running_bot(fake_telegram, fake_anthropic, tmp_path, workspace_root, bot_repo, **SETTINGS) as bot:
        store = bot.runtime.store

        async def noted() -> bool:  # the start-up's catch-up of the missed slot has been through it
            kept = await store.schedules.get(1)
            return kept is not None and kept.next_run_at is not None and kept.next_run_at > slot

        await until(noted)
        assert [t.id for t in await tasks_of(bot, OWNER)] == [1], "the slot ran again"
        assert (await store.schedules.get(1)).last_task_id == 1


async def test_a_schedule_whose_maker_is_unknown_does_not_run(bot: BotHarness) -> None:
    """A run acts as its maker; a stored schedule with none would act as nobody (and, in the role checks, as the
    bot itself): it is paused instead."""
    made = await bot.runtime.store.schedules.add(
        Schedule(
            chat_id=OWNER,
            user_id=None,
            workspace="calc",
            worker=WorkerKind.CODE,
            instructions="Run the tests.",
            every_minutes=60,
            next_run_at=datetime.now(UTC) + timedelta(hours=1),
        )
    )
    assert await bot.runtime.schedules.run(made.stored_id) is None
    assert await tasks_of(bot, OWNER) == []
    assert (await bot.runtime.store.schedules.get(made.stored_id)).status is ScheduleStatus.PAUSED
