"""A task's branch and worktree: created (or reused on resume), checked, cleaned of stale locks, removed, discarded.

The user's checkout is never touched while a task runs: a task gets a branch `agentlab/task-<id>-<slug>` and a
worktree outside the repository; only `merge.merge_task_branch` (an explicit user action) writes to the main checkout.
Given a disk budget, a new worktree is a file system of its own where the machine allows one
(agents/sandbox/task_disk.py): mounted before `git worktree add`, unmounted and deleted when the worktree is removed.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

from agents.core.branch_names import task_branch_name
from agents.git.command import GIT_TIMEOUT_SECONDS, GitError, GitIdentity, git_text, object_sizes
from agents.git.locks import bot_writes, repo_lock
from agents.git.ref_files import plain_bytes
from agents.git.repository import (
    branch_exists,
    config_get,
    current_branch,
    git_common_dir,
    has_commits,
    rev_parse,
    same_path,
    toplevel,
)
from agents.sandbox import task_disk
from agents.sandbox.temp_folders import remove_folder

log = logging.getLogger(__name__)


_BASE_BRANCH_KEY = "agentlab-base"


_BASE_COMMIT_KEY = "agentlab-base-commit"


@dataclass(frozen=True)
class TaskWorktree:
    """A task's branch and the worktree where it is checked out."""

    repo: Path  # top level of the main checkout
    path: Path  # the task's worktree directory
    branch: str  # e.g. agentlab/task-7-fix-login
    base_branch: str  # what the branch was made from (a branch name, or a sha for a detached HEAD)
    base_commit: str  # the commit the branch was made from


async def branch_head(tree: TaskWorktree) -> str:
    """The commit the task's branch names, read in the owner's repository: the task's last commit as the bot made it
    (never read through the worktree's `.git`, which its worker can point at a history of its own)."""
    return await rev_parse(tree.repo, f"refs/heads/{tree.branch}")


def worktree_admin_dir(common_dir: Path, worktree_path: Path) -> Path | None:
    """The folder under `<common dir>/worktrees/` that belongs to the worktree at `worktree_path`, or None.

    Found from the common dir's side (each admin folder's `gitdir` file names its worktree's `.git`), so nothing the
    worktree itself holds can redirect it.
    """
    link = (Path(worktree_path) / ".git").absolute()
    try:
        admins = sorted((Path(common_dir) / "worktrees").iterdir())
    except OSError:
        return None
    for admin in admins:
        try:
            named = Path((admin / "gitdir").read_text(encoding="utf-8").strip())
        except OSError:
            continue
        if same_path(named, link) or named == link:
            return admin
    return None


class WorktreeLinkBroken(GitError):
    """The worktree's `.git` file no longer points at its own metadata in the owner's repository."""


async def check_worktree_link(worktree: TaskWorktree) -> Path:
    """Before a bot git call in a task's worktree: its `.git` must be a plain file naming its admin folder; the folder.

    A worker that replaced `.git` (a folder of its own, a symlink, another gitdir) would otherwise have the bot commit
    into, and run the settings of, a repository of the worker's making.
    """
    common = await git_common_dir(worktree.repo)
    admin = worktree_admin_dir(common, worktree.path)
    dot_git = worktree.path / ".git"
    if admin is None:
        raise WorktreeLinkBroken(f"{worktree.path} is no longer a worktree of {worktree.repo}")
    text = dot_git_text(dot_git)
    target = text.strip().removeprefix("gitdir:").strip() if text.startswith("gitdir:") else ""
    if not target or not same_path(worktree.path / target, admin):
        raise WorktreeLinkBroken(f"the .git file of {worktree.path} was replaced: it no longer points at {admin}")
    return admin


def dot_git_text(dot_git: Path) -> str:
    """The text of a worktree's `.git` file when it is a plain file, else "". Its worker can swap the name for a link
    or a FIFO at any moment, so the file is opened once, with no link followed and no wait on a FIFO, and checked
    by that descriptor (`plain_bytes`): a check of the name followed by a read of it could open a FIFO the check never
    saw, and wait for a writer on the bot's event loop."""
    data = plain_bytes(dot_git)
    return data.decode("utf-8", errors="replace") if data is not None else ""


