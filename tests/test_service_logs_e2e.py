"""A task's service logs stay inside its disk budget and do not outlive it: attacks through the real bot and bwrap.

A hostile worker (the scripted model) starts services that print far more than the task's disk budget
(SANDBOX_MAX_DISK_MB=16) into their logs, which live outside the worktree; a bot killed mid-task leaves its services
folder (and its other temporary folders) behind, which the next start removes.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from agents.sandbox.bwrap import SERVICES_MOUNT
from tests.conftest import BotHarness
from tests.fakes import anthropic_server as claude_says
from tests.scripted import RoleScript
from tests.support.tasks import ended, start_task

pytestmark = pytest.mark.skipif(
    shutil.which("bwrap") is None or shutil.which("nsenter") is None or not sys.platform.startswith("linux"),
    reason="bubblewrap (bwrap) or nsenter is not installed: scripts/install-system-deps.sh",
)

LEFTOVER_PREFIX = "agentlab-services-"  # then the pid of the bot that made it
NOISY = "head -c 12000000 /dev/zero | tr '\\0' x; sleep 60"  # 12 MB of output, then it keeps running


@pytest.mark.untested_calc  # neither the verdict nor the task's end is what this test is about
@pytest.mark.settings(sandbox_max_disk_mb=16)
async def test_service_logs_count_in_the_tasks_disk_budget(bot: BotHarness) -> None:
    mine = f"{LEFTOVER_PREFIX}{os.getpid()}-1-*"  # this process's folders of a task #1 (earlier tests' included)
    before = set(Path(tempfile.gettempdir()).glob(mine))
    model = RoleScript()
    bot.claude.handler = model
    model.add("orchestrator", start_task("calc", "Start the services."), claude_says.text("Started."))
    model.add(
        "code",
        *[claude_says.tool_use("run_command", {"command": NOISY, "background": True}) for _ in range(3)],
        claude_says.tool_use("run_command", {"command": f"sleep 3; du -sb {SERVICES_MOUNT}"}),
        claude_says.text("Done."),
    )
    bot.say("start the services in calc")
    await ended(bot, 1, timeout=90)
    last = model.requests["code"][-1]["messages"]
    results = [
        b["content"] if isinstance(b["content"], str) else json.dumps(b["content"])
        for m in last
        if m["role"] == "user" and isinstance(m["content"], list)
        for b in m["content"]
        if b.get("type") == "tool_result"
    ]
    # the third service printed as much as the others, into a spent budget: said so at once, not "no output"
    assert "left out" in results[2] and "no output" not in results[2], results[2]
    assert re.search(r"\d+\s+" + re.escape(SERVICES_MOUNT), results[-1]), results
    used = int(re.search(r"(\d+)\s+" + re.escape(SERVICES_MOUNT), results[-1]).group(1))
    assert used <= 17 << 20, f"the services' logs took {used:,} bytes against a budget of 16 MB"
    await bot.tg.await_for(lambda: not set(Path(tempfile.gettempdir()).glob(mine)) - before, timeout=30)


async def test_a_killed_bots_temporary_folders_are_swept_at_start(bot_factory) -> None:
    """What a SIGKILLed bot left in the temporary folder (services logs, an MCP research folder, the browser's proxy
    socket folder, pasta's folder, the sandbox's private copies; older names without a pid too, once a day old) goes
    at the next start; the folders of a live process (this one: the bot under test runs in it) stay."""
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    tmp = Path(tempfile.gettempdir())
    left = [
        Path(tempfile.mkdtemp(prefix=f"agentlab-{kind}-{dead.pid}-{label}-", dir=tmp))
        for kind, label in (("services", "7"), ("mcp", "7"), ("proxy", "7"), ("pasta", "net"), ("sandbox", "etc"))
    ]
    (left[0] / "service-1.log").write_bytes(b"x" * 1000)
    old = [Path(tempfile.mkdtemp(prefix=f"agentlab-{kind}-1-", dir=tmp)) for kind in ("services", "mcp", "proxy")]
    for folder in old:  # made by an older version (no pid in the name), two days ago
        os.utime(folder, (time.time() - 2 * 86400,) * 2)
    recent_old = Path(tempfile.mkdtemp(prefix="agentlab-services-2-", dir=tmp))  # may be a live older bot's
    alive = [
        Path(tempfile.mkdtemp(prefix=f"agentlab-{kind}-{os.getpid()}-8-", dir=tmp)) for kind in ("services", "mcp")
    ]
    try:
        async with bot_factory():
            survived = [p.name for p in [*left, *old] if p.exists()]
            assert not survived, f"a killed bot's folders survived the next start: {survived}"
            assert all(p.exists() for p in alive), "a running bot's folder was removed"
            assert recent_old.exists(), "a recent folder without a pid (maybe a live older bot's) was removed"
    finally:
        for folder in [*left, *old, *alive, recent_old]:
            shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture
def bot_factory(fake_telegram, fake_anthropic, tmp_path, workspace_root, bot_repo):
    from tests.conftest import running_bot

    return lambda: running_bot(fake_telegram, fake_anthropic, tmp_path, workspace_root, bot_repo)
