"""A task's changes become commits: every change within the size limits, never build debris; what was left out."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from agents.core.text import human_size
from agents.git.command import (
    GitError,
    GitIdentity,
    git_succeeds,
    git_text,
    nul_joined,
    object_sizes,
    run_git,
    split_nul,
)
from agents.git.locks import bot_writes
from agents.git.ref_files import git_dirs, head_commit_from_files, loose_object_header
from agents.git.repository import remember_changes
from agents.git.worktrees import TaskWorktree, check_worktree_link

# Build and environment debris a task run leaves behind, never committed even where .gitignore misses it (the
# `.agentlab-*` names are the bot's own: a file, or a folder and everything in it).
NEVER_COMMIT = tuple(
    f":(exclude,glob)**/{name}"
    for name in (
        ".venv",
        ".venv/**",
        "__pycache__/**",
        "*.pyc",
        "node_modules/**",
        ".pytest_cache/**",
        ".agentlab-*",
        ".agentlab-*/**",
    )
)


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
class CommitLimits:
    """What one task may commit: each file at most `max_file_bytes`, all changed files together `max_task_bytes`
    (each file counted with its path and ENTRY_BYTES more: what it adds to git's trees and index, so thousands of
    empty files with long names are not free)."""

    max_file_bytes: int = 5 * 1024 * 1024
    max_task_bytes: int = 20 * 1024 * 1024
    large_file_bytes: int = 1024 * 1024  # committed files from this size on are named in the summary


ENTRY_BYTES = 64  # about what a file adds to a tree object and the index besides its path


def committed_bytes(path: str, size: int) -> int:
    """What one changed file counts toward the per-task limit: its bytes, its path and an entry's overhead."""
    return size + len(path.encode()) + ENTRY_BYTES


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
    async with bot_writes(worktree.repo):
        await check_worktree_link(worktree)
        left_out, changing, pending = await _over_limits(worktree, limits)
        kept_out = {item.path for item in left_out}
        await stage_paths(worktree.path, [p for p, _ in pending if p not in kept_out])
        if left_out:
            await _set_back_to_head(worktree.path, kept_out)
        # git is asked whether anything is staged only where the status did not already show a change that staging
        # commits (or where the commit then found nothing after all: a service of the task undid it meanwhile)
        if not changing and await git_succeeds("diff", "--cached", "--quiet", cwd=worktree.path):
            return CommitResult("", "", message, left_out=left_out) if left_out else None
        said = await run_git("commit", "--no-verify", "-m", message, cwd=worktree.path, identity=identity)
        if said.exit_code != 0:
            if changing and await git_succeeds("diff", "--cached", "--quiet", cwd=worktree.path):
                return CommitResult("", "", message, left_out=left_out) if left_out else None
            detail = said.stderr.strip() or said.stdout.strip() or f"exit code {said.exit_code}"
            raise GitError(f"git commit --no-verify -m {message}: {detail}")
        sha, short_sha = await _head_and_short(worktree.path, worktree.branch, said.stdout)
    span = f"{worktree.base_commit}..{sha}"
    changes, blobs, binary, diffstat = _changed_files(
        await git_text(
            "diff", "--raw", "--numstat", "--stat", "-z", "--no-abbrev", "--no-renames", span, cwd=worktree.path
        )
    )
    remember_changes(worktree.path, worktree.base_commit, sha, changes)  # what the tests ask next
    files = [path for _, path in changes]
    large = await _large(worktree.path, blobs, limits)
    return CommitResult(
        sha=sha,
        short_sha=short_sha,
        message=message,
        files=sorted(files),
        diffstat=diffstat,
        left_out=left_out,
        large=large,
        binary=sorted(binary),
    )


async def stage_paths(path: Path, pending: list[str], extra_env: Mapping[str, str] | None = None) -> None:
    """Stage `pending` (paths as `git status` names them, "sub/" for a nested repository) as `git add -A` would.

    Through `git update-index`, never `git add`: `git add` asks `git status` inside every submodule of the index
    whether it is dirty, and that status reads the submodule's own configuration and `.gitattributes`, which a worker
    writes when it makes a folder of its worktree a repository of its own: its clean filter, a shell command, would
    run here, outside the sandbox. `update-index` reads no more of a submodule than its HEAD. The paths go to git
    on its standard input, never as pathspecs: one pathspec per file put 100,000 files on the command line (E2BIG)
    and makes matching quadratic."""
    paths = [p.rstrip("/") for p in pending]
    if paths:
        await git_text(
            "update-index", "--add", "--remove", "-z", "--stdin", cwd=path, stdin=nul_joined(paths), extra_env=extra_env
        )


