"""A task's summary starts with the verdict's mark (✔, ✗ or ⚠) even when its worker did not finish: out of steps
after a change the bot tested and saw pass (⚠: whether the task is done the bot cannot tell), stopped by its time
limit (⚠: the tests did not run)."""

from __future__ import annotations

import shutil
import sys

import pytest

from tests.conftest import BotHarness
from tests.fakes import anthropic_server as claude_says
from tests.scripted import RoleScript
from tests.support.tasks import edit, final_summary, start_task

pytestmark = [
    pytest.mark.skipif(
        shutil.which("bwrap") is None or not sys.platform.startswith("linux"),
        reason="bubblewrap (bwrap) is not installed",
    ),
]


def first_line(text: str) -> str:
    return (text or "").strip().splitlines()[0]


@pytest.mark.settings(worker_max_steps=3, worker_warn_steps=1)
async def test_step_limit_summary_first_line_starts_with_a_verdict_mark(bot: BotHarness, model: RoleScript) -> None:
    """A worker that ran out of steps after a change the bot then tested (the tests pass): ⚠, blocked."""
    model.add("orchestrator", start_task("calc", "Fix add() and tidy calc.py."), "started")
    model.add(
        "code",
        claude_says.tool_use("read_file", {"path": "calc.py"}),
        edit("calc.py", "a - b", "a + b"),
        claude_says.tool_use("read_file", {"path": "calc.py"}),
        claude_says.text("Report: add() fixed; the tidying is left to do."),
    )
    bot.say("fix and tidy calc")
    _, summary = await final_summary(bot, 1)
    assert "passed" in summary.text, "the bot ran the tests on the work"
    assert first_line(summary.text).startswith("⚠ Task #1 blocked: stopped after 3 steps"), summary.text


@pytest.mark.settings(worker_max_seconds=3)
async def test_time_limit_summary_first_line_starts_with_a_verdict_mark(bot: BotHarness, model: RoleScript) -> None:
    """A worker stopped by its time limit after a change: the tests did not run, ⚠."""
    model.add("orchestrator", start_task("calc", "Fix add()."), "started")
    model.add(
        "code",
        edit("calc.py", "a - b", "a + b"),
        claude_says.text("Done, add() fixed.", delay=8),
    )
    bot.say("fix calc")
    _, summary = await final_summary(bot, 1, timeout=60)
    assert first_line(summary.text).startswith("⚠ Task #1 stopped: stopped after 3 s (time limit)"), summary.text
