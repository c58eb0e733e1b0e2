"""A race's Merge with the bot SIGKILLed in the middle: the bot as a real process, a wrapper `git` first on its PATH
holding one git command of the Merge (tests/support/held_git.py) until the test has killed the bot, then the bot
started again on the same database and workspace. The Merge of a race is a decision on record (the group `merging`,
with the attempt chosen), so the restarted bot finishes it as git shows it: the chosen attempt merged, the other
attempts' branches and worktrees are discarded, the race is merged and its chat told once; not merged, the race is
offered again with Merge the pick / Discard all."""

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
from tests.scripted import RoleScript, spare
from tests.support.attempts import Plays, start_attempts
from tests.support.held_git import GitHold, alive
from tests.support.processes import bot_env, launch
from tests.support.tasks import branches, edit

pytestmark = [pytest.mark.slow, pytest.mark.quick_tests]

MERGE_THE_PICK = "attempts:merge:1"


async def killed(proc: subprocess.Popen[bytes]) -> None:
    proc.send_signal(signal.SIGKILL)
    await asyncio.to_thread(proc.wait, 10)


def race_state(tmp_path: Path) -> str:
    with contextlib.closing(sqlite3.connect(tmp_path / "data" / "bot.db", timeout=5)) as db:
        return str(db.execute("SELECT state FROM attempt_groups WHERE id = 1").fetchone()[0])


def merged_events(tmp_path: Path) -> list[tuple[int, str]]:
    with contextlib.closing(sqlite3.connect(tmp_path / "data" / "bot.db", timeout=5)) as db:
        rows = db.execute("SELECT task_id, detail FROM task_events WHERE kind = 'merged' ORDER BY id").fetchall()
    return [(int(row[0]), str(row[1])) for row in rows]


def texts(tg: FakeTelegram) -> list[str]:
    return [m.text or "" for m in tg.messages(USER_ID)]


async def told(tg: FakeTelegram, *words: str, timeout: float = 90) -> BotMessage:
    """The bot's message holding all of `words`; what the chat holds instead when none comes."""
    try:
        return await tg.await_for(
            lambda: next((m for m in tg.messages(USER_ID) if all(w in (m.text or "") for w in words)), None),
            timeout=timeout,
        )
    except TimeoutError:
        raise AssertionError(f"the chat was never told {words!r}; chat: {texts(tg)}") from None


def worktrees(repo: Path) -> list[str]:
    return [line for line in git(repo, "worktree", "list", "--porcelain").splitlines() if line.startswith("worktree ")]


async def merge_pressed(
    tg: FakeTelegram, claude: FakeAnthropic, tmp_path: Path, workspace_root: Path, held: tuple[str, str]
) -> tuple[GitHold, dict[str, str], subprocess.Popen[bytes], int]:
    """A race of two attempts on calc (attempt 1 wrong, attempt 2 right: the pick), its summary in, Merge the pick
    pressed with the git command `held` (subcommand, a pattern of its arguments) held before it runs: the wrapper,
    the bot's env, the first bot (alive) and the held git's pid."""
    model = RoleScript()
    claude.handler = model
    hold = GitHold(tmp_path)
    env = bot_env(tg, claude, tmp_path, workspace_root)
    env["PATH"] = f"{hold.bin}:{env.get('PATH', '')}"
    env["MAX_CORRECTIONS"] = "0"
    plays = Plays(
        {
            1: [edit("calc.py", "a - b", "a * b"), claude_says.text("Changed add().")],
            2: [edit("calc.py", "a - b", "a + b"), claude_says.text("Fixed add().")],
        }
    )
    model.add("orchestrator", start_attempts("calc", "Fix add() in calc.py.", 2), claude_says.text("Two racing."))
    model.add("code", *[spare(plays, why="each attempt's turns, however many it takes") for _ in range(8)])
    first = launch(env, tmp_path, "first")
    try:
        tg.send_text(USER_ID, "try two ways to fix calc")
        summary = await tg.await_for(
            lambda: next((m for m in tg.messages(USER_ID) if MERGE_THE_PICK in m.callback_data), None), timeout=180
        )
        assert "Pick: attempt 2 (task #2)" in (summary.text or ""), summary.text
        hold.arm(*held, when="before")
        tg.press_button(USER_ID, summary.message_id, MERGE_THE_PICK)
        await tg.await_for(lambda: hold.hit(held[0]), timeout=60)
    except BaseException:
        await killed(first)
        raise
    pid = hold.hit(held[0])
    assert pid is not None
    return hold, env, first, pid


async def stop(*procs: subprocess.Popen[bytes] | None) -> None:
    for proc in procs:
        if proc is not None and proc.poll() is None:
            await killed(proc)


