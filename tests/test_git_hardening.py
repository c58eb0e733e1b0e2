"""The bot's git calls against a repository a hostile worker prepared: nothing it planted runs; guard, limits, diff cap.

Direct calls into agents.git (command, worktrees, commits, merge, guard, diff) on real repositories (the end-to-end attacks through the bot are
in test_repo_guard_e2e.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from agents.git import diff as git_diff
from agents.git.command import GitIdentity, run_git
from agents.git.commits import CommitLimits, commit_all
from agents.git.guard import RepositoryGuard
from agents.git.locks import bot_writes
from agents.git.merge import merge_task_branch
from agents.git.repository import git_common_dir
from agents.git.worktrees import (
    TaskWorktree,
    WorktreeLinkBroken,
    check_worktree_link,
    clear_stale_index_locks,
    create_task_worktree,
    discard_task_worktree,
    remove_worktree_keep_branch,
    worktree_admin_dir,
)
from agents.sandbox.pause import paused, tree
from agents.verify.checkout_state import checkout_state
from tests.support.git_repos import git, make_user_repo, no_git_identity  # noqa: F401  (an autouse fixture)
from tests.support.swappers import dot_git_fifo_swapper

HOOKS = (
    "pre-commit",
    "prepare-commit-msg",
    "commit-msg",
    "post-commit",
    "pre-merge-commit",
    "post-merge",
    "post-checkout",
    "post-rewrite",
    "reference-transaction",
    "post-index-change",
    "pre-auto-gc",
)


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return make_user_repo(tmp_path / "demo")


@pytest.fixture
def marks(tmp_path: Path) -> Path:
    folder = tmp_path / "marks"
    folder.mkdir()
    return folder


async def new_task(repo: Path, tmp_path: Path, task_id: int = 7) -> TaskWorktree:
    return await create_task_worktree(repo, task_id, "hostile", GitIdentity(), tmp_path / "worktrees")


def plant_everything(repo: Path, worktree: Path, marks: Path) -> None:
    """What a worker with a shell can leave in the shared `.git` and in its worktree for the bot's git to run."""
    common = repo / ".git"
    for hook in HOOKS:
        script = common / "hooks" / hook
        script.write_text(f"#!/bin/sh\ntouch {marks}/hook-{hook}\n")
        script.chmod(0o755)
    include = worktree / "evil.gitconfig"
    include.write_text(f"[core]\n\tsshCommand = touch {marks}/include-ssh\n")
    for key, value in {
        "core.fsmonitor": f"touch {marks}/fsmonitor; false",
        "filter.evil.clean": f"touch {marks}/filter-clean; cat",
        "filter.evil.smudge": f"touch {marks}/filter-smudge; cat",
        "filter.evil.process": f"touch {marks}/filter-process",
        "diff.evil.textconv": f"touch {marks}/textconv; cat",
        "diff.evil.command": f"touch {marks}/diff-command",
        "diff.external": f"touch {marks}/diff-external",
        "merge.evil.driver": f"touch {marks}/merge-driver; false",
        "core.pager": f"touch {marks}/pager; cat",
        "gpg.program": f"touch {marks}/gpg",
        "commit.gpgSign": "true",
        "log.showSignature": "true",
        "include.path": str(include),
    }.items():
        git("config", key, value, cwd=repo)
    (worktree / ".gitattributes").write_text("* filter=evil diff=evil merge=evil\n")
    (common / "info").mkdir(exist_ok=True)
    (common / "info" / "attributes").write_text("* filter=evil diff=evil merge=evil\n")  # the owner's checkout too


async def test_nothing_planted_runs_in_the_bots_commit_diff_or_merge(repo: Path, tmp_path: Path, marks: Path) -> None:
    tree = await new_task(repo, tmp_path)
    plant_everything(repo, tree.path, marks)
    (tree.path / "app.py").write_text("VALUE = 2\n")
    commit = await commit_all(tree, "hostile change", GitIdentity())
    assert commit is not None and commit.committed
    await git_diff.write_diff(tree, io.BytesIO())
    await remove_worktree_keep_branch(tree)
    merged = await merge_task_branch(tree, GitIdentity())
    assert merged.ok, merged.message
    assert "VALUE = 2" in (repo / "app.py").read_text()
    assert sorted(p.name for p in marks.iterdir()) == [], "a planted hook, driver or command ran inside the bot's git"


