"""Direct-answer latency with 0 and with 5 background tasks running, against the zero-latency fakes.

The real bot (MAX_CONCURRENT_TASKS=5) answers 30 direct questions with no task running, then 30 more while 5 code
workers run in the background, each alternating `run_command "sleep 0.2"`, `read_file` and `grep` for hundreds of
steps (a scripted model plays Claude). The workers are checked to be still running at the end of the measurement,
then cancelled. Same chat for both: the per-chat lock serialises turns in one chat only; background tasks don't hold it.

Run: .venv/bin/python bench/background.py [--json]
"""

from __future__ import annotations

import asyncio
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from agents.models import TaskStatus  # noqa: E402
from bench._harness import (  # noqa: E402
    ANSWER, LatencySummary, ServerClock, agentlab_settings, emit_json, machine, measure_replies, parse_args, questions,
    quiet_logging, running_fakes, temp_workspace, verdict, wait_transcriber_settled,
)
from telegram_bot.app import stop_polling  # noqa: E402
from tests.conftest import USER_ID, BotHarness, start_bot  # noqa: E402
from tests.fakes import anthropic_server as claude_says  # noqa: E402
from tests.scripted import ScriptedModel  # noqa: E402

WARMUP = 5
MESSAGES = 30
TASKS = 5
STEPS_PER_TASK = 400  # far more than the measurement needs: the workers must still be busy at its end
TARGET = 1.5
GAP_SECONDS = 0.08  # idle between messages, as in overhead.py (keeps under the 30 requests/s rate limiter)
WORKER_CYCLE = [
    claude_says.tool_use("run_command", {"command": "sleep 0.2"}),
    claude_says.tool_use("read_file", {"path": "calc.py"}),
    claude_says.tool_use("grep", {"pattern": "def "}),
]


def scripted_model() -> ScriptedModel:
    model = ScriptedModel()
    model.add("orchestrator", *[claude_says.text(ANSWER) for _ in range(2 * (WARMUP + MESSAGES) + 10)])
    steps = [WORKER_CYCLE[i % len(WORKER_CYCLE)] for i in range(STEPS_PER_TASK)]
    for _ in range(TASKS):  # one shared queue for the "code" role: the tasks take turns popping it
        model.add("code", *steps)
    return model


async def start_background_tasks(bot: BotHarness, model: ScriptedModel) -> list[int]:
    """Start the tasks the way the orchestrator's start_task tool does; wait until all run and have taken steps."""
    for n in range(TASKS):
        await bot.runtime.crew.start_task(bot.chat_id, "calc", "code", f"Long job {n}: keep checking calc.py.", True)
    tasks = await bot.runtime.store.list_tasks(bot.chat_id, limit=100)
    ids = sorted(t.id for t in tasks)[-TASKS:]
    deadline = time.perf_counter() + 60
    while len(bot.runtime.runner.running) < TASKS or len(model.requests["code"]) < 3 * TASKS:
        if time.perf_counter() > deadline:
            raise TimeoutError(f"background tasks did not get going: running {list(bot.runtime.runner.running)}, "
                               f"{len(model.requests['code'])} worker requests")
        await asyncio.sleep(0.05)
    return ids


async def statuses(bot: BotHarness, ids: list[int]) -> list[TaskStatus]:
    return [(await bot.runtime.store.get_task(task_id)).status for task_id in ids]


async def main() -> dict:
    quiet_logging()
    model = scripted_model()
    with running_fakes() as (tg, claude), temp_workspace() as tmp:
        claude.handler = model
        clock = ServerClock(tg, claude).install()
        settings = agentlab_settings(tg, claude, tmp, max_concurrent_tasks=TASKS, worker_max_steps=10 * STEPS_PER_TASK,
                                     worker_max_tokens=10**9)
        bot = await start_bot(settings, tg, claude)
        try:
            await wait_transcriber_settled(bot.runtime)
            await measure_replies(tg, questions(WARMUP), gap=GAP_SECONDS)
            idle = await measure_replies(tg, questions(MESSAGES, WARMUP), gap=GAP_SECONDS)

            ids = await start_background_tasks(bot, model)
            clock.reset()
            steps_before = len(model.requests["code"])
            window_started = time.perf_counter()
            busy = await measure_replies(tg, questions(MESSAGES, WARMUP + MESSAGES), gap=GAP_SECONDS)
            window = time.perf_counter() - window_started
            steps = len(model.requests["code"]) - steps_before
            fake_claude_ms = clock.mean_ms().get("anthropic./v1/messages", 0.0) * clock.count("anthropic./v1/messages")
            at_end = await statuses(bot, ids)
            for task_id in ids:
                await bot.runtime.runner.cancel(task_id)
            after_cancel = await statuses(bot, ids)
        finally:
            await stop_polling(bot.app)

    a, b = LatencySummary.of(idle), LatencySummary.of(busy)
    ratio_p50, ratio_p95 = b.p50 / a.p50, b.p95 / a.p95
    all_running = all(s is TaskStatus.IN_PROGRESS for s in at_end)
    info = machine()
    print(f"Direct answers with background work: {MESSAGES} sequential messages each, {GAP_SECONDS * 1000:.0f} ms idle "
          f"between messages; {info['date']}, {info['nproc']} CPUs, {info['cpu']}, Python {info['python']}")
    print(f"  0 background tasks  {a.line()}")
    print(f"  {TASKS} background tasks  {b.line()}")
    print(f"  ratio {TASKS} tasks / 0 tasks: p50 {ratio_p50:.2f}×   p95 {ratio_p95:.2f}×   "
          f"target {verdict(ratio_p50, TARGET)} (p50), {verdict(ratio_p95, TARGET)} (p95)")
    print(f"  background load during the {window:.1f} s window: {steps} worker steps ({steps / window:.0f}/s: Messages "
          f"calls + tool calls, one 'sleep 0.2' in three); fake Anthropic server busy {fake_claude_ms / window / 10:.0f}% "
          "of one core in the same process")
    print(f"  tasks at the end of the measurement: {', '.join(s.value for s in at_end)} "
          f"({'all still running' if all_running else 'NOT all running: the figure understates the load'}); "
          f"after cancel: {', '.join(s.value for s in after_cancel)}")
    print("  Note: the fakes answer with zero latency; direct answers and workers share one event loop, one SQLite "
          "connection and (here) the CPU with the fakes.")
    return {
        "bench": "background", **info, "messages": MESSAGES, "warmup": WARMUP, "tasks": TASKS, "gap_ms": GAP_SECONDS * 1000,
        "idle": a.as_dict(), "busy": b.as_dict(), "ratio_p50": round(ratio_p50, 3), "ratio_p95": round(ratio_p95, 3),
        "target_ratio": TARGET, "target_met": ratio_p50 <= TARGET and ratio_p95 <= TARGET,
        "background_steps_per_s": round(steps / window, 1), "background_all_in_progress": all_running,
        "statuses_after_cancel": [s.value for s in after_cancel],
    }


if __name__ == "__main__":
    args = parse_args(__doc__.splitlines()[0])
    figures = asyncio.run(main())
    if args.json:
        emit_json(figures)