def _open_by_any_process(path: Path) -> bool | None:
    """Whether some process has `path` open (Linux `/proc/*/fd`); None where that cannot be told."""
    proc = Path("/proc")
    if not (proc / "self" / "fd").is_dir():
        return None
    target = str(path)
    for pid in proc.iterdir():
        if not pid.name.isdigit():
            continue
        try:
            fds = list((pid / "fd").iterdir())
        except OSError:
            continue
        for fd in fds:
            try:
                if os.readlink(fd) == target:
                    return True
            except OSError:
                continue
    return False


def _clear_stale_locks(paths: list[Path], min_age_seconds: float) -> list[Path]:
    removed = []
    for lock in paths:
        try:
            age = time.time() - lock.lstat().st_mtime
        except OSError:
            continue
        held = _open_by_any_process(lock)
        if held or (held is None and age < min_age_seconds):
            continue
        with contextlib.suppress(FileNotFoundError):
            lock.unlink()
            removed.append(lock)
    return removed


async def clear_stale_index_locks(worktree: TaskWorktree) -> list[Path]:
    """Remove the lock files a killed git left in the task's worktree metadata (and the main checkout's index lock).

    A lock is stale when no process has it open (git keeps its lock file open until it commits or rolls it back);
    where that cannot be told (no `/proc`), when it is older than a git call may take. Call it before the worker
    starts: a resumed task otherwise fails at its first commit, after a whole worker run. The removed locks.
    """
    common = await git_common_dir(worktree.repo)
    admin = worktree_admin_dir(common, worktree.path)
    candidates = [common / "index.lock", common / "refs" / "heads" / f"{worktree.branch}.lock"]
    if admin is not None:
        candidates += [admin / "index.lock", admin / "HEAD.lock"]
    async with repo_lock(worktree.repo):
        removed = await asyncio.to_thread(_clear_stale_locks, candidates, GIT_TIMEOUT_SECONDS)
    for lock in removed:
        log.warning("removed the stale git lock %s (no process held it)", lock)
    return removed


async def clear_stale_checkout_locks(repo: Path, branch: str) -> list[Path]:
    """Remove the lock files a killed git left in the owner's checkout: its index's, HEAD's and `branch`'s. A merge
    killed with the whole bot (its git too: a stop of the bot's cgroup, the machine's OOM killer) leaves index.lock,
    and every later Merge would fail on it ("File exists") until someone removed it by hand. Stale as in
    `clear_stale_index_locks`; the caller holds the repository lock. The locks left: a live git's."""
    common = await git_common_dir(repo)
    candidates = [common / "index.lock", common / "HEAD.lock", common / "refs" / "heads" / f"{branch}.lock"]
    removed = await asyncio.to_thread(_clear_stale_locks, candidates, GIT_TIMEOUT_SECONDS)
    for lock in removed:
        log.warning("removed the stale git lock %s (no process held it)", lock)
    return [lock for lock in candidates if lock.exists()]


@dataclass(frozen=True)
class _WorktreeEntry:
    path: Path
    branch: str | None  # None when detached
    prunable: bool


async def _list_worktrees(repo: Path) -> list[_WorktreeEntry]:
    text = await git_text("worktree", "list", "--porcelain", "-z", cwd=repo)
    entries: list[_WorktreeEntry] = []
    path: Path | None = None
    branch: str | None = None
    prunable = False
    for item in text.split("\0") + [""]:
        if item == "":
            if path is not None:
                entries.append(_WorktreeEntry(path, branch, prunable))
            path, branch, prunable = None, None, False
        elif item.startswith("worktree "):
            path = Path(item.removeprefix("worktree "))
        elif item.startswith("branch "):
            branch = item.removeprefix("branch ").removeprefix("refs/heads/")
        elif item.startswith("prunable"):
            prunable = True
    return entries


