"""Git plumbing for tasks: every task works on its own branch in its own worktree, and code changes are commits.

The user's checkout is never touched while a task runs: a task gets a branch `agentlab/task-<id>-<slug>` and a
worktree outside the repository, commits land there, and only `merge_task_branch` (an explicit user action) writes to
the main checkout, refusing rather than forcing when that would be unsafe.

Every git call goes through `run_git`: no terminal prompt, the bot's identity in the environment (so it works on a
machine with no git identity configured), no system or global configuration, and every repository setting that could
run a program (hooks, fsmonitor, filter/textconv/merge drivers, signing, pagers, editors, credential helpers)
overridden on the command line, so nothing a worker planted in the shared `.git` runs inside the bot's own git calls.

Why one module over 400 lines: the hardened runner and every git operation of a task (worktrees, commits with size
limits, merge, discard) share the same locks and overrides.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import re
import tempfile
import time
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO, Protocol

from agents.tools.shell import child_env

log = logging.getLogger(__name__)

GIT_TIMEOUT_SECONDS = 120.0
BRANCH_PREFIX = "agentlab/task-"
# Build and environment debris a task run leaves behind, never committed even where .gitignore misses it.
NEVER_COMMIT = tuple(
    f":(exclude,glob)**/{name}"
    for name in (".venv", ".venv/**", "__pycache__/**", "*.pyc", "node_modules/**", ".pytest_cache/**", ".agentlab-*")
)
_BASE_BRANCH_KEY = "agentlab-base"
_BASE_COMMIT_KEY = "agentlab-base-commit"
_NOT_A_REPOSITORY = "not a git repository"


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
    left_out: list[LeftOut] = field(default_factory=list)  # not committed: over a size limit
    large: list[tuple[str, int]] = field(
        default_factory=list
    )  # committed files of CommitLimits.large_file_bytes or more
    binary: list[str] = field(default_factory=list)  # committed binary files (added or changed)

    @property
    def committed(self) -> bool:
        return bool(self.sha)


@dataclass(frozen=True)
class MergeResult:
    ok: bool
    message: str
    conflicts: list[str] = field(default_factory=list)
    sha: str | None = None  # the merge commit (or the base branch head when there was nothing to merge)


@dataclass(frozen=True)
class GitOutput:
    exit_code: int
    stdout: str
    stderr: str


# ----------------------------------------------------------------------------------------------------------------------
# running git
#
# The repository's own configuration is not trusted: a worker (or anything it ran) may have written hooks, an fsmonitor
# command, filter/textconv/merge drivers or includes into it. Every call therefore runs with the system and global
# configuration switched off and with command-line overrides (which beat every config file) for every setting that can
# make git run a program; the drivers a repository names are discovered first with `git config` (which runs nothing)
# and neutralised one by one. Diffs also get `--no-ext-diff --no-textconv`.

# Settings that would run a program, each set to a value that runs nothing (or nothing but git itself).
_SAFE_OPTIONS: tuple[tuple[str, str], ...] = (
    ("core.hooksPath", "/dev/null"),
    ("core.fsmonitor", ""),
    ("core.sshCommand", "false"),
    ("core.gitProxy", ""),
    ("core.askPass", ""),
    ("core.pager", "cat"),
    ("core.editor", "true"),
    ("core.attributesFile", "/dev/null"),
    ("sequence.editor", "true"),
    ("credential.helper", ""),
    ("commit.gpgSign", "false"),
    ("tag.gpgSign", "false"),
    ("log.showSignature", "false"),
    ("gpg.program", "false"),
    ("gpg.ssh.program", "false"),
    ("gpg.x509.program", "false"),
    ("gpg.ssh.defaultKeyCommand", ""),
    ("gc.auto", "0"),  # no background `gc --auto` outliving the call
    ("maintenance.auto", "false"),
    ("core.quotePath", "off"),  # readable non-ASCII paths
)
_GIT_OPTIONS: tuple[str, ...] = tuple(arg for key, value in _SAFE_OPTIONS for arg in ("-c", f"{key}={value}"))
# Per-name drivers a repository (or an attribute file) can name: <section>.<name>.<key> → the harmless value.
_DRIVER_OVERRIDES: dict[str, dict[str, str]] = {
    "filter": {"clean": "", "smudge": "", "process": "", "required": "false"},
    "diff": {"textconv": ""},  # diff.<name>.command is ignored through --no-ext-diff
    "merge": {"driver": "git merge-file --marker-size=%L %A %O %B"},  # the built-in three-way merge, as a driver
}
_DIFF_COMMANDS = frozenset({"diff", "log", "show"})
_NO_EXTERNAL_DIFF = ("--no-ext-diff", "--no-textconv")


def _git_env(identity: GitIdentity | None, extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """No secrets, no inherited GIT_* variables, no system or global config, no prompts or editors, the bot's
    identity."""
    env = {key: value for key, value in child_env().items() if not key.startswith("GIT_")}
    env.pop("SSH_ASKPASS", None)
    identity = identity or GitIdentity()
    env.update(
        GIT_CONFIG_NOSYSTEM="1",
        GIT_CONFIG_GLOBAL="/dev/null",
        GIT_ATTR_NOSYSTEM="1",
        GIT_TERMINAL_PROMPT="0",
        GIT_EDITOR="true",
        GIT_SEQUENCE_EDITOR="true",
        GIT_PAGER="cat",
        GIT_AUTHOR_NAME=identity.name,
        GIT_AUTHOR_EMAIL=identity.email,
        GIT_COMMITTER_NAME=identity.name,
        GIT_COMMITTER_EMAIL=identity.email,
        LC_ALL="C",
        LANGUAGE="C",
    )
    if extra:
        env.update(extra)
    return env


async def _exec_git(
    argv: list[str], cwd: Path, env: Mapping[str, str], timeout: float, stdin: bytes | None = None
) -> GitOutput:
    try:
        proc = await asyncio.create_subprocess_exec(
            "git",
            *argv,
            cwd=str(cwd),
            env=dict(env),
            stdin=asyncio.subprocess.DEVNULL if stdin is None else asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
    except (FileNotFoundError, NotADirectoryError, PermissionError) as err:
        raise GitError(f"cannot run git in {cwd}: {err.strerror or err}") from None
    try:
        async with asyncio.timeout(timeout):  # not wait_for: on 3.11 it can swallow a cancellation racing git's exit
            stdout, stderr = await proc.communicate(stdin)
    except (TimeoutError, asyncio.CancelledError) as err:
        await _reap(proc)
        if isinstance(err, asyncio.CancelledError):
            raise
        raise GitError(f"git {_subcommand(argv)} timed out after {timeout:g} s") from None
    assert proc.returncode is not None
    return GitOutput(
        proc.returncode, stdout.decode("utf-8", errors="replace"), stderr.decode("utf-8", errors="replace")
    )


def _subcommand(argv: list[str]) -> str:
    i = 0
    while i < len(argv) and argv[i].startswith("-"):
        i += 2 if argv[i] in ("-c", "-C") else 1
    return argv[i] if i < len(argv) else ""


async def _driver_options(cwd: Path, env: Mapping[str, str]) -> list[str]:
    """`-c` overrides for every filter, diff and merge driver the effective configuration (includes too) names."""
    listed = await _exec_git(
        [*_GIT_OPTIONS, "config", "--includes", "-z", "--name-only", "--get-regexp", r"^(filter|diff|merge)\."],
        cwd,
        env,
        GIT_TIMEOUT_SECONDS,
    )
    options: list[str] = []
    names: set[tuple[str, str]] = set()
    for key in _split_nul(listed.stdout):
        section, _, rest = key.partition(".")
        name, dot, _ = rest.rpartition(".")
        if dot and name:
            names.add((section, name))
    for section, name in sorted(names):
        for key, value in _DRIVER_OVERRIDES.get(section.lower(), {}).items():
            options += ["-c", f"{section}.{name}.{key}={value}"]
    return options


async def _prepared(
    args: tuple[str, ...], cwd: Path, identity: GitIdentity | None, extra_env: Mapping[str, str] | None
) -> tuple[list[str], dict[str, str]]:
    env = _git_env(identity, extra_env)
    argv = [*_GIT_OPTIONS, *await _driver_options(Path(cwd), env), *args]
    if args and args[0] in _DIFF_COMMANDS:
        argv[len(argv) - len(args) + 1 : len(argv) - len(args) + 1] = _NO_EXTERNAL_DIFF
    return argv, env


async def run_git(
    *args: str,
    cwd: Path,
    identity: GitIdentity | None = None,
    timeout: float = GIT_TIMEOUT_SECONDS,
    extra_env: Mapping[str, str] | None = None,
    stdin: bytes | None = None,
) -> GitOutput:
    """Run `git <args>` in `cwd`, hardened as described above; its exit code and output, whatever the exit code.

    The one git runner of the product: repo_map and doctor use it too. `stdin` is fed to git's standard input.
    """
    argv, env = await _prepared(args, Path(cwd), identity, extra_env)
    return await _exec_git(argv, Path(cwd), env, timeout, stdin)


async def stream_git(
    *args: str,
    cwd: Path,
    out: BinaryIO,
    limit: int,
    timeout: float = GIT_TIMEOUT_SECONDS,
    extra_env: Mapping[str, str] | None = None,
) -> tuple[int, bool]:
    """Copy the stdout of `git <args>` (hardened like run_git) into `out` in chunks, at most `limit` bytes.

    Returns (bytes written, cut short); git is stopped as soon as the limit is reached, so nothing bigger than one
    chunk is ever held in memory.
    """
    argv, env = await _prepared(args, Path(cwd), None, extra_env)
    proc = await asyncio.create_subprocess_exec(
        "git",
        *argv,
        cwd=str(cwd),
        env=env,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.DEVNULL,
    )
    assert proc.stdout is not None
    written, cut = 0, False

    async def copy() -> None:
        nonlocal written, cut
        while chunk := await proc.stdout.read(65_536):
            room = limit - written
            if len(chunk) > room:
                chunk, cut = chunk[:room], True
            out.write(chunk)
            written += len(chunk)
            if cut:
                return

    try:
        async with asyncio.timeout(timeout):
            await copy()
    except TimeoutError:
        cut = True
    finally:
        await _reap(proc)
    return written, cut


async def _reap(proc: asyncio.subprocess.Process) -> None:
    """Kill git if it still runs and wait for it. On 3.11 wait() returns only once its pipes are closed, and a
    reader stopped early may have paused one (full buffer): read them to EOF, never for longer than a moment."""
    if proc.returncode is None:
        with contextlib.suppress(ProcessLookupError):
            proc.kill()
    with contextlib.suppress(TimeoutError, OSError):
        async with asyncio.timeout(5):
            for pipe in (proc.stdout, proc.stderr):
                if pipe is not None:
                    await pipe.read()
            await proc.wait()


_run_git = run_git


async def _git(
    *args: str,
    cwd: Path,
    identity: GitIdentity | None = None,
    timeout: float = GIT_TIMEOUT_SECONDS,
    extra_env: Mapping[str, str] | None = None,
    stdin: bytes | None = None,
) -> str:
    """Run `git <args>` in `cwd`; return stdout, or raise GitError with git's stderr on a non-zero exit."""
    result = await _run_git(*args, cwd=cwd, identity=identity, timeout=timeout, extra_env=extra_env, stdin=stdin)
    if result.exit_code != 0:
        detail = result.stderr.strip() or result.stdout.strip() or f"exit code {result.exit_code}"
        raise GitError(f"git {' '.join(args)}: {detail}")
    return result.stdout


