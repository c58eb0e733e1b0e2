"""Merge and Discard never lose the owner's work, whatever the task's branch holds.

A worker decides what its branch holds (an emptied `.gitignore`, a link in place of a folder), and git counts an
ignored file as expendable; an owner may keep local edits git was told to assume unchanged; a follow-up (Fix CI, a
mention on the task's pull request) works on the same branch while the task it continues waits for its Merge. The
bot refuses, says why, and leaves the checkout as it was.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

from agents.core.errors import ToolError
from agents.core.models import Caller, TaskStatus
from agents.git.command import GitIdentity
from agents.git.commits import commit_all
from agents.git.merge import merge_task_branch
from agents.git.worktrees import create_task_worktree
from tests.conftest import USER_ID, BotHarness
from tests.conftest import git as git_in
from tests.fakes import anthropic_server as claude_says
from tests.scripted import RoleScript, spare
from tests.support.git_repos import git, make_user_repo, no_git_identity  # noqa: F401  (an autouse fixture)
from tests.support.tasks import edit, final_summary, start_task, until

PRECIOUS = "OWNER_ONLY_COPY=do-not-lose\n"


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    path = make_user_repo(tmp_path / "demo")
    (path / ".gitignore").write_text("notes.txt\nlocal/\n")
    git("add", ".gitignore", cwd=path)
    git("commit", "-q", "-m", "ignore the owner's notes", cwd=path)
    return path


@pytest.fixture
def worktrees_dir(tmp_path: Path) -> Path:
    return tmp_path / "worktrees"


async def test_a_merge_never_overwrites_an_ignored_file_of_the_owner(repo: Path, worktrees_dir: Path) -> None:
    """The worker un-ignores `notes.txt` and commits its own; the owner's ignored notes.txt is theirs. With a
    conflict too, the aborted merge would have deleted it."""
    wt = await create_task_worktree(repo, 1, "hostile", worktrees_dir=worktrees_dir)
    (wt.path / ".gitignore").write_text("")
    (wt.path / "notes.txt").write_text("WORKER=overwrote-you\n")
    (wt.path / "app.py").write_text("VALUE = 'task'\n")
    assert await commit_all(wt, "task", GitIdentity())
    (repo / "notes.txt").write_text(PRECIOUS)
    result = await merge_task_branch(wt)
    assert not result.ok and "files git does not track" in result.message and "notes.txt" in result.message, result
    assert (repo / "notes.txt").read_text() == PRECIOUS
    (repo / "app.py").write_text("VALUE = 'owner'\n")
    git("commit", "-q", "-am", "owner's change: a conflict", cwd=repo)
    result = await merge_task_branch(wt)
    assert not result.ok and result.conflicts == ["app.py"], result  # found before the checkout is touched
    assert (repo / "notes.txt").read_text() == PRECIOUS


async def test_a_merge_goes_through_a_lock_a_killed_git_left_and_never_one_a_live_git_holds(
    repo: Path, worktrees_dir: Path
) -> None:
    """A merge killed with the whole bot left `.git/index.lock`: the next Merge removes it (no process has it open)
    rather than failing on it for ever; a lock some git still holds open is left alone, and the merge refused."""
    wt = await create_task_worktree(repo, 1, "feature", worktrees_dir=worktrees_dir)
    (wt.path / "app.py").write_text("VALUE = 'task'\n")
    assert await commit_all(wt, "task", GitIdentity())
    lock = repo / ".git" / "index.lock"
    with lock.open("w"):  # held open, as a running git holds it
        held = await merge_task_branch(wt)
        assert not held.ok and lock.exists() and "another git is at work" in held.message, held
    result = await merge_task_branch(wt)  # now nobody has it open: a killed git's
    assert result.ok, result
    assert not lock.exists()
    assert git("show", "HEAD:app.py", cwd=repo).strip() == "VALUE = 'task'"


async def test_a_file_the_branch_adds_in_a_folder_main_renamed_never_overwrites_an_ignored_file(
    repo: Path, worktrees_dir: Path
) -> None:
    """The owner renames `conf/` to `settings/` on main while the task runs and keeps an ignored `settings/local.cfg`;
    the branch adds `conf/local.cfg`. git's directory-rename detection writes it to `settings/local.cfg`: the check
    looked only at the path the branch named, so the merge overwrote the owner's file, hit a conflict, and its abort
    deleted it (while saying main was unchanged). The merge is now planned in the object store first."""
    (repo / "conf").mkdir()
    (repo / "conf" / "a.cfg").write_text("a\n")
    (repo / "conf" / "b.cfg").write_text("b\n")
    (repo / ".gitignore").write_text("settings/local.cfg\n")
    git("add", "-A", cwd=repo)
    git("commit", "-q", "-m", "config folder", cwd=repo)
    wt = await create_task_worktree(repo, 1, "config", worktrees_dir=worktrees_dir)
    (wt.path / "conf" / "local.cfg").write_text("WORKER=overwrote-you\n")
    assert await commit_all(wt, "task", GitIdentity())
    git("mv", "conf", "settings", cwd=repo)  # the owner's own work meanwhile
    git("commit", "-q", "-m", "rename conf to settings", cwd=repo)
    (repo / "settings" / "local.cfg").write_text(PRECIOUS)
    head = git("rev-parse", "HEAD", cwd=repo)
    result = await merge_task_branch(wt)
    assert not result.ok and "settings/local.cfg" in result.message, result
    assert (repo / "settings" / "local.cfg").read_text() == PRECIOUS
    assert git("rev-parse", "HEAD", cwd=repo) == head and git("status", "--porcelain", cwd=repo) == ""


async def test_a_merge_never_writes_into_a_folder_git_does_not_track(repo: Path, worktrees_dir: Path) -> None:
    """The owner's `venv/` is ignored; the worker empties `.gitignore` and commits a `.pth` file into
    `venv/lib/python3.11/site-packages/`, which every Python the owner starts from that venv runs, unconfined. No
    file was in the way there, so the merge wrote it."""
    (repo / ".gitignore").write_text("venv/\n")
    git("commit", "-q", "-am", "ignore the venv", cwd=repo)
    site = repo / "venv" / "lib" / "python3.11" / "site-packages"
    site.mkdir(parents=True)
    (site / "owner_pkg.py").write_text("OWNER = 1\n")
    wt = await create_task_worktree(repo, 1, "venv", worktrees_dir=worktrees_dir)
    (wt.path / ".gitignore").write_text("")
    planted = wt.path / "venv" / "lib" / "python3.11" / "site-packages"
    planted.mkdir(parents=True)
    (planted / "zz_task.pth").write_text("import os; os.system('touch /tmp/owned-by-the-worker')\n")
    (wt.path / "app.py").write_text("VALUE = 'task'\n")
    assert await commit_all(wt, "task", GitIdentity())
    result = await merge_task_branch(wt)
    assert not result.ok and "write into files git does not track" in result.message, result
    assert "(venv:" in result.message, result
    assert not (site / "zz_task.pth").exists()
    assert sorted(p.name for p in site.iterdir()) == ["owner_pkg.py"]


async def test_a_merge_never_wipes_an_edit_git_was_told_to_assume_unchanged(repo: Path, worktrees_dir: Path) -> None:
    wt = await create_task_worktree(repo, 1, "edit app", worktrees_dir=worktrees_dir)
    (wt.path / "app.py").write_text("VALUE = 42\n")
    assert await commit_all(wt, "task", GitIdentity())
    git("update-index", "--assume-unchanged", "app.py", cwd=repo)  # a common way to keep a local config edit
    (repo / "app.py").write_text("VALUE = 'my local setting'\n")
    result = await merge_task_branch(wt)
    assert not result.ok and "assume-unchanged (app.py)" in result.message, result
    assert (repo / "app.py").read_text() == "VALUE = 'my local setting'\n"


async def test_a_committed_link_never_replaces_an_ignored_folder_of_the_owner(
    repo: Path, worktrees_dir: Path, tmp_path: Path
) -> None:
    """`local/` is ignored in the owner's checkout (their database lives there); the branch commits a link named
    `local` to a folder outside. Nothing is written through a committed link either."""
    outside = tmp_path / "outside"
    outside.mkdir()
    wt = await create_task_worktree(repo, 1, "links", worktrees_dir=worktrees_dir)
    (wt.path / "local").symlink_to(outside)
    assert await commit_all(wt, "links", GitIdentity())
    (repo / "local").mkdir()
    (repo / "local" / "owner.db").write_text(PRECIOUS)
    result = await merge_task_branch(wt)
    assert not result.ok and "local" in result.message, result
    assert (repo / "local" / "owner.db").read_text() == PRECIOUS and not (repo / "local").is_symlink()
    assert list(outside.iterdir()) == []


def held_turn(go: threading.Event):  # noqa: ANN201 - a scripted reply
    def held(body: dict[str, Any]) -> dict[str, Any]:
        go.wait(60)
        return claude_says.text("Still on it.")

    return held


@pytest.mark.quick_tests
@pytest.mark.settings(max_corrections=1)
async def test_merge_and_discard_wait_for_a_follow_up_still_working_on_the_branch(
    bot: BotHarness, model: RoleScript
) -> None:
    """Task #1 ended ✔; its follow-up #2 (as Fix CI or a mention on its pull request starts one) committed a change
    no verdict has judged, and runs on in the same worktree. Merge of #1 would take #2's commit; Discard of #1 would
    pull the worktree and the branch from under #2. Both wait for #2, and say so."""
    go = threading.Event()
    repo = bot.settings.paths.workspace_path / "calc"
    model.add("orchestrator", start_task("calc", "Fix add() in calc.py."), claude_says.text("started"))
    model.add("code", edit("calc.py", "a - b", "a + b"), claude_says.text("Fixed add()."))
    bot.say("fix calc")
    first, _ = await final_summary(bot, 1, timeout=90)
    assert first.status is TaskStatus.COMPLETED, first
    model.add(
        "code",
        edit("calc.py", "a + b", "a * b"),
        claude_says.text("Done."),
        spare(held_turn(go), why="keeps the follow-up running through its correction, if the checks get that far"),
    )
    owner = Caller(chat_id=USER_ID, user_id=USER_ID, user_name="@owner")
    crew = bot.runtime.crew
    try:
        follow = await crew.starts.continue_task(owner, 1, "make add multiply")

        async def moved() -> bool:
            return git_in(repo, "rev-parse", f"refs/heads/{first.branch}").strip() != first.commit_sha

        await until(moved)
        assert (await bot.runtime.store.get_task(follow.id)).status.is_active
        with pytest.raises(ToolError, match=f"task #{follow.id} is still working on task #1's branch; merge it"):
            await crew.branches.merge(owner, 1)
        with pytest.raises(ToolError, match=f"task #{follow.id} is still working on task #1's branch; discard it"):
            await crew.branches.discard(owner, 1)
    finally:
        go.set()
    assert "a * b" not in git_in(repo, "show", "main:calc.py")
    assert git_in(repo, "branch", "--list", first.branch).strip(), "the branch is still there"