async def test_a_race_merge_killed_while_git_merges_is_finished_at_the_next_start(
    fake_telegram: FakeTelegram, fake_anthropic: FakeAnthropic, tmp_path: Path, workspace_root: Path
) -> None:
    """Killed with the pick's `git merge` under way (it ends after the bot's death): the restart sees the pick
    merged, discards the other attempt, marks the race merged and tells the chat once, for the race."""
    repo = workspace_root / "calc"
    hold, env, first, held = await merge_pressed(
        fake_telegram, fake_anthropic, tmp_path, workspace_root, ("merge", "--no-ff")
    )
    second = None
    try:
        await killed(first)
        second = launch(env, tmp_path, "second")
        notice = await told(fake_telegram, "merging attempts #1", "Attempt 2 (task #2) merged")
        await asyncio.sleep(3)  # a second notice, were one owed, would be out by now
        chat = texts(fake_telegram)
    finally:
        await stop(first, second)
        if (pid := hold.hit("merge")) is not None and alive(pid):
            os.kill(pid, signal.SIGKILL)
    sha = git(repo, "rev-parse", "HEAD").strip()
    assert git(repo, "log", "--merges", "--format=%H").split() == [sha], "merged once, never twice"
    assert "a + b" in git(repo, "show", "main:calc.py")
    assert f"into main ({sha[:8]})" in (notice.text or "") and "other attempts were discarded (#1)" in (
        notice.text or ""
    ), notice.text
    left = branches(repo)
    assert len(left) == 2 and any(b.startswith("agentlab/task-2-") for b in left), left
    assert len(worktrees(repo)) == 1, worktrees(repo)
    assert race_state(tmp_path) == "merged"
    assert [task for task, _ in merged_events(tmp_path)] == [2]
    assert sum("merging attempts #1" in t for t in chat) == 1, chat
    assert not [t for t in chat if "merging task #2" in t], "the race's notice alone tells it"


async def test_a_race_merge_killed_while_discarding_the_others_discards_them_at_the_next_start(
    fake_telegram: FakeTelegram, fake_anthropic: FakeAnthropic, tmp_path: Path, workspace_root: Path
) -> None:
    """Killed after the pick was merged, while the other attempt's branch was being deleted: the restart deletes
    it (an owner pressed Merge: nobody is asked again), marks the race merged and tells the chat once."""
    repo = workspace_root / "calc"
    hold, env, first, held = await merge_pressed(
        fake_telegram, fake_anthropic, tmp_path, workspace_root, ("branch", "-D")
    )
    second = None
    try:
        await killed(first)
        os.kill(held, signal.SIGKILL)  # the branch is never deleted by the killed bot
        assert len(branches(repo)) == 3, "the other attempt's branch was still there when the bot died"
        second = launch(env, tmp_path, "second")
        notice = await told(fake_telegram, "merging attempts #1", "Attempt 2 (task #2) merged")
        await asyncio.sleep(3)
        chat = texts(fake_telegram)
    finally:
        await stop(first, second)
    assert "other attempts were discarded (#1)" in (notice.text or ""), notice.text
    left = branches(repo)
    assert len(left) == 2 and any(b.startswith("agentlab/task-2-") for b in left), left
    assert len(worktrees(repo)) == 1, worktrees(repo)
    assert race_state(tmp_path) == "merged"
    assert sum("merging attempts #1" in t for t in chat) == 1, chat
    assert not [t for t in chat if "discarding task #1" in t], "the race's notice alone tells it"


async def test_a_race_merge_killed_before_git_merged_is_offered_again(
    fake_telegram: FakeTelegram, fake_anthropic: FakeAnthropic, tmp_path: Path, workspace_root: Path
) -> None:
    """Killed before the pick's `git merge` ran: the restart merges nothing, tells the chat the merge did not happen
    with Merge the pick / Discard all again, and a press then merges the pick and discards the other attempt."""
    repo = workspace_root / "calc"
    hold, env, first, held = await merge_pressed(
        fake_telegram, fake_anthropic, tmp_path, workspace_root, ("merge", "--no-ff")
    )
    second = None
    try:
        await killed(first)
        os.kill(held, signal.SIGKILL)  # the merge never runs
        before = git(repo, "rev-parse", "HEAD").strip()
        second = launch(env, tmp_path, "second")
        notice = await told(fake_telegram, "merging attempts #1", "the merge did not happen")
        assert git(repo, "rev-parse", "HEAD").strip() == before, "the restart merged by itself"
        assert notice.callback_data[:2] == [MERGE_THE_PICK, "attempts:discard:1"], notice.callback_data
        assert race_state(tmp_path) == "summarised"
        assert len(branches(repo)) == 3, "nothing is discarded when nothing was merged"
        assert not [t for t in texts(fake_telegram) if "merging task #2" in t], "the race's notice alone tells it"
        fake_telegram.press_button(USER_ID, notice.message_id, MERGE_THE_PICK)
        merged = await told(fake_telegram, "Attempt 2 (task #2) merged", "other attempts were discarded (#1)")
    finally:
        await stop(first, second)
    sha = git(repo, "rev-parse", "HEAD").strip()
    assert f"into main ({sha[:8]})" in (merged.text or ""), merged.text
    assert git(repo, "log", "--merges", "--format=%H").split() == [sha], "merged once, never twice"
    assert len(branches(repo)) == 2 and len(worktrees(repo)) == 1
    assert race_state(tmp_path) == "merged"