async def _succeeds(*args: str, cwd: Path) -> bool:
    return (await _run_git(*args, cwd=cwd)).exit_code == 0


def _split_nul(text: str) -> list[str]:
    return [p for p in text.split("\0") if p]


_repo_locks: dict[Path, asyncio.Lock] = {}


def repo_lock(repo: Path) -> asyncio.Lock:
    """One lock per repository for operations on its shared state (worktree list, branches, config, merges)."""
    key = repo.resolve()
    lock = _repo_locks.get(key)
    if lock is None:
        lock = _repo_locks[key] = asyncio.Lock()
    return lock


# ----------------------------------------------------------------------------------------------------------------------
# what the bot itself wrote, and where a worktree's metadata lives


class RepositoryWatcher(Protocol):
    """Something that keeps a snapshot of a repository's shared state (see repo_guard.RepositoryGuard)."""

    async def verify(self) -> None:
        """Compare with the snapshot and undo what moved (the caller holds the repository lock)."""

    async def resnapshot(self) -> None:
        """Take the snapshot again (after the bot itself changed the repository)."""


_watchers: dict[Path, set[RepositoryWatcher]] = {}


def watch(repo: Path, watcher: RepositoryWatcher) -> None:
    _watchers.setdefault(Path(repo).resolve(), set()).add(watcher)


