"""TASK_ENGINE=temporal: schedules are Temporal Schedules on a real `temporal server start-dev`, made, run, paused and
cancelled through the real bot (fake Telegram and Anthropic); slots that come while the bot is down run once when it
is back. The firing on its own (`TemporalFiring`, beside the local one for the same stored schedules): a cluster that
lacks a schedule gets it as the store has it (its missed slot run once, paused if paused), one left by an earlier
database at the same path is replaced, and a cron runs on the same days as the bot says. The runs are research, which with TASK_ENGINE=temporal runs on an `agentlab runner` (one process here, its
workspaces cloned from the same bare repository as the bot's; its code served on the test's event loop)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import subprocess
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from agents.core.models import Schedule, ScheduleStatus, WorkerKind
from agents.work.schedule_timing import trigger_of
from tests.conftest import make_settings, running_bot
from tests.fakes import anthropic_server as claude_says
from tests.scripted import RoleScript
from tests.support.schedules import OWNER, SETTINGS, confirm, said, schedule, tasks_of
from tests.support.tasks import ended, until
from tests.support.temporal import Runners, clone_workspaces, needs_temporal, runner_env

temporalio = pytest.importorskip("temporalio", reason="the Temporal SDK (the optional extra .[temporal]) is missing")
pytestmark = needs_temporal
HANG_GUARD = 60
PROPOSAL = "## Summary\nAll fine.\n## Plan\n1. Nothing to do."


@pytest.fixture
async def runner(tmp_path, workspace_root, temporal, fake_anthropic) -> AsyncIterator[tuple[Path, str]]:
    """One runner on the test's queue; the bot's workspaces become clones of a shared bare calc."""
    bare = tmp_path / "remote" / "calc.git"
    subprocess.run(["git", "clone", "-q", "--bare", str(workspace_root / "calc"), str(bare)], check=True)
    shared = clone_workspaces(bare, tmp_path / "bot-workspaces")
    queue = f"q-{os.getpid()}-schedules"  # the dev server is shared by the test process's Temporal tests
    group = Runners(tmp_path, bare, runner_env(temporal, queue, fake_anthropic.url))
    group.serve("a")
    yield shared, queue
    await group.close()


async def test_temporal_schedules_fire_pause_and_go_with_the_bots(
    fake_telegram, fake_anthropic, tmp_path, bot_repo, temporal, runner
) -> None:
    from temporalio.client import Client
    from temporalio.service import RPCError

    model = RoleScript()
    fake_anthropic.handler = model
    workspace_root, queue = runner
    engine = dict(SETTINGS, task_engine="temporal", temporal_address=temporal, temporal_task_queue=queue)
    client = await Client.connect(temporal)

    model.add("orchestrator", schedule(worker="research", every_minutes=60), confirm)
    async with running_bot(fake_telegram, fake_anthropic, tmp_path, workspace_root, bot_repo, **engine) as bot:
        bot.say("every hour research calc")
        await bot.tg.await_for(lambda: said(bot, OWNER, "Schedule #1 set"), timeout=HANG_GUARD)
        handle = client.get_schedule_handle(bot.runtime.schedules.firing.schedule_id(1))
        described = await handle.describe()
        stored = await bot.runtime.store.schedules.get(1)
        first = described.info.next_action_times[0]
        assert abs(first - (stored.created_at + timedelta(hours=1))) < timedelta(seconds=2), "an hour from its making"
        assert await bot.runtime.schedules.next_run(1) == first

        model.add("research", claude_says.text(PROPOSAL))
        await handle.trigger()  # the slot comes: Temporal starts the run, the bot's worker runs it
        proposal = await bot.tg.await_for(lambda: said(bot, OWNER, "Proposal #1"), timeout=HANG_GUARD)
        assert "⏰ Run of schedule #1." in proposal.text
        await ended(bot, 1)

    # the bot is down for two slots: the first run waits for it, the second is skipped as an overlap
    await handle.trigger()
    await until(lambda: _running(handle))
    await handle.trigger()
    await until(lambda: _skipped(handle))

    model.add("research", claude_says.text(PROPOSAL))
    async with running_bot(fake_telegram, fake_anthropic, tmp_path, workspace_root, bot_repo, **engine) as bot:
        await ended(bot, 2)
        await asyncio.sleep(1.0)
        assert [t.id for t in await tasks_of(bot, OWNER)] == [2, 1], "the slots missed while down ran once"

        model.add(
            "orchestrator",
            claude_says.tool_use("pause_schedule", {"schedule_id": 1}),
            claude_says.text("Paused schedule #1."),
        )
        bot.say("pause the hourly research")
        await bot.tg.await_for(lambda: said(bot, OWNER, "Paused schedule #1."), timeout=HANG_GUARD)
        assert (await handle.describe()).schedule.state.paused
        assert (await bot.runtime.store.schedules.get(1)).status is ScheduleStatus.PAUSED

        bot.tg.send_command(OWNER, "/schedules")
        listing = await bot.tg.await_for(lambda: said(bot, OWNER, "Schedules"))
        assert "[paused]" in listing.text
        bot.tg.press_button(OWNER, listing.message_id, "schedule:cancel:1")
        await bot.tg.await_for(lambda: said(bot, OWNER, "Schedule #1 cancelled"))
        with pytest.raises(RPCError):
            await handle.describe()


async def _running(handle) -> bool:  # noqa: ANN001
    return bool((await handle.describe()).info.running_actions)


async def _skipped(handle) -> bool:  # noqa: ANN001
    return (await handle.describe()).info.num_actions_skipped_overlap >= 1


# ---- the firing on its own ---------------------------------------------------------------------------------------------
class Recorder:
    """A `fire` that records the runs (a plain coroutine function: APScheduler awaits only those)."""

    def __init__(self) -> None:
        self.fired: list[int] = []

        async def fire(schedule_id: int) -> None:
            self.fired.append(schedule_id)

        self.fire = fire

    async def fired_within(self, seconds: float) -> list[int]:
        for _ in range(int(seconds * 10)):
            if self.fired:
                break
            await asyncio.sleep(0.1)
        return self.fired


def firing(fake_telegram, fake_anthropic, tmp_path: Path, temporal: str, kind: str = "temporal"):  # noqa: ANN001
    """A `Firing` of `kind` on its own, its database (so its Temporal Schedule ids) the test's."""
    settings = make_settings(
        fake_telegram,
        fake_anthropic,
        tmp_path,
        tmp_path,
        task_engine="temporal",
        temporal_address=temporal,
        temporal_task_queue=f"q-{os.getpid()}-firing",
        timezone="Europe/Berlin",
        database_path=tmp_path / "data" / "agentlab.db",
    )
    if kind == "local":
        from agents.work.schedule_book import LocalFiring

        return LocalFiring(settings.schedules.zone)
    from agents.engine.temporal_schedules import TemporalFiring

    return TemporalFiring(settings)


