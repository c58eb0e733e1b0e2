"""The daily budget (DAILY_BUDGET_USD) holds after a task was accepted: a running worker stops before its next model
call once the day's spend reaches it (correction rounds included), a task queued under budget is not started past
it, and Resume is refused past it as every other start is; tasks or attempts started together, whose first model
calls are under way at the same moment, do not each pass it (a call under way counts until its usage is recorded).
The budget is $0.01; a worker step scripted with 10,000 input tokens costs $0.03 (3 $/Mtok)."""

from __future__ import annotations

import contextlib
import threading
from typing import Any

import pytest

from agents.core.errors import ToolError
from agents.core.models import Caller, Task, TaskStatus, UsageRecord, WorkerKind
from tests.conftest import USER_ID, BotHarness
from tests.fakes import anthropic_server as claude_says
from tests.scripted import RoleScript, spare
from tests.support.attempts import start_attempts
from tests.support.tasks import ended, until

PRICEY = {"input_tokens": 10_000, "output_tokens": 10, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}
CHEAP = {"input_tokens": 10, "output_tokens": 10, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}
ME = Caller(chat_id=USER_ID, user_id=USER_ID, user_name="owner")


def first_text(body: dict[str, Any]) -> str:
    content = body["messages"][0]["content"]
    return content if isinstance(content, str) else " ".join(b.get("text", "") for b in content if "text" in b)


async def spend(bot: BotHarness, usd: float = 1.0) -> None:
    """Usage elsewhere (another chat, another task) that spends the day's budget."""
    tokens = int(usd / 3.0 * 1_000_000)
    await bot.runtime.store.record_usage(
        UsageRecord(input_tokens=tokens, output_tokens=0, agent="orchestrator", model="m", chat_id=999)
    )


class Looper:
    """A worker that keeps running cheap commands (each step costs $0.03), at most `steps` of them, then ends."""

    def __init__(self, steps: int = 6) -> None:
        self.steps = steps
        self.calls = 0
        self._lock = threading.Lock()

    def __call__(self, body: dict[str, Any]) -> dict[str, Any]:
        with self._lock:
            self.calls += 1
        said = sum(1 for m in body["messages"] if m["role"] == "assistant")
        if said >= self.steps:
            return claude_says.text("Done.", usage=PRICEY)
        return claude_says.tool_use("run_command", {"command": "true"}, usage=PRICEY)


class Together(Looper):
    """As Looper, but the first steps of `size` workers are held until all are under way (or `hold` seconds pass), as
    calls of several seconds each are: the tasks started together call the model together."""

    def __init__(self, size: int, hold: float = 8.0) -> None:
        super().__init__(steps=4)
        self._together = threading.Barrier(size, timeout=hold)

    def __call__(self, body: dict[str, Any]) -> dict[str, Any]:
        if not any(m["role"] == "assistant" for m in body["messages"]):
            with contextlib.suppress(threading.BrokenBarrierError):
                self._together.wait()
        return super().__call__(body)


async def all_ended(bot: BotHarness, count: int) -> None:
    for number in range(1, count + 1):
        await ended(bot, number, timeout=60)


@pytest.mark.settings(daily_budget_usd=0.01)
async def test_past_the_budget_a_chat_turn_answers_after_one_round_of_tools(bot: BotHarness, model: RoleScript) -> None:
    """The chat still answers past the budget, but a model looping on tools gets one round, then answers without
    tools: two calls, not the turn's thirteen."""
    await spend(bot)
    loop = claude_says.tool_use("read_file", {"workspace": "calc", "path": "calc.py"}, usage=PRICEY)
    model.add("orchestrator", loop, claude_says.text("Read it.", usage=PRICEY))
    model.add("orchestrator", *[spare(loop, why="the rounds a turn under budget would get")] * 11)
    bot.say("read calc.py again and again")
    [reply] = await bot.replies(1)
    assert reply.text == "Read it."
    asked = model.requests["orchestrator"]
    assert len(asked) == 2 and asked[-1].get("tool_choice") == {"type": "none"}, [b.get("tool_choice") for b in asked]


@pytest.mark.settings(daily_budget_usd=0.01, max_corrections=0, max_concurrent_tasks=3)
async def test_tasks_started_together_do_not_each_pass_the_budget(bot: BotHarness, model: RoleScript) -> None:
    """One turn starts three tasks (spent $0 < $0.01): the first call under way holds what it may cost, so the others'
    checks count it and refuse; one step of $0.03 is spent, not three."""
    worker = Together(size=3)
    starts = [
        (
            "start_task",
            {"workspace": "group-therapy", "worker": "code", "instructions": f"Notes {k}.", "background": True},
        )
        for k in (1, 2, 3)
    ]
    model.add("orchestrator", claude_says.tool_uses(starts, usage=CHEAP), claude_says.text("Started.", usage=CHEAP))
    model.add("code", *[spare(worker, why="steps of the tasks until the budget stops them")] * 20)
    bot.say("write three kinds of notes")
    await all_ended(bot, 3)
    assert worker.calls == 1, f"{worker.calls} worker calls of $0.03 each against a daily budget of $0.01"