def unwatch(repo: Path, watcher: RepositoryWatcher) -> None:
    _watchers.get(Path(repo).resolve(), set()).discard(watcher)


@contextlib.asynccontextmanager
async def _bot_writes(repo: Path) -> AsyncIterator[None]:
    """Hold the repository lock around a change the bot makes to its refs or config, keeping the watchers exact.

    Before: every watcher undoes what a worker moved (so it is not mistaken for the bot's). After: every watcher takes
    its snapshot again, so the bot's own change is not undone.
    """
    async with repo_lock(repo):
        watchers = list(_watchers.get(Path(repo).resolve(), ()))
        for watcher in watchers:
            await watcher.verify()
        try:
            yield
        finally:
            for watcher in watchers:
                await watcher.resnapshot()


async def git_common_dir(repo: Path) -> Path:
    """The repository's shared git directory (`.git` of the main checkout), absolute."""
    out = (await _git("rev-parse", "--git-common-dir", cwd=repo)).strip()
    return (Path(repo) / out).resolve()


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
        if _same_path(named, link) or named == link:
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
    try:
        text = dot_git.read_text(encoding="utf-8") if dot_git.is_file() and not dot_git.is_symlink() else ""
    except OSError:
        text = ""
    target = text.strip().removeprefix("gitdir:").strip() if text.startswith("gitdir:") else ""
    if not target or not _same_path(worktree.path / target, admin):
        raise WorktreeLinkBroken(f"the .git file of {worktree.path} was replaced: it no longer points at {admin}")
    return admin


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
            "commit",
            "-q",
            "--allow-empty",
            "--no-verify",
            "-m",
            "Initial commit (agentlab)",
            cwd=top,
            identity=identity,
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

    async with _bot_writes(top):
        if branch and await _branch_exists(top, branch):
            base_branch = await _config_get(top, f"branch.{branch}.{_BASE_BRANCH_KEY}") or await current_branch(top)
            base_commit = (
                await _config_get(top, f"branch.{branch}.{_BASE_COMMIT_KEY}")
                or (await _git("merge-base", branch, base_branch, cwd=top)).strip()
            )
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


