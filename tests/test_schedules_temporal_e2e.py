"""TASK_ENGINE=temporal: schedules are Temporal Schedules on a real `temporal server start-dev`, made, run, paused and
cancelled through the real bot (fake Telegram and Anthropic); slots that come while the bot is down run once when it
is back. The runs are research, which with TASK_ENGINE=temporal runs on an `agentlab runner` (one process here, its
workspaces cloned from the same bare repository as the bot's; its code served on the test's event loop)."""

from __future__ import annotations

import asyncio
import os
import subprocess
from collections.abc import AsyncIterator
from datetime import timedelta
from pathlib import Path

import pytest

from agents.core.models import ScheduleStatus
from tests.conftest import running_bot
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