async def create_task_worktree(
    repo: Path,
    task_id: int,
    title: str,
    identity: GitIdentity | None = None,
    worktrees_dir: Path | None = None,
    branch: str | None = None,
    disk_budget: int | None = None,
    start_point: str | None = None,
) -> TaskWorktree:
    """Create the task's branch and worktree, or (resume: `branch` names the task's existing branch) reuse them.

    New: branch `agentlab/task-<id>-<slug>` from the current HEAD, or from `start_point` (a commit: the attempts of
    one race all start from the commit that was HEAD when they were asked for, whenever each starts) where this
    repository has it (with a `-2`, `-3`… suffix when a branch of that name is left over from an earlier database),
    checked out at `worktrees_dir/<repo>-task-<id>-<slug>`.
    Resumed: the branch is reused; its worktree directory is reused when it is checked out, added otherwise.
    The base branch and base commit are remembered in the repository config so a resumed task diffs against the
    same base. With `disk_budget` (bytes), a new worktree is a file system of its own with room for its checkout
    plus that budget, where the machine allows one; a kept one whose file system is not mounted (the machine
    restarted) is mounted again before anything looks at it.
    """
    top = await toplevel(Path(repo))
    if top is None:
        raise GitError(f"{repo} is not a git repository")
    if not same_path(top, Path(repo)):  # a folder inside another repository: never a checkout of all of that one
        raise GitError(f"{repo} is inside the repository at {top}, not one of its own: call ensure_repository first")
    if not await has_commits(top):
        raise GitError(f"{top} has no commits yet: call ensure_repository first")
    if worktrees_dir is None:
        worktrees_dir = top.parent / f"{top.name}-agentlab-worktrees"
    worktrees_dir = Path(worktrees_dir)

    made: tuple[TaskWorktree, bool] | None = None  # the worktree, and whether this call added it
    try:
        async with bot_writes(top):
            made = await _task_worktree(top, task_id, title, worktrees_dir, branch, disk_budget, start_point)
    except BaseException:
        if made is not None and made[1]:  # cancelled while the repository's watchers took their snapshots again
            await asyncio.shield(_remove_worktree(made[0]))
        raise
    assert made is not None
    return made[0]


async def _commit_here(top: Path, commit: str | None) -> str | None:
    """`commit` when it is a commit this repository has (a runner's clone may not have the bot's), else None."""
    if not commit:
        return None
    try:
        return (await git_text("rev-parse", "--verify", "--quiet", f"{commit}^{{commit}}", cwd=top)).strip() or None
    except GitError:
        return None


async def _task_worktree(
    top: Path,
    task_id: int,
    title: str,
    worktrees_dir: Path,
    branch: str | None,
    disk_budget: int | None,
    start_point: str | None = None,
) -> tuple[TaskWorktree, bool]:
    """`create_task_worktree` under the repository's lock: the branch made or reused, its worktree checked out (and
    whether it was added now)."""
    created = False
    if branch and await branch_exists(top, branch):
        base_branch = await config_get(top, f"branch.{branch}.{_BASE_BRANCH_KEY}") or await current_branch(top)
        base_commit = (
            await config_get(top, f"branch.{branch}.{_BASE_COMMIT_KEY}")
            or (await git_text("merge-base", branch, base_branch, cwd=top)).strip()
        )
    else:
        branch = candidate = task_branch_name(task_id, title)
        suffix = 2
        while await branch_exists(top, branch):
            branch = f"{candidate}-{suffix}"
            suffix += 1
        base_branch = await current_branch(top)
        base_commit = await _commit_here(top, start_point) or await rev_parse(top, "HEAD")
        await git_text("branch", branch, base_commit, cwd=top)
        created = True
        await git_text("config", "--local", f"branch.{branch}.{_BASE_BRANCH_KEY}", base_branch, cwd=top)
        await git_text("config", "--local", f"branch.{branch}.{_BASE_COMMIT_KEY}", base_commit, cwd=top)

    target = worktrees_dir / f"{top.name}-{branch.split('/', 1)[-1]}"
    added = not target.exists()  # a kept worktree's folder stays (its mount point, when its file system is unmounted)
    path = await _checkout_worktree(top, branch, target, disk_budget, new_branch=created)
    added = added and same_path(path, target)
    return (
        TaskWorktree(repo=top, path=path, branch=branch, base_branch=base_branch, base_commit=base_commit),
        added,
    )


