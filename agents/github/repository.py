"""Which GitHub repository a workspace is on, and where the bot pushes its task branches to.

A workspace's GitHub repository is its `origin` remote when that is a GitHub URL (`https://github.com/OWNER/NAME`,
`git@github.com:OWNER/NAME`, with or without `.git`; with GITHUB_API_URL naming GitHub Enterprise or a test server,
that server's host too), or else the `[github] repository = "OWNER/NAME"` of its `.agentlab.toml` (read from the
checked-out commit; the workspace's file only when it is untracked). The host is matched without regard to case, as
DNS does. A workspace with no `origin` at all is pushed to the repository its `.agentlab.toml` names only when that
file is the owner's own (untracked): a committed one is anyone's commit, and must never choose a repository the
bot's token then pushes a task's branch into (the owner's other, private repository).

The bot pushes to GitHub over HTTPS with its own token (a header in its own git call): a GitHub `origin` in any form
(SSH, `http://`, a URL with a user name in it) is pushed to through the HTTPS URL of the same repository on the GitHub
that GITHUB_API_URL names (the server the token is for), so the token never travels in clear text. An `origin` that is
not on GitHub (a local bare repository, a company mirror) is pushed to as it is, without the token: a GitHub token is
for GitHub, never for whichever host a repository's remote names (the push then uses what that machine's git has for
that host, or fails with git's reason).
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from agents.git.command import run_git
from agents.git.repository import file_at, is_tracked

CONFIG_FILE = ".agentlab.toml"
_NAME = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,38})/[A-Za-z0-9._-]{1,100}")


@dataclass(frozen=True)
class GitHubRepository:
    """A workspace's repository on GitHub: its `OWNER/NAME` and the URL the bot pushes task branches to."""

    full_name: str
    push_url: str
    on_github: bool = True  # push_url is GitHub's own: the only place the bot's token is sent

    @property
    def owner(self) -> str:
        return self.full_name.split("/", 1)[0]

    @property
    def name(self) -> str:
        return self.full_name.split("/", 1)[1]


def name_from_url(url: str, web_url: str = "https://github.com") -> str | None:
    """`OWNER/NAME` of a GitHub remote URL (HTTPS, `git@host:`, `ssh://git@host/`) on github.com or on the host of
    `web_url` (GitHub Enterprise, a test server), None for any other URL."""
    hosts = "|".join(re.escape(h) for h in dict.fromkeys(("github.com", urlsplit(web_url).hostname or "github.com")))
    url = url.strip()
    patterns = (
        rf"https?://(?:[^@/]+@)?(?i:{hosts})(?::\d+)?/(?P<repo>[^/]+/[^/]+?)(?:\.git)?/?",
        rf"(?:ssh://)?git@(?i:{hosts})[:/](?P<repo>[^/]+/[^/]+?)(?:\.git)?/?",
    )
    for pattern in patterns:
        match = re.fullmatch(pattern, url)
        if match and _NAME.fullmatch(match.group("repo")):
            return match.group("repo")
    return None


def name_from_config(text: str) -> str | None:
    """`[github] repository = "OWNER/NAME"` of an `.agentlab.toml` text; None when absent or malformed."""
    try:
        table = tomllib.loads(text).get("github")
    except tomllib.TOMLDecodeError:
        return None
    value = table.get("repository") if isinstance(table, dict) else None
    return value.strip() if isinstance(value, str) and _NAME.fullmatch(value.strip()) else None


async def _origin(path: Path) -> str | None:
    result = await run_git("remote", "get-url", "origin", cwd=path)
    return result.stdout.strip() or None if result.exit_code == 0 else None


async def _config_text(path: Path) -> tuple[str | None, bool]:
    """The `.agentlab.toml` text (the checked-out commit's, else the workspace's untracked file) and whether it is
    the owner's own (untracked: no commit, anyone's, wrote it)."""
    text = await file_at(path, "HEAD", CONFIG_FILE)
    if text is None and (path / CONFIG_FILE).is_file() and not await is_tracked(path, CONFIG_FILE):
        return (path / CONFIG_FILE).read_text(errors="replace"), True
    return text, False


async def github_repository(path: Path, web_url: str = "https://github.com") -> GitHubRepository | None:
    """The workspace's GitHub repository, or None when it is not on GitHub (see the module's docstring)."""
    origin = await _origin(path)
    web = web_url.rstrip("/")
    if origin is not None and (name := name_from_url(origin, web)) is not None:
        return GitHubRepository(name, f"{web}/{name}.git")
    text, owners = await _config_text(path)
    name = name_from_config(text) if text is not None else None
    if name is None:
        return None
    if origin is None:  # pushed to GitHub with the token: only where the owner's own file says so
        return GitHubRepository(name, f"{web}/{name}.git") if owners else None
    return GitHubRepository(name, origin, on_github=False)
