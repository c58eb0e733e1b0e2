"""Task services, played through the real bot by the scripted model: `run_command(background=true)`
starts a server in the task's sandbox and network namespace, later commands reach it on localhost, its later output
is readable, an exit is reported, nothing (not even a double-forked, setsid'd escapee) outlives the task or /cancel,
and a service without the network reaches nothing outside."""

from __future__ import annotations

import asyncio
import dataclasses
import os
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest

from agents.core.errors import ToolError
from agents.core.models import TaskStatus
from agents.core.secrets_filter import SecretsFilter
from agents.git import worktrees
from agents.sandbox import pause
from agents.sandbox.bwrap import spec_for
from agents.sandbox.services import LEFT_OUT, TaskServices, start_sandboxed_stdio
from agents.sandbox.shell import run_command
from agents.sandbox.task_limits import DiskBudget, TaskBounds
from agents.work import task_checkout
from agents.work.task_sandbox import TaskSandboxes
from tests.conftest import USER_ID, BotHarness
from tests.fakes import anthropic_server as claude_says
from tests.scripted import RoleScript
from tests.support.processes import Listener, host_pids, own_sleep
from tests.support.sandbox import PROBE, listener  # noqa: F401  (a fixture)
from tests.support.tasks import ended, everything_said, start_task, tool_results

ESCAPEE = own_sleep("8081")  # escapes the sandbox every way it can
OUTSIDE = own_sleep("8082")  # tries the host, then waits
BESIDE = own_sleep("7172")  # a command beside a service
FIRST_THEN_SLEEPS = own_sleep("9191")  # prints, then runs on

pytestmark = pytest.mark.skipif(
    shutil.which("bwrap") is None or shutil.which("nsenter") is None or not sys.platform.startswith("linux"),
    reason="bubblewrap (bwrap) or nsenter is not installed: scripts/install-system-deps.sh",
)

FETCH = "python3 -c \"import urllib.request; print(urllib.request.urlopen('http://127.0.0.1:8123/calc.py').read())\""


def run(command: str, background: bool = False) -> dict:
    args: dict = {"command": command}
    if background:
        args["background"] = True
    return claude_says.tool_use("run_command", args)


@pytest.mark.quick_tests  # the verdict is not what this test is about
async def test_a_service_serves_later_commands_and_ends_with_the_task(
    bot: BotHarness, model: RoleScript, listener: Listener
) -> None:
    escapee = (
        f"setsid sh -c 'sleep {ESCAPEE} & echo forked' & env -u AGENTLAB_TASK nohup sleep {ESCAPEE} >/dev/null 2>&1 & "
        f"echo escaped; exec sleep {ESCAPEE}"
    )
    outside = (
        f"python3 -c \"import socket; socket.create_connection(('127.0.0.1', {listener.port}), timeout=3); "
        f"print('CONN' 'ECTED')\"; echo tried; exec sleep {OUTSIDE}"
    )
    model.add("orchestrator", start_task("calc", "Serve and fetch."), claude_says.text("Started."))
    model.add(
        "code",
        run("python3 -m http.server 8123 --bind 127.0.0.1", background=True),  # no output (buffered): the port
        run(FETCH),
        run("cat /run/services/service-1.log"),
        run(escapee, background=True),
        run("echo starting; sleep 1; exit 4", background=True),
        run("sleep 2; echo slept"),
        run(outside, background=True),
        claude_says.text("Done."),
    )
    bot.say("serve calc")
    await bot.tg.await_for(lambda: len(host_pids(ESCAPEE)) >= 3, timeout=60)
    task = await ended(bot, 1, timeout=120)
    assert task.status is not TaskStatus.FAILED, task.error
    results = tool_results(model)
    started = next(r for r in results if "http.server" in r)
    assert "service 1 started; listening on port 8123" in started, started
    fetched = next(r for r in results if "urlopen" in r)
    assert "def add" in fetched or "a - b" in fetched, fetched  # calc.py, served by the service
    log = next(r for r in results if "cat /run/services" in r)
    assert "GET /calc.py" in log, log
    assert any("service 3 started" in r and "starting" in r for r in results), results
    slept = next(r for r in results if "slept" in r and "sleep 2" in r)
    assert "service 3" in slept and "exited with code 4" in slept, slept
    tried = next(r for r in results if "socket.create_connection" in r)
    assert "tried" in tried, tried
    said = everything_said(bot, model)
    assert listener.connections == 0 and "CONNECTED" not in said
    await bot.tg.await_for(lambda: not host_pids(ESCAPEE) and not host_pids(OUTSIDE), timeout=10)
    assert not host_pids("8123"), "the http.server outlived its task"


