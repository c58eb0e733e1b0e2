"""A team for end-to-end tests: one owner and two members of the bot, and a forum supergroup they share."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tests.conftest import USER_ID, BotHarness, running_bot
from tests.fakes.anthropic_server import FakeAnthropic
from tests.fakes.telegram_server import FakeTelegram

OWNER = USER_ID
MEMBER = 2002
OTHER_MEMBER = 2003
GROUP = -1009000


@pytest.fixture
async def team(
    fake_telegram: FakeTelegram, fake_anthropic: FakeAnthropic, tmp_path: Path, workspace_root: Path, bot_repo: Path
) -> AsyncIterator[BotHarness]:
    """The bot with one owner and two members, SANDBOX_NETWORK=ask (30 s to answer); a forum supergroup, GROUP."""
    fake_telegram.make_forum(GROUP)
    async with running_bot(
        fake_telegram,
        fake_anthropic,
        tmp_path,
        workspace_root,
        bot_repo,
        allowed_user_ids=f"{OWNER},{MEMBER},{OTHER_MEMBER}",
        owner_user_ids=str(OWNER),
        sandbox_network="ask",
        sandbox_network_answer_seconds=30,
    ) as harness:
        yield harness
