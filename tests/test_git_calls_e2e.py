"""How many git processes one change task costs, through the real bot: an upper bound with room to spare.

Each git process costs a few milliseconds of CPU in git plus the Python side of an asyncio subprocess, and a task
once ran about seventy of them; this guards against slipping back (a fact asked again and again instead of
remembered, one git call per ref or per file instead of one for all). The bound is loose on purpose: well under what it
was, with room for a few more calls, not an exact count any harmless change would break.
"""

from __future__ import annotations

import asyncio
import shutil
import sys
from collections import Counter
from typing import Any

import pytest

from agents.core.models import TaskStatus
from tests.conftest import BotHarness
from tests.fakes import anthropic_server as claude_says
from tests.scripted import RoleScript
from tests.support.tasks import edit, final_summary, start_task

pytestmark = pytest.mark.skipif(
    shutil.which("bwrap") is None or not sys.platform.startswith("linux"),
    reason="bubblewrap (bwrap) is not installed: scripts/install-system-deps.sh",
)

# A task that fixes one file, is tested (at its base and after) and committed: 25 git processes now (the same in
# repeated runs), about 35 before the bot read its branch, HEAD (a packed commit too) and worktree records and new
# blobs' sizes from the git files, listed the base commit once for all who ask, and asked the commit's diff and stat
# at once; about 70 before it asked git for several facts at once and stopped asking again for what cannot change.
GIT_PROCESSES_PER_TASK = 25


def _subcommand(argv: tuple[Any, ...]) -> str:
    i = 0
    while i < len(argv) and str(argv[i]).startswith("-"):
        i += 2 if argv[i] in ("-c", "-C") else 1
    return str(argv[i]) if i < len(argv) else ""


# calc's real pytest, not a quick check (tests/conftest.py): a Python task's git calls include its pytest run's own (the
# base copy its red test is traced in), which a quick check never makes
async def test_one_change_task_runs_at_most_about_half_the_git_processes_it_once_did(
    bot: BotHarness, model: RoleScript, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: Counter[str] = Counter()
    spawn = asyncio.create_subprocess_exec

    async def counting_spawn(program: Any, *args: Any, **kwargs: Any) -> asyncio.subprocess.Process:
        if str(program) == "git" or str(program).endswith("/git"):
            calls[_subcommand(args)] += 1
        return await spawn(program, *args, **kwargs)

    monkeypatch.setattr(asyncio, "create_subprocess_exec", counting_spawn)
    model.add("orchestrator", start_task("calc", "Fix add() in calc.py."), claude_says.text("started"))
    model.add("code", edit("calc.py", "a - b", "a + b"), claude_says.text("Fixed add()."))
    bot.say("please fix add() in calc.py")
    task, _summary = await final_summary(bot, 1)
    assert task.status is TaskStatus.COMPLETED, task.status
    assert calls["commit"] == 1, calls  # the task did commit: the count covers a whole task
    total = sum(calls.values())
    print(f"\ngit processes for one task: {total} {dict(calls.most_common())}")
    assert total <= GIT_PROCESSES_PER_TASK, f"{total} git processes for one task: {dict(calls.most_common())}"
