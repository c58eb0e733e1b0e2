"""Cancel on TASK_ENGINE=temporal at each moment a user can press it, through the real bot, the real dev server and
real runners: the task ends cancelled, its run on the runner stops, no model call follows, no later report turns it
into another end or shows a summary, and the chat says what happened.

- while its runner prepares it (the clone caught up, the files fetched, before the worker starts): the cancel
  reaches the runner, which stops there;
- while its worker's model call is in flight: nothing more is asked of the model;
- while its runner pushes the finished task's branch: the report that follows ends it cancelled all the same (its
  usage and branch kept, its summary not shown);
- while its runner is lost (SIGKILLed) and before another takes it over: the task is not handed over.

A cancel before any runner took the task is tests/test_temporal_workflow.py's; one while a command runs,
tests/test_temporal_e2e.py's."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest

from agents.core.models import TaskStatus
from tests.conftest import USER_ID, BotHarness
from tests.fakes import anthropic_server as claude_says
from tests.fakes.anthropic_server import FakeAnthropic
from tests.scripted import RoleScript, role_of
from tests.support.processes import host_pids, own_sleep
from tests.support.tasks import message_with, start_task, until
from tests.support.temporal import (  # noqa: F401  (fixtures)
    Runners,
    cheap_tests,
    needs_temporal,
    queue,
    remote,
    runners,
    tbot,
    workspace_root,
)

pytestmark = needs_temporal
pytest.importorskip("temporalio", reason="the Temporal SDK (the optional extra .[temporal]) is missing")
from agents.engine.payloads import TaskReport  # noqa: E402

SLEEP = own_sleep("13")  # a command's argument found again in /proc, unique to this test process


async def run_of(bot: BotHarness, task_id: int) -> str:
    """The workflow id of the task's run, once the bot follows it."""

    async def check() -> str | None:
        followed = bot.runtime.engine.lines.followed.get(task_id)
        return followed.workflow_id if followed else None

    return await until(check)


async def report_of(bot: BotHarness, run: str) -> TaskReport:
    """What the run's workflow ended with: the report a runner sent, or the workflow's own."""
    return await asyncio.wait_for(bot.runtime.engine.lines.handle(run).result(), 90)


def chat(bot: BotHarness) -> list[str]:
    return [m.text or "" for m in bot.tg.messages(USER_ID)]


