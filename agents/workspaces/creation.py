"""Making a new workspace: a validated folder name under WORKSPACE_PATH, initialised as a git repository."""

from __future__ import annotations

import asyncio
import os
import re
import shutil
from pathlib import Path

from agents.core.errors import ToolError
from agents.git.command import GitIdentity, git_env
from agents.git.repository import ensure_repository
from agents.sandbox.reaping import reaped_on_failure
from agents.workspaces.folders import SELF_NAME, Workspace, Workspaces

_NAME = re.compile(r"[a-z0-9][a-z0-9_-]{0,62}")
INIT_SECONDS = 30.0


def workspace_name(name: str) -> str:
    """The folder name for a new project, or a ToolError saying what a name may be ('My Site' → 'my-site')."""
    cleaned = "-".join(str(name).strip().lower().split())
    if not _NAME.fullmatch(cleaned) or cleaned.endswith((".", "-")) or cleaned == SELF_NAME:
        raise ToolError(
            f"{name!r} cannot be a workspace name: use 1-63 letters, digits, '-' or '_', starting with a "
            f"letter or digit (and not {SELF_NAME!r})"
        )
    return cleaned


async def create_workspace(workspaces: Workspaces, name: str, identity: GitIdentity) -> Workspace:
    folder = workspace_name(name)
    root = workspaces.root.resolve()
    target = root / folder
    if (clash := workspaces.clashes_with(folder)) is not None:
        # a name the tolerant matching takes for another workspace would take its spoken names over (or make them
        # ambiguous): `group_therapy` beside `group-therapy`, `the-bot` for `self`
        taken = (
            f"a workspace named {folder!r} already exists"
            if clash == folder
            else f"{folder!r} would be taken for the workspace {clash} (names match ignoring case, spaces, - and _)"
        )
        raise ToolError(f"{taken}; use it, or pick another name")
    if workspaces.overlaps_private(target):
        # the bot's data or task worktrees folder (made later, beside the data folder): as a workspace, every chat's
        # database and checkouts would be in it
        raise ToolError(f"{folder!r} is the bot's own data folder (every chat's files); pick another name")
    if os.path.lexists(target):  # a link counts too, even a dangling one: nothing is made where it points
        raise ToolError(f"{folder!r} is taken in the workspaces folder by something that is no workspace; pick another")
    if not root.is_dir():
        raise ToolError(f"the workspaces folder {root} does not exist")
    target.mkdir()
    try:
        await _initialise(target, folder, identity)
    except BaseException:
        # Half made, it was no repository, and it took the name: a second try was refused ("already exists").
        shutil.rmtree(target, ignore_errors=True)
        raise
    return Workspace(folder, target)


async def _initialise(target: Path, folder: str, identity: GitIdentity) -> None:
    """`git init` in the new folder (its own repository even when WORKSPACE_PATH itself lies inside one), then an
    initial commit. `git init` gets the environment of the bot's other git commands (no secrets, no user config)."""
    git = await asyncio.create_subprocess_exec(
        "git",
        "init",
        "-q",
        "-b",
        "main",
        cwd=target,
        env=git_env(identity),
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
    )
    async with reaped_on_failure(git), asyncio.timeout(INIT_SECONDS):
        _, err = await git.communicate()
    if git.returncode != 0:
        raise ToolError(f"git init failed in {folder}: {err.decode(errors='replace').strip()[:300]}")
    await ensure_repository(target, identity)