def stored(**when) -> Schedule:  # noqa: ANN003
    return Schedule(
        id=1, chat_id=OWNER, user_id=OWNER, user_name="@ana", workspace="calc", worker=WorkerKind.RESEARCH,
        instructions="Run the tests.", **when,
    )  # fmt: skip


async def closed(made) -> None:  # noqa: ANN001
    """The firing closed, its Temporal Schedule deleted from the dev server the test process shares."""
    from temporalio.service import RPCError

    if getattr(made, "client", None) is not None:
        with contextlib.suppress(RPCError):
            await made.handle(1).delete()
    assert await made.stopped(timeout=15), "the firing's schedule worker did not shut down"


@pytest.mark.parametrize("kind", ["local", "temporal"])
@pytest.mark.parametrize("when", ["every hour", "once"])
async def test_a_slot_missed_while_down_runs_once_at_start_though_the_cluster_lacks_the_schedule(
    kind, when, fake_telegram, fake_anthropic, tmp_path, temporal
) -> None:
    """The store's slot passed while the bot was down, and the cluster has no such schedule (a dev server restarted,
    a new namespace, a bot that ran TASK_ENGINE=local until now): created at start, its missed slot runs once, as
    under the local engine."""
    now = datetime.now(UTC).replace(microsecond=0)
    if when == "once":
        due = now - timedelta(minutes=3)
        schedule = stored(at=due, created_at=due - timedelta(hours=1), next_run_at=due)
    else:
        made = now - timedelta(minutes=61)
        schedule = stored(every_minutes=60, created_at=made, next_run_at=made + timedelta(minutes=60))
    made_firing, fire = firing(fake_telegram, fake_anthropic, tmp_path, temporal, kind), Recorder()
    try:
        await made_firing.start([schedule], fire.fire)
        assert await fire.fired_within(15) == [1], f"{kind}: the slot due at {schedule.next_run_at} did not run"
    finally:
        await closed(made_firing)