@cheap_tests
async def test_a_cancel_while_the_runner_prepares_the_task_stops_it_there(
    tbot: BotHarness, model: RoleScript, runners: Runners, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The runner has claimed the task and is catching its clone up with the shared remote (held here): a cancel
    then must reach it, though its worker has not started. No model call is scripted for the worker: one fails."""
    import agents.engine.runner_node as runner_node

    reached, release = asyncio.Event(), asyncio.Event()
    catch_up = runner_node.catch_up

    async def held_catch_up(*args: Any, **kwargs: Any) -> str | None:
        reached.set()
        await release.wait()
        return await catch_up(*args, **kwargs)

    monkeypatch.setattr(runner_node, "catch_up", held_catch_up)  # the runner is served on this test's loop
    runners.serve("a")
    model.add("orchestrator", start_task("calc", "Fix add() in calc.py."), claude_says.text("Started."))
    tbot.say("fix add in calc")
    run = await run_of(tbot, 1)
    await asyncio.wait_for(reached.wait(), 60)
    tbot.tg.send_command(USER_ID, "/cancel 1")
    await tbot.tg.await_for(lambda: message_with(tbot, "Task #1 cancelled"), timeout=30)
    release.set()  # were the runner still on the task, it would go on from here
    report = await report_of(tbot, run)
    assert report.status == "cancelled", f"the runner went on with the cancelled task: it reported {report.status}"
    assert not model.requests["code"], "no model call after the cancel"
    task = await tbot.runtime.store.get_task(1)
    assert task.status is TaskStatus.CANCELLED
    assert not [t for t in chat(tbot) if "✔" in t or "done" in t], chat(tbot)


@cheap_tests
async def test_a_cancel_during_a_model_call_asks_the_model_nothing_more(
    tbot: BotHarness, model: RoleScript, runners: Runners, fake_anthropic: FakeAnthropic
) -> None:
    """The worker's first model call is held in the fake: the cancel stops the task; the reply that comes after it is
    never acted on, and no further call is made."""
    asked, answer, answered = threading.Event(), threading.Event(), threading.Event()

    def claude(body: dict) -> Any:
        if role_of(body) != "code":
            return model(body)
        asked.set()
        answer.wait(60)  # the worker's call is in flight while the user cancels
        try:
            return model(body)
        finally:
            answered.set()

    fake_anthropic.handler = claude
    model.add("orchestrator", start_task("calc", "Fix add() in calc.py."), claude_says.text("Started."))
    model.add("code", claude_says.tool_use("run_command", {"command": "echo never-run"}))
    runners.serve("a")
    tbot.say("fix add in calc")
    run = await run_of(tbot, 1)
    await tbot.tg.await_for(asked.is_set, timeout=60)
    tbot.tg.send_command(USER_ID, "/cancel 1")
    await tbot.tg.await_for(lambda: message_with(tbot, "Task #1 cancelled"), timeout=30)
    answer.set()
    # the held call is recorded by the fake's thread once it answers: the report may come back before that
    await tbot.tg.await_for(answered.is_set, timeout=30)
    report = await report_of(tbot, run)
    assert report.status == "cancelled", report
    assert len(model.requests["code"]) == 1, "no model call after the cancel"
    assert (await tbot.runtime.store.get_task(1)).status is TaskStatus.CANCELLED
    assert not [c for c in await tbot.runtime.store.tool_calls(task_id=1) if c.tool == "run_command"]


@cheap_tests
async def a_finished_task_held_at_its_push(
    tbot: BotHarness, model: RoleScript, runners: Runners, monkeypatch: pytest.MonkeyPatch
) -> tuple[str, asyncio.Event]:
    """Task #1 fixes add(), and its runner's push of the finished branch is held: its run, and the event that lets
    the push go on."""
    from agents.engine.branch_pushes import BranchPushes

    pushing, release = asyncio.Event(), asyncio.Event()
    final = BranchPushes.final

    async def held_final(self: BranchPushes, task: Any) -> tuple[bool, str | None]:
        pushing.set()
        await release.wait()
        return await final(self, task)

    monkeypatch.setattr(BranchPushes, "final", held_final)
    runners.serve("a")
    model.add("orchestrator", start_task("calc", "Fix add() in calc.py."), claude_says.text("Started."))
    model.add(
        "code",
        claude_says.tool_use("edit_file", {"path": "calc.py", "old": "a - b", "new": "a + b"}),
        claude_says.text("Fixed add()."),
    )
    tbot.say("fix add in calc")
    run = await run_of(tbot, 1)
    await asyncio.wait_for(pushing.wait(), 60)
    return run, release


async def test_a_cancel_while_the_runner_pushes_the_finished_task_ends_it_cancelled(
    tbot: BotHarness, model: RoleScript, runners: Runners, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The worker is done and the runner pushes the task branch (held here) when the user cancels; the push then
    goes on and the runner's report, `completed` with its summary, comes after the cancel. The chat was told the task
    is cancelled: so it ends, its summary unshown, its usage counted and its branch fetched (what it did is kept)."""
    run, release = await a_finished_task_held_at_its_push(tbot, model, runners, monkeypatch)
    lines = tbot.runtime.engine.lines
    poke = lines.poke

    async def poke_then_push(sent: Any) -> bool:  # the push ends once the cancel is on its way: its report follows
        delivered = await poke(sent)
        release.set()
        return delivered

    monkeypatch.setattr(lines, "poke", poke_then_push)
    tbot.tg.send_command(USER_ID, "/cancel 1")
    said = await tbot.tg.await_for(lambda: message_with(tbot, "Task #1", "cancel"), timeout=30)
    assert (await report_of(tbot, run)).status == "completed", "the runner had finished when the cancel came"

    async def told() -> bool:
        return any(e.detail == f"ended {run}" for e in await tbot.runtime.store.task_events(1))

    await until(told)
    task = await tbot.runtime.store.get_task(1)
    assert task.status is TaskStatus.CANCELLED, f"the chat said {said.text!r}, yet task #1 is {task.status.value}"
    assert "Task #1 cancelled" in said.text and "kept on its branch" in said.text, said.text
    assert not message_with(tbot, "Fixed add()"), "no summary of a cancelled task"
    assert sum(u.agent == "code-worker" for u in await tbot.runtime.store.task_usage(1)) == 2


async def test_a_report_that_comes_after_the_cancel_stopped_waiting_still_counts_what_the_run_cost(
    tbot: BotHarness, model: RoleScript, runners: Runners, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As above, but the runner's push is held until /cancel has stopped waiting for its report (the chat told the
    task is cancelled): the report that comes then still has its usage and audit rows stored (the day's budget counts
    what the run cost), and changes nothing else: the task stays cancelled, no summary is shown."""
    from agents.engine import front

    monkeypatch.setattr(front, "CANCEL_WAIT_SECONDS", 0.2)
    run, release = await a_finished_task_held_at_its_push(tbot, model, runners, monkeypatch)
    tbot.tg.send_command(USER_ID, "/cancel 1")
    said = await tbot.tg.await_for(lambda: message_with(tbot, "Task #1", "cancel"), timeout=30)
    store = tbot.runtime.store
    task = await store.get_task(1)
    assert task.status is TaskStatus.CANCELLED, said.text
    assert not await store.tool_calls(task_id=1), "the report came before the cancel gave up on it"
    release.set()
    assert (await report_of(tbot, run)).status == "completed", "the runner had finished when the cancel came"

    async def ended() -> bool:
        return any(e.detail == f"ended {run}" for e in await store.task_events(1))

    await until(ended)
    used = await store.task_usage(1)
    assert sum(u.agent == "code-worker" for u in used) == 2, used
    assert await store.tool_calls(task_id=1), "the run's audit rows were not stored"
    task = await store.get_task(1)
    assert task.status is TaskStatus.CANCELLED, task.status
    assert not message_with(tbot, "Fixed add()"), "no summary of a cancelled task"


@cheap_tests
async def test_a_cancel_while_its_runner_is_lost_hands_the_task_to_no_other(
    tbot: BotHarness, model: RoleScript, runners: Runners
) -> None:
    """Runner a (a real process) is SIGKILLed in the task's command; the user cancels before the workflow has noticed;
    runner c comes after: the task is not taken over (no model call for it is scripted: one fails)."""
    runners.start("a")
    model.add("orchestrator", start_task("calc", "Fix add() in calc.py."), claude_says.text("Started."))
    model.add("code", claude_says.tool_use("run_command", {"command": f"sleep {SLEEP}"}))
    tbot.say("fix add in calc")
    run = await run_of(tbot, 1)
    await tbot.tg.await_for(lambda: host_pids(SLEEP), timeout=60)
    runners.procs["a"].kill()
    await tbot.tg.await_for(lambda: not host_pids(SLEEP), timeout=10)  # its command died with it
    tbot.tg.send_command(USER_ID, "/cancel 1")
    await tbot.tg.await_for(lambda: message_with(tbot, "Task #1 cancelled"), timeout=30)
    runners.serve("c")  # a takeover, had the workflow offered one, waits for a runner: this one
    report = await report_of(tbot, run)
    assert report.status == "cancelled", report
    assert len(model.requests["code"]) == 1, "nobody took the cancelled task over"
    assert (await tbot.runtime.store.get_task(1)).status is TaskStatus.CANCELLED