@pytest.mark.settings(daily_budget_usd=0.01, max_corrections=0)
async def test_a_race_of_attempts_does_not_pass_the_budget_once_per_attempt(bot: BotHarness, model: RoleScript) -> None:
    worker = Together(size=3)
    model.add("orchestrator", {**start_attempts("group-therapy", "Write notes.", 3), "usage": CHEAP})
    model.add("orchestrator", claude_says.text("Racing.", usage=CHEAP))
    model.add("code", *[spare(worker, why="steps of the attempts until the budget stops them")] * 20)
    bot.say("try three ways to write the notes")
    await all_ended(bot, 3)
    assert worker.calls == 1, f"{worker.calls} attempts' calls of $0.03 each against a daily budget of $0.01"


@pytest.mark.settings(daily_budget_usd=0.01, max_corrections=0)
async def test_running_task_is_stopped_once_the_daily_budget_is_spent(bot: BotHarness, model: RoleScript) -> None:
    """A single task starts under budget; its first step alone spends 3x the budget: it is stopped before its
    second model call (as attempts are stopped mid-race), not left to spend until its own step or token limit, and
    its summary says why."""
    looper = Looper(steps=6)
    model.add("code", *[spare(looper, why="steps of the task until something stops it")] * 12)
    started = await bot.runtime.crew.starts.start_one(ME, "group-therapy", "code", "Write notes.", True)
    assert started.startswith("Task #1 (code worker"), started
    task = await ended(bot, 1, timeout=90)
    assert looper.calls == 1, f"the task made {looper.calls} model calls after the daily budget was spent"
    assert task.status is TaskStatus.FAILED, task.status
    assert task.error == "⚠ Task #1 stopped: the daily budget (DAILY_BUDGET_USD) was spent while it ran", task.error


class Holder:
    """Task A: runs `sleep 600` until cancelled. Task B: its first call is recorded and it ends at once."""

    def __init__(self) -> None:
        self.firsts: list[str] = []
        self._lock = threading.Lock()

    def __call__(self, body: dict[str, Any]) -> dict[str, Any]:
        text = first_text(body)
        with self._lock:
            if not any(m["role"] == "assistant" for m in body["messages"]):
                self.firsts.append(text)
        if "TASK-B" in text:
            return claude_says.text("B done.")
        return claude_says.tool_use("run_command", {"command": "sleep 600"})


@pytest.mark.settings(daily_budget_usd=0.01, max_concurrent_tasks=1, max_corrections=0)
async def test_a_queued_task_does_not_start_after_the_budget_is_spent(bot: BotHarness, model: RoleScript) -> None:
    """B is accepted under budget but waits for A's slot; the day's budget is spent meanwhile: when B is claimed it
    is refused (as a no-longer-allowed user's task is), its worker never calls the model, and the chat is told."""
    holder = Holder()
    model.add("code", *[spare(holder, why="A's first step, and B's if it runs")] * 4)
    starts = bot.runtime.crew.starts
    await starts.start_one(ME, "group-therapy", "code", "TASK-A write notes.", True)
    await until(lambda: _true(len(holder.firsts) == 1), timeout=60)
    await starts.start_one(ME, "group-therapy", "code", "TASK-B write notes.", True)
    assert (await bot.runtime.store.get_task(2)).status is TaskStatus.PENDING
    await spend(bot)
    await bot.runtime.engine.cancel(1)
    task_b = await ended(bot, 2, timeout=90)
    assert not any("TASK-B" in t for t in holder.firsts), "queued task B reached the model past the daily budget"
    assert task_b.status is TaskStatus.FAILED and "daily budget" in (task_b.error or ""), task_b
    assert any("Task #2 was not started: The daily budget" in (m.text or "") for m in bot.tg.messages(USER_ID))


@pytest.mark.settings(daily_budget_usd=0.01)
async def test_resume_is_refused_once_the_budget_is_spent(bot: BotHarness, model: RoleScript) -> None:
    """Resume (the button / tool) puts an interrupted task back in the queue: refused past the budget, as every
    other start (start_task, research, approve, schedules, follow-ups) is."""
    model.add("code", spare(claude_says.text("Resumed and done."), why="the resumed task, if it runs"))
    store = bot.runtime.store
    task = await store.add_task(
        Task(
            chat_id=USER_ID,
            user_id=USER_ID,
            workspace="group-therapy",
            worker=WorkerKind.CODE,
            title="t",
            instructions="Write notes.",
        )
    )
    await store.update_task(task.stored_id, status=TaskStatus.INTERRUPTED)
    await spend(bot)
    with pytest.raises(ToolError, match="daily budget"):
        said = await bot.runtime.crew.branches.resume(ME, task.stored_id)
        pytest.fail(f"resume went through past the budget: {said}")


async def _true(value: bool) -> bool:
    return value