async def test_repo_map_and_doctor_use_the_hardened_runner(repo: Path, marks: Path) -> None:
    from agents.doctor import workspaces as doctor_workspaces
    from agents.repo_map import maps as repo_map

    git("config", "core.fsmonitor", f"touch {marks}/fsmonitor; false", cwd=repo)
    (repo / "app.py").write_text("VALUE = 3\n")  # a dirty tree makes `git diff` consult the fsmonitor
    assert await repo_map.git_head(repo)
    await repo_map._recently_changed(repo, {})
    assert (await doctor_workspaces._git("rev-parse", "--show-toplevel", cwd=repo))[0] == 0
    assert list(marks.iterdir()) == []


async def test_the_guard_undoes_moved_refs_deleted_branches_and_planted_hooks(
    repo: Path, tmp_path: Path, marks: Path
) -> None:
    git("branch", "feature", cwd=repo)
    main_before = git("rev-parse", "main", cwd=repo)
    tree = await new_task(repo, tmp_path)
    config_before = (repo / ".git" / "config").read_bytes()
    guard = await RepositoryGuard.start(tree)
    try:
        (tree.path / "x.txt").write_text("x\n")
        git("add", "x.txt", cwd=tree.path)
        git("commit", "-qm", "worker's own commit", cwd=tree.path)  # the task branch may move: no warning
        evil = git("commit-tree", "-m", "evil", "HEAD^{tree}", cwd=tree.path)
        git("update-ref", "refs/heads/main", evil, cwd=tree.path)
        git("branch", "-D", "feature", cwd=tree.path)
        git("tag", "planted", cwd=tree.path)
        plant_everything(repo, tree.path, marks)
        (tree.path / ".git").unlink()
        (tree.path / ".git").mkdir()  # a repository of the worker's making in place of the worktree link
        warnings = await guard.check()
    finally:
        guard.close()
    assert git("rev-parse", "main", cwd=repo) == main_before
    assert "feature" in git("branch", "--format=%(refname:short)", cwd=repo).split()
    assert git("tag", cwd=repo) == ""
    assert (repo / ".git" / "config").read_bytes() == config_before
    assert not any((repo / ".git" / "hooks" / hook).exists() for hook in HOOKS)
    assert (tree.path / ".git").is_file()
    await check_worktree_link(tree)  # the link is back
    text = "\n".join(warnings)
    for expected in (
        "refs/heads/main",
        "refs/heads/feature",
        "refs/tags/planted",
        ".git/config",
        "hooks/post-commit",
        "`.git` file",
    ):
        assert expected in text
    assert tree.branch not in text, "the task's own branch is the worker's to move"


async def test_the_bots_own_writes_are_not_undone_by_another_tasks_guard(repo: Path, tmp_path: Path) -> None:
    first = await new_task(repo, tmp_path, 1)
    guard = await RepositoryGuard.start(first)
    try:
        second = await new_task(repo, tmp_path, 2)  # new branch + config keys written by the bot
        (second.path / "b.txt").write_text("b\n")
        commit = await commit_all(second, "second task", GitIdentity())
        await remove_worktree_keep_branch(second)
        assert (await merge_task_branch(second, GitIdentity())).ok
        assert await guard.check() == []
    finally:
        guard.close()
    assert git("rev-parse", second.branch, cwd=repo) == commit.sha


async def test_a_ref_a_worker_moves_while_the_bot_writes_is_still_undone(repo: Path, tmp_path: Path) -> None:
    """After a write of its own (another task's commit, worktree or merge) the bot takes every guard's snapshot again.
    A worker's command that moved `main` while the bot wrote was taken in as the bot's change and never undone; the
    guarded task's processes are stopped while the bot writes, so the move lands after it, and the guard undoes it."""
    first = await new_task(repo, tmp_path, 1)
    main = git("rev-parse", "main", cwd=repo)
    planted = git("commit-tree", "HEAD^{tree}", "-p", "HEAD", "-m", "planted", cwd=repo)
    go = tmp_path / "go"
    command = f"while [ ! -e {go} ]; do sleep 0.01; done; git update-ref refs/heads/main {planted}"
    worker = subprocess.Popen(["sh", "-c", command], cwd=first.path)  # the worker's command, waiting for its moment
    guard = await RepositoryGuard.start(first, pause=lambda: paused(lambda: tree({worker.pid})))
    try:
        async with bot_writes(repo):  # the bot writes (here: nothing) and the command is let go meanwhile
            go.touch()
            for _ in range(50):  # half a second for the command to move main, were it running
                if git("rev-parse", "main", cwd=repo) != main:
                    break
                await asyncio.sleep(0.01)
        assert await asyncio.to_thread(worker.wait, 10) == 0
        assert git("rev-parse", "main", cwd=repo) == planted, "the command moved main (after the bot's write)"
        warnings = await guard.check()
    finally:
        guard.close()
        with contextlib.suppress(ProcessLookupError):
            worker.kill()
    assert any("refs/heads/main" in w for w in warnings), warnings
    assert git("rev-parse", "main", cwd=repo) == main