@dataclass(frozen=True)
class CommitLimits:
    """What one task may commit: each file at most `max_file_bytes`, all changed files together `max_task_bytes`."""

    max_file_bytes: int = 5 * 1024 * 1024
    max_task_bytes: int = 20 * 1024 * 1024
    large_file_bytes: int = 1024 * 1024  # committed files from this size on are named in the summary


@dataclass(frozen=True)
class LeftOut:
    """A file the bot did not commit because of a size limit (it stays in the worktree until the task ends)."""

    path: str
    size: int
    reason: str  # e.g. "over the 5 MB per-file limit"


async def commit_all(
    worktree: TaskWorktree, message: str, identity: GitIdentity | None = None, limits: CommitLimits | None = None
) -> CommitResult | None:
    """Stage every change in the worktree within the size limits and commit it; None when nothing changed.

    Files over the per-file limit, and those that would take the task past its total, are never staged (so their
    content is never written into the owner's object store) and come back in `left_out`; when they were the only
    change, the result has no commit (`committed` is False). Call it again after a correction round to commit the new
    changes as a further commit.
    """
    limits = limits or CommitLimits()
    async with _bot_writes(worktree.repo):
        await check_worktree_link(worktree)
        left_out = await _over_limits(worktree, limits)
        if left_out:
            await _stage_all_but(worktree.path, {item.path for item in left_out})
        else:
            await _git("add", "-A", "--", ".", *NEVER_COMMIT, cwd=worktree.path)
        if await _succeeds("diff", "--cached", "--quiet", cwd=worktree.path):
            return CommitResult("", "", message, left_out=left_out) if left_out else None
        await _git("commit", "-q", "--no-verify", "-m", message, cwd=worktree.path, identity=identity)
        sha = await _rev_parse(worktree.path, "HEAD")
    short_sha = (await _git("rev-parse", "--short", sha, cwd=worktree.path)).strip()
    files = _split_nul(
        await _git("diff", "--name-only", "--no-renames", "-z", f"{worktree.base_commit}..{sha}", cwd=worktree.path)
    )
    diffstat = (await _git("diff", "--stat", f"{worktree.base_commit}..{sha}", cwd=worktree.path)).rstrip()
    large, binary = await _large_and_binary(worktree, sha, limits)
    return CommitResult(
        sha=sha,
        short_sha=short_sha,
        message=message,
        files=sorted(files),
        diffstat=diffstat,
        left_out=left_out,
        large=large,
        binary=binary,
    )