async def test_a_paused_schedule_the_cluster_lacks_is_made_paused(
    fake_telegram, fake_anthropic, tmp_path, temporal
) -> None:
    now = datetime.now(UTC)
    paused = stored(every_minutes=60, created_at=now - timedelta(minutes=10), status=ScheduleStatus.PAUSED)
    made = firing(fake_telegram, fake_anthropic, tmp_path, temporal)
    try:
        await made.start([paused], Recorder().fire)
        assert (await made.handle(1).describe()).schedule.state.paused, "paused in the store, active on the cluster"
    finally:
        await closed(made)


async def test_a_schedule_left_by_an_earlier_database_is_replaced_not_trusted(
    fake_telegram, fake_anthropic, tmp_path, temporal
) -> None:
    """The cluster still has schedule #1 of an earlier database at the same path (restored, or deleted to start
    afresh: the ids are the path's): a new schedule #1 armed gets its own spec, never the old one's cadence."""
    now = datetime.now(UTC)
    old = firing(fake_telegram, fake_anthropic, tmp_path, temporal)
    await old.start([], Recorder().fire)
    try:
        await old.arm(stored(every_minutes=1, created_at=now - timedelta(days=3)))
    finally:
        assert await old.stopped(timeout=15), "the firing's schedule worker did not shut down"
    new = firing(fake_telegram, fake_anthropic, tmp_path, temporal)
    await new.start([], Recorder().fire)
    try:
        daily = stored(cron="0 3 * * *", created_at=now)
        await new.arm(daily)
        upcoming = await new.next_run(1)
        assert upcoming == trigger_of(daily, new.zone).get_next_fire_time(None, now), f"the old spec fires: {upcoming}"
    finally:
        await closed(new)


@pytest.mark.parametrize(
    "expression", ["0 9 * * 1/2", "0 9 * * 3/4", "0 9 * * 1-5", "0 9 * * 7", "30 8 1 * 1", "0 9 15 * 1-5"]
)
async def test_a_cron_runs_on_the_same_days_on_the_cluster_as_the_bot_says(
    expression, fake_telegram, fake_anthropic, tmp_path, temporal
) -> None:
    """A weekday step from a start (`1/2`) is start..6 to the bot (its 'next run', the local engine); Temporal read
    the raw expression as start..7 (an extra Sunday). The cluster gets the weekdays as the bot reads them."""
    now = datetime.now(UTC)
    schedule = stored(cron=expression, created_at=now)
    made = firing(fake_telegram, fake_anthropic, tmp_path, temporal)
    await made.start([], Recorder().fire)
    try:
        await made.arm(schedule)
        remote = [t.astimezone(UTC) for t in (await made.handle(1).describe()).info.next_action_times]
        trigger, local, previous, after = trigger_of(schedule, made.zone), [], None, now
        while len(local) < len(remote):
            previous = trigger.get_next_fire_time(previous, after)
            local.append(previous.astimezone(UTC))
            after = previous + timedelta(seconds=1)
        assert remote and remote == local, f"{expression!r}: the bot says {local}, the cluster runs {remote}"
    finally:
        await closed(made)
