"""Git plumbing for tasks: every task works on its own branch in its own worktree, and code changes are commits.

The user's checkout is never touched while a task runs: a task gets a branch `agentlab/task-<id>-<slug>` and a
worktree outside the repository, commits land there, and only `merge_task_branch` (an explicit user action) writes to
the main checkout, refusing rather than forcing when that would be unsafe.

Every git call runs without a terminal prompt and with the bot's identity in the environment, so it works on a machine
with no git identity configured; commit signing and hooks are switched off for the bot's own commits.
"""

from __future__ import annotations

import asyncio
import re
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from agents.shell import child_env

GIT_TIMEOUT_SECONDS = 120.0
BRANCH_PREFIX = "agentlab/task-"
# Build and environment debris a task run leaves behind, never committed even where .gitignore misses it.
NEVER_COMMIT = tuple(f":(exclude,glob)**/{name}" for name in (
    ".venv", ".venv/**", "__pycache__/**", "*.pyc", "node_modules/**", ".pytest_cache/**", ".agentlab-*"))
_BASE_BRANCH_KEY = "agentlab-base"
_BASE_COMMIT_KEY = "agentlab-base-commit"
_NOT_A_REPOSITORY = "not a git repository"
# Options every call gets: readable non-ASCII paths, and never sign the bot's commits (signing may prompt or fail).
_GIT_OPTIONS = ("-c", "core.quotepath=off", "-c", "commit.gpgsign=false", "-c", "tag.gpgsign=false")


class GitError(RuntimeError):
    """A git command failed; the message carries git's own error text."""


@dataclass(frozen=True)
class GitIdentity:
    """Author and committer of everything the bot commits."""

    name: str = "agentlab"
    email: str = "agentlab@localhost"


@dataclass(frozen=True)
class TaskWorktree:
    """A task's branch and the worktree where it is checked out."""

    repo: Path  # top level of the main checkout
    path: Path  # the task's worktree directory
    branch: str  # e.g. agentlab/task-7-fix-login
    base_branch: str  # what the branch was made from (a branch name, or a sha for a detached HEAD)
    base_commit: str  # the commit the branch was made from


@dataclass(frozen=True)
class CommitResult:
    sha: str
    short_sha: str
    message: str
    files: list[str] = field(default_factory=list)  # every path changed on the branch vs base_commit
    diffstat: str = ""  # `git diff --stat base_commit..HEAD`


@dataclass(frozen=True)
class MergeResult:
    ok: bool
    message: str
    conflicts: list[str] = field(default_factory=list)
    sha: str | None = None  # the merge commit (or the base branch head when there was nothing to merge)


@dataclass(frozen=True)
class _GitOutput:
    exit_code: int
    stdout: str
    stderr: str


# ----------------------------------------------------------------------------------------------------------------------
# running git