async def _stage_all_but(path: Path, left_out: set[str]) -> None:
    """Stage every pending change except `left_out`, which is set back to HEAD (what the worker staged of it too).

    The paths go to git on its standard input, never as pathspecs: one exclude pathspec per file put 100,000 files
    on the command line (E2BIG) and makes matching quadratic."""
    pending = [p.rstrip("/") for p, _ in await pending_changes(path) if p not in left_out]  # "sub/": a nested repo
    if pending:
        await _git("update-index", "--add", "--remove", "-z", "--stdin", cwd=path, stdin=_nul_joined(pending))
    in_head = {}
    for entry in _split_nul(await _git("ls-tree", "-r", "-z", "--full-tree", "HEAD", cwd=path)):
        meta, _, name = entry.partition("\t")
        if name in left_out:
            mode, _, sha = meta.split(" ", 2)
            in_head[name] = f"{mode} {sha}"
    removed = f"0 {'0' * 40}"  # mode 0: drop the path from the index
    lines = [f"{in_head.get(p, removed)}\t{p}" for p in sorted(left_out)]
    await _git("update-index", "-z", "--index-info", cwd=path, stdin=_nul_joined(lines))


def _nul_joined(items: list[str]) -> bytes:
    return b"".join(item.encode("utf-8", "surrogateescape") + b"\0" for item in items)


def _file_size(path: Path) -> int:
    try:
        info = path.lstat()
    except OSError:
        return 0
    return info.st_size if not path.is_symlink() else 0


async def _over_limits(worktree: TaskWorktree, limits: CommitLimits) -> list[LeftOut]:
    """The pending files (changed or new, not deleted) that the size limits keep out of the next commit.

    The task's total counts what the branch already changed vs its base plus what is pending; the smallest pending
    files are admitted first, so one huge file does not crowd out the real work.
    """
    pending = {path for path, code in await pending_changes(worktree.path) if "D" not in code}
    committed = set(
        _split_nul(
            await _git("diff", "--name-only", "--no-renames", "-z", f"{worktree.base_commit}..HEAD", cwd=worktree.path)
        )
    )
    used = sum(_file_size(worktree.path / p) for p in committed - pending)
    left_out: list[LeftOut] = []
    for size, path in sorted((_file_size(worktree.path / p), p) for p in pending):
        if size > limits.max_file_bytes:
            left_out.append(LeftOut(path, size, f"over the {human_size(limits.max_file_bytes)} per-file limit"))
        elif used + size > limits.max_task_bytes:
            left_out.append(LeftOut(path, size, f"over the {human_size(limits.max_task_bytes)} per-task limit"))
        else:
            used += size
    return sorted(left_out, key=lambda item: item.path)


