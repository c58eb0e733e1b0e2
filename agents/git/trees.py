"""What a commit holds, listed once: `git ls-tree -r` of a commit, kept for the next question about the same commit.

A task asks about its base commit's files several times before the worker starts: which credential files it holds
(agents/workspaces/credential_files.py), whether it has a test configuration (`repository.file_at`), which
instruction files it has (agents/work/repo_rules.py). A commit never changes, so one listing answers them all. It
is kept per repository (its shared git directory) and commit id, only where the git files say no object is replaced
(grafts, `refs/replace/`: then a commit id could name other content and git is asked every time), only for a
listing of moderate size, and only for the latest few commits.
"""

from __future__ import annotations

import re
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path

from agents.git.command import run_git, split_nul
from agents.git.ref_files import git_dirs, nothing_replaced

_KEPT = 8  # listings kept (the latest asked)
_MAX_KEPT_CHARS = 1024 * 1024  # a bigger listing (some 10,000 files) is not kept: asked of git each time
_COMMIT_ID = re.compile(r"[0-9a-f]{40}([0-9a-f]{24})?")


@dataclass(frozen=True)
class TreeEntry:
    """One entry of `git ls-tree -r`: mode, type (blob, commit for a submodule), object id, path."""

    mode: str
    kind: str
    object_id: str
    path: str


# (git directory, commit) → the commit's listing. Process-wide: a commit's tree never changes (a replaced object is
# asked again: see `_key`)
_listings: OrderedDict[tuple[str, str], tuple[TreeEntry, ...]] = OrderedDict()


def _key(checkout: Path, commit: str) -> tuple[str, str] | None:
    """Where a listing of `commit` in the work tree at `checkout` may be kept: (shared git directory, commit)."""
    dirs = git_dirs(Path(checkout)) if _COMMIT_ID.fullmatch(commit) else None
    if dirs is None or not nothing_replaced(dirs[1]):
        return None
    return str(dirs[1].resolve()), commit


async def tree_entries(checkout: Path, commit: str) -> tuple[TreeEntry, ...] | None:
    """Every file of `commit` (`git ls-tree -r --full-tree`, run in the work tree at `checkout`); None when git
    cannot list it (no such commit, say)."""
    key = _key(checkout, commit)
    if key is not None and (known := _listings.get(key)) is not None:
        _listings.move_to_end(key)
        return known
    out = await run_git("ls-tree", "-r", "-z", "--full-tree", commit, cwd=Path(checkout))
    if out.exit_code != 0:
        return None
    entries = []
    for item in split_nul(out.stdout):
        meta, _, path = item.partition("\t")
        parts = meta.split()
        if len(parts) == 3:
            entries.append(TreeEntry(parts[0], parts[1], parts[2], path))
    listing = tuple(entries)
    if key is not None and len(out.stdout) <= _MAX_KEPT_CHARS and key == _key(checkout, commit):
        _listings[key] = listing
        while len(_listings) > _KEPT:
            _listings.popitem(last=False)
    return listing


def known_absent(checkout: Path, commit: str, path: str) -> bool:
    """Whether a kept listing of `commit` shows that `path` (a plain relative path) is neither a file nor a folder
    there: then `git show <commit>:<path>` would fail, and need not run."""
    key = _key(checkout, commit)
    listing = _listings.get(key) if key is not None else None
    if listing is None or not _plain(path):
        return False
    folder = path + "/"
    return not any(entry.path == path or entry.path.startswith(folder) for entry in listing)


def _plain(path: str) -> bool:
    parts = path.split("/")
    return bool(path) and all(part not in ("", ".", "..") for part in parts)
