"""A workspace put on the fake GitHub (a bare `origin` and `[github] repository`), what a GitHub flow left behind,
kept for the record (the chat's messages and the fake GitHub's state), and a stand-in for a git host that is not
GitHub, which records the headers of what reaches it."""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from tests.conftest import USER_ID, BotHarness, git
from tests.fakes.github_server import FakeGitHub


def transcript(name: str, bot: BotHarness, fake: FakeGitHub, chats: tuple[int, ...] = (USER_ID,)) -> None:
    """Keep the flow's chat messages and GitHub's state in GITHUB_TRANSCRIPTS/<name>.txt (for the record)."""
    folder = os.environ.get("GITHUB_TRANSCRIPTS")
    if not folder:
        return
    lines = []
    for chat in chats:
        for m in bot.tg.messages(chat):
            buttons = " ".join(f"[{b}]" for b in m.callback_data)
            lines.append(f"bot → chat {chat}: {(m.text or m.caption or '').strip()} {buttons}".rstrip())
    for repo in fake.repos.values():
        for number, pull in repo.pulls.items():
            lines.append(
                f"GitHub {repo.full_name} PR #{number} draft={pull.draft} readied={pull.readied} "
                f"title={pull.title!r}\n{pull.body}"
            )
        for number, body in repo.comments:
            lines.append(f"GitHub {repo.full_name} #{number} comment:\n{body}")
    Path(folder).mkdir(parents=True, exist_ok=True)
    (Path(folder) / f"{name}.txt").write_text("\n".join(lines) + "\n")


class _OtherHost(ThreadingHTTPServer):
    daemon_threads = True
    seen: list[dict[str, str]]


class _Recording(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.0"
    server: _OtherHost

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002  (the base class's name)
        pass

    def _refuse(self) -> None:
        self.server.seen.append({"path": self.path, **{k.lower(): v for k, v in self.headers.items()}})
        self.send_response(404)
        self.send_header("content-length", "0")
        self.end_headers()

    do_GET = do_POST = _refuse  # noqa: N815


@contextlib.contextmanager
def other_git_host() -> Iterator[_OtherHost]:
    """An HTTP server on loopback standing in for a git host that is not GitHub (a mirror, a GitLab): it answers
    every request 404 and keeps each one's path and headers in `.seen`."""
    server = _OtherHost(("127.0.0.1", 0), _Recording)
    server.seen = []
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


def on_github(workspace: Path, full_name: str, fake: FakeGitHub) -> Path:
    """`workspace` gets `[github] repository` in its tracked .agentlab.toml (after what it holds: calc's quick
    [tests]) and a bare repository as `origin`."""
    config = workspace / ".agentlab.toml"
    held = config.read_text() if config.exists() else ""
    config.write_text(f'{held}[github]\nrepository = "{full_name}"\n')
    git(workspace, "add", ".agentlab.toml")
    git(workspace, "commit", "-q", "-m", "on GitHub")
    origin = workspace.parent.parent / f"{workspace.name}-origin.git"
    git(workspace.parent, "clone", "-q", "--bare", str(workspace), str(origin))
    git(workspace, "remote", "add", "origin", str(origin))
    fake.add_repo(full_name, origin)
    return origin
