"""The bot's own data inside its checkout is out of every file tool's reach: attacks through the real bot.

The bot runs as the README runs it, from its own checkout (BOT_REPOSITORY, the workspace `self`), its database at
the default `data/agentlab.db` inside that checkout and the task worktrees beside it in `data-worktrees/` (both
gitignored, as in the real repository). Every chat's attachments, stored messages and unmerged task work lie there:
an owner's turn in a group (its answer read by members; the scripted model as hostile as a real one could be) or an
owner's research task on `self` reads, lists and searches that data through `self`, and nothing of it comes back.
"""

from __future__ import annotations

import hashlib
import shutil
import sys
import threading
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from agents.core.models import Caller
from tests.conftest import BotHarness, git, running_bot
from tests.fakes import anthropic_server as claude_says
from tests.fakes.anthropic_server import FakeAnthropic
from tests.fakes.telegram_server import FakeTelegram
from tests.scripted import RoleScript
from tests.support.tasks import ended, until
from tests.support.tasks import tool_results as worker_results
from tests.support.team import GROUP, HANG_GUARD, MEMBER, OTHER_MEMBER, OWNER, said, team_turn, tool_results

pytestmark = [
    pytest.mark.skipif(
        shutil.which("bwrap") is None or not sys.platform.startswith("linux"),
        reason="bubblewrap (bwrap) is not installed",
    ),
    pytest.mark.quick_tests,
]

REFUSED = "the bot's own data"


@pytest.fixture
async def home_bot(
    fake_telegram: FakeTelegram, fake_anthropic: FakeAnthropic, tmp_path: Path, workspace_root: Path, bot_repo: Path
) -> AsyncIterator[BotHarness]:
    """The bot in its own checkout with its data there (see the module docstring): one owner, two members, a forum
    group."""
    (bot_repo / ".gitignore").write_text("data/\ndata-worktrees/\n.venv/\n")
    git(bot_repo, "add", ".gitignore")
    git(bot_repo, "commit", "-q", "-m", "ignore the bot's data")
    fake_telegram.make_forum(GROUP)
    async with running_bot(
        fake_telegram,
        fake_anthropic,
        tmp_path,
        workspace_root,
        bot_repo,
        allowed_user_ids=f"{OWNER},{MEMBER},{OTHER_MEMBER}",
        owner_user_ids=str(OWNER),
        database_path=bot_repo / "data" / "agentlab.db",
    ) as harness:
        yield harness


async def private_document(bot: BotHarness, model: RoleScript, user: int, data: bytes, name: str) -> str:
    """`user` sends a text file in their private chat and the orchestrator answers it: where it is stored, relative
    to the bot's checkout."""
    marker = f"GOT-FILE-{len(model.requests['orchestrator'])}"
    model.add("orchestrator", claude_says.text(marker))
    bot.tg.send_document(user, data, name, mime="text/plain", caption="my server log")
    await bot.tg.await_for(lambda: said(bot, user, marker), timeout=HANG_GUARD)
    relative = f"data/attachments/{user}/{hashlib.sha256(data).hexdigest()[:32]}{Path(name).suffix}"
    assert (bot.settings.paths.bot_repository / relative).is_file(), relative
    return relative


async def test_a_group_turn_reads_no_other_chats_attachment_through_self(
    home_bot: BotHarness, model: RoleScript
) -> None:
    """A member's private file lands in data/attachments/<member>/; the owner's group turn looks for it in `self`."""
    secret = "MEMBER-PRIVATE-ATTACHMENT-7731"
    relative = await private_document(home_bot, model, MEMBER, f"db password: {secret}\n".encode(), "server.log")

    last = await team_turn(
        home_bot,
        model,
        [
            claude_says.tool_use("read_file", {"workspace": "self", "path": relative}),
            claude_says.tool_use("grep", {"workspace": "self", "pattern": "MEMBER-PRIVATE", "path": "data"}),
            claude_says.tool_use("grep", {"workspace": "self", "pattern": "MEMBER-PRIVATE"}),
            claude_says.tool_use("glob", {"workspace": "self", "pattern": "data/**"}),
            claude_says.tool_use("glob", {"workspace": "self", "pattern": "**/*.log"}),
        ],
        chat=GROUP,
        user=OWNER,
        words="what is in your data folder?",
    )
    results = tool_results(last)
    leaked = [r[:300] for r in results if secret in r or f"attachments/{MEMBER}" in r]
    assert not leaked, f"a group turn read another chat's attachment through `self`: {leaked}"
    assert REFUSED in results[0] and REFUSED in results[1] and REFUSED in results[3], results