async def test_a_resumed_task_never_takes_over_the_owners_own_worktree_of_its_branch(
    repo: Path, worktrees_dir: Path, tmp_path: Path
) -> None:
    """After task #1 ended, the owner checked its branch out in a worktree of their own and left a draft there. A
    follow-up or a Resume on that branch would have worked in the owner's folder, committed the draft under the
    bot's name and removed the folder at its end: it is refused instead, saying where the branch is."""
    from agents.git.command import GitError
    from agents.git.worktrees import remove_worktree_keep_branch

    wt = await create_task_worktree(repo, 1, "first", worktrees_dir=worktrees_dir)
    (wt.path / "app.py").write_text("VALUE = 2\n")
    assert await commit_all(wt, "task", GitIdentity())
    await remove_worktree_keep_branch(wt)
    mine = tmp_path / "owner-try"
    git("worktree", "add", "-q", str(mine), wt.branch, cwd=repo)
    (mine / "draft.txt").write_text(PRECIOUS)
    with pytest.raises(GitError, match="owner-try, a worktree that is not the bot's"):
        await create_task_worktree(repo, 2, "follow-up", worktrees_dir=worktrees_dir, branch=wt.branch)
    assert (mine / "draft.txt").read_text() == PRECIOUS
    assert "draft.txt" not in git("ls-tree", "--name-only", wt.branch, cwd=repo)
    git("worktree", "remove", "--force", str(mine), cwd=repo)
    resumed = await create_task_worktree(repo, 2, "follow-up", worktrees_dir=worktrees_dir, branch=wt.branch)
    assert resumed.path.parent == worktrees_dir, "the bot's own worktree again, once the owner's is gone"