@pytest.mark.untested_calc  # neither the verdict nor the task's end is what this test is about
async def test_cancel_ends_a_service(bot: BotHarness, model: RoleScript) -> None:
    model.add("orchestrator", start_task("calc", "Serve."), claude_says.text("Started."))
    model.add(
        "code",
        run("python3 -u -m http.server 8124 --bind 127.0.0.1", background=True),
        run(f"sleep {BESIDE}"),
    )
    bot.say("serve calc")
    await bot.tg.await_for(lambda: host_pids("8124") and host_pids(BESIDE), timeout=60)
    bot.tg.send_command(USER_ID, "/cancel")
    await bot.tg.await_for(lambda: any("Task #1 cancelled" in (m.text or "") for m in bot.tg.messages(USER_ID)))
    await bot.tg.await_for(lambda: not host_pids("8124") and not host_pids(BESIDE), timeout=10)
    results = tool_results(model)
    assert any("service 1 started" in r and "Serving HTTP" in r for r in results), results


LINGERER = own_sleep("7373")  # a service still running when the task's work is over


@pytest.mark.untested_calc  # neither the verdict nor the task's end is what this test is about
@pytest.mark.parametrize("ending", ["done", "cancelled"])
async def test_a_tasks_processes_have_ended_before_its_worktree_is_deleted(
    bot: BotHarness, model: RoleScript, monkeypatch: pytest.MonkeyPatch, ending: str
) -> None:
    """The bot deletes the worktree outside any sandbox: a service of the task still running then could change the
    worktree under the delete (swap a folder for a link out of it). Each call of the delete records which of the
    task's processes were still alive at that moment, then deletes as it would."""
    alive_at_delete: list[list[int]] = []
    delete = worktrees.delete_folder

    def recording_delete(folder: Path, tries: int = 3) -> None:
        alive_at_delete.append(host_pids(LINGERER))
        delete(folder, tries)

    monkeypatch.setattr(worktrees, "delete_folder", recording_delete)
    model.add("orchestrator", start_task("calc", "Serve."), claude_says.text("Started."))
    calls = [run(f"echo up; exec sleep {LINGERER}", background=True)]
    calls += [run(f"sleep {BESIDE}")] if ending == "cancelled" else [claude_says.text("Done.")]
    model.add("code", *calls)
    bot.say("serve calc")
    await bot.tg.await_for(lambda: host_pids(LINGERER), timeout=60)
    if ending == "cancelled":
        await bot.tg.await_for(lambda: host_pids(BESIDE), timeout=60)
        bot.tg.send_command(USER_ID, "/cancel")
    await ended(bot, 1, timeout=120)
    await bot.tg.await_for(lambda: alive_at_delete, timeout=10)
    assert alive_at_delete == [[]], (
        f"the task's service was still running when its worktree was deleted: {alive_at_delete}"
    )


PAUSED = own_sleep("7474")  # a service running while the bot commits the worker's turn


@pytest.mark.untested_calc  # neither the verdict nor the task's end is what this test is about
async def test_a_tasks_processes_are_stopped_while_the_bot_commits_its_worktree(
    bot: BotHarness, model: RoleScript, monkeypatch: pytest.MonkeyPatch
) -> None:
    """git reads the worktree by path, outside the sandbox: every process of the task (the service, and a child it
    forked into a session of its own) is stopped while the bot commits, and runs on afterwards. Each commit records
    the state of those processes at that moment, then commits as it would."""
    states: list[list[str]] = []
    after: list[list[str]] = []
    commit, end = task_checkout.commit_all, TaskSandboxes.end_processes

    async def recording_commit(*args: Any, **kwargs: Any) -> Any:
        states.append([(pause.state(pid) or "gone") for pid in host_pids(PAUSED)])
        return await commit(*args, **kwargs)

    async def recording_end(self: TaskSandboxes, task: Any) -> None:  # the work is over: the next step after it
        after.append([(pause.state(pid) or "gone") for pid in host_pids(PAUSED)])
        await end(self, task)

    monkeypatch.setattr(task_checkout, "commit_all", recording_commit)
    monkeypatch.setattr(TaskSandboxes, "end_processes", recording_end)
    model.add("orchestrator", start_task("calc", "Serve."), claude_says.text("Started."))
    service = f"setsid sleep {PAUSED} & echo up; exec sleep {PAUSED}"
    model.add("code", run(service, background=True), run("echo changed > changed.txt"), claude_says.text("Done."))
    bot.say("serve calc")
    await ended(bot, 1, timeout=120)
    assert states and all(len(seen) == 2 for seen in states), f"the service's processes were not running: {states}"
    assert all(set(seen) == {"T"} for seen in states), f"not stopped while the bot committed: {states}"
    assert after and after[0] and "T" not in after[0], f"still stopped after the commit: {after}"