class Commands:
    """A task's activity as `TaskBounds.activity` gives it: commands started so far, and whether one runs now."""

    def __init__(self) -> None:
        self.started, self.running = 0, False

    def __call__(self) -> tuple[int, bool]:
        return self.started, self.running


async def test_main_moved_is_blamed_on_the_task_that_ran_a_command_not_on_the_one_whose_guard_saw_it(
    repo: Path, tmp_path: Path
) -> None:
    """Two tasks on one repository: the one that ran a command since the last check is the one warned, even where the
    other's guard checks first; with both active, both are warned, each naming the other."""
    busy, idle = Commands(), Commands()
    first, second = await new_task(repo, tmp_path, 1), await new_task(repo, tmp_path, 2)
    main = git("rev-parse", "main", cwd=repo)
    planted = git("commit-tree", "HEAD^{tree}", "-p", "HEAD", "-m", "planted", cwd=repo)
    busy_guard = await RepositoryGuard.start(first, activity=busy, label="#1")
    idle_guard = await RepositoryGuard.start(second, activity=idle, label="#2")
    try:
        busy.started += 1  # task 1's command moves main
        git("update-ref", "refs/heads/main", planted, cwd=repo)
        assert await idle_guard.check() == []
        assert git("rev-parse", "main", cwd=repo) == main
        assert busy_guard.warnings == [
            f"the worker moved `refs/heads/main` to {planted[:10]}; it was put back at {main[:10]}"
        ], busy_guard.warnings
        assert await busy_guard.check() == [], "the move was accounted for at the first check"

        busy.started += 1
        idle.running = True  # task 2 has a command running: it could as well have done it
        git("branch", "planted", cwd=repo)
        said = await busy_guard.check()
        assert said == [
            "a worker created `refs/heads/planted`; it was deleted again (this task's worker or that of #2, running "
            "on this repository at the same time)"
        ], said
        assert idle_guard.warnings[-1].endswith(
            "(this task's worker or that of #1, running on this repository at the same time)"
        )
        assert "planted" not in git("branch", "--list", "planted", cwd=repo)
    finally:
        busy_guard.close()
        idle_guard.close()


async def test_a_command_still_running_at_a_check_stays_suspected_after_it_ends(repo: Path, tmp_path: Path) -> None:
    """A look at the repository while a task's command runs does not clear that command: a move it makes after the
    look, then ending before the next check, is still the task's."""
    commands = Commands()
    task = await new_task(repo, tmp_path, 1)
    main = git("rev-parse", "main", cwd=repo)
    planted = git("commit-tree", "HEAD^{tree}", "-p", "HEAD", "-m", "planted", cwd=repo)
    guard = await RepositoryGuard.start(task, activity=commands, label="#1")
    try:
        commands.started, commands.running = 1, True
        assert await guard.check() == []  # nothing moved yet
        git("update-ref", "refs/heads/main", planted, cwd=repo)
        commands.running = False  # the command moved main and ended
        said = await guard.check()
        assert said and "refs/heads/main" in said[0], said
        assert git("rev-parse", "main", cwd=repo) == main
    finally:
        guard.close()


@pytest.mark.parametrize("sandboxed", [True, False])
async def test_the_owners_own_commit_made_while_no_task_could_is_kept(
    repo: Path, tmp_path: Path, sandboxed: bool
) -> None:
    """The owner commits on `main` in their checkout while a task runs. Where the task's processes cannot write the
    git metadata (the sandbox), or none ran since the last check, the move is the owner's: kept, by every later check
    too, and nobody is warned. (The guard once put `main` back under the owner and blamed the worker.)"""
    commands = Commands()
    task = await new_task(repo, tmp_path, 1)
    guard = await RepositoryGuard.start(task, activity=(lambda: None) if sandboxed else commands, label="#1")
    try:
        (repo / "NOTES.md").write_text("the owner's notes\n")
        git("add", "NOTES.md", cwd=repo)
        git("commit", "-q", "-m", "the owner's own work", cwd=repo)
        owners = git("rev-parse", "main", cwd=repo)
        assert await guard.check() == []
        commands.started += 1  # a later command of the task: the owner's commit is not taken for its change
        assert await guard.check() == []
        assert git("rev-parse", "main", cwd=repo) == owners
        assert guard.warnings == []
    finally:
        guard.close()