async def _set_back_to_head(path: Path, left_out: set[str]) -> None:
    """Set `left_out` back to HEAD in the index (what the worker staged of it too)."""
    in_head = {}
    for entry in split_nul(await git_text("ls-tree", "-r", "-z", "--full-tree", "HEAD", cwd=path)):
        meta, _, name = entry.partition("\t")
        if name in left_out:
            mode, _, sha = meta.split(" ", 2)
            in_head[name] = f"{mode} {sha}"
    removed = f"0 {'0' * 40}"  # mode 0: drop the path from the index
    lines = [f"{in_head.get(p, removed)}\t{p}" for p in sorted(left_out)]
    await git_text("update-index", "-z", "--index-info", cwd=path, stdin=nul_joined(lines))


def file_size(path: Path) -> int:
    try:
        info = path.lstat()
    except OSError:
        return 0
    return info.st_size if not path.is_symlink() else 0


async def _over_limits(
    worktree: TaskWorktree, limits: CommitLimits
) -> tuple[list[LeftOut], bool, list[tuple[str, str]]]:
    """The pending files (changed or new, not deleted) that the size limits keep out of the next commit, whether
    staging the others surely changes what HEAD has (`_status_v2_entries`), and every pending change.

    The task's total counts what the branch already changed vs its base plus what is pending; the smallest pending
    files are admitted first, so one huge file does not crowd out the real work.
    """
    head, changes, changing = await _pending_and_head(worktree.path)
    pending = {path for path, code in changes if "D" not in code}
    committed: set[str] = set()
    if head != worktree.base_commit:  # the branch's first commit has nothing before it to count
        committed = set(
            split_nul(
                await git_text(
                    "diff", "--name-only", "--no-renames", "-z", f"{worktree.base_commit}..HEAD", cwd=worktree.path
                )
            )
        )
    used = sum(committed_bytes(p, file_size(worktree.path / p)) for p in committed - pending)
    left_out: list[LeftOut] = []
    for size, path in sorted((file_size(worktree.path / p), p) for p in pending):
        if size > limits.max_file_bytes:
            left_out.append(LeftOut(path, size, f"over the {human_size(limits.max_file_bytes)} per-file limit"))
        elif used + committed_bytes(path, size) > limits.max_task_bytes:
            left_out.append(LeftOut(path, size, f"over the {human_size(limits.max_task_bytes)} per-task limit"))
        else:
            used += committed_bytes(path, size)
    kept_out = {item.path for item in left_out}
    return sorted(left_out, key=lambda item: item.path), any(path not in kept_out for path in changing), changes


def _status_entries(text: str) -> list[tuple[str, str]]:
    """(path, two-letter code) from `git status --porcelain -z --no-renames`."""
    return [(item[3:], item[:2]) for item in text.split("\0") if len(item) > 3]


async def _pending_and_head(path: Path) -> tuple[str | None, list[tuple[str, str]], set[str]]:
    """`pending_changes(path)`, the commit HEAD names (None before the first) and the paths whose staging surely
    changes what HEAD has, from one `git status`."""
    status = await git_text(
        "status",
        "--porcelain=v2",
        "--branch",
        "-z",
        "--untracked-files=all",
        "--no-renames",
        "--",
        ".",
        *NEVER_COMMIT,
        cwd=path,
    )
    return _status_v2_entries(status)


# `git status --porcelain=v2` entries: the kind, then how many space-separated fields come before the path
_V2_FIELDS_BEFORE_PATH = {"1": 8, "2": 9, "u": 10, "?": 1, "!": 1}


def _status_v2_entries(text: str) -> tuple[str | None, list[tuple[str, str]], set[str]]:
    """(HEAD's commit or None, [(path, two-letter code as `--porcelain` v1 writes it)], the paths whose staging
    surely changes what HEAD has) from `git status --porcelain=v2 --branch -z`.

    Surely: a file (not a submodule) whose index entry is HEAD's while the working tree differs from it (modified,
    type changed or deleted), or an untracked file with no other entry (one in HEAD but not in the index would have
    one: deleted from the index). Git compares contents for the status as `git add` will stage them; anything else
    (changes staged already, which the working tree may undo) is left to `git diff --cached`."""
    head: str | None = None
    entries: list[tuple[str, str]] = []
    plain_changes: set[str] = set()
    untracked: set[str] = set()
    fields = text.split("\0")
    i = 0
    while i < len(fields):
        item = fields[i]
        i += 1
        if item.startswith("# branch.oid "):
            oid = item.removeprefix("# branch.oid ").strip()
            head = None if oid == "(initial)" else oid
            continue
        kind = item[:1]
        before = _V2_FIELDS_BEFORE_PATH.get(kind)
        if before is None or item[1:2] != " ":
            continue
        parts = item.split(" ", before)
        if len(parts) <= before:
            continue
        if kind == "2":
            i += 1  # a rename's original path follows in its own field
        code = {"?": "??", "!": "!!"}.get(kind) or parts[1].replace(".", " ")
        entries.append((parts[before], code))
        if kind == "1" and parts[1][:1] == "." and parts[1][1:] in ("M", "T", "D") and parts[2] == "N...":
            plain_changes.add(parts[before])
        elif kind == "?":
            untracked.add(parts[before])
    others = {path for path, code in entries if code != "??"}
    return head, entries, plain_changes | (untracked - others)