@pytest.mark.quick_tests
async def test_discard_keeps_a_branch_holding_the_owners_own_commits(bot: BotHarness, model: RoleScript) -> None:
    """The owner committed a fix of their own on the task's branch, by hand: Discard would delete the branch and drop
    that commit with it. It is refused, naming the commit; the branch stays."""
    repo = bot.settings.paths.workspace_path / "calc"
    model.add("orchestrator", start_task("calc", "Fix add() in calc.py."), claude_says.text("started"))
    model.add("code", edit("calc.py", "a - b", "a + b"), claude_says.text("Fixed add()."))
    bot.say("fix calc")
    task, _ = await final_summary(bot, 1, timeout=90)
    assert task.branch
    mine = repo.parent / "owner-try"
    git_in(repo, "worktree", "add", "-q", str(mine), task.branch)
    (mine / "NOTES.md").write_text("my own notes\n")
    git_in(mine, "add", "NOTES.md")
    git_in(mine, "-c", "user.name=Owner", "-c", "user.email=owner@example.com", "commit", "-qm", "my notes")
    git_in(repo, "worktree", "remove", str(mine))
    owner = Caller(chat_id=USER_ID, user_id=USER_ID, user_name="@owner")
    with pytest.raises(ToolError, match=r"holds commits the bot did not make \(\w+ by "):
        await bot.runtime.crew.branches.discard(owner, 1)
    assert "NOTES.md" in git_in(repo, "ls-tree", "--name-only", task.branch)


