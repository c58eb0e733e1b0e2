"""The project folders and git: the git binary and the identity the bot commits as, WORKSPACE_PATH's folders,
BOT_REPOSITORY (the workspace `self`).
"""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path

from agents.core.settings import Settings
from agents.doctor.checks import Check, Level
from agents.git.command import GitError, run_git
from agents.workspaces.folders import Workspaces

GIT_TIMEOUT_SECONDS = 5.0


async def _git(*args: str, cwd: Path | None = None) -> tuple[int, str]:
    """(exit code, stdout or stderr) of `git <args>` through the bot's one hardened git command; (127, reason) when git
    cannot run, (124, …) on a timeout."""
    try:
        result = await run_git(*args, cwd=cwd or Path.cwd(), timeout=GIT_TIMEOUT_SECONDS)
    except GitError as err:
        return (124 if "timed out" in str(err) else 127), str(err)
    text = result.stdout if result.exit_code == 0 else result.stderr
    return result.exit_code, text.strip()


async def _repository_root(path: Path) -> Path | None:
    code, out = await _git("rev-parse", "--show-toplevel", cwd=path)
    return Path(out).resolve() if code == 0 and out else None


async def check_git(settings: Settings) -> list[Check]:
    """The git binary, and the identity the bot commits under (always set: from settings, with defaults)."""
    identity = Check(
        Level.ok,
        "git identity",
        f"the bot commits as {settings.commits.git_author_name} <{settings.commits.git_author_email}> "
        "(GIT_AUTHOR_NAME / GIT_AUTHOR_EMAIL)",
    )
    if shutil.which("git") is None:
        return [Check(Level.fail, "git", "not found on PATH", "install git (apt install git)"), identity]
    code, version = await _git("--version")
    if code != 0:
        return [Check(Level.fail, "git", f"`git --version` failed: {version}", "reinstall git"), identity]
    return [Check(Level.ok, "git", version), identity]


async def check_workspaces(settings: Settings) -> list[Check]:
    """WORKSPACE_PATH exists; each project folder in it is a git repository (others are initialised when needed)."""
    root = Path(settings.paths.workspace_path).expanduser()
    if not root.is_dir():
        what = "is not a folder" if root.exists() else "does not exist"
        return [
            Check(
                Level.fail,
                "workspaces",
                f"WORKSPACE_PATH {root} {what}",
                f"mkdir -p {root} and clone your repositories into it, or point WORKSPACE_PATH at such a folder",
            )
        ]
    folders = [w for w in Workspaces(root, private=settings.paths.private_dirs).all() if not w.is_self]
    if not folders:
        return [
            Check(
                Level.warn,
                "workspaces",
                f"{root} has no project folders yet",
                f"clone a repository into {root} (each sub-folder is a workspace)",
            )
        ]
    roots = await asyncio.gather(*(_repository_root(w.path) for w in folders))
    repos = [w.name for w, top in zip(folders, roots) if top == w.path]
    checks = [
        Check(
            Level.ok,
            "workspaces",
            f"{root}: {len(repos)} git repositor{'y' if len(repos) == 1 else 'ies'}"
            + (f" ({', '.join(repos)})" if repos else ""),
        )
    ]
    for workspace, top in zip(folders, roots):
        if top is None:
            checks.append(
                Check(
                    Level.warn,
                    f"workspace {workspace.name}",
                    "not a git repository",
                    "the bot runs `git init` and commits the files when a task needs it; "
                    f"or run it yourself: git -C {workspace.path} init",
                )
            )
        elif top != workspace.path:
            checks.append(
                Check(
                    Level.warn,
                    f"workspace {workspace.name}",
                    f"inside the git repository {top}",
                    "tasks will branch and commit in that enclosing repository; "
                    "make the folder a repository of its own if that is not what you want",
                )
            )
    return checks


async def check_bot_repository(settings: Settings) -> Check | None:
    """BOT_REPOSITORY (optional) is a git checkout: the workspace `self`."""
    if settings.paths.bot_repository is None:
        return Check(Level.ok, "BOT_REPOSITORY", "off (unset: no workspace `self`, the bot does not work on itself)")
    path = Path(settings.paths.bot_repository).expanduser()
    if not path.is_dir():
        return Check(
            Level.fail,
            "BOT_REPOSITORY",
            f"{path} is not a folder",
            "point BOT_REPOSITORY at this agentlab checkout, or leave it empty",
        )
    top = await _repository_root(path)
    if top is None:
        return Check(
            Level.fail,
            "BOT_REPOSITORY",
            f"{path} is not a git repository",
            "point BOT_REPOSITORY at a git checkout of agentlab (git clone …), or leave it empty",
        )
    return Check(Level.ok, "BOT_REPOSITORY", f"{top} is a git repository (the workspace `self`)")
