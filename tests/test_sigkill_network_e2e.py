"""A bot SIGKILLed while a task's network-allowed command and service run (SANDBOX_NETWORK=on: pasta wires each
sandbox out): the sandboxes die with the bot, and the pastas, which run in the background in no group of the bot's and
outlive the namespace they served, are gone once the next bot has started (its start-up sweep kills them)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal
import sys
from pathlib import Path

import pytest

from tests.conftest import USER_ID
from tests.fakes import anthropic_server as claude_says
from tests.scripted import RoleScript
from tests.support.processes import bot_env, host_pids, host_pids_where, launch, own_sleep
from tests.support.tasks import start_task

pytestmark = [
    pytest.mark.skipif(
        shutil.which("bwrap") is None or not sys.platform.startswith("linux"),
        reason="bubblewrap (bwrap) is not installed: scripts/install-system-deps.sh",
    ),
    pytest.mark.skipif(shutil.which("pasta") is None, reason="pasta (Debian package passt) is not installed"),
    pytest.mark.untested_calc,
]

COMMAND = own_sleep("6101")  # a network-allowed command of the task the bot is SIGKILLed in the middle of
SERVICE = own_sleep("6102")  # a network-allowed background service of that task


def run(command: str, background: bool = False) -> dict:
    return claude_says.tool_use(
        "run_command", {"command": command, "network": True, **({"background": True} if background else {})}
    )


def pastas_of(bot_pid: int) -> list[int]:
    """The pasta processes a bot process started (their pid file lies in its `agentlab-pasta-<pid>-…` folder)."""
    mark = f"agentlab-pasta-{bot_pid}-".encode()
    return host_pids_where(lambda args: bool(args) and b"pasta" in args[0] and any(mark in a for a in args))


def alive(pid: int) -> bool:
    """Whether `pid` is a live process (not a zombie waiting for its parent)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rindex(")") + 2 :].split()[0] != "Z"


def told(tg, text: str) -> bool:  # noqa: ANN001
    return any(text in (m.text or "") for m in tg.messages(USER_ID))


async def test_no_pasta_of_a_sigkilled_bot_outlives_its_next_start(
    fake_telegram, fake_anthropic, tmp_path, workspace_root
) -> None:
    model = RoleScript()
    fake_anthropic.handler = model
    model.add("orchestrator", start_task("calc", "Fetch the data."), claude_says.text("Started."))
    model.add("code", run(f"echo up; exec sleep {SERVICE}", background=True), run(f"exec sleep {COMMAND}"))
    env = bot_env(fake_telegram, fake_anthropic, tmp_path, workspace_root) | {"SANDBOX_NETWORK": "on"}
    first = launch(env, tmp_path, "first")
    second = None
    pastas: list[int] = []
    try:
        fake_telegram.send_text(USER_ID, "fetch the data in calc")
        await fake_telegram.await_for(lambda: host_pids(COMMAND) and host_pids(SERVICE), timeout=90)
        pastas = pastas_of(first.pid)
        assert len(pastas) == 2, f"a pasta per network-allowed process: {pastas}"
        first.send_signal(signal.SIGKILL)
        await asyncio.to_thread(first.wait, 10)
        await fake_telegram.await_for(lambda: not host_pids(COMMAND) and not host_pids(SERVICE), timeout=10)
        second = launch(env, tmp_path, "second")
        await fake_telegram.await_for(lambda: told(fake_telegram, "stopped while task #1"), timeout=90)
        await fake_telegram.await_for(lambda: not any(alive(pid) for pid in pastas), timeout=30)
    finally:
        for pid in pastas + host_pids(COMMAND) + host_pids(SERVICE):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        for bot in (first, second):
            if bot is not None and bot.poll() is None:
                bot.kill()