@pytest.mark.parametrize("where", ["config", "config.worktree"])
async def test_a_driver_planted_after_the_bots_git_ran_is_still_overridden(
    repo: Path, tmp_path: Path, marks: Path, where: str
) -> None:
    """The driver overrides are kept per configuration (agents/git/command.py): a driver planted after the bot's git
    already ran in the worktree, with no include to stop the keeping, is seen all the same."""
    tree = await new_task(repo, tmp_path)
    (tree.path / "app.py").write_text("VALUE = 2\n")
    assert (await commit_all(tree, "first", GitIdentity())).committed  # the overrides of a clean config are kept
    common = repo / ".git"
    if where == "config.worktree":
        git("config", "extensions.worktreeConfig", "true", cwd=repo)
        config = ["config", "--worktree"]
    else:
        config = ["config"]
    git(*config, "filter.evil.clean", f"touch {marks}/filter-clean; cat", cwd=tree.path)
    git(*config, "filter.evil.process", f"touch {marks}/filter-process", cwd=tree.path)
    (common / "info").mkdir(exist_ok=True)
    (common / "info" / "attributes").write_text("* filter=evil\n")
    (tree.path / "app.py").write_text("VALUE = 3\n")
    assert (await commit_all(tree, "second", GitIdentity())).committed
    assert sorted(p.name for p in marks.iterdir()) == [], "a driver planted after a kept answer ran"


@pytest.mark.parametrize("section", ['[FILTER "evil"]', "[Filter.evil]", '[filter "evil"]'])
async def test_a_driver_section_written_by_hand_in_any_case_is_overridden(
    repo: Path, tmp_path: Path, marks: Path, section: str
) -> None:
    """The bot asks git for the drivers only where the configuration holds the word filter, diff or merge: in
    whatever case and syntax git accepts it."""
    tree = await new_task(repo, tmp_path)
    config = repo / ".git" / "config"
    config.write_text(config.read_text() + f"{section}\n\tclean = touch {marks}/clean-ran; cat\n")
    (repo / ".git" / "info").mkdir(exist_ok=True)
    (repo / ".git" / "info" / "attributes").write_text("* filter=evil\n")
    (tree.path / "app.py").write_text("VALUE = 3\n")
    assert (await commit_all(tree, "x", GitIdentity())).committed
    assert [p.name for p in marks.iterdir()] == [], "the bot's git ran a planted filter"
    (tree.path / "app.py").write_text("VALUE = 4\n")
    git("add", "-A", cwd=tree.path)  # the user's git does run it: the planted driver is real
    assert [p.name for p in marks.iterdir()] == ["clean-ran"]


def plant_nested_repository(worktree: Path, marks: Path) -> Path:
    """What a sandboxed worker can make in its worktree alone: `sub/`, a repository of its own whose config has a
    clean filter that its `.gitattributes` applies to every file, and a `.gitmodules` asking to look into it."""
    sub = worktree / "sub"
    sub.mkdir()
    git("init", "-q", "-b", "main", cwd=sub)
    (sub / ".gitattributes").write_text("* filter=evil\n")
    (sub / "f").write_text("data\n")
    git("add", "-A", cwd=sub)
    git("commit", "-qm", "nested", cwd=sub)
    git("config", "filter.evil.clean", f"touch {marks}/nested-filter; cat", cwd=sub)
    (worktree / ".gitmodules").write_text('[submodule "sub"]\n\tpath = sub\n\turl = ./sub\n\tignore = none\n')
    return sub


