"""Schedules made in words: the orchestrator's `schedule_task` call and its one-sentence confirmation, the settings of
a bot with an owner, a member and a time zone, and what a chat was told."""

from __future__ import annotations

import re
from typing import Any

from tests.conftest import USER_ID, BotHarness
from tests.fakes import anthropic_server as claude_says
from tests.scripted import last_user_text

OWNER = USER_ID
MEMBER = 2002
ZONE = "Europe/Berlin"
SETTINGS = dict(allowed_user_ids=f"{OWNER},{MEMBER}", owner_user_ids=str(OWNER), timezone=ZONE, sandbox_network="off")


def schedule(workspace: str = "calc", worker: str = "code", **when: object) -> dict[str, Any]:
    """The orchestrator's `schedule_task` call (`every_minutes=60`, `cron=…`, …)."""
    instructions = "Run the tests and report whether anything is red."
    return claude_says.tool_use(
        "schedule_task", {"workspace": workspace, "worker": worker, "instructions": instructions, **when}
    )


def confirm(body: dict[str, Any]) -> dict[str, Any]:
    """The orchestrator's one sentence, built from what the tool answered (as the real model does)."""
    result = last_user_text(body)
    made = re.search(r"Schedule #(\d+) made \(([^)]*)\).*Next run: ([^.]*)\.", result)
    if made is None:
        return claude_says.text(f"I could not make it: {result}")
    return claude_says.text(f"Schedule #{made[1]} set ({made[2]}); next: {made[3]}.")


def said(bot: BotHarness, chat: int, needle: str) -> Any:
    """The newest message in `chat` with `needle` in its text, or None."""
    return next((m for m in reversed(bot.tg.messages(chat)) if needle in (m.text or "")), None)


async def tasks_of(bot: BotHarness, chat: int) -> list[Any]:
    return list(await bot.runtime.store.list_tasks(chat, limit=50))
