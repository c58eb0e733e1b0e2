"""Direct-answer latency with 0 and with 5 background tasks running, against the zero-latency fakes.

The real bot (MAX_CONCURRENT_TASKS=5) answers 30 direct questions with no task running, then 30 more while 5 code
workers run in the background, each alternating `run_command "sleep 0.2"`, `read_file` and `grep` for hundreds of
steps (a scripted model plays Claude). The workers are checked to be still running at the end of the measurement,
then cancelled. That is done twice: with the workers' Messages calls answered at zero latency (each worker is then a
busy loop between its sleeps: the worst case) and with each worker call taking 0.5 s, like a fast real model.
Same chat for all: the per-chat lock serialises turns in one chat only; background tasks don't hold it.
Also printed: the event loop's lag (how late a 5 ms sleep wakes up) in each run.

Run: .venv/bin/python bench/background.py [--json]
"""

from __future__ import annotations

import asyncio
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from agents.core.models import Caller, TaskStatus  # noqa: E402
from bench._harness import (  # noqa: E402
    ANSWER,
    LatencySummary,
    LoopLagProbe,
    agentlab_settings,
    emit_json,
    machine,
    measure_replies,
    parse_args,
    questions,
    quiet_logging,
    running_fakes,
    temp_workspace,
    verdict,
    wait_indexing_idle,
    wait_transcriber_settled,
)
from telegram_bot.app import stop_application  # noqa: E402
from tests.conftest import BotHarness, start_bot  # noqa: E402
from tests.fakes import anthropic_server as claude_says  # noqa: E402
from tests.scripted import RoleScript  # noqa: E402

WARMUP = 5
MESSAGES = 30
TASKS = 5
STEPS_PER_TASK = 400  # far more than a measurement needs: the workers must still be busy at its end
TARGET = 1.5
GAP_SECONDS = 0.08  # idle between messages, as in overhead.py (keeps under the 30 requests/s rate limiter)
# The second run gives each worker Messages call this latency, as a (fast) real model would have; with zero latency
# every worker is a busy loop on the bot's event loop between its 'sleep 0.2' commands.
WORKER_MODEL_SECONDS = 0.5
WORKER_CYCLE = [
    claude_says.tool_use("run_command", {"command": "sleep 0.2"}),
    claude_says.tool_use("read_file", {"path": "calc.py"}),
    claude_says.tool_use("grep", {"pattern": "def "}),
]


@dataclass
class WorkerPace:
    """The latency the fake gives worker Messages calls; changed between runs."""

    delay: float = 0.0

    def reply(self, step: int) -> Callable[[dict[str, Any]], dict[str, Any]]:
        def answer(_body: dict[str, Any]) -> dict[str, Any]:
            reply = WORKER_CYCLE[step % len(WORKER_CYCLE)]
            return {**reply, "delay": self.delay} if self.delay else reply

        return answer


def scripted_model(pace: WorkerPace, runs: int) -> RoleScript:
    model = RoleScript()
    model.add("orchestrator", *[claude_says.text(ANSWER) for _ in range(WARMUP + (runs + 1) * MESSAGES + 10)])
    for _ in range(runs * TASKS):  # one shared queue for the "code" role: the tasks take turns popping it
        model.add("code", *[pace.reply(step) for step in range(STEPS_PER_TASK)])
    return model


@dataclass
class Phase:
    """One measurement: latencies of the direct answers, event-loop lag, and what the background did meanwhile."""

    label: str
    latency: LatencySummary
    loop_lag: LatencySummary
    steps_per_s: float = 0.0
    statuses_at_end: list[str] = field(default_factory=list)
    statuses_after_cancel: list[str] = field(default_factory=list)

    @property
    def all_running(self) -> bool:
        return all(s == TaskStatus.IN_PROGRESS.value for s in self.statuses_at_end)

    def as_dict(self) -> dict[str, Any]:
        return {
            "latency": self.latency.as_dict(),
            "loop_lag": self.loop_lag.as_dict(),
            "background_steps_per_s": round(self.steps_per_s, 1),
            "statuses_at_end": self.statuses_at_end,
            "statuses_after_cancel": self.statuses_after_cancel,
        }


async def measure_phase(bot: BotHarness, label: str, first: int) -> tuple[Phase, float]:
    with LoopLagProbe() as probe:
        started = time.perf_counter()
        latencies = await measure_replies(bot.tg, questions(MESSAGES, first), gap=GAP_SECONDS)
        window = time.perf_counter() - started
    return Phase(label, LatencySummary.of(latencies), probe.summary()), window


async def start_background_tasks(bot: BotHarness, model: RoleScript) -> list[int]:
    """Start the tasks the way the orchestrator's start_task tool does; wait until all run and have taken steps."""
    steps_before = len(model.requests["code"])
    for n in range(TASKS):
        await bot.runtime.crew.races.start_task(
            Caller(chat_id=bot.chat_id), "calc", "code", f"Long job {n}: keep checking calc.py.", True
        )
    ids = sorted(t.id for t in await bot.runtime.store.list_tasks(bot.chat_id, limit=TASKS))
    deadline = time.perf_counter() + 60
    while len(bot.runtime.engine.running) < TASKS or len(model.requests["code"]) - steps_before < 3 * TASKS:
        if time.perf_counter() > deadline:
            raise TimeoutError(
                f"background tasks did not get going: running {list(bot.runtime.engine.running)}, "
                f"{len(model.requests['code']) - steps_before} worker requests"
            )
        await asyncio.sleep(0.05)
    return ids