def _status_entries(text: str) -> list[tuple[str, str]]:
    """(path, two-letter code) from `git status --porcelain -z --no-renames`."""
    return [(item[3:], item[:2]) for item in text.split("\0") if len(item) > 3]


async def pending_changes(path: Path, extra_env: Mapping[str, str] | None = None) -> list[tuple[str, str]]:
    """(path, two-letter status code) of every change not committed yet in the checkout at `path`, untracked files
    included, the never-committed paths left out."""
    status = await _git(
        "status",
        "--porcelain",
        "-z",
        "--untracked-files=all",
        "--no-renames",
        "--",
        ".",
        *NEVER_COMMIT,
        cwd=path,
        extra_env=extra_env,
    )
    return _status_entries(status)


async def _large_and_binary(
    worktree: TaskWorktree, sha: str, limits: CommitLimits
) -> tuple[list[tuple[str, int]], list[str]]:
    """Files added or changed on the branch that are large (with their size) or binary, for the summary."""
    span = f"{worktree.base_commit}..{sha}"
    numstat = _split_nul(await _git("diff", "--numstat", "-z", "--no-renames", span, cwd=worktree.path))
    binary = [item.split("\t", 2)[2] for item in numstat if item.startswith("-\t-\t")]
    raw = await _git("diff", "--raw", "-z", "--no-abbrev", "--no-renames", "--diff-filter=AM", span, cwd=worktree.path)
    fields = _split_nul(raw)
    blobs = {fields[i + 1]: fields[i].split()[3] for i in range(0, len(fields) - 1, 2)}
    sizes = await _blob_sizes(worktree.path, list(blobs.values()))
    large = sorted(
        (path, sizes.get(blob, 0)) for path, blob in blobs.items() if sizes.get(blob, 0) >= limits.large_file_bytes
    )
    return large, sorted(binary)


async def _blob_sizes(cwd: Path, blobs: list[str]) -> dict[str, int]:
    return {name: size for name, (_, size) in (await _object_sizes(cwd, blobs)).items()}


async def _object_sizes(
    cwd: Path, names: list[str], fmt: str = "%(objectname) %(objecttype) %(objectsize)"
) -> dict[str, tuple[str, int]]:
    """name → (type, size) through one `git cat-file --batch-check` (missing objects are left out)."""
    if not names:
        return {}
    env = _git_env(None)
    proc = await asyncio.create_subprocess_exec(
        "git",
        *_GIT_OPTIONS,
        "cat-file",
        f"--batch-check={fmt}",
        cwd=str(cwd),
        env=env,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.DEVNULL,
    )
    try:
        async with asyncio.timeout(GIT_TIMEOUT_SECONDS):
            out, _ = await proc.communicate("\n".join(names).encode() + b"\n")
    except (TimeoutError, asyncio.CancelledError):
        await _reap(proc)
        raise
    found: dict[str, tuple[str, int]] = {}
    for line in out.decode().splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[2].isdigit():
            found[parts[0]] = (parts[1], int(parts[2]))
    return found


def human_size(size: int) -> str:
    """`5 MB`, `812 KB`, `37 B` (binary units)."""
    if size < 1024:
        return f"{size} B"
    for unit, scale in (("GB", 1024**3), ("MB", 1024**2), ("KB", 1024)):
        if size >= scale:
            value = size / scale
            return f"{value:.0f} {unit}" if value >= 10 or value == int(value) else f"{value:.1f} {unit}"
    return f"{size} B"


def worktree_present(worktree: TaskWorktree) -> bool:
    return worktree.path.is_dir() and (worktree.path / ".git").exists()


async def diff(worktree: TaskWorktree) -> str:
    """The task's diff as text, capped (see git_diff.write_diff)."""
    from agents.tools import git_diff  # git_diff builds on this module

    with tempfile.TemporaryFile() as out:
        await git_diff.write_diff(worktree, out)
        out.seek(0)
        return out.read().decode("utf-8", errors="replace")


# ----------------------------------------------------------------------------------------------------------------------
# merging and cleaning up


