"""Merging a task branch into its base in the owner's checkout: refused rather than forced when that is unsafe."""

from __future__ import annotations

import asyncio
import fcntl
import os
import re
import time
from dataclasses import dataclass, field
from pathlib import Path

from agents.core.text import some_of
from agents.git.command import GIT_TIMEOUT_SECONDS, GitError, GitIdentity, git_succeeds, git_text, run_git, split_nul
from agents.git.locks import bot_writes
from agents.git.repository import branch_exists, current_branch, rev_parse
from agents.git.worktrees import TaskWorktree, clear_stale_checkout_locks


@dataclass(frozen=True)
class MergeResult:
    ok: bool
    message: str
    conflicts: list[str] = field(default_factory=list)
    sha: str | None = None  # the merge commit (or the base branch head when there was nothing to merge)


async def merge_lock(path: Path, timeout: float = GIT_TIMEOUT_SECONDS) -> int | None:
    """`path` opened and locked (flock, exclusive), the descriptor to hand the merge's git (`run_git(held=)`), which
    keeps the lock as long as it runs, past the bot's death; an earlier holder (a killed bot's merge still running)
    is waited for, at most `timeout`: None when it still holds the lock then."""
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    deadline = time.monotonic() + timeout
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return fd
        except BlockingIOError:
            if time.monotonic() >= deadline:
                os.close(fd)
                return None
            await asyncio.sleep(0.1)


def merge_unlock(path: Path, fd: int) -> None:
    """The lock `merge_lock` took let go, its file removed (the caller's branch lock keeps anyone else from it)."""
    path.unlink(missing_ok=True)
    os.close(fd)


async def merge_ended(path: Path, timeout: float = GIT_TIMEOUT_SECONDS) -> bool:
    """Whether no merge holds the lock at `path` (a killed bot's git merge has ended), waiting at most `timeout`."""
    fd = await merge_lock(path, timeout)
    if fd is None:
        return False
    merge_unlock(path, fd)
    return True


async def branch_merged(repo: Path, branch: str, base_branch: str, base_commit: str) -> bool:
    """Whether the task's `branch` has commits of its own (past `base_commit`) and every one is in `base_branch`: it
    was merged; False where the branch is gone."""
    try:
        head = await rev_parse(repo, f"refs/heads/{branch}")
    except GitError:
        return False
    base = f"refs/heads/{base_branch}"
    return head != base_commit and await git_succeeds("merge-base", "--is-ancestor", head, base, cwd=repo)


async def merge_task_branch(
    worktree: TaskWorktree, identity: GitIdentity | None = None, lock: Path | None = None
) -> MergeResult:
    """Merge the task branch into its base branch in the main checkout (`--no-ff`), or refuse and say why.

    Refuses without touching anything when the main checkout is not on the base branch, has uncommitted changes to
    tracked files (or files marked assume-unchanged, whose edits git cannot see), is in the middle of a merge, or
    holds a file or folder git does not track (untracked or ignored) where the merge would write or delete one: git
    counts an ignored file as expendable, and the branch decides what it adds (an emptied `.gitignore`, a link in
    place of an ignored folder). Where the merge writes is read from the merge done first in the object store
    (`git merge-tree`), so a conflict is reported before the checkout is touched; should the real merge still stop
    on one, it is aborted and the conflicting files are reported. Nothing is ever forced.

    `lock`: a file the merge's git holds locked while it runs (`merge_lock`), so a bot killed meanwhile is followed
    by one that knows when that merge has ended (`merge_ended`); a merge of the same branch still running is waited
    for before anything is looked at.
    """
    if lock is None:
        return await _merge(worktree, identity, None)
    held = await merge_lock(lock)
    if held is None:
        return MergeResult(False, f"not merged: an earlier merge of {worktree.branch} is still running; try later")
    try:
        return await _merge(worktree, identity, held)
    finally:
        merge_unlock(lock, held)


