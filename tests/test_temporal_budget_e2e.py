"""The daily budget (DAILY_BUDGET_USD) holds across runners on TASK_ENGINE=temporal (the real bot, real dev server,
runners served on the test's loop): a task's usage rows reach the bot as its runner records them, not only in its
report at the end. A task that spent past the budget and is still busy in a command shows its spend in the bot's
store and /usage; a second task is refused instead of spending as much again on another runner; the report that
comes at the end does not count the rows the bot already stored a second time.

The budget is $0.05; the first worker step is scripted with 20,000 input tokens: $0.06 at 3 $/Mtok."""

from __future__ import annotations

import contextlib
import threading
from typing import Any

import pytest

from agents.core.errors import ToolError
from agents.core.models import Caller, TaskStatus
from agents.llm.client import cost_usd
from agents.llm.usage import total
from tests.conftest import USER_ID
from tests.fakes import anthropic_server as claude_says
from tests.fakes.anthropic_server import FakeAnthropic
from tests.scripted import RoleScript, role_of
from tests.support.processes import host_pids, own_sleep
from tests.support.tasks import ended, message_with, until
from tests.support.temporal import (  # noqa: F401  (fixtures)
    Runners,
    cheap_tests,
    needs_temporal,
    queue,
    remote,
    runners,
    temporal_bot,
    workspace_root,
)

pytestmark = needs_temporal
pytest.importorskip("temporalio", reason="the Temporal SDK is missing")

BUDGET = 0.05
PRICEY = {"input_tokens": 20_000, "output_tokens": 10, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}
ME = Caller(chat_id=USER_ID, user_id=USER_ID, user_name="owner")
SLEEP = own_sleep("31")  # task A's command, found again in /proc


def first_text(body: dict[str, Any]) -> str:
    content = body["messages"][0]["content"]
    return content if isinstance(content, str) else " ".join(b.get("text", "") for b in content if "text" in b)


class Workers:
    """Task A: one step of $0.06 that starts a long command (until cancelled). Task B: a step of $0.06 that ends
    it, if it ever reaches the model. Every worker call is counted by its task."""

    def __init__(self) -> None:
        self.calls: dict[str, int] = {"A": 0, "B": 0}
        self._lock = threading.Lock()

    def __call__(self, body: dict[str, Any]) -> dict[str, Any]:
        which = "B" if "TASK-B" in first_text(body) else "A"
        with self._lock:
            self.calls[which] += 1
        if which == "B":
            return claude_says.text("B done.", usage=PRICEY)
        if any(m["role"] == "assistant" for m in body["messages"]):
            return claude_says.text("A done.", usage=PRICEY)
        return claude_says.tool_use("run_command", {"command": f"sleep {SLEEP}"}, usage=PRICEY)


@cheap_tests
async def test_a_running_tasks_spend_on_a_runner_counts_against_the_budget_at_once(
    fake_telegram,
    fake_anthropic: FakeAnthropic,
    tmp_path,
    workspace_root,
    remote,
    temporal,
    queue,
    runners: Runners,
    model: RoleScript,
) -> None:
    workers = Workers()

    def claude(body: dict[str, Any]) -> Any:
        return workers(body) if role_of(body) == "code" else model(body)

    fake_anthropic.handler = claude
    async with temporal_bot(
        fake_telegram, fake_anthropic, tmp_path, workspace_root, temporal, queue, daily_budget_usd=BUDGET
    ) as tbot:
        runners.serve("a")
        runners.serve("b")  # a free runner for task B: each takes one task at a time
        starts = tbot.runtime.crew.starts
        said = await starts.start_one(ME, "calc", "code", "TASK-A write notes.", True)
        assert said.startswith("Task #1"), said
        await tbot.tg.await_for(lambda: host_pids(SLEEP), timeout=60)
        store = tbot.runtime.store

        # (1) A spent $0.06 and is busy in its command: the bot's store and /usage show it now
        async def spend_of_a() -> float:
            return cost_usd(total(await store.task_usage(1)), tbot.settings)

        async def past_the_budget() -> bool:
            return await spend_of_a() > BUDGET

        with contextlib.suppress(AssertionError):  # not within 30 s: the assertion below says what was seen
            await until(past_the_budget, timeout=30)
        task_a = await store.get_task(1)
        spent = await spend_of_a()
        assert spent > BUDGET, (
            f"task #1 spent $0.06 on runner a and is still {task_a.status.value} in its command, yet the bot's "
            f"store shows ${spent:.2f} of its spend"
        )
        assert task_a.status is TaskStatus.IN_PROGRESS and host_pids(SLEEP), "task #1 ended before the check"
        tbot.tg.send_command(USER_ID, "/usage")
        await tbot.tg.await_for(lambda: message_with(tbot, "Most expensive tasks", "#1 $0.06"), timeout=30)

        # (2) a second task is refused, not offered to runner b with the budget counted as unspent
        try:
            said = await starts.start_one(ME, "calc", "code", "TASK-B write notes.", True)
        except ToolError as err:
            said = str(err)
        if said.startswith("Task #2"):  # accepted: its claim, or its run's first check, must stop it
            task_b = await ended(tbot, 2, timeout=60)
            assert task_b.status is not TaskStatus.COMPLETED, task_b
        else:
            assert "daily budget" in said, said
        assert workers.calls["B"] == 0, "task B reached the model past the daily budget: $0.12 against $0.05"

        # (3) A ends (cancelled): its report carries the row the bot stored while it ran, which is not stored again
        tbot.tg.send_command(USER_ID, "/cancel 1")

        async def run_ended() -> bool:
            return any(e.kind == "workflow" and e.detail.startswith("ended ") for e in await store.task_events(1))

        await until(run_ended, timeout=60)
        rows = [u for u in await store.task_usage(1) if u.agent == "code-worker"]
        assert len(rows) == workers.calls["A"] == 1, f"{len(rows)} usage rows for {workers.calls['A']} model call"