async def test_a_nested_repositorys_filter_never_runs_in_the_bots_git_calls(
    repo: Path, tmp_path: Path, marks: Path
) -> None:
    """Once the bot committed the worker's nested repository as a gitlink, a `git add`, `git status` or `git diff`
    of the worktree that asks the submodule whether it is dirty runs `git status` inside it, which re-hashes a file
    whose stat changed through the nested config's filter. Each of the bot's calls on a worktree, with `f`'s stat
    changed before it: none may run the filter."""
    from agents.repo_map import maps as repo_map
    from agents.work.turn_notes import diffstat

    tree = await new_task(repo, tmp_path)
    sub = plant_nested_repository(tree.path, marks)
    assert (await commit_all(tree, "the nested repository, as a gitlink", GitIdentity())).committed
    assert "160000" in git("ls-files", "-s", "sub", cwd=tree.path)
    calls = {
        "commit_all": lambda: commit_all(tree, "more", GitIdentity()),
        "write_diff": lambda: git_diff.write_diff(tree, io.BytesIO()),
        "checkout_state": lambda: checkout_state(tree.path),
        "diffstat": lambda: diffstat(tree.path, tree.base_commit),
        "repo_map": lambda: repo_map._recently_changed(tree.path, {}),
    }
    ran = []
    for year, (name, call) in enumerate(calls.items(), start=2001):
        (tree.path / "app.py").write_text(f"VALUE = {year}\n")  # something to commit or show
        os.utime(sub / "f", (0, (year - 1970) * 365 * 86400))  # a stat the nested index does not have
        await call()
        if any(marks.iterdir()):
            ran.append(name)
            for mark in marks.iterdir():
                mark.unlink()
    assert ran == [], f"the nested repository's filter ran in the bot's {ran}"
    os.utime(sub / "f", (0, 0))
    git("status", "--porcelain", cwd=tree.path)  # the user's own git does run it: the planted filter is real
    assert [p.name for p in marks.iterdir()] == ["nested-filter"]


async def test_a_replaced_git_file_stops_the_bots_git_calls(repo: Path, tmp_path: Path) -> None:
    tree = await new_task(repo, tmp_path)
    (tree.path / ".git").write_text(f"gitdir: {tmp_path / 'elsewhere'}\n")
    with pytest.raises(WorktreeLinkBroken):
        await commit_all(tree, "x", GitIdentity())


async def test_files_over_the_limits_are_never_staged_and_are_named(repo: Path, tmp_path: Path) -> None:
    tree = await new_task(repo, tmp_path)
    with open(tree.path / "huge.bin", "wb") as fh:  # 100 MB, sparse: instant to make
        fh.truncate(100 * 1024 * 1024)
    (tree.path / "a.txt").write_bytes(b"a" * 3000)
    (tree.path / "b.txt").write_bytes(b"b" * 3000)
    (tree.path / "small.py").write_text("OK = 1\n")
    git("add", "huge.bin", cwd=tree.path)  # a worker that staged it itself
    commit = await commit_all(
        tree, "limits", GitIdentity(), CommitLimits(max_file_bytes=4000, max_task_bytes=5000, large_file_bytes=2000)
    )
    assert commit is not None and commit.committed
    left = {item.path: item.reason for item in commit.left_out}
    assert "per-file" in left["huge.bin"] and "per-task" in left["b.txt"]
    assert sorted(commit.files) == ["a.txt", "small.py"]
    assert commit.large == [("a.txt", 3000)]
    assert "huge.bin" not in git("ls-files", cwd=tree.path)


async def test_the_task_limit_counts_what_the_branchs_earlier_commits_changed(repo: Path, tmp_path: Path) -> None:
    tree = await new_task(repo, tmp_path)
    limits = CommitLimits(max_file_bytes=4000, max_task_bytes=5000, large_file_bytes=4000)
    (tree.path / "a.txt").write_bytes(b"a" * 3000)
    first = await commit_all(tree, "first", GitIdentity(), limits)
    assert first is not None and first.files == ["a.txt"] and not first.left_out
    (tree.path / "b.txt").write_bytes(b"b" * 3000)  # fits alone, not with a.txt already on the branch
    (tree.path / "c.py").write_text("OK = 1\n")
    second = await commit_all(tree, "second", GitIdentity(), limits)
    assert second is not None and second.committed
    assert [(item.path, "per-task" in item.reason) for item in second.left_out] == [("b.txt", True)]
    assert second.files == ["a.txt", "c.py"]


async def test_the_bots_commit_never_writes_a_huge_file_into_the_object_store(repo: Path, tmp_path: Path) -> None:
    tree = await new_task(repo, tmp_path)
    (tree.path / "big.bin").write_bytes(os.urandom(6 * 1024 * 1024))
    before = _loose_object_bytes(repo)
    commit = await commit_all(tree, "big", GitIdentity())
    assert commit is not None and not commit.committed and commit.left_out[0].path == "big.bin"
    assert _loose_object_bytes(repo) - before < 100_000


