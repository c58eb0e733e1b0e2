"""What a task's checkout holds, as one comparable value: its HEAD commit plus every file git does not have there
as committed (changed, untracked, ignored: the files the commit limits left out, a gitignored settings file, what a
test run wrote), each with its size and modification time.

Two equal states mean the same files with the same contents as far as the tests can tell, so a second test run
would run the same code on the same inputs: the bot's checks use it to skip re-running the tests when a worker's
correction turn changed nothing (agents/verify/task_tests.py)."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

from agents.git.command import GitError, git_text

CheckoutState = tuple[str, tuple[tuple[str, int, int], ...]]


async def checkout_state(checkout: Path) -> CheckoutState | None:
    """The state of `checkout` (HEAD and each file outside it with size and mtime); None when git cannot say."""
    try:
        head = (await git_text("rev-parse", "--verify", "-q", "HEAD", cwd=checkout)).strip()
        listing = await git_text(  # no index refresh written: nothing here takes the checkout's index.lock
            "status",
            "--porcelain=v1",
            "-z",
            "--no-renames",
            "--ignored",
            "--untracked-files=all",
            cwd=checkout,
            extra_env={"GIT_OPTIONAL_LOCKS": "0"},
        )
    except GitError:
        return None
    paths = sorted({entry[3:] for entry in listing.split("\0") if len(entry) > 3})
    return head, await asyncio.to_thread(_stats, checkout, paths)


def _stats(checkout: Path, paths: list[str]) -> tuple[tuple[str, int, int], ...]:
    found = []
    for path in paths:
        try:
            stat = os.lstat(checkout / path)  # a link as itself: the bot's borrowed folders are links
        except OSError:
            found.append((path, -1, -1))  # deleted: still a difference from a state where it existed
            continue
        found.append((path, stat.st_size, stat.st_mtime_ns))
    return tuple(found)