def _git_env(identity: GitIdentity | None, extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The bot's secrets stripped (git may run user-configured helpers and filters), no prompts, the bot's identity."""
    env = child_env()
    identity = identity or GitIdentity()
    env.update(
        GIT_TERMINAL_PROMPT="0",
        GIT_AUTHOR_NAME=identity.name,
        GIT_AUTHOR_EMAIL=identity.email,
        GIT_COMMITTER_NAME=identity.name,
        GIT_COMMITTER_EMAIL=identity.email,
        LC_ALL="C",
        LANGUAGE="C",
    )
    env.pop("GIT_INDEX_FILE", None)
    if extra:
        env.update(extra)
    return env


async def _run_git(
    *args: str,
    cwd: Path,
    identity: GitIdentity | None = None,
    timeout: float = GIT_TIMEOUT_SECONDS,
    extra_env: Mapping[str, str] | None = None,
) -> _GitOutput:
    """Run `git <args>` in `cwd` and return its exit code and output, whatever the exit code."""
    try:
        proc = await asyncio.create_subprocess_exec(
            "git",
            *_GIT_OPTIONS,
            *args,
            cwd=str(cwd),
            env=_git_env(identity, extra_env),
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
    except FileNotFoundError as err:
        raise GitError(f"cannot run git in {cwd}: {err.strerror or err}") from None
    try:
        async with asyncio.timeout(timeout):  # not wait_for: on 3.11 it can swallow a cancellation racing git's exit
            stdout, stderr = await proc.communicate()
    except (TimeoutError, asyncio.CancelledError) as err:
        if proc.returncode is None:
            proc.kill()
        await proc.wait()
        if isinstance(err, asyncio.CancelledError):
            raise
        raise GitError(f"git {args[0] if args else ''} timed out after {timeout:g} s") from None
    assert proc.returncode is not None
    return _GitOutput(
        proc.returncode,
        stdout.decode("utf-8", errors="replace"),
        stderr.decode("utf-8", errors="replace"),
    )


async def _git(
    *args: str,
    cwd: Path,
    identity: GitIdentity | None = None,
    timeout: float = GIT_TIMEOUT_SECONDS,
    extra_env: Mapping[str, str] | None = None,
) -> str:
    """Run `git <args>` in `cwd`; return stdout, or raise GitError with git's stderr on a non-zero exit."""
    result = await _run_git(*args, cwd=cwd, identity=identity, timeout=timeout, extra_env=extra_env)
    if result.exit_code != 0:
        detail = result.stderr.strip() or result.stdout.strip() or f"exit code {result.exit_code}"
        raise GitError(f"git {' '.join(args)}: {detail}")
    return result.stdout


async def _succeeds(*args: str, cwd: Path) -> bool:
    return (await _run_git(*args, cwd=cwd)).exit_code == 0


def _split_nul(text: str) -> list[str]:
    return [p for p in text.split("\0") if p]


_repo_locks: dict[Path, asyncio.Lock] = {}


def _repo_lock(repo: Path) -> asyncio.Lock:
    """One lock per repository for operations on its shared state (worktree list, branches, config, merges)."""
    key = repo.resolve()
    lock = _repo_locks.get(key)
    if lock is None:
        lock = _repo_locks[key] = asyncio.Lock()
    return lock


# ----------------------------------------------------------------------------------------------------------------------
# repositories


async def _toplevel(path: Path) -> Path | None:
    """The work tree containing `path`, or None when `path` is not inside one (other failures raise)."""
    result = await _run_git("rev-parse", "--show-toplevel", cwd=path)
    if result.exit_code == 0:
        return Path(result.stdout.strip())
    if _NOT_A_REPOSITORY in result.stderr:
        return None
    raise GitError(f"git rev-parse in {path}: {result.stderr.strip()}")


async def _has_commits(repo: Path) -> bool:
    return await _succeeds("rev-parse", "--verify", "--quiet", "HEAD^{commit}", cwd=repo)


async def ensure_repository(path: Path, identity: GitIdentity | None = None) -> bool:
    """Make sure `path` is in a git work tree with at least one commit; True when this initialised a new repository.

    A folder outside any repository gets `git init -b main` and an initial commit of what is there (respecting any
    .gitignore). A repository without commits gets an initial commit of its files (empty if there are none), so that
    task branches can be made from it.
    """
    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    top = await _toplevel(path)
    initialised = top is None
    if top is None:
        await _git("init", "-q", "-b", "main", cwd=path)
        top = path
    if not await _has_commits(top):
        await _git("add", "-A", cwd=top)
        await _git(
            "commit", "-q", "--allow-empty", "--no-verify", "-m", "Initial commit (agentlab)", cwd=top, identity=identity
        )
    return initialised


async def current_branch(repo: Path) -> str:
    """The checked-out branch name, or the commit sha when HEAD is detached."""
    result = await _run_git("symbolic-ref", "--short", "-q", "HEAD", cwd=repo)
    if result.exit_code == 0 and result.stdout.strip():
        return result.stdout.strip()
    return (await _git("rev-parse", "HEAD", cwd=repo)).strip()


async def _branch_exists(repo: Path, branch: str) -> bool:
    return await _succeeds("show-ref", "--verify", "--quiet", f"refs/heads/{branch}", cwd=repo)


async def _rev_parse(repo: Path, rev: str) -> str:
    return (await _git("rev-parse", "--verify", f"{rev}^{{commit}}", cwd=repo)).strip()


# ----------------------------------------------------------------------------------------------------------------------
# task worktrees


def slugify(title: str, max_length: int = 40) -> str:
    """A branch-safe slug: lower-case ASCII letters, digits and single dashes; `task` when nothing is left."""
    slug = re.sub(r"[^a-z0-9]+", "-", title.lower()).strip("-")
    slug = slug[:max_length].rstrip("-")
    return slug or "task"


def task_branch_name(task_id: int, title: str) -> str:
    return f"{BRANCH_PREFIX}{task_id}-{slugify(title)}"


@dataclass(frozen=True)
class _WorktreeEntry:
    path: Path
    branch: str | None  # None when detached
    prunable: bool


async def _list_worktrees(repo: Path) -> list[_WorktreeEntry]:
    text = await _git("worktree", "list", "--porcelain", "-z", cwd=repo)
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


def _same_path(a: Path, b: Path) -> bool:
    try:
        return a.resolve() == b.resolve()
    except OSError:
        return False


async def _config_get(repo: Path, key: str) -> str | None:
    result = await _run_git("config", "--local", "--get", key, cwd=repo)
    if result.exit_code != 0:
        return None
    return result.stdout.strip() or None


async def create_task_worktree(
    repo: Path,
    task_id: int,
    title: str,
    identity: GitIdentity | None = None,
    worktrees_dir: Path | None = None,
    branch: str | None = None,
) -> TaskWorktree:
    """Create the task's branch and worktree, or (resume: `branch` names the task's existing branch) reuse them.

    New: branch `agentlab/task-<id>-<slug>` from the current HEAD (with a `-2`, `-3`… suffix when a branch of that
    name is left over from an earlier database), checked out at `worktrees_dir/<repo>-task-<id>-<slug>`.
    Resumed: the branch is reused; its worktree directory is reused when it is checked out, added otherwise.
    The base branch and base commit are remembered in the repository config so a resumed task diffs against the
    same base.
    """
    top = await _toplevel(Path(repo))
    if top is None:
        raise GitError(f"{repo} is not a git repository")
    if not await _has_commits(top):
        raise GitError(f"{top} has no commits yet: call ensure_repository first")
    if worktrees_dir is None:
        worktrees_dir = top.parent / f"{top.name}-agentlab-worktrees"
    worktrees_dir = Path(worktrees_dir)

    async with _repo_lock(top):
        if branch and await _branch_exists(top, branch):
            base_branch = await _config_get(top, f"branch.{branch}.{_BASE_BRANCH_KEY}") or await current_branch(top)
            base_commit = await _config_get(top, f"branch.{branch}.{_BASE_COMMIT_KEY}") or (
                await _git("merge-base", branch, base_branch, cwd=top)
            ).strip()
        else:
            branch = candidate = task_branch_name(task_id, title)
            suffix = 2
            while await _branch_exists(top, branch):
                branch = f"{candidate}-{suffix}"
                suffix += 1
            base_branch = await current_branch(top)
            base_commit = await _rev_parse(top, "HEAD")
            await _git("branch", branch, base_commit, cwd=top)
            await _git("config", "--local", f"branch.{branch}.{_BASE_BRANCH_KEY}", base_branch, cwd=top)
            await _git("config", "--local", f"branch.{branch}.{_BASE_COMMIT_KEY}", base_commit, cwd=top)

        target = worktrees_dir / f"{top.name}-{branch.split('/', 1)[-1]}"
        path = await _checkout_worktree(top, branch, target)
    return TaskWorktree(repo=top, path=path, branch=branch, base_branch=base_branch, base_commit=base_commit)


async def _checkout_worktree(repo: Path, branch: str, target: Path) -> Path:
    """The worktree where `branch` is checked out: an existing one if it is still there, else a new one at `target`."""
    entries = await _list_worktrees(repo)
    stale = False
    for entry in entries:
        if entry.branch == branch:
            if _same_path(entry.path, repo):
                raise GitError(f"{branch} is checked out in the main checkout {repo}: switch that to another branch")
            if entry.path.is_dir() and not entry.prunable:
                return entry.path
            stale = True
    if stale or any(_same_path(e.path, target) and not e.path.is_dir() for e in entries):
        await _git("worktree", "prune", cwd=repo)
    if target.exists() and any(target.iterdir()):
        raise GitError(f"cannot create the worktree: {target} already exists and is not the worktree of {branch}")
    target.parent.mkdir(parents=True, exist_ok=True)
    await _git("worktree", "add", "-q", str(target), branch, cwd=repo)
    return target


# ----------------------------------------------------------------------------------------------------------------------
# commits and diffs


async def commit_all(
    worktree: TaskWorktree, message: str, identity: GitIdentity | None = None
) -> CommitResult | None:
    """Stage every change in the worktree and commit it; None when nothing changed.

    Call it again after a correction round to commit the new changes as a further commit.
    """
    await _git("add", "-A", "--", ".", *NEVER_COMMIT, cwd=worktree.path)
    if await _succeeds("diff", "--cached", "--quiet", cwd=worktree.path):
        return None
    await _git("commit", "-q", "--no-verify", "-m", message, cwd=worktree.path, identity=identity)
    sha = await _rev_parse(worktree.path, "HEAD")
    short_sha = (await _git("rev-parse", "--short", sha, cwd=worktree.path)).strip()
    files = _split_nul(
        await _git("diff", "--name-only", "--no-renames", "-z", f"{worktree.base_commit}..{sha}", cwd=worktree.path)
    )
    diffstat = (await _git("diff", "--stat", f"{worktree.base_commit}..{sha}", cwd=worktree.path)).rstrip()
    return CommitResult(sha=sha, short_sha=short_sha, message=message, files=sorted(files), diffstat=diffstat)


def _worktree_present(worktree: TaskWorktree) -> bool:
    return worktree.path.is_dir() and (worktree.path / ".git").exists()


async def changed_files(worktree: TaskWorktree) -> list[str]:
    """Every path changed vs the base commit: committed, staged, unstaged and untracked (not ignored) files.

    After the worktree is removed, the paths changed on the branch.
    """
    if not _worktree_present(worktree):
        text = await _git(
            "diff", "--name-only", "--no-renames", "-z", f"{worktree.base_commit}..{worktree.branch}", cwd=worktree.repo
        )
        return sorted(_split_nul(text))
    tracked = await _git("diff", "--name-only", "--no-renames", "-z", worktree.base_commit, cwd=worktree.path)
    untracked = await _git("ls-files", "--others", "--exclude-standard", "-z", cwd=worktree.path)
    return sorted(set(_split_nul(tracked)) | set(_split_nul(untracked)))


async def diff(worktree: TaskWorktree) -> str:
    """The branch's full diff vs its base commit, followed by any uncommitted changes (untracked files included).

    After the worktree is removed, the diff of the branch.
    """
    if not _worktree_present(worktree):
        return await _git("diff", f"{worktree.base_commit}..{worktree.branch}", cwd=worktree.repo)
    committed = await _git("diff", f"{worktree.base_commit}..HEAD", cwd=worktree.path)
    uncommitted = await _uncommitted_diff(worktree.path)
    if not uncommitted.strip():
        return committed
    header = "# uncommitted changes (not in a commit yet)\n"
    return f"{committed}{header}{uncommitted}" if committed else f"{header}{uncommitted}"


async def _uncommitted_diff(path: Path) -> str:
    """HEAD vs the working tree including untracked files, built in a throwaway index (the real one is untouched)."""
    with tempfile.TemporaryDirectory(prefix="agentlab-index-") as tmp:
        env = {"GIT_INDEX_FILE": str(Path(tmp) / "index")}
        await _git("read-tree", "HEAD", cwd=path, extra_env=env)
        await _git("add", "-A", cwd=path, extra_env=env)
        return await _git("diff", "--cached", "HEAD", cwd=path, extra_env=env)


# ----------------------------------------------------------------------------------------------------------------------
# merging and cleaning up


async def merge_task_branch(worktree: TaskWorktree, identity: GitIdentity | None = None) -> MergeResult:
    """Merge the task branch into its base branch in the main checkout (`--no-ff`), or refuse and say why.

    Refuses without touching anything when the main checkout is not on the base branch, has uncommitted changes to
    tracked files, or is in the middle of a merge. On a conflict the merge is aborted and the conflicting files are
    reported; nothing is ever forced.
    """
    repo, branch, base = worktree.repo, worktree.branch, worktree.base_branch
    async with _repo_lock(repo):
        if not await _branch_exists(repo, branch):
            return MergeResult(False, f"branch {branch} no longer exists: nothing to merge")
        if not await _branch_exists(repo, base):
            return MergeResult(False, f"the task started from a detached HEAD ({base[:12]}): merge {branch} by hand")
        checked_out = await current_branch(repo)
        if checked_out != base:
            return MergeResult(
                False, f"not merged: {repo} is on {checked_out}, not {base}; switch it to {base} and try again"
            )
        if await _succeeds("rev-parse", "--verify", "--quiet", "MERGE_HEAD", cwd=repo):
            return MergeResult(False, f"not merged: {repo} is in the middle of another merge; finish or abort it first")
        dirty = _porcelain_paths(await _git("status", "--porcelain", "-z", "--untracked-files=no", cwd=repo))
        if dirty:
            return MergeResult(
                False,
                f"not merged: {repo} has uncommitted changes to tracked files ({_short_list(dirty)}); "
                "commit or stash them first",
            )
        if await _succeeds("merge-base", "--is-ancestor", branch, "HEAD", cwd=repo):
            head = await _rev_parse(repo, "HEAD")
            return MergeResult(True, f"nothing to merge: {base} already contains {branch}", sha=head)

        result = await _run_git(
            "merge", "--no-ff", "--no-edit", "--no-verify", "-m", f"Merge {branch} into {base}", branch,
            cwd=repo, identity=identity,
        )
        if result.exit_code == 0:
            sha = await _rev_parse(repo, "HEAD")
            return MergeResult(True, f"merged {branch} into {base} ({sha[:8]})", sha=sha)

        if not await _succeeds("rev-parse", "--verify", "--quiet", "MERGE_HEAD", cwd=repo):
            # git refused before starting (e.g. untracked files would be overwritten): nothing to undo.
            detail = (result.stderr.strip() or result.stdout.strip()).splitlines()
            return MergeResult(False, "not merged: " + (" ".join(detail[:6]) or f"git merge exit {result.exit_code}"))
        conflicts = _split_nul(await _git("diff", "--name-only", "--diff-filter=U", "-z", cwd=repo))
        await _git("merge", "--abort", cwd=repo)
        return MergeResult(
            False,
            f"merge conflict in {len(conflicts)} file(s): {_short_list(conflicts)}; "
            f"the merge was aborted and {base} is unchanged",
            conflicts=sorted(conflicts),
        )


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
    shown = ", ".join(paths[:limit])
    return shown + (f" and {len(paths) - limit} more" if len(paths) > limit else "")


async def remove_worktree_keep_branch(worktree: TaskWorktree) -> None:
    """Remove the task's worktree directory but keep its branch (for Merge/Diff later).

    Uncommitted changes in the worktree are lost: call `commit_all` first.
    """
    async with _repo_lock(worktree.repo):
        await _remove_worktree(worktree)


async def discard_task_worktree(worktree: TaskWorktree) -> None:
    """Remove the task's worktree and delete its branch (its commits become unreachable)."""
    async with _repo_lock(worktree.repo):
        await _remove_worktree(worktree)
        if await _branch_exists(worktree.repo, worktree.branch):
            await _git("branch", "-D", worktree.branch, cwd=worktree.repo)


async def _remove_worktree(worktree: TaskWorktree) -> None:
    registered = any(_same_path(e.path, worktree.path) for e in await _list_worktrees(worktree.repo))
    if registered and worktree.path.is_dir():
        await _git("worktree", "remove", "--force", str(worktree.path), cwd=worktree.repo)
    await _git("worktree", "prune", cwd=worktree.repo)