async def test_discard_deletes_the_large_objects_only_its_branch_used(repo: Path, tmp_path: Path) -> None:
    tree = await new_task(repo, tmp_path)
    (tree.path / "data.bin").write_bytes(os.urandom(3 * 1024 * 1024))
    (tree.path / "app.py").write_text("VALUE = 1\n# keep\n")
    before = _loose_object_bytes(repo)
    commit = await commit_all(tree, "data", GitIdentity())
    assert commit.binary == ["data.bin"] and commit.large == [("data.bin", 3 * 1024 * 1024)]
    assert _loose_object_bytes(repo) - before > 3_000_000
    freed = await discard_task_worktree(tree)
    assert freed == 3 * 1024 * 1024
    assert _loose_object_bytes(repo) - before < 100_000
    assert subprocess.run(["git", "fsck", "--connectivity-only"], cwd=repo, capture_output=True).returncode == 0


async def test_thousands_of_empty_files_count_toward_what_a_task_may_commit(repo: Path, tmp_path: Path) -> None:
    """Empty files weighed nothing: 1,000 of them with 100-character names were all committed under a 64 KB per-task
    limit, and at the default budget a worker could grow the owner's trees and index by hundreds of megabytes."""
    tree = await new_task(repo, tmp_path)
    for i in range(1000):
        (tree.path / f"{i:04}{'x' * 96}").touch()
    commit = await commit_all(tree, "many", GitIdentity(), CommitLimits(max_task_bytes=64 * 1024))
    assert commit is not None and commit.committed
    kept = 1000 - len(commit.left_out)
    assert kept == 65536 // (100 + 64), kept  # each: its 100-byte path and an entry's 64
    assert (
        len([name for name in git("ls-tree", "--name-only", "HEAD", cwd=tree.path).split() if "x" * 96 in name]) == kept
    )
    assert all("per-task limit" in item.reason for item in commit.left_out)


async def test_a_big_diff_is_capped_streamed_and_says_what_it_left_out(repo: Path, tmp_path: Path) -> None:
    tree = await new_task(repo, tmp_path)
    (tree.path / "huge.txt").write_text("line of text\n" * 80_000)  # ~1 MB: named, not inlined
    (tree.path / "logo.png").write_bytes(b"\x89PNG\r\n\x1a\n\x00" + os.urandom(2000))
    for i in range(30):  # 30 × 60 KB of text: more than the cap
        (tree.path / f"part{i:02}.txt").write_text(f"part {i} " * 7_500 + "\n")
    commit = await commit_all(tree, "much", GitIdentity(), CommitLimits(50_000_000, 50_000_000))
    assert commit.committed
    with open(tmp_path / "out.diff", "w+b") as out:
        report = await git_diff.write_diff(tree, out, max_bytes=400_000)
        out.seek(0)
        data = out.read()
    assert len(data) < 400_000 + 200
    text = data.decode()
    assert report.truncated and "truncated" in text
    assert [p for p, _ in report.huge] == ["huge.txt"] and report.binary == ["logo.png"]
    assert "#   huge.txt (" in text and "#   logo.png" in text and "line of text" not in text
    assert "part00.txt" in text.split("\n\n", 1)[0], "the stat lists files the patch did not reach"
    assert "huge file(s)" in report.note() and "cut" in report.note()


@pytest.mark.parametrize("committed", [True, False], ids=["committed", "in the worktree"])
@pytest.mark.parametrize("kind", ["binary", "huge"])
async def test_a_file_named_not_shown_never_hides_the_folder_of_its_name(
    repo: Path, tmp_path: Path, kind: str, committed: bool
) -> None:
    """The branch deletes `src/` and adds a binary (or huge) file named `src`. The Diff left it out with a pathspec
    that excludes everything under `src/` too: the deleted code was in neither the stat nor the patch, yet Merge
    deletes it."""
    (repo / "src").mkdir()
    (repo / "src" / "auth.py").write_text("def allowed(user):\n    return user in OWNERS\n")
    git("add", "-A", cwd=repo)
    git("commit", "-q", "-m", "src", cwd=repo)
    tree = await new_task(repo, tmp_path)
    (tree.path / "src" / "auth.py").unlink()
    (tree.path / "src").rmdir()
    if kind == "binary":
        (tree.path / "src").write_bytes(b"\0\1\2binary")
    else:
        (tree.path / "src").write_text("x" * (git_diff.HUGE_FILE_BYTES + 10))
    if committed:
        assert (await commit_all(tree, "replace src", GitIdentity())).committed
    with open(tmp_path / "out.diff", "w+b") as out:
        report = await git_diff.write_diff(tree, out)
        out.seek(0)
        text = out.read().decode()
    assert (report.binary if kind == "binary" else [p for p, _ in report.huge]) == ["src"]
    stat, _, patch = text.partition("\n\n")
    assert "src/auth.py" in stat or not committed, text[:2000]  # the stat is the commits' (uncommitted: the patch)
    assert "-    return user in OWNERS" in patch, text[:2000]
    assert "xxxxxxxx" not in text and "binary" not in patch, "the file itself is still named, not inlined"