async def test_a_runners_branch_fetched_home_never_drops_the_owners_commits_on_it(repo: Path, tmp_path: Path) -> None:
    """Under TASK_ENGINE=temporal a task's branch comes home from the shared remote. The owner committed on it by
    hand meanwhile, and a follow-up on a runner pushed the branch again without that commit: a forced fetch would
    rewind the owner's branch. Only a fast-forward moves it; otherwise it is kept, and the error says why."""
    from agents.git.command import GitError
    from agents.git.remote import fetch_branch

    shared = tmp_path / "shared.git"
    git("clone", "-q", "--bare", str(repo), str(shared), cwd=tmp_path)
    runner = tmp_path / "runner"
    git("clone", "-q", str(shared), str(runner), cwd=tmp_path)
    branch = "agentlab/task-1-notes"
    git("checkout", "-q", "-b", branch, cwd=runner)
    (runner / "notes.md").write_text("the task's notes\n")
    git("add", "notes.md", cwd=runner)
    git("commit", "-q", "-m", "task", cwd=runner)
    git("push", "-q", "origin", branch, cwd=runner)
    assert await fetch_branch(repo, branch, str(shared))  # home: a new branch
    (repo / "mine.md").write_text(PRECIOUS)
    git("checkout", "-q", branch, cwd=repo)
    git("add", "mine.md", cwd=repo)
    git("commit", "-q", "-m", "the owner's own commit", cwd=repo)
    git("checkout", "-q", "-", cwd=repo)
    mine = git("rev-parse", branch, cwd=repo).strip()
    (runner / "notes.md").write_text("the follow-up's notes\n")
    git("commit", "-q", "-am", "follow-up", cwd=runner)
    git("push", "-q", "origin", branch, cwd=runner)
    with pytest.raises(GitError, match="holds commits the one on .* lacks"):
        await fetch_branch(repo, branch, str(shared))
    assert git("rev-parse", branch, cwd=repo).strip() == mine, "the owner's commit was dropped"


async def test_an_old_merge_pressed_before_the_start_up_tells_a_cut_short_merge_is_told_once(
    bot: BotHarness, model: RoleScript
) -> None:
    """A kill cut a Merge short before git ran; at the next start the reconciliation, which runs in the background,
    has listed its record when the owner presses the old Merge button: the press merges and tells the chat, and the
    reconciliation then finds the record ended and tells nothing (it told "merged" a second time, with a second
    `merged` event)."""
    model.add("orchestrator", start_task("calc", "Fix add() in calc.py."), claude_says.text("started"))
    model.add("code", edit("calc.py", "a - b", "a + b"), claude_says.text("Fixed add()."))
    bot.say("fix calc")
    first, _ = await final_summary(bot, 1, timeout=90)
    assert first.status is TaskStatus.COMPLETED, first
    store, crew = bot.runtime.store, bot.runtime.crew
    await store.open_decisions.begin(1, "merge")  # the record a kill left: git never ran
    [listed] = await store.open_decisions.cut_short()  # what the start-up's reconciliation read
    owner = Caller(chat_id=USER_ID, user_id=USER_ID, user_name="@owner")
    assert "merged agentlab/task-1-" in await crew.branches.merge(owner, 1)
    assert await crew.branches.cut_short(listed) is None, "the press told it already"
    assert [e.kind for e in await store.task_events(1)].count("merged") == 1