async def _checkout_worktree(
    repo: Path, branch: str, target: Path, disk_budget: int | None = None, new_branch: bool = False
) -> Path:
    """The worktree where `branch` is checked out: the bot's own at `target` if it is still there, else a new one
    there (a file system of its own with `disk_budget`, where the machine allows one). A worktree of the owner's
    where the branch is checked out (`git worktree add ../try <task branch>`) is never taken over: the task would
    commit the owner's drafts and remove the folder at its end; refused, saying where.

    A branch made a moment ago (`new_branch`) is checked out nowhere: its worktree is added at once, and git's list
    of worktrees is read only where that fails (a stale record of a worktree at `target`, say)."""
    try:  # a kept worktree's files are back before git decides whether it is there
        await task_disk.remount(target)
    except OSError as err:
        raise GitError(f"the file system of the worktree {target} cannot be mounted again: {err}") from err
    if new_branch and not target.exists():
        with contextlib.suppress(GitError):
            return await _add_worktree(repo, branch, target, disk_budget)
    entries = await _list_worktrees(repo)
    stale = False
    for entry in entries:
        if entry.branch == branch:
            if same_path(entry.path, repo):
                raise GitError(f"{branch} is checked out in the main checkout {repo}: switch that to another branch")
            if entry.path.is_dir() and not entry.prunable:
                if same_path(entry.path, target):
                    return entry.path
                raise GitError(
                    f"{branch} is checked out in {entry.path}, a worktree that is not the bot's: remove it "
                    "(`git worktree remove`) or switch it to another branch first"
                )
            stale = True
    if stale or any(same_path(e.path, target) and not e.path.is_dir() for e in entries):
        await git_text("worktree", "prune", cwd=repo)
    if target.exists() and any(target.iterdir()):
        raise GitError(f"cannot create the worktree: {target} already exists and is not the worktree of {branch}")
    return await _add_worktree(repo, branch, target, disk_budget)


async def _add_worktree(repo: Path, branch: str, target: Path, disk_budget: int | None) -> Path:
    """`git worktree add` of `branch` at `target` (a file system of its own first, with `disk_budget`, where the
    machine allows one; released again if git fails)."""
    target.parent.mkdir(parents=True, exist_ok=True)
    if disk_budget is not None and task_disk.can_make():
        size, entries_count = await _checkout_size(repo, branch)
        await task_disk.make(target, size, entries_count, disk_budget)
    try:
        await git_text("worktree", "add", "-q", str(target), branch, cwd=repo)
    except BaseException:
        await asyncio.shield(task_disk.release(target))  # a second cancel does not stop it half way
        raise
    return target


