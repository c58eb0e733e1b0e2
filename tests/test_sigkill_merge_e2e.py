"""Merge with the bot SIGKILLed in the middle: the bot as a real process, a wrapper `git` first on its PATH holding the
real `git merge` in the owner's checkout until the test has killed the bot, then the bot started again on the same
database and workspace. The owner's checkout ends whole: the merge committed, never the merged files left uncommitted
on the old HEAD (git died of SIGPIPE writing "Auto-merging …" to the dead bot's pipe). The press was on record, so the
restarted bot tells the chat how it ended, as git shows it: merged (the task marked so), or not, with Merge again."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sqlite3
import subprocess
from pathlib import Path

import pytest

from tests.conftest import USER_ID, git
from tests.fakes import anthropic_server as claude_says
from tests.fakes.anthropic_server import FakeAnthropic
from tests.fakes.telegram_server import BotMessage, FakeTelegram
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


def task_events(tmp_path: Path, kind: str) -> list[str]:
    with contextlib.closing(sqlite3.connect(tmp_path / "data" / "bot.db", timeout=5)) as db:
        rows = db.execute("SELECT detail FROM task_events WHERE task_id = 1 AND kind = ?", (kind,)).fetchall()
    return [row[0] for row in rows]


async def told(tg: FakeTelegram, words: str) -> BotMessage:
    """The bot's message holding `words`; what the chat holds instead when none comes."""
    try:
        return await tg.await_for(
            lambda: next((m for m in tg.messages(USER_ID) if words in (m.text or "")), None), timeout=90
        )
    except TimeoutError:
        chat = [m.text for m in tg.messages(USER_ID)]
        raise AssertionError(f"the chat was never told {words!r} after the restart; chat: {chat}") from None


async def merge_pressed(
    tg: FakeTelegram, claude: FakeAnthropic, tmp_path: Path, workspace_root: Path
) -> tuple[GitHold, dict[str, str], subprocess.Popen[bytes], int]:
    """A task done, the owner's own commit on main meanwhile, Merge pressed with `git merge` held before it runs: the
    wrapper, its env, the first bot (alive) and the held git's pid."""
    model = RoleScript()
    claude.handler = model
    hold = GitHold(tmp_path)
    env = bot_env(tg, claude, tmp_path, workspace_root)
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
    try:
        tg.send_text(USER_ID, "fix calc")
        summary = await tg.await_for(
            lambda: next((m for m in tg.messages(USER_ID) if "task:merge:1" in m.callback_data), None), timeout=120
        )
        (repo / "calc.py").write_text(CALC.replace("a * b", "b * a"))  # the owner's own commit on main meanwhile
        git(repo, "commit", "-q", "-am", "owner's change")
        hold.arm("merge", "--no-ff", when="before")  # git merge starts once the bot is dead
        tg.press_button(USER_ID, summary.message_id, "task:merge:1")
        await tg.await_for(lambda: hold.hit("merge"), timeout=60)
    except BaseException:
        await killed(first)
        raise
    held = hold.hit("merge")
    assert held is not None
    return hold, env, first, held


async def test_a_merge_the_bot_is_killed_in_the_middle_of_still_ends_whole_and_is_told(
    fake_telegram: FakeTelegram, fake_anthropic: FakeAnthropic, tmp_path: Path, workspace_root: Path
) -> None:
    repo = workspace_root / "calc"
    hold, env, first, held = await merge_pressed(fake_telegram, fake_anthropic, tmp_path, workspace_root)
    second = None
    try:
        await killed(first)
        second = launch(env, tmp_path, "second")
        # the killed bot's git merge, let go after the wrapper's pause, ends meanwhile; the new bot waits for it
        notice = await told(fake_telegram, "merged agentlab/task-1-")
        for _ in range(200):
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
    sha = git(repo, "rev-parse", "HEAD").strip()
    assert f"into main ({sha[:8]})" in (notice.text or ""), notice.text  # what a merge not cut short says
    assert [d.endswith(f"into main ({sha})") for d in task_events(tmp_path, "merged")] == [True]
    assert git(repo, "log", "--merges", "--format=%H").split() == [sha], "merged once, never twice"


async def test_a_merge_the_kill_stopped_before_git_ran_is_offered_again(
    fake_telegram: FakeTelegram, fake_anthropic: FakeAnthropic, tmp_path: Path, workspace_root: Path
) -> None:
    repo = workspace_root / "calc"
    hold, env, first, held = await merge_pressed(fake_telegram, fake_anthropic, tmp_path, workspace_root)
    second = None
    try:
        await killed(first)
        os.kill(held, signal.SIGKILL)  # the merge never runs
        before = git(repo, "rev-parse", "HEAD").strip()
        second = launch(env, tmp_path, "second")
        notice = await told(fake_telegram, "the merge did not happen")
        assert git(repo, "rev-parse", "HEAD").strip() == before, "the restart merged by itself"
        assert "task:merge:1" in notice.callback_data, notice.callback_data
        fake_telegram.press_button(USER_ID, notice.message_id, "task:merge:1")
        merged = await told(fake_telegram, "merged agentlab/task-1-")
    finally:
        for proc in (first, second):
            if proc is not None and proc.poll() is None:
                await killed(proc)
    sha = git(repo, "rev-parse", "HEAD").strip()
    assert f"into main ({sha[:8]})" in (merged.text or ""), merged.text
    assert git(repo, "log", "--merges", "--format=%H").split() == [sha], "merged once, never twice"
    assert len(task_events(tmp_path, "merged")) == 1
