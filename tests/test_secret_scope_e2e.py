"""The values a task adds to the output filter (its credential files') are masked while it runs and forgotten
when it ends, so the filter's set of values does not grow task after task: through the real bot.

The calc workspace commits an `.env.production` with a key. Three tasks in a row each print it: each sees it masked,
and after each the filter holds what it held before the first (the bot's own secrets stay, checked too).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from agents.core.models import TaskStatus
from agents.core.secrets_filter import MASK
from tests.conftest import BotHarness, git
from tests.fakes import anthropic_server as claude_says
from tests.scripted import RoleScript
from tests.support.tasks import ended, start_task, tool_results

TASK_SECRET = "Prod-Key-Of-The-Task-4471xyz"
TASKS = 3
OWN_KEY = "Own-Bot-Key-Not-A-Known-Shape-991"  # masked only because the bot added it to its filter


@pytest.mark.untested_calc  # neither the verdict nor the task's end is what this test is about
@pytest.mark.settings(anthropic_api_key=OWN_KEY)
async def test_a_tasks_added_values_are_masked_while_it_runs_and_forgotten_after(
    bot: BotHarness, workspace_root: Path
) -> None:
    calc = workspace_root / "calc"
    (calc / ".env.production").write_text(f"NODE_ENV=production\nAPI_KEY={TASK_SECRET}\n")
    git(calc, "add", "-A")
    git(calc, "commit", "-q", "-m", "credentials, committed by mistake")
    secrets = bot.runtime.secrets  # the bot's one filter, which the task's tools mask with
    before = secrets.value_count()
    while_running: list[tuple[int, str]] = []

    def look(body: dict[str, Any]) -> dict[str, Any]:  # the task runs: what the filter holds now
        while_running.append((secrets.value_count(), secrets.mask(TASK_SECRET)))
        return claude_says.tool_use("run_command", {"command": "cat .env.production; echo done-cat"})

    model = RoleScript()
    bot.claude.handler = model
    for task_id in range(1, TASKS + 1):
        model.add("orchestrator", start_task("calc", "Print the file."), claude_says.text("Started."))
        model.add("code", look, claude_says.text("Done."))
        bot.say("print the production file in calc")
        task = await ended(bot, task_id, timeout=90)
        assert task.status is not TaskStatus.FAILED, task.error
        await bot.tg.await_for(lambda: secrets.value_count() == before, timeout=10)
        assert secrets.mask(f"key {TASK_SECRET}") == f"key {TASK_SECRET}", "a finished task's value is kept"
        assert secrets.mask(OWN_KEY) == MASK, "the bot's own key is no longer masked"
    assert len(while_running) == TASKS
    for count, masked in while_running:
        assert count > before and masked == MASK, (count, before, masked)
    printed = [r for r in tool_results(model) if "done-cat" in r]  # the same text each time: kept once
    assert printed and all(TASK_SECRET not in r and "API_KEY=\\u00abmasked" in r for r in printed), printed