async def merge_task_branch(worktree: TaskWorktree, identity: GitIdentity | None = None) -> MergeResult:
    """Merge the task branch into its base branch in the main checkout (`--no-ff`), or refuse and say why.

    Refuses without touching anything when the main checkout is not on the base branch, has uncommitted changes to
    tracked files, or is in the middle of a merge. On a conflict the merge is aborted and the conflicting files are
    reported; nothing is ever forced.
    """
    repo, branch, base = worktree.repo, worktree.branch, worktree.base_branch
    async with _bot_writes(repo):
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
            "merge",
            "--no-ff",
            "--no-edit",
            "--no-verify",
            "-m",
            f"Merge {branch} into {base}",
            branch,
            cwd=repo,
            identity=identity,
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
    async with _bot_writes(worktree.repo):
        await _remove_worktree(worktree)


DISCARD_PRUNE_MIN_BYTES = 64 * 1024


async def discard_task_worktree(worktree: TaskWorktree) -> int:
    """Remove the task's worktree, delete its branch, and delete the large objects only that branch used.

    Objects of 64 KiB or more reachable from the discarded branch and from nothing else (no ref, reflog or index of
    any worktree) are deleted at once when they are loose (the bot's commits write loose objects); smaller ones are
    left to git's own gc. No `git gc --prune=now`: that would also prune objects the owner's own git processes are
    writing at that moment. Returns the number of bytes freed.
    """
    async with _bot_writes(worktree.repo):
        await _remove_worktree(worktree)
        if not await _branch_exists(worktree.repo, worktree.branch):
            return 0
        tip = await _rev_parse(worktree.repo, f"refs/heads/{worktree.branch}")
        await _git("branch", "-D", worktree.branch, cwd=worktree.repo)
        return await _delete_unreachable_large_objects(worktree.repo, tip)


async def _delete_unreachable_large_objects(repo: Path, tip: str) -> int:
    listed = await _git(
        "rev-list", "--objects", "--no-object-names", tip, "--not", "--all", "--reflog", "--indexed-objects", cwd=repo
    )
    objects = [line.strip() for line in listed.splitlines() if line.strip()]
    if not objects:
        return 0
    sizes = await _object_sizes(repo, objects, "%(objectname) %(objecttype) %(objectsize)")
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
    registered = any(_same_path(e.path, worktree.path) for e in await _list_worktrees(worktree.repo))
    if registered and worktree.path.is_dir():
        await _git("worktree", "remove", "--force", str(worktree.path), cwd=worktree.repo)
    await _git("worktree", "prune", cwd=worktree.repo)


# ----------------------------------------------------------------------------------------------------------------------
# reading a commit (issue 13: the bot's test checks come from the base commit)


async def file_at(repo: Path, commit: str, path: str) -> str | None:
    """The text of `path` at `commit`, or None when it is not there."""
    result = await _run_git("show", f"{commit}:{path}", cwd=repo)
    return result.stdout if result.exit_code == 0 else None


async def is_tracked(repo: Path, path: str) -> bool:
    return await _succeeds("ls-files", "--error-unmatch", "--", path, cwd=repo)


async def changes_since(path: Path, base_commit: str) -> list[tuple[str, str]]:
    """(status letter, path) of every file changed between `base_commit` and HEAD in the checkout at `path`."""
    text = await _git("diff", "--name-status", "--no-renames", "-z", f"{base_commit}..HEAD", cwd=path)
    fields = _split_nul(text)
    return [(fields[i][:1], fields[i + 1]) for i in range(0, len(fields) - 1, 2)]


async def export_tree(repo: Path, commit: str, target: Path) -> None:
    """Write the files of `commit` into the empty folder `target` (no git metadata: a throw-away copy)."""
    target.mkdir(parents=True, exist_ok=True)
    archive = target.parent / f"{target.name}.tar"
    try:
        await _git("archive", "--format=tar", "-o", str(archive), commit, cwd=repo)
        await asyncio.to_thread(_untar, archive, target)
    finally:
        archive.unlink(missing_ok=True)


def _untar(archive: Path, target: Path) -> None:
    import tarfile

    with tarfile.open(archive) as tar:
        tar.extractall(target, filter="data")
