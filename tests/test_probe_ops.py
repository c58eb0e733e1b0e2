"""Probes: a careless user and an unlucky operator (restarts, kills, clock edges). Each test asserts the safe
behaviour; a failure is a defect."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from agents.core.models import Schedule, WorkerKind
from agents.work.schedule_book import job_id
from agents.work.schedule_timing import cron_trigger
from tests.conftest import USER_ID, make_settings, running_bot, start_bot
from tests.fakes import anthropic_server as claude_says
from tests.scripted import RoleScript, spare
from tests.support.schedules import OWNER, SETTINGS, confirm, said, schedule, tasks_of
from tests.support.tasks import ended


def fire_now(bot, schedule_id: int) -> None:
    bot.runtime.schedules.firing.scheduler.modify_job(job_id(schedule_id), next_run_time=datetime.now(UTC))


# ---- schedules ------------------------------------------------------------------------------------------------


async def test_probe_a_slot_whose_task_was_stored_runs_once_after_a_kill_before_the_schedule_record(
    fake_telegram, fake_anthropic, model: RoleScript, tmp_path, workspace_root, bot_repo
) -> None:
    """A schedule's run stores its task (work_starts.submit) and only then writes last_task_id / next_run_at on the
    schedule (schedule_book.run). A SIGKILL between the two leaves: the task stored for the slot, the schedule still
    due at that slot with no last task. After the restart the slot must not start a second task."""
    model.add("orchestrator", schedule(every_minutes=60), confirm)
    async with running_bot(fake_telegram, fake_anthropic, tmp_path, workspace_root, bot_repo, **SETTINGS) as bot:
        bot.say("every hour run the tests in calc")
        await bot.tg.await_for(lambda: said(bot, OWNER, "Schedule #1 set"))
        model.add("code", claude_says.text("Ran the tests."))
        slot = datetime.now(UTC)
        fire_now(bot, 1)
        await ended(bot, 1)
    # what a kill right after add_task leaves: the schedule record as it was before the run, its slot now past
    db = sqlite3.connect(tmp_path / "data" / "agentlab.db")
    with db:
        db.execute(
            "UPDATE schedules SET next_run_at = ?, last_task_id = NULL, last_run_at = NULL, note = NULL WHERE id = 1",
            (slot.isoformat(),),
        )
    db.close()
    model.add("code", spare(claude_says.text("Ran the tests again."), why="a duplicate run of the same slot"))
    async with running_bot(fake_telegram, fake_anthropic, tmp_path, workspace_root, bot_repo, **SETTINGS) as bot:
        await asyncio.sleep(4.0)
        runs = [t.id for t in await tasks_of(bot, OWNER)]
        assert runs == [1], f"the slot of {slot:%H:%M:%S} already has task #1 (schedule_id=1); it ran again: {runs}"


async def test_probe_a_schedule_whose_maker_is_unknown_does_not_run(bot, model: RoleScript) -> None:
    """The allowed-user check in schedule_book.run is skipped when user_id is None: fail-open."""
    store = bot.runtime.store
    made = await store.schedules.add(
        Schedule(
            chat_id=USER_ID,
            user_id=None,
            user_name=None,
            workspace="calc",
            worker=WorkerKind.CODE,
            instructions="Run the tests.",
            every_minutes=60,
            created_at=datetime.now(UTC),
            next_run_at=datetime.now(UTC) + timedelta(hours=1),
        )
    )
    model.add("code", spare(claude_says.text("done"), why="a run as nobody"))
    task = await bot.runtime.schedules.run(made.stored_id)
    assert task is None, f"a schedule with no maker started task #{task and task.id} as nobody"


def test_probe_a_cron_slot_in_the_repeated_hour_fires_once_on_the_fall_back_night() -> None:
    """Europe/Berlin, 2026-10-25: 02:00-03:00 happens twice. A daily 02:30 must run once that day."""
    zone = ZoneInfo("Europe/Berlin")
    trigger = cron_trigger("30 2 * * *", zone)
    now = datetime(2026, 10, 24, 12, 0, tzinfo=zone)
    fires: list[datetime] = []
    previous = None
    for _ in range(4):
        nxt = trigger.get_next_fire_time(previous, now)
        fires.append(nxt)
        previous, now = nxt, nxt
    on_the_day = [f for f in fires if f.astimezone(zone).date().isoformat() == "2026-10-25"]
    assert len(on_the_day) == 1, f"fires on the fall-back day: {[f.isoformat() for f in on_the_day]}"


def test_probe_a_cron_slot_in_the_missing_hour_still_runs_on_the_spring_forward_day() -> None:
    """Europe/Berlin, 2026-03-29: 02:00-03:00 does not exist. A daily 02:30 must not silently skip the day."""
    zone = ZoneInfo("Europe/Berlin")
    trigger = cron_trigger("30 2 * * *", zone)
    now = datetime(2026, 3, 28, 12, 0, tzinfo=zone)
    fires: list[datetime] = []
    previous = None
    for _ in range(3):
        nxt = trigger.get_next_fire_time(previous, now)
        fires.append(nxt)
        previous, now = nxt, nxt
    days = [f.astimezone(zone).date().isoformat() for f in fires]
    assert "2026-03-29" in days, f"the daily run skipped the spring-forward day: {[f.isoformat() for f in fires]}"


# ---- messages in flight when the bot stops --------------------------------------------------------------------


async def test_probe_a_message_queued_behind_a_turn_is_not_dropped_silently_by_a_stop(
    fake_telegram, fake_anthropic, model: RoleScript, tmp_path, workspace_root, bot_repo
) -> None:
    """Message A's turn is in flight; message B waits for the chat's lock. The bot stops. After the restart the chat
    must hear about B too (answered, or asked to send it again): Telegram already has B's update confirmed."""
    go = threading.Event()

    def held(body: dict) -> dict:
        go.wait(20)
        return claude_says.text("answer to A")

    model.add("orchestrator", spare(held, why="A's turn, cut short"))
    async with running_bot(fake_telegram, fake_anthropic, tmp_path, workspace_root, bot_repo) as bot:
        bot.say("first question alpha")
        await bot.tg.await_for(lambda: len(model.requests["orchestrator"]) == 1)
        b_id = bot.say("second question bravo")["message"]["message_id"]
        await bot.tg.await_for(lambda: not bot.tg.pending_updates)
        await asyncio.sleep(0.5)
    go.set()
    asked = len(model.requests["orchestrator"])
    model.add("orchestrator", spare(claude_says.text("answer"), why="B answered after restart"))
    async with running_bot(fake_telegram, fake_anthropic, tmp_path, workspace_root, bot_repo) as bot:
        await asyncio.sleep(3.0)
        texts = [m.text or "" for m in bot.tg.messages(USER_ID)]
        about_b = [m for m in bot.tg.messages(USER_ID) if m.reply_to_message_id == b_id or "bravo" in (m.text or "")]
        assert about_b or len(model.requests["orchestrator"]) > asked, (
            f"message B ('second question bravo') vanished without a word; the chat saw: {texts}"
        )