async def _merge(worktree: TaskWorktree, identity: GitIdentity | None, held: int | None) -> MergeResult:
    repo, branch, base = worktree.repo, worktree.branch, worktree.base_branch
    async with bot_writes(repo):
        if held_locks := await clear_stale_checkout_locks(repo, base):  # a killed merge's would refuse this one
            names = ", ".join(
                str(lock.relative_to(repo)) if lock.is_relative_to(repo) else str(lock) for lock in held_locks
            )
            return MergeResult(False, f"not merged: another git is at work in {repo} ({names}); try again when it ends")
        if not await branch_exists(repo, branch):
            return MergeResult(False, f"branch {branch} no longer exists: nothing to merge")
        if not await branch_exists(repo, base):
            if re.fullmatch(r"[0-9a-f]{40}|[0-9a-f]{64}", base):  # the commit a detached HEAD was at, not a branch
                return MergeResult(
                    False, f"the task started from a detached HEAD ({base[:12]}): merge {branch} by hand"
                )
            return MergeResult(
                False,
                f"not merged: the branch {base} the task started from no longer exists (renamed or deleted?); switch "
                f"{repo} to the branch to merge into and merge {branch} by hand",
            )
        checked_out = await current_branch(repo)
        if checked_out != base:
            return MergeResult(
                False, f"not merged: {repo} is on {checked_out}, not {base}; switch it to {base} and try again"
            )
        if await git_succeeds("rev-parse", "--verify", "--quiet", "MERGE_HEAD", cwd=repo):
            return MergeResult(False, f"not merged: {repo} is in the middle of another merge; finish or abort it first")
        dirty = _porcelain_paths(await git_text("status", "--porcelain", "-z", "--untracked-files=no", cwd=repo))
        if dirty:
            return MergeResult(
                False,
                f"not merged: {repo} has uncommitted changes to tracked files ({_short_list(dirty)}); "
                "commit or stash them first",
            )
        if await git_succeeds("merge-base", "--is-ancestor", branch, "HEAD", cwd=repo):
            head = await rev_parse(repo, "HEAD")
            return MergeResult(
                True, f"already merged: {base} holds every commit of {branch}, nothing more to merge", sha=head
            )
        tracked, unseen = _index_entries(await git_text("ls-files", "-v", "-z", cwd=repo))
        if unseen:
            return MergeResult(
                False,
                f"not merged: {repo} has files marked assume-unchanged ({_short_list(unseen)}): git cannot see your "
                "edits to them, and a merge would overwrite them; run `git update-index --no-assume-unchanged` on "
                "them first",
            )
        # the merge done in git's object store first: its tree names every path the real one writes or deletes,
        # where git puts them (a file the branch adds in a folder main renamed lands in the new folder), and its
        # conflicts are known before the checkout is touched
        planned = await run_git(
            "merge-tree", "--write-tree", "--name-only", "--no-messages", "-z", "HEAD", branch, cwd=repo
        )
        if planned.exit_code not in (0, 1):
            detail = (planned.stderr.strip() or planned.stdout.strip()).splitlines()
            return MergeResult(False, "not merged: " + (" ".join(detail[:6]) or f"git merge-tree {planned.exit_code}"))
        merged_tree, *conflicted = split_nul(planned.stdout)
        if planned.exit_code == 1:
            conflicts = sorted(set(conflicted))
            return MergeResult(
                False,
                f"merge conflict in {len(conflicts)} file(s): {_short_list(conflicts)}; nothing was merged and "
                f"{base} is unchanged",
                conflicts=conflicts,
            )
        brought = split_nul(await git_text("diff", "--name-only", "-z", "--no-renames", "HEAD", merged_tree, cwd=repo))
        in_the_way = await asyncio.to_thread(_untracked_in_the_way, repo, brought, tracked)  # a stat a path
        if in_the_way:
            return MergeResult(
                False,
                f"not merged: the merge would overwrite, delete or write into files git does not track in {repo} "
                f"({_short_list(in_the_way)}: untracked or ignored, files or folders); move them away first",
            )

        # whole: a merge the bot is killed in the middle of still ends as a merge commit (command.py), never as the
        # merged files left uncommitted on the owner's HEAD
        result = await run_git(
            "merge",
            "--no-ff",
            "--no-edit",
            "--no-verify",
            "-m",
            f"Merge {branch} into {base}",
            branch,
            cwd=repo,
            identity=identity,
            whole=True,
            held=held,
        )
        if result.exit_code == 0:
            sha = await rev_parse(repo, "HEAD")
            return MergeResult(True, f"merged {branch} into {base} ({sha[:8]})", sha=sha)

        if not await git_succeeds("rev-parse", "--verify", "--quiet", "MERGE_HEAD", cwd=repo):
            # git refused before starting (e.g. untracked files would be overwritten): nothing to undo.
            detail = (result.stderr.strip() or result.stdout.strip()).splitlines()
            return MergeResult(False, "not merged: " + (" ".join(detail[:6]) or f"git merge exit {result.exit_code}"))
        conflicts = split_nul(await git_text("diff", "--name-only", "--diff-filter=U", "-z", cwd=repo))
        await git_text("merge", "--abort", cwd=repo)
        return MergeResult(
            False,
            f"merge conflict in {len(conflicts)} file(s): {_short_list(conflicts)}; "
            f"the merge was aborted and {base} is unchanged",
            conflicts=sorted(conflicts),
        )


def _index_entries(text: str) -> tuple[set[str], list[str]]:
    """From `git ls-files -v -z`: every tracked path, and those marked assume-unchanged (a lowercase tag)."""
    tracked: set[str] = set()
    unseen: list[str] = []
    for entry in split_nul(text):
        tag, _, path = entry.partition(" ")
        tracked.add(path)
        if tag.islower():
            unseen.append(path)
    return tracked, unseen


def _untracked_in_the_way(repo: Path, brought: list[str], tracked: set[str]) -> list[str]:
    """The paths of the checkout git does not track that writing `brought` (the paths the merge changes) would
    overwrite, delete or write into: the path itself, one of its folders that is a file or a link on disk, or a
    folder on disk that holds no tracked file (an ignored `venv/`: a `.pth` file written there runs in every Python
    the owner starts from it)."""
    tracked_folders = {path[:cut] for path in tracked for cut in _slashes(path)}
    found: list[str] = []
    for path in brought:
        parts = path.split("/")
        for depth in range(1, len(parts) + 1):
            prefix = "/".join(parts[:depth])
            on_disk = repo / prefix
            last = depth == len(parts)
            if prefix in tracked or not os.path.lexists(on_disk):
                continue
            if last or on_disk.is_symlink() or not on_disk.is_dir() or prefix not in tracked_folders:
                found.append(prefix)
                break
    return sorted(set(found))


def _slashes(path: str) -> list[int]:
    return [i for i, char in enumerate(path) if char == "/"]


def _porcelain_paths(text: str) -> list[str]:
    """Paths from `git status --porcelain -z` (a rename's second entry, the old path, is skipped)."""
    paths: list[str] = []
    items = text.split("\0")
    i = 0
    while i < len(items):
        item = items[i]
        if len(item) > 3:
            paths.append(item[3:])
            if item[0] in "RC":
                i += 1
        i += 1
    return paths


def _short_list(paths: list[str], limit: int = 8) -> str:
    return some_of(paths, limit)