async def pending_changes(path: Path, extra_env: Mapping[str, str] | None = None) -> list[tuple[str, str]]:
    """(path, two-letter status code) of every change not committed yet in the checkout at `path`, untracked files
    included, the never-committed paths left out."""
    status = await git_text(
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


async def _head_and_short(path: Path, branch: str = "", said: str = "") -> tuple[str, str]:
    """The commit HEAD names and its short form (`rev-parse --short`). Just after a commit on `branch` that `git
    commit` reported as `said` ("[<branch> <short>] <title>"), read from that and the git files; else asked of git
    in one call."""
    head = head_commit_from_files(path) if branch else None
    first = said.partition("\n")[0]
    for opening in (f"[{branch} ", f"[{branch} (root-commit) "):
        short = first.removeprefix(opening).partition("] ")[0] if first.startswith(opening) else ""
        if head is not None and _SHORT_ID.fullmatch(short) and head.startswith(short):
            return head, short
    full, _, short = (await git_text("rev-parse", "HEAD^{commit}", "--short", "HEAD^{commit}", cwd=path)).partition(
        "\n"
    )
    full, short = full.strip(), short.strip()
    if not short or not full.startswith(short):  # HEAD moved between the two: the short form of the first
        short = (await git_text("rev-parse", "--short", full, cwd=path)).strip()
    return full, short


_SHORT_ID = re.compile(r"[0-9a-f]{4,64}")


def _changed_files(text: str) -> tuple[list[tuple[str, str]], dict[str, str], list[str], str]:
    """From `git diff --raw --numstat --stat -z --no-abbrev --no-renames`: (status letter, path) of every changed
    path, as `--name-status` says it; path → new blob of those added or changed (status A or M); the binary ones
    (numstat `-` `-`); the `--stat` text (what follows the last NUL: git writes it last, with its own newlines)."""
    fields = text.split("\0")
    diffstat = fields.pop().rstrip() if len(fields) > 1 else ""
    changes: list[tuple[str, str]] = []
    blobs: dict[str, str] = {}
    binary: list[str] = []
    i = 0
    while i < len(fields):
        item = fields[i]
        if item.startswith(":") and i + 1 < len(fields):  # `:mode mode sha sha status`, then the path
            meta, path = item.split(), fields[i + 1]
            changes.append((meta[4][:1] if len(meta) >= 5 else "", path))
            if len(meta) >= 5 and meta[4] in ("A", "M"):
                blobs[path] = meta[3]
            i += 2
            continue
        if item.startswith("-\t-\t"):  # `added<TAB>deleted<TAB>path`: `-` counts for a binary file
            binary.append(item.split("\t", 2)[2])
        i += 1
    return changes, blobs, binary, diffstat


async def _large(cwd: Path, blobs: dict[str, str], limits: CommitLimits) -> list[tuple[str, int]]:
    """The files among `blobs` (path → blob) of `limits.large_file_bytes` or more, with their size."""
    sizes = await blob_sizes(cwd, list(blobs.values()))
    return sorted(
        (path, sizes.get(blob, 0)) for path, blob in blobs.items() if sizes.get(blob, 0) >= limits.large_file_bytes
    )


async def blob_sizes(cwd: Path, blobs: list[str]) -> dict[str, int]:
    """blob → size; read from the headers of loose objects (what the bot's own commits and `git add` write), asked
    of git (`cat-file --batch-check`) for the rest."""
    dirs = git_dirs(Path(cwd))
    known: dict[str, int] = {}
    for blob in blobs if dirs is not None else ():
        found = loose_object_header(dirs[1], blob) if dirs is not None else None
        if found is not None:
            known[blob] = found[1]
    rest = [blob for blob in blobs if blob not in known]
    if rest:
        known.update({name: size for name, (_, size) in (await object_sizes(cwd, rest)).items()})
    return known
