"""A team for end-to-end tests: one owner and two members of the bot, and a forum supergroup they share; a turn of
one of them whose model makes the calls a test scripts (a hostile model), and what those calls answered."""

from __future__ import annotations

import json
import threading
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import USER_ID, BotHarness, running_bot
from tests.fakes import anthropic_server as claude_says
from tests.fakes.anthropic_server import FakeAnthropic
from tests.fakes.telegram_server import FakeTelegram
from tests.scripted import RoleScript

OWNER = USER_ID
MEMBER = 2002
OTHER_MEMBER = 2003
GROUP = -1009000
HANG_GUARD = 60


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


def said(bot: BotHarness, chat: int, needle: str) -> Any:
    """The newest message of `chat` that holds `needle` (None: none does)."""
    return next((m for m in reversed(bot.tg.messages(chat)) if needle in (m.text or "")), None)


def tool_results(body: dict[str, Any]) -> list[str]:
    """What every tool call of a request's conversation answered, in order."""
    return [
        b["content"] if isinstance(b["content"], str) else json.dumps(b["content"])
        for m in body["messages"]
        if m["role"] == "user" and isinstance(m["content"], list)
        for b in m["content"]
        if b.get("type") == "tool_result"
    ]


async def team_turn(
    bot: BotHarness,
    model: RoleScript,
    replies: list[dict[str, Any]],
    chat: int = GROUP,
    user: int = MEMBER,
    words: str = "do it",
) -> dict[str, Any]:
    """One turn of `user` in `chat`, saying `words`, whose model answers with `replies` (each a response, tool calls
    or text), then a closing text; the last request the model got (every tool result in it)."""
    marker = f"TURN-DONE-{len(model.requests['orchestrator'])}"
    model.add("orchestrator", *replies, claude_says.text(marker))
    text = f"@test_bot {words}" if chat < 0 else words
    bot.tg.send_text(user, text, chat_id=chat if chat < 0 else None, username=f"u{user}")
    await bot.tg.await_for(lambda: said(bot, chat, marker), timeout=HANG_GUARD)
    return model.requests["orchestrator"][-1]


async def task_held_in_topic(team: BotHarness, model: RoleScript, name: str = "calc") -> tuple[int, threading.Event]:
    """A topic `name` whose owner starts task #1 there, its worker held in its first model call: the topic's thread,
    and the event that lets the worker go on."""
    from tests.support.tasks import start_task

    topic = team.tg.create_topic(GROUP, name, OWNER)
    go = threading.Event()

    def held(body: dict) -> dict:
        go.wait(30)
        return claude_says.text("Looked around.")

    model.add("orchestrator", start_task("", "Look at calc.py."), claude_says.text("Started."))
    model.add("code", held)
    team.tg.send_text(OWNER, f"@test_bot look at {name}.py", chat_id=GROUP, thread_id=topic)
    await team.tg.await_for(lambda: len(model.requests["code"]) == 1, timeout=HANG_GUARD)
    return topic, go