async def test_a_tree_deeper_than_pythons_recursion_neither_crashes_a_walk_nor_outlives_its_task(
    repo: Path, tmp_path: Path
) -> None:
    """A worker's `mkdir -p d/d/…` 1,400 deep (within its disk budget) made every walk of the worktree (list_files,
    the test run's set-up, credential masking) raise RecursionError, and the worktree stayed on disk after the task:
    os.fwalk and shutil.rmtree recurse once per level on Python 3.11."""
    from agents.workspaces.file_walk import WALK_DEPTH, walk_files

    tree = await new_task(repo, tmp_path)
    subprocess.run(["mkdir", "-p", "/".join(["d"] * 1400)], cwd=tree.path, check=True)  # os.makedirs recurses too
    (tree.path / "d" / "shallow.txt").write_text("kept\n")
    listed = await asyncio.to_thread(walk_files, tree.path)
    assert "d/shallow.txt" in listed and max(path.count("/") for path in listed) <= WALK_DEPTH
    await remove_worktree_keep_branch(tree)
    assert not os.path.lexists(tree.path)


async def test_a_stale_index_lock_is_cleared_but_a_held_one_is_kept(repo: Path, tmp_path: Path) -> None:
    tree = await new_task(repo, tmp_path)
    admin = worktree_admin_dir(await git_common_dir(repo), tree.path)
    lock = admin / "index.lock"
    lock.write_bytes(b"")
    holder = subprocess.Popen(["sleep", "30"], stdin=open(lock, "rb"))  # a live process with the lock open
    try:
        assert await clear_stale_index_locks(tree) == [] and lock.exists()
    finally:
        holder.kill()
        holder.wait()
    assert await clear_stale_index_locks(tree) == [lock] and not lock.exists()
    (tree.path / "app.py").write_text("VALUE = 9\n")
    assert (await commit_all(tree, "after the lock", GitIdentity())).committed


def _loose_object_bytes(repo: Path) -> int:
    total = 0
    for folder in (repo / ".git" / "objects").iterdir():
        if len(folder.name) == 2:
            total += sum(f.stat().st_size for f in folder.iterdir())
    return total


FIFO_GUARD = 5.0  # seconds: only a read blocked on a FIFO takes this long; then the FIFO is opened to end it


@pytest.mark.parametrize("plant", ["dot-git", "commondir", "config"])
async def test_a_fifo_the_worker_left_for_a_git_file_never_blocks_the_bots_git_call(
    repo: Path, tmp_path: Path, plant: str
) -> None:
    """Before each git call the bot reads the worktree's `.git` file and the configuration it names (to know whether
    a driver needs overriding), in its own event loop. The worker writes that `.git` and whatever folder of its
    worktree it names: a FIFO there, read by name, waited for a writer that never comes, and the whole bot with it.
    Here a watchdog opens the FIFO for writing after FIFO_GUARD seconds, so that a blocked read ends and the test
    can say so."""
    tree = await new_task(repo, tmp_path)
    fake = tree.path / "fake-admin"
    if plant == "dot-git":
        (tree.path / ".git").unlink()
        fifo = tree.path / ".git"
    else:
        fake.mkdir()
        (tree.path / ".git").write_text("gitdir: fake-admin\n")
        if plant == "config":
            (fake / "commondir").write_text(".\n")
        fifo = fake / plant
    os.mkfifo(fifo)
    released = threading.Event()

    def release() -> None:
        with contextlib.suppress(OSError):  # ENXIO: no reader is waiting, nothing to release
            os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
            released.set()

    watchdog = threading.Timer(FIFO_GUARD, release)
    watchdog.start()
    try:
        await run_git("status", "--porcelain", cwd=tree.path)
    finally:
        watchdog.cancel()
    assert not released.is_set(), f"the bot's git call waited on the FIFO at {fifo.relative_to(tree.path)}"