async def statuses(bot: BotHarness, ids: list[int]) -> list[str]:
    return [(await bot.runtime.store.get_task(task_id)).status.value for task_id in ids]


async def busy_phase(bot: BotHarness, model: RoleScript, label: str, first: int) -> Phase:
    ids = await start_background_tasks(bot, model)
    steps_before = len(model.requests["code"])
    phase, window = await measure_phase(bot, label, first)
    phase.steps_per_s = (len(model.requests["code"]) - steps_before) / window
    phase.statuses_at_end = await statuses(bot, ids)
    for task_id in ids:
        await bot.runtime.engine.cancel(task_id)
    phase.statuses_after_cancel = await statuses(bot, ids)
    return phase


def report(idle: Phase, busy: Phase) -> tuple[float, float]:
    ratio_p50, ratio_p95 = busy.latency.p50 / idle.latency.p50, busy.latency.p95 / idle.latency.p95
    print(f"  {busy.label}")
    print(f"    direct answers  {busy.latency.line()}")
    print(f"    loop lag        {busy.loop_lag.line()}")
    print(
        f"    ratio to 0 tasks: p50 {ratio_p50:.2f}×   p95 {ratio_p95:.2f}×   "
        f"target {verdict(ratio_p50, TARGET)} (p50), {verdict(ratio_p95, TARGET)} (p95)"
    )
    running = "all still running" if busy.all_running else "NOT all running: the figure understates the load"
    print(
        f"    background: {busy.steps_per_s:.0f} worker steps/s (a Messages call and a tool call each); tasks at the "
        f"end: {', '.join(busy.statuses_at_end)} ({running}); after cancel: {', '.join(busy.statuses_after_cancel)}"
    )
    return ratio_p50, ratio_p95


async def main() -> dict:
    quiet_logging()
    pace = WorkerPace()
    model = scripted_model(pace, runs=2)
    with running_fakes() as (tg, claude), temp_workspace() as tmp:
        claude.handler = model
        settings = agentlab_settings(
            tg, claude, tmp, max_concurrent_tasks=TASKS, worker_max_steps=10 * STEPS_PER_TASK, worker_max_tokens=10**9
        )
        bot = await start_bot(settings, tg, claude)
        try:
            await wait_transcriber_settled(bot.runtime)
            await measure_replies(tg, questions(WARMUP), gap=GAP_SECONDS)
            await wait_indexing_idle(bot.runtime)
            idle, _ = await measure_phase(bot, "0 background tasks", WARMUP)
            fast = await busy_phase(
                bot, model, f"{TASKS} background tasks, worker model calls at zero latency", WARMUP + MESSAGES
            )
            pace.delay = WORKER_MODEL_SECONDS
            paced = await busy_phase(
                bot,
                model,
                f"{TASKS} background tasks, worker model calls taking {WORKER_MODEL_SECONDS:g} s",
                WARMUP + 2 * MESSAGES,
            )
        finally:
            await stop_application(bot.app)

    info = machine()
    print(
        f"Direct answers with background work: {MESSAGES} sequential messages per run, "
        f"{GAP_SECONDS * 1000:.0f} ms idle between messages, the orchestrator's model at zero latency; "
        f"{info['date']}, {info['nproc']} CPUs, {info['cpu']}, Python {info['python']}"
    )
    print(f"  {idle.label}")
    print(f"    direct answers  {idle.latency.line()}")
    print(f"    loop lag        {idle.loop_lag.line()}")
    fast_p50, fast_p95 = report(idle, fast)
    paced_p50, paced_p95 = report(idle, paced)
    print(
        "  Note: the fakes answer with zero latency unless stated; direct answers and workers share one event "
        "loop and one SQLite connection, and here the CPU with the fakes (same process)."
    )
    return {
        "bench": "background",
        **info,
        "messages": MESSAGES,
        "warmup": WARMUP,
        "tasks": TASKS,
        "gap_ms": GAP_SECONDS * 1000,
        "worker_model_seconds": WORKER_MODEL_SECONDS,
        "target_ratio": TARGET,
        "idle": idle.as_dict(),
        "busy": fast.as_dict(),
        "busy_paced": paced.as_dict(),
        "ratio_p50": round(fast_p50, 3),
        "ratio_p95": round(fast_p95, 3),
        "target_met": fast_p50 <= TARGET and fast_p95 <= TARGET,
        "ratio_paced_p50": round(paced_p50, 3),
        "ratio_paced_p95": round(paced_p95, 3),
        "target_met_paced": paced_p50 <= TARGET and paced_p95 <= TARGET,
        "background_all_in_progress": fast.all_running and paced.all_running,
    }


if __name__ == "__main__":
    args = parse_args(__doc__.splitlines()[0])
    figures = asyncio.run(main())
    if args.json:
        emit_json(figures)
