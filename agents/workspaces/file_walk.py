"""The one file walker of the product: which files of a folder count, as git sees them.

In a git work tree that is `git ls-files -cot --exclude-standard` (tracked files plus untracked ones `.gitignore`
does not exclude); untracked files inside a virtualenv (a folder holding `pyvenv.cfg`) or inside one of `SKIP_DIRS`
are left out, so a copied `venv/` nobody ignored does not flood the list. A folder that is not in git is walked
with the same skips. Symlinks are never followed. Paths are relative, with `/` separators, sorted.

`read_only_git` runs the read-only git calls of the index (ls-files, rev-parse, diff, log) through
`run_git`, the product's one hardened git command (no hooks, fsmonitor or drivers; timeout, group kill).
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable, Iterator
from pathlib import Path

from agents.git.command import GitError, run_git
from agents.sandbox.safe_paths import open_folder

SKIP_DIRS = frozenset(
    {".git", "node_modules", ".venv", "__pycache__", ".mypy_cache", ".pytest_cache", ".ruff_cache", ".tox"}
)
VIRTUALENV_MARKER = "pyvenv.cfg"
# folders below this many levels are not entered: no source tree is that deep, and os.fwalk recurses (and holds a
# descriptor) per level, so a worker's `mkdir -p d/d/…` 1,400 deep made every walk of its worktree raise RecursionError
WALK_DEPTH = 100
GIT_TIMEOUT_S = 30.0
# Hooks and fsmonitor are programs a repository can name; a read-only listing never runs them.
_GIT_OPTIONS = ("-c", "core.hooksPath=/dev/null", "-c", "core.fsmonitor=", "-c", "core.quotepath=off")


async def read_only_git(root: Path, *args: str, timeout: float = GIT_TIMEOUT_S) -> str | None:
    """stdout of `git <args>` run in `root` through the product's one hardened git command, or None (not a
    repository, git missing, an error, a timeout). Optional locks are off: a listing never takes index.lock."""
    try:
        result = await run_git(
            "-c",
            "core.quotepath=off",
            *args,
            cwd=Path(root),
            timeout=timeout,
            extra_env={"GIT_OPTIONAL_LOCKS": "0", "LC_ALL": "C"},
        )
    except (GitError, OSError):
        return None
    return result.stdout if result.exit_code == 0 else None


async def list_files(root: Path) -> list[str]:
    """The files of `root` that count (see the module docstring): relative `/` paths, sorted."""
    root = Path(root)
    # One listing, tracked and untracked together, each path tagged ("? " untracked, "H "/"S "/"M " tracked); it
    # fails outside a work tree (no repository, a bare one, inside `.git`), where the folder is walked instead.
    listed = await read_only_git(root, "ls-files", "-c", "-o", "--exclude-standard", "-t", "-z", "--", ".")
    if listed is None:
        return await asyncio.to_thread(walk_files, root)
    files: set[str] = set()  # relative to `root`, tracked and untracked alike
    untracked: list[str] = []
    for entry in listed.split("\0"):
        tag, path = entry[:2], entry[2:]
        if not path:
            continue
        if tag == "? ":
            untracked.append(path)
        else:
            files.add(path)
    files.update(_keep_untracked(untracked))
    return sorted(files)


def _keep_untracked(paths: list[str]) -> list[str]:
    """Untracked paths minus those in a virtualenv or a skipped folder."""
    virtualenvs = {
        p[: -len(VIRTUALENV_MARKER)] for p in paths if p == VIRTUALENV_MARKER or p.endswith("/" + VIRTUALENV_MARKER)
    }
    kept = []
    for path in paths:
        folders = path.split("/")[:-1]
        if any(part in SKIP_DIRS for part in folders):
            continue
        if virtualenvs and any(path.startswith(venv) for venv in virtualenvs):
            continue
        kept.append(path)
    return kept


def walk_tree(
    start: Path, skip: Callable[[str], bool] | None = None, *, root: Path | None = None
) -> Iterator[tuple[Path, list[str], list[str]]]:
    """`os.walk` top-down with names sorted, never following a symlinked folder, never descending into `SKIP_DIRS`,
    a virtualenv below `start` (a folder holding `pyvenv.cfg`), a folder `skip` names, or one WALK_DEPTH levels
    down. As with `os.walk`, a caller may prune `dirs` further in place. `files` lists what is not a folder (links to
    files, broken links too).

    Walked through directory fds (`os.fwalk`): a folder swapped for a symlink after it was listed is not entered,
    whatever the timing. With `root` (a trusted folder `start` lies in), the way from `root` down to `start` is
    opened with no symlink followed too; a link there (a race with a worker's process) walks nothing."""
    try:
        if root is None:
            fd = os.open(start, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        else:
            with open_folder(root, start.relative_to(root)) as folder:
                fd = os.dup(folder)
    except (OSError, ValueError):  # as os.walk: a folder that cannot be listed yields nothing
        return
    yield from _walk_from(start, fd, skip)


def _walk_from(start: Path, fd: int, skip: Callable[[str], bool] | None) -> Iterator[tuple[Path, list[str], list[str]]]:
    """`walk_tree` below the open folder `fd` (closed here), the paths named as below `start`."""
    try:
        walked = os.fwalk(".", dir_fd=fd, follow_symlinks=False)
        for folder, dirs, files, _fd in walked:
            here = start / folder
            if VIRTUALENV_MARKER in files and here != start:
                dirs.clear()
                continue
            if folder.count("/") >= WALK_DEPTH:
                dirs.clear()
            dirs[:] = sorted(d for d in dirs if d not in SKIP_DIRS and not (skip and skip(d)))
            files.sort()
            yield here, dirs, files
    finally:
        os.close(fd)


def walk_files(root: Path) -> list[str]:
    """Every file under `root` (`walk_tree`, links left out), relative and sorted: the listing where git is absent."""
    found: list[str] = []
    for folder, _dirs, files in walk_tree(root):
        prefix = "" if folder == root else folder.relative_to(root).as_posix() + "/"
        found += [prefix + name for name in files if not (folder / name).is_symlink()]
    return sorted(found)