SWAPS_TRIED = 300  # bot-side checks of the `.git` file while a service swaps it with a FIFO
FIFO_SWAPPER = dot_git_fifo_swapper(stoppable=False)


@pytest.mark.parametrize("reader", ["commit-check", "guard"])
async def test_a_fifo_swapped_in_for_the_dot_git_file_never_blocks_the_bots_check_of_it(
    repo: Path, tmp_path: Path, reader: str
) -> None:
    """Before each commit (`check_worktree_link`) and after each worker step (`RepositoryGuard`), the bot checks that
    the worktree's `.git` is a plain file naming its admin folder, then reads it. A service of the task swapping that
    file with a FIFO again and again (one `renameat2(RENAME_EXCHANGE)` each time) can have the check see the file and
    the read open the FIFO: the read waits for a writer, on the bot's event loop. A watchdog thread opens both names
    for writing whenever the bot's checks made no progress for FIFO_GUARD seconds, so that a blocked read ends and
    the test can say so."""
    tree = await new_task(repo, tmp_path)
    guard = await RepositoryGuard.start(tree) if reader == "guard" else None
    os.mkfifo(tree.path / "fifo")
    done, progress, released = threading.Event(), [0], []

    def watch() -> None:
        seen = -1
        while not done.wait(FIFO_GUARD):
            if progress[0] == seen:
                for name in (".git", "fifo"):
                    with contextlib.suppress(OSError):  # ENXIO: no reader waits on this one
                        os.close(os.open(tree.path / name, os.O_WRONLY | os.O_NONBLOCK))
                        released.append(progress[0])
                        break
            seen = progress[0]

    service = subprocess.Popen([sys.executable, "-c", FIFO_SWAPPER], cwd=tree.path)
    watchdog = threading.Thread(target=watch, daemon=True)
    watchdog.start()
    try:
        for _ in range(SWAPS_TRIED):
            if released:
                break  # one blocked read says it all (each costs FIFO_GUARD seconds)
            if guard is not None:
                await guard.check()
            else:
                with contextlib.suppress(WorktreeLinkBroken):
                    await check_worktree_link(tree)
            progress[0] += 1
    finally:
        service.kill()
        service.wait()
        done.set()
        watchdog.join()
        if guard is not None:
            guard.close()
    assert released == [], f"the bot's read of .git waited on the FIFO (released after check {released})"


# ---- a git directory of the worker's: its config names a command to fetch with ------------------------------------
MISSING = "0123456789abcdef0123456789abcdef01234567"  # a commit no repository has: reading it means fetching it


def a_workers_git_dir(folder: Path, marker: Path) -> None:
    """A git directory whose HEAD names a missing commit and whose promisor remote (a local path) fetches with
    `touch marker`: any git call that reads HEAD fetches it lazily, and git runs that upload-pack command."""
    (folder / "objects").mkdir(parents=True)
    (folder / "refs" / "heads").mkdir(parents=True)
    (folder / "HEAD").write_text("ref: refs/heads/main\n")
    (folder / "refs" / "heads" / "main").write_text(MISSING + "\n")
    (folder / "config").write_text(
        "[core]\n\trepositoryformatversion = 1\n\tbare = false\n[extensions]\n\tpartialClone = origin\n"
        f'[remote "origin"]\n\turl = {folder}/none\n\tpromisor = true\n\tuploadpack = "touch {marker}; false"\n'
        '[protocol]\n\tallow = always\n[protocol "file"]\n\tallow = always\n'
    )


@pytest.mark.parametrize("call", ["checkout_state", "diff"])
async def test_a_git_directory_a_worker_made_runs_no_command_of_its_config(tmp_path: Path, call: str) -> None:
    """The worktree's `.git` replaced by a git directory of the worker's (as a service of the task could, between the
    bot's checks): the bot's own git calls there (run on the host) fetch nothing over a local path, so the command its
    config names for that never runs, even where that config allows every transport."""
    repo = make_user_repo(tmp_path / "demo")
    tree = await create_task_worktree(repo, 1, "swapped", worktrees_dir=tmp_path / "wt")
    marker = tmp_path / "UPLOADPACK-RAN-ON-HOST"
    (tree.path / ".git").unlink()
    a_workers_git_dir(tree.path / ".git", marker)
    if call == "checkout_state":
        await checkout_state(tree.path)
    else:
        await run_git("diff", "--stat", MISSING, cwd=tree.path)
    assert not marker.exists(), "a command of the worker's git directory ran on the host (a lazy fetch's upload-pack)"
