"""What a GitHub flow left behind, kept for the record: the chat's messages and the fake GitHub's state."""

from __future__ import annotations

import os
from pathlib import Path

from tests.conftest import USER_ID, BotHarness
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
