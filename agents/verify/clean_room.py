"""The clean room a verdict run tests in: a fresh copy of one commit's files in a folder of the bot's, never the
worker's worktree. Only committed content reaches it (no untracked file, cache or build output the worker left),
plus the borrowed folders (`.venv`, `node_modules`, linked from the owner's checkout) and the files the workspace's
`.agentlab.toml` keeps (`[tests] keep = [".env.test"]`, copied from the owner's checkout, which the worker cannot
reach). The base run and every run after the worker use one each; the folder goes when the run is over.

The network side of the room is the sandbox's: a verdict run's sandbox is not the task's (no task cgroup, no task
network namespace), so bwrap gives each run a network namespace of its own, with no task service in it.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import stat
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path

from agents.git.repository import export_tree
from agents.sandbox.temp_folders import remove_folder
from agents.verify.suite_env import TestEnvironment, link_borrowed
from agents.workspaces.folders import is_secret_file

MAX_KEPT_BYTES = 64 << 20  # what `keep` may copy into one room (a generated folder, not a dataset)


@contextlib.asynccontextmanager
async def clean_room(repo: Path, commit: str, env: TestEnvironment | None, folder: Path) -> AsyncIterator[Path]:
    """A fresh checkout of `commit` of `repo` under `folder` (its borrowed folders linked, its kept files copied),
    removed on exit."""
    folder.mkdir(parents=True, exist_ok=True)
    tree = Path(await asyncio.to_thread(tempfile.mkdtemp, prefix=f"room-{commit[:8]}-", dir=folder))
    try:
        await export_tree(repo, commit, tree)
        if env is not None:
            await asyncio.to_thread(_furnish, env, tree, Path(env.workspace or repo))
        yield tree
    finally:
        await asyncio.to_thread(remove_folder, tree)  # a commit may hold a tree deeper than rmtree's recursion


def _furnish(env: TestEnvironment, tree: Path, workspace: Path) -> None:
    copy_kept(env.keep, workspace, tree, credentials=env.keep_credentials)
    link_borrowed(env, tree)


def copy_kept(keep: tuple[str, ...], workspace: Path, tree: Path, *, credentials: bool = False) -> list[str]:
    """Copy each kept path of `workspace` that the commit lacks into `tree` (no path through a symlink; links inside
    a kept folder stay links; at most MAX_KEPT_BYTES in all; credential files inside a kept folder only with
    `credentials`: the list is the owner's). Returns what was copied."""
    copied: list[str] = []
    budget = MAX_KEPT_BYTES
    for rel in keep:
        source, target = workspace / rel, tree / rel
        if os.path.lexists(target) or not _plain_inside(workspace, rel):
            continue  # committed content wins; a path through a link is never followed
        try:
            info = source.lstat()
            if stat.S_ISREG(info.st_mode) and info.st_size <= budget:
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(source, target, follow_symlinks=False)
                budget -= info.st_size
            elif stat.S_ISDIR(info.st_mode) and (size := _size(source)) <= budget:
                shutil.copytree(source, target, symlinks=True, ignore=None if credentials else _credential_files)
                budget -= size
            else:
                continue
        except OSError:
            continue
        copied.append(rel)
    return copied


def _credential_files(_folder: str, names: list[str]) -> list[str]:
    return [name for name in names if is_secret_file(name)]


def _plain_inside(workspace: Path, rel: str) -> bool:
    """Every folder on the way to `rel` is a real folder of `workspace` (no symlink), and `rel` itself no link."""
    current = workspace
    for part in Path(rel).parts:
        current = current / part
        try:
            if stat.S_ISLNK(current.lstat().st_mode):
                return False
        except OSError:
            return False
    return True


def _size(folder: Path) -> int:
    total = 0
    for root, _dirs, files in os.walk(folder):
        for name in files:
            with contextlib.suppress(OSError):
                total += (Path(root) / name).lstat().st_size
    return total