async def test_probe_a_voice_note_being_transcribed_is_not_dropped_silently_by_a_stop(
    fake_telegram, fake_anthropic, model: RoleScript, tmp_path, workspace_root, bot_repo
) -> None:
    """A voice note whose transcription is under way when the bot stops: after the restart the chat must be told (no
    open turn exists yet: it is begun only once the transcript reaches the orchestrator)."""
    from telegram_bot.app import stop_application
    from tests.fakes.whisper_checkpoint import FakeTranscriber

    settings = make_settings(fake_telegram, fake_anthropic, tmp_path, workspace_root, bot_repository=bot_repo)
    slow = FakeTranscriber("deploy the thing", delay=30.0)
    model.add("orchestrator", spare(claude_says.text("ok"), why="the note answered"))
    loop = asyncio.get_running_loop()
    bot = await start_bot(settings, fake_telegram, fake_anthropic, transcriber=slow)
    try:
        note_id = fake_telegram.send_voice(USER_ID, b"OggS" + b"\0" * 200, duration=3)["message"]["message_id"]
        await fake_telegram.await_for(lambda: slow.received)
        await asyncio.sleep(0.3)
    finally:
        t0 = loop.time()
        await stop_application(bot.app)
        stop_took = loop.time() - t0
    bot = await start_bot(settings, fake_telegram, fake_anthropic, transcriber=FakeTranscriber())
    try:
        await asyncio.sleep(3.0)
        texts = [m.text or "" for m in fake_telegram.messages(USER_ID)]
        about = [m for m in fake_telegram.messages(USER_ID) if m.reply_to_message_id == note_id]
        told = [t for t in texts if "voice" in t.lower() or "again" in t.lower()]
        print("STOP TOOK", stop_took, "CHAT", texts, "ORCH", len(model.requests["orchestrator"]))
        assert about or told, f"the voice note cut short by the stop vanished without a word; the chat saw: {texts}"
    finally:
        await stop_application(bot.app)


# ---- voice download faults ------------------------------------------------------------------------------------


async def test_probe_a_5xx_on_get_file_does_not_lose_the_voice_note(bot, model: RoleScript) -> None:
    """One 502 from getFile (Telegram unwell for a moment): the note is still transcribed and answered."""
    model.add("orchestrator", claude_says.text("Got it."))
    bot.tg.fail_next("getFile", error_code=502, description="Bad Gateway")
    bot.tg.send_voice(USER_ID, b"OggS" + b"\0" * 200, duration=2)
    try:
        await bot.tg.await_for(lambda: said(bot, USER_ID, "Got it."), timeout=15)
    except (TimeoutError, AssertionError):
        texts = [m.text for m in bot.tg.messages(USER_ID)]
        pytest.fail(f"a single 502 on getFile lost the voice note; the chat saw: {texts}")
