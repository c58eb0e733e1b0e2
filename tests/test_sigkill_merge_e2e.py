"""Merge with the bot SIGKILLed in the middle: the bot as a real process, a wrapper `git` first on its PATH holding the
real `git merge` in the owner's checkout until the test has killed the bot, then the bot started again on the same
database and workspace. The owner's checkout ends whole: the merge committed, never the merged files left uncommitted
on the old HEAD (git died of SIGPIPE writing "Auto-merging …" to the dead bot's pipe)."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
from pathlib import Path

import pytest

from tests.conftest import USER_ID, git
from tests.fakes import anthropic_server as claude_says
from tests.fakes.anthropic_server import FakeAnthropic
from tests.fakes.telegram_server import FakeTelegram
from tests.scripted import RoleScript
from tests.support.held_git import GitHold, alive, owner_state
from tests.support.processes import bot_env, launch
from tests.support.tasks import start_task

pytestmark = [pytest.mark.slow, pytest.mark.quick_tests]

# add() to fix at the top, mul() the owner changes meanwhile far below: a clean merge, but a real content merge
CALC = "def add(a, b):\n    return a - b\n\n\n# spacer\n# spacer\n# spacer\n\n\ndef mul(a, b):\n    return a * b\n"


async def killed(proc: subprocess.Popen[bytes]) -> None:
    proc.send_signal(signal.SIGKILL)
    await asyncio.to_thread(proc.wait, 10)


async def test_a_merge_the_bot_is_killed_in_the_middle_of_still_ends_whole(
    fake_telegram: FakeTelegram, fake_anthropic: FakeAnthropic, tmp_path: Path, workspace_root: Path
) -> None:
    model = RoleScript()
    fake_anthropic.handler = model
    hold = GitHold(tmp_path)
    env = bot_env(fake_telegram, fake_anthropic, tmp_path, workspace_root)
    env["PATH"] = f"{hold.bin}:{env.get('PATH', '')}"
    repo = workspace_root / "calc"
    (repo / "calc.py").write_text(CALC)
    git(repo, "commit", "-q", "-am", "longer calc")
    model.add("orchestrator", start_task("calc", "Fix add() in calc.py."), claude_says.text("Started task #1."))
    model.add(
        "code",
        claude_says.tool_use("edit_file", {"path": "calc.py", "old": "a - b", "new": "a + b"}),
        claude_says.text("Fixed add()."),
    )
    first = launch(env, tmp_path, "first")
    second = None
    try:
        fake_telegram.send_text(USER_ID, "fix calc")
        summary = await fake_telegram.await_for(
            lambda: next((m for m in fake_telegram.messages(USER_ID) if "task:merge:1" in m.callback_data), None),
            timeout=120,
        )
        (repo / "calc.py").write_text(CALC.replace("a * b", "b * a"))  # the owner's own commit on main meanwhile
        git(repo, "commit", "-q", "-am", "owner's change")
        hold.arm("merge", "--no-ff", when="before")  # git merge starts once the bot is dead
        fake_telegram.press_button(USER_ID, summary.message_id, "task:merge:1")
        await fake_telegram.await_for(lambda: hold.hit("merge"), timeout=60)
        held = hold.hit("merge")
        assert held is not None
        await killed(first)
        before = len(fake_telegram.calls("getUpdates"))
        second = launch(env, tmp_path, "second")
        await fake_telegram.await_for(lambda: len(fake_telegram.calls("getUpdates")) > before, timeout=90)
        for _ in range(200):  # the killed bot's git merge, let go after the wrapper's pause, ends meanwhile
            if not alive(held):
                break
            await asyncio.sleep(0.1)
        state = owner_state(repo)
    finally:
        for proc in (first, second):
            if proc is not None and proc.poll() is None:
                await killed(proc)
        if (pid := hold.hit("merge")) is not None and alive(pid):
            os.kill(pid, signal.SIGKILL)
    assert state["status"] == "" and not state["merge_head"] and not state["locks"], state
    assert git(repo, "log", "-1", "--format=%s").startswith("Merge agentlab/task-1-"), "the merge was not committed"
    assert "a + b" in (repo / "calc.py").read_text() and "b * a" in (repo / "calc.py").read_text()