async def _checkout_size(repo: Path, branch: str) -> tuple[int, int]:
    """What checking out `branch` takes: bytes in whole blocks (a folder takes one), and how many files and folders."""
    listed = await git_text("ls-tree", "-r", "-t", "-l", "-z", branch, cwd=repo)
    total, count = task_disk.BLOCK, 1
    for entry in listed.split("\0"):
        fields = entry.split("\t", 1)[0].split()
        if len(fields) < 4:
            continue
        count += 1
        size = int(fields[3]) if fields[3].isdigit() else task_disk.BLOCK
        total += -(-size // task_disk.BLOCK) * task_disk.BLOCK
    return total, count


async def park_worktree(path: Path) -> bool:
    """The bot is stopping and the task will resume: the worktree's own file system is unmounted, its image kept (the
    next start, or the task's resume, mounts it again), so no mount outlives the bot. Whether it was unmounted."""
    if not task_disk.is_own_file_system(path):
        return False
    await task_disk.unmount(path)
    return True


def worktree_present(worktree: TaskWorktree) -> bool:
    return worktree.path.is_dir() and (worktree.path / ".git").exists()


async def remove_worktree_keep_branch(worktree: TaskWorktree) -> None:
    """Remove the task's worktree directory but keep its branch (for Merge/Diff later).

    Uncommitted changes in the worktree are lost: call `commit_all` first.
    """
    async with bot_writes(worktree.repo):
        await _remove_worktree(worktree)


DISCARD_PRUNE_MIN_BYTES = 64 * 1024


async def discard_task_worktree(worktree: TaskWorktree) -> int:
    """Remove the task's worktree, delete its branch, and delete the large objects only that branch used.

    Objects of 64 KiB or more reachable from the discarded branch and from nothing else (no ref, reflog or index of
    any worktree) are deleted at once when they are loose (the bot's commits write loose objects); smaller ones are
    left to git's own gc. No `git gc --prune=now`: that would also prune objects the owner's own git processes are
    writing at that moment. Returns the number of bytes freed.
    """
    async with bot_writes(worktree.repo):
        await _remove_worktree(worktree)
        if not await branch_exists(worktree.repo, worktree.branch):
            return 0
        tip = await rev_parse(worktree.repo, f"refs/heads/{worktree.branch}")
        await git_text("branch", "-D", worktree.branch, cwd=worktree.repo)
        return await _delete_unreachable_large_objects(worktree.repo, tip)


async def _delete_unreachable_large_objects(repo: Path, tip: str) -> int:
    listed = await git_text(
        "rev-list", "--objects", "--no-object-names", tip, "--not", "--all", "--reflog", "--indexed-objects", cwd=repo
    )
    objects = [line.strip() for line in listed.splitlines() if line.strip()]
    if not objects:
        return 0
    sizes = await object_sizes(repo, objects, "%(objectname) %(objecttype) %(objectsize)")
    common = await git_common_dir(repo)
    freed = 0
    for name, (kind, size) in sizes.items():
        if kind != "blob" or size < DISCARD_PRUNE_MIN_BYTES:
            continue
        loose = common / "objects" / name[:2] / name[2:]
        with contextlib.suppress(FileNotFoundError):
            loose.unlink()
            freed += size
    return freed


async def _remove_worktree(worktree: TaskWorktree) -> None:
    """The worktree's folder goes, then git's record of it.

    The folder is deleted by `delete_folder`, never by `git worktree remove`: git's recursive delete looks at an
    entry, then opens and deletes it by name, so a folder that a process of the task swaps for a link between the two
    leads it out of the worktree (it deleted a neighbour's files, outside any sandbox). git's record is then its
    admin folder, found from the common dir's side, which is all `worktree remove` deletes besides the folder."""
    common = await git_common_dir(worktree.repo)
    admin = worktree_admin_dir(common, worktree.path)
    # a worktree with a file system of its own goes with it (git could not delete the mount point): unmounted, its
    # image deleted, the folder removed
    if not await task_disk.release(worktree.path) and worktree.path.is_dir():
        await asyncio.to_thread(delete_folder, worktree.path)
    if admin is not None:
        await asyncio.to_thread(shutil.rmtree, admin, ignore_errors=True)
    else:  # no admin folder names it: whatever git still records of a worktree gone is dropped as git would
        await git_text("worktree", "prune", cwd=worktree.repo)


def delete_folder(folder: Path, tries: int = 3) -> None:
    """Delete `folder` and what it holds without following a link, even one swapped in during the walk.

    `shutil.rmtree` walks by directory descriptors: it opens each folder relative to its parent's descriptor and
    goes in only when what it opened is the entry it looked at (a link swapped in meanwhile is deleted as a name,
    never followed); a tree deeper than its recursion reaches is left to `rm -rf` (`remove_folder`). A process still
    writing in it can leave something behind: a few more passes, then GitError."""
    for _ in range(tries):
        remove_folder(folder)
        if not os.path.lexists(folder):
            return
    raise GitError(f"could not delete the worktree folder {folder}: something kept writing in it")