ECHO_SERVER = (
    "import sys, os, pathlib\n"
    "print('ready', flush=True)\n"
    "for line in sys.stdin:\n"
    "    extra = pathlib.Path(os.environ['EXTRA'], 'note.txt').read_text().strip()\n"
    "    print('to the log', file=sys.stderr, flush=True)\n"
    "    print(line.strip().upper(), extra, os.environ.get('SERVER_KEY'), flush=True)\n"
)


async def test_the_stdio_seam_runs_a_program_in_the_task_sandbox_and_ends_it_with_the_task(tmp_path) -> None:
    worktree, extra = tmp_path / "work", tmp_path / "server-folder"
    worktree.mkdir()
    extra.mkdir()
    (extra / "note.txt").write_text("extra-readable\n")
    (extra / "server.py").write_text(ECHO_SERVER)
    bounds = TaskBounds("seam", 1 << 30, 256)
    spec = dataclasses.replace(spec_for(SecretsFilter(), PROBE, worktree), task=bounds)
    process = await start_sandboxed_stdio(
        spec, ["python3", str(extra / "server.py")], {"EXTRA": str(extra), "SERVER_KEY": "k1"}, read_paths=[extra]
    )
    try:
        assert (await process.stdout.readline()).strip() == b"ready"
        process.stdin.write(b"hello\n")
        await process.stdin.drain()
        assert (await process.stdout.readline()).strip() == b"HELLO extra-readable k1"
        # its stderr is in the bot's own folder, not among the logs the task's commands are shown
        assert bounds.own_logs is not None and bounds.service_logs is not None
        logs = list(bounds.own_logs.glob("stdio-*.log"))
        assert logs and "to the log" in logs[0].read_text()
        assert not list(bounds.service_logs.glob("*.log")), "the stdio program's log is shown at /run/services"
        # nor does a command find it where a read path holds the bot's folder: the folder is covered there
        holding = dataclasses.replace(spec, read_only=(*spec.read_only, bounds.own_logs.parent))
        seen = await run_command(
            f"echo files=$(ls -A {bounds.own_logs} | wc -l); cat {logs[0]} 2>/dev/null || echo not-there",
            worktree,
            20,
            env={},
            sandbox=holding,
        )
        assert seen.output.split() == ["files=0", "not-there"], seen.output
        own_logs, pid = bounds.own_logs, process.pid
    finally:
        await bounds.close()
    assert process.returncode is not None
    assert not own_logs.exists(), "the bot's own logs outlived the task"
    assert not host_pids(str(extra / "server.py")), "the stdio program outlived its task"
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


async def test_a_services_log_ends_within_the_disk_budget_the_notice_included(tmp_path) -> None:
    budget = 64 << 10
    bounds = TaskBounds("logs", 1 << 30, 256, DiskBudget(tmp_path, budget))
    spec = dataclasses.replace(spec_for(SecretsFilter(), PROBE, tmp_path), task=bounds)
    services = TaskServices.of(bounds)
    try:
        await services.start(spec, "head -c 300000 /dev/zero | tr '\\0' x; echo; exec sleep 1000.9292", {})
        logs = bounds.service_logs
        for _ in range(400):  # the pump writes the notice once the budget is spent (a hang guard, not a timing)
            if any(LEFT_OUT.strip() in log.read_bytes() for log in logs.glob("*.log")):
                break
            await asyncio.sleep(0.05)
        written = sum(log.stat().st_size for log in logs.glob("*.log"))
        assert any(LEFT_OUT.strip() in log.read_bytes() for log in logs.glob("*.log")), "the notice is written"
        assert written <= budget, f"the logs took {written:,} bytes against a budget of {budget:,}"
        assert bounds.disk is not None and bounds.disk.grown <= budget
    finally:
        await bounds.close()


async def test_a_task_runs_at_most_its_number_of_services(tmp_path) -> None:
    bounds = TaskBounds("cap", 1 << 30, 256, max_services=1)
    spec = dataclasses.replace(spec_for(SecretsFilter(), PROBE, tmp_path), task=bounds)
    services = TaskServices.of(bounds)
    try:
        said = await services.start(spec, f"echo first; exec sleep {FIRST_THEN_SLEEPS}", {})
        assert "service 1 started" in said and "first" in said, said
        with pytest.raises(ToolError, match="SANDBOX_MAX_SERVICES"):
            await services.start(spec, f"exec sleep {FIRST_THEN_SLEEPS}", {})
    finally:
        await bounds.close()
    assert not host_pids(FIRST_THEN_SLEEPS)