async def test_a_group_turn_reads_no_stored_messages_from_the_database_through_self(
    home_bot: BotHarness, model: RoleScript
) -> None:
    """The member's private words are stored in data/agentlab.db (and its WAL) inside `self`."""
    secret = "MEMBER-PRIVATE-WORDS-5519"
    marker = "PRIVATE-ANSWERED"
    model.add("orchestrator", claude_says.text(marker))
    home_bot.tg.send_text(MEMBER, f"my bank pin is {secret}", username="mia")
    await home_bot.tg.await_for(lambda: said(home_bot, MEMBER, marker), timeout=HANG_GUARD)

    looks = [
        claude_says.tool_use(tool, {"workspace": "self", "path": path, **({"pattern": "MEMBER"} if grep else {})})
        for path in ("data/agentlab.db", "data/agentlab.db-wal")
        for tool, grep in (("grep", True), ("read_file", False))
    ]
    last = await team_turn(home_bot, model, looks, chat=GROUP, user=OWNER, words="look at your database")
    results = tool_results(last)
    assert not [r[:300] for r in results if secret in r], results
    assert all(REFUSED in r for r in results), results


async def test_a_group_turn_reads_no_other_chats_task_worktree_through_self(
    home_bot: BotHarness, model: RoleScript
) -> None:
    """A member's running task in their private chat has unmerged work in its worktree in data-worktrees/, inside
    the bot's checkout; the owner's group turn looks there through `self`."""
    secret = "MEMBER-PRIVATE-WORK-3307"
    release = threading.Event()

    def held(_body: dict[str, Any]) -> dict[str, Any]:  # the worker's turn waits while the owner looks
        release.wait(HANG_GUARD)
        return claude_says.text("Fixed add().")

    model.add(
        "code",
        claude_says.tool_use("edit_file", {"path": "calc.py", "old": "a - b", "new": f"a + b  # {secret}"}),
        held,
    )
    member = Caller(chat_id=MEMBER, user_id=MEMBER, user_name="mia")
    await home_bot.runtime.crew.races.start_task(member, "calc", "code", "fix add", True)
    paths = home_bot.settings.paths
    assert paths.bot_repository is not None and paths.worktrees_dir.is_relative_to(paths.bot_repository)

    async def edited() -> list[Path]:
        return [p for p in paths.worktrees_dir.rglob("calc.py") if secret in p.read_text()]

    try:
        relative = (await until(edited))[0].relative_to(paths.bot_repository).as_posix()
        last = await team_turn(
            home_bot,
            model,
            [
                claude_says.tool_use("glob", {"workspace": "self", "pattern": "data-worktrees/**/calc.py"}),
                claude_says.tool_use("glob", {"workspace": "self", "pattern": "**/calc.py"}),
                claude_says.tool_use("read_file", {"workspace": "self", "path": relative}),
                claude_says.tool_use("grep", {"workspace": "self", "pattern": "MEMBER-PRIVATE-WORK", "path": "."}),
            ],
            chat=GROUP,
            user=OWNER,
            words="what are the others working on?",
        )
    finally:
        release.set()
    await ended(home_bot, 1, timeout=90)
    results = tool_results(last)
    assert not [r[:300] for r in results if secret in r or "data-worktrees/" in r], results
    assert REFUSED in results[0] and REFUSED in results[2], results


async def test_a_research_task_on_self_reads_no_other_chats_attachment(home_bot: BotHarness, model: RoleScript) -> None:
    """An owner's research on `self` started in the group: its worker's file tools work on the live checkout (no
    worktree), so data/ must be out of its reach too (its proposal is shown in the group)."""
    secret = "MEMBER-PRIVATE-ATTACHMENT-8812"
    relative = await private_document(home_bot, model, MEMBER, f"customers: {secret}\n".encode(), "customers.txt")
    model.add(
        "research",
        claude_says.tool_use("glob", {"pattern": "data/**"}),
        claude_says.tool_use("glob", {"pattern": "**/*.txt"}),
        claude_says.tool_use("read_file", {"path": relative}),
        claude_says.tool_use("grep", {"pattern": "MEMBER-PRIVATE", "path": "data"}),
        claude_says.tool_use("grep", {"pattern": "MEMBER-PRIVATE"}),
        claude_says.text("## Summary\nNothing.\n\n## Plan\n1. Nothing."),
    )
    owner = Caller(chat_id=GROUP, user_id=OWNER, user_name="boss")
    await home_bot.runtime.crew.starts.start_research(owner, "self", "look around")
    await ended(home_bot, 1, timeout=90)
    results = worker_results(model, "research")
    leaked = [r[:300] for r in results if secret in r or f"attachments/{MEMBER}/" in r]
    assert not leaked, f"a research worker on `self` read another chat's attachment: {leaked}"
    assert REFUSED in results[0], results  # the three refusals read alike: tool_results keeps one
