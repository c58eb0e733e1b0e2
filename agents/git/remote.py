"""A task branch between machines: a runner pushes it to the workspace's shared remote, the bot fetches it.

Through the one hardened git command, so nothing a worker planted in `.git` runs here either; the remote is reached
with the machine's own SSH set-up (`ssh`, or `GIT_SSH_COMMAND` from the environment) or a local path / `file://` URL
(a bare repository both machines reach). HTTPS credential helpers stay off, as in every git call of the bot.
"""

from __future__ import annotations

import base64
import os
from pathlib import Path

from agents.git.command import GitError, GitIdentity, git_text, run_git
from agents.git.locks import bot_writes

REMOTE_TIMEOUT_SECONDS = 300.0


def _remote_env() -> dict[str, str]:
    return {"GIT_SSH_COMMAND": os.environ.get("GIT_SSH_COMMAND", "ssh")}


# A remote that is a local path or a `file://` URL (a bare repository both machines reach): every other git call of
# the bot refuses that transport (agents/git/command.py), these run in the owner's checkout or a runner's clone
LOCAL_PATHS = ("-c", "protocol.file.allow=always")


async def has_remote(repo: Path, remote: str) -> bool:
    return (await run_git("remote", "get-url", remote, cwd=repo)).exit_code == 0


async def _remote_git(
    repo: Path, *args: str, identity: GitIdentity | None = None, env: dict[str, str] | None = None
) -> str:
    """`git <args>` in `repo` reaching a remote: local paths allowed, the machine's SSH, the remote's own time."""
    return await git_text(
        *LOCAL_PATHS,
        *args,
        cwd=repo,
        identity=identity,
        timeout=REMOTE_TIMEOUT_SECONDS,
        extra_env={**_remote_env(), **(env or {})},
    )


async def _has_branch(repo: Path, remote: str, branch: str) -> bool:
    listed = await _remote_git(repo, "ls-remote", "--heads", remote, branch)
    return any(line.split("\t")[-1] == f"refs/heads/{branch}" for line in listed.splitlines())


async def push_branch(repo: Path, branch: str, remote: str) -> None:
    """Push `branch` to `remote` under the same name (forced: the task's branch is the runner's to move). Under the
    repository lock: the push moves the remote-tracking ref, which a running task's guard must not take for the
    worker's doing."""
    async with bot_writes(repo):
        await _remote_git(repo, "push", "--no-verify", "--force", remote, f"refs/heads/{branch}:refs/heads/{branch}")


async def fetch_branch(
    repo: Path, branch: str, remote: str, identity: GitIdentity | None = None, *, overwrite: bool = False
) -> bool:
    """Bring `remote`'s `branch` into the local branch of that name; False when the remote has no such branch.

    A local branch checked out in a worktree is never overwritten (git refuses); the bot's worktrees of remote tasks
    live on the runners, so there is none here. Only a fast-forward moves the local branch: in the owner's checkout
    it may hold commits of the owner's own, which a forced fetch would drop (GitError says so). `overwrite`: a
    runner's own clone, whose local branch is a copy of the remote's and nothing else.
    """
    if not await _has_branch(repo, remote, branch):
        return False
    refspec = f"{'+' if overwrite else ''}refs/heads/{branch}:refs/heads/{branch}"
    async with bot_writes(repo):
        try:
            await _remote_git(repo, "fetch", "--no-tags", remote, refspec, identity=identity)
        except GitError as err:
            if "non-fast-forward" not in str(err):
                raise
            raise GitError(
                f"the local branch {branch} holds commits the one on {remote} lacks (your own, perhaps): it was not "
                "overwritten; merge the two by hand"
            ) from None
    return True


async def delete_remote_branch(repo: Path, branch: str, remote: str) -> bool:
    """Delete `branch` on `remote` (a discarded task's branch a runner pushed); False when the remote has no such
    branch, or the clone no such remote."""
    if not await has_remote(repo, remote) or not await _has_branch(repo, remote, branch):
        return False
    await _remote_git(repo, "push", "--no-verify", remote, f":refs/heads/{branch}")
    return True


async def catch_up(repo: Path, remote: str) -> str | None:
    """A runner's clone before a task: fetch `remote` and fast-forward the checked-out branch to its upstream, so the
    task starts where the owner's shared branch is. Returns why it could not (the clone is then used as it is)."""
    try:
        async with bot_writes(repo):
            await _remote_git(repo, "fetch", "--no-tags", remote)
            upstream = await run_git("rev-parse", "--abbrev-ref", "--symbolic-full-name", "@{u}", cwd=repo)
            if upstream.exit_code != 0:
                return "its branch has no upstream"
            await git_text("merge", "--ff-only", "--no-edit", upstream.stdout.strip(), cwd=repo)
    except GitError as err:
        return str(err)
    return None


def token_header_env(token: str) -> dict[str, str]:
    """The environment of one git call that sends `token` as GitHub's HTTPS credentials: `http.extraHeader` through
    git's GIT_CONFIG_COUNT variables, so it is in no file (the repository's config, a credential store) and in no
    command line (which any process may read from /proc); only this git process and its children see it."""
    basic = base64.b64encode(f"x-access-token:{token}".encode()).decode()
    return {
        "GIT_CONFIG_COUNT": "1",
        "GIT_CONFIG_KEY_0": "http.extraHeader",
        "GIT_CONFIG_VALUE_0": f"Authorization: Basic {basic}",
    }


async def push_with_token(repo: Path, branch: str, url: str, token: str | None) -> None:
    """Push `branch` to `url` (a pull request's head) with the bot's GitHub token (None: without it, for a remote
    that is not GitHub's); never forced, so commits someone else pushed to the branch are not lost (the push then
    fails with git's reason)."""
    async with bot_writes(repo):
        refspec = f"refs/heads/{branch}:refs/heads/{branch}"
        await _remote_git(repo, "push", "--no-verify", url, refspec, env=token_header_env(token) if token else None)
