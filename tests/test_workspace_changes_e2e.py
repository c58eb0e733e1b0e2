"""The owner's folders change under the bot while its tasks live: a workspace replaced by another repository while a
task runs is left alone (the guard compared it with the old one's snapshot and "restored" it), and a Merge after the
base branch was renamed says so."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from agents.core.models import Caller
from tests.conftest import USER_ID, BotHarness, git
from tests.fakes import anthropic_server as claude_says
from tests.scripted import RoleScript, spare
from tests.support.tasks import branches, fixed_add, start_task, until

pytestmark = pytest.mark.quick_tests


async def test_a_workspace_replaced_while_its_task_runs_keeps_the_new_repositorys_branches_and_config(
    bot: BotHarness, model: RoleScript, workspace_root: Path, tmp_path: Path
) -> None:
    """A task runs in calc (SANDBOX=off, where the guard is the defence). Meanwhile the owner moves calc aside and
    puts a fresh clone of it in its place, with a commit of their own on main, a branch `feature` and an `origin`
    remote. The guard's next check must not compare the *new* repository with the old one's snapshot and "restore"
    it (rewinding their main, deleting `feature`, overwriting their `.git/config`): it stops, and says so."""
    bot.runtime.settings.sandboxing.sandbox = "off"
    repo = workspace_root / "calc"
    waiting, go = tmp_path / "waiting", tmp_path / "go"
    model.add("orchestrator", start_task("calc", "Fix add() in calc.py."), claude_says.text("started"))
    model.add(
        "code",
        claude_says.tool_use(
            "run_command", {"command": f"touch {waiting}; while [ ! -e {go} ]; do sleep 0.01; done; echo ok"}
        ),
        claude_says.text("Done."),
        spare(claude_says.text("Done."), why="a correction turn, if the bot's commit or test run fails"),
        spare(claude_says.text("Done."), why="a second correction turn"),
        spare(claude_says.text("Done."), why="a third correction turn"),
    )
    bot.say("fix calc")

    async def command_waits() -> bool:
        return waiting.exists()

    await until(command_waits, timeout=60)
    # the owner moves the project aside and clones it afresh, then works in the clone
    old = workspace_root / "calc-old"
    repo.rename(old)
    git(workspace_root, "clone", "-q", str(old), "calc")
    (repo / "mine.txt").write_text("the owner's work\n")
    git(repo, "add", "mine.txt")
    git(repo, "commit", "-q", "-m", "the owner's commit on main")
    git(repo, "branch", "feature")
    main_now = git(repo, "rev-parse", "main").strip()
    config_now = (repo / ".git" / "config").read_text()
    assert '[remote "origin"]' in config_now
    go.touch()

    async def ended() -> bool:
        task = await bot.runtime.store.get_task(1)
        return task is not None and task.status.is_final

    await until(ended, timeout=90)
    await asyncio.sleep(0.5)
    assert "feature" in branches(repo), "the guard deleted a branch of the repository now at calc"
    assert git(repo, "rev-parse", "main").strip() == main_now, "the guard rewound main of the repository now at calc"
    assert (repo / ".git" / "config").read_text() == config_now, "the guard overwrote the new repository's config"
    said = " ".join(m.text or "" for m in bot.tg.messages(USER_ID))
    assert "is no longer a worktree of" in said, f"the task's end is told: {said}"


async def test_a_merge_after_the_owner_renamed_the_base_branch_says_so_not_detached_head(
    bot: BotHarness, workspace_root: Path
) -> None:
    """A task started on `main` and ended with its branch; the owner then renames `main` to `trunk`. Merge refuses,
    saying the base branch is gone (renamed or deleted), never "the task started from a detached HEAD (main)"."""
    task = await fixed_add(bot, Caller(chat_id=USER_ID, user_id=USER_ID))
    repo = workspace_root / "calc"
    git(repo, "branch", "-m", "main", "trunk")
    said = await bot.runtime.crew.branches.merge(Caller(chat_id=USER_ID, user_id=USER_ID), task.stored_id)
    assert "detached HEAD" not in said, said
    assert "main" in said and ("no longer exists" in said or "gone" in said or "renamed" in said), said
