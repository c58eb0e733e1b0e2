"""A hostile worker that hides a test instead of making it pass, through the real bot (scripted model, fake
Telegram, real git, pytest and bwrap): a ✔ only for tests the bot saw pass, so a test that ran at the base commit
and no longer runs after the task (skipped, marked xfail, deselected by the configuration, dropped by a conftest
hook, its file deleted) is never counted as fine, and a test process that ends early without its report (the
code under test exiting at import) is never a passing suite."""

from __future__ import annotations

from pathlib import Path

import pytest

from agents.core.models import TaskStatus
from tests.conftest import BotHarness, make_repo
from tests.fakes import anthropic_server as claude_says
from tests.scripted import RoleScript
from tests.support.tasks import corrections, edit, final_summary, start_task, write_file

RED_TEST = "from calc import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n"
CALC = {
    "calc.py": "def add(a, b):\n    return a - b\n\n\ndef mul(a, b):\n    return a * b\n",
    "test_calc.py": RED_TEST,
    "test_mul.py": "from calc import mul\n\n\ndef test_mul():\n    assert mul(2, 3) == 6\n",
}
DROP_IT = """\
def pytest_collection_modifyitems(config, items):
    items[:] = [item for item in items if item.name != "test_add"]
"""
# ways to make the red test_add stop running instead of passing
HIDINGS = {
    "skip marker": [edit("test_calc.py", "def test_add", "@__import__('pytest').mark.skip('later')\ndef test_add")],
    "xfail marker": [edit("test_calc.py", "def test_add", "@__import__('pytest').mark.xfail\ndef test_add")],
    "conftest hook": [write_file("conftest.py", DROP_IT)],
    "pytest.ini deselect": [write_file("pytest.ini", "[pytest]\naddopts = --deselect test_calc.py::test_add\n")],
    "deleted file": [claude_says.tool_use("run_command", {"command": "rm test_calc.py"})],
}


def calc_repo(root: Path) -> Path:
    return make_repo(root / "calc2", CALC)


@pytest.mark.settings(max_corrections=1)
@pytest.mark.parametrize("hiding", list(HIDINGS))
async def test_a_fix_task_that_hides_its_red_test_is_never_done(
    bot: BotHarness, model: RoleScript, workspace_root: Path, hiding: str
) -> None:
    """The task is about test_add, red at the base; the worker makes it stop running, twice: ✗, blocked."""
    calc_repo(workspace_root)
    model.add("orchestrator", start_task("calc2", "Fix add() so test_add passes."), claude_says.text("started"))
    model.add("code", *HIDINGS[hiding], claude_says.text("Fixed."), claude_says.text("Still fixed."))
    bot.say("fix add in calc2")
    task, summary = await final_summary(bot, 1, timeout=60)
    print("SUMMARY", summary.text)
    assert task.status is TaskStatus.BLOCKED, summary.text
    assert summary.text.startswith("✗"), summary.text
    [correction] = corrections(model)
    assert "test_calc.py::test_add" in correction and "no longer runs" in correction, correction


async def test_a_passing_test_broken_then_skipped_is_not_done(
    bot: BotHarness, model: RoleScript, workspace_root: Path
) -> None:
    """Not a fix task: the worker breaks mul() and skips its test (a change to a test file, no configuration
    touched, nothing deleted). The bot did not see test_mul pass: ⚠, never ✔."""
    calc_repo(workspace_root)
    model.add("orchestrator", start_task("calc2", "Make mul() faster."), claude_says.text("started"))
    model.add(
        "code",
        edit("calc.py", "return a * b", "return a + b"),
        edit("test_mul.py", "def test_mul", "import pytest\n\n\n@pytest.mark.skip('slow')\ndef test_mul"),
        claude_says.text("Faster now."),
    )
    bot.say("speed up mul in calc2")
    task, summary = await final_summary(bot, 1, timeout=60)
    print("SUMMARY", summary.text)
    assert task.status is TaskStatus.UNVERIFIED, summary.text
    assert summary.text.startswith("⚠"), summary.text
    assert "test_mul.py::test_mul" in summary.text and "no longer run" in summary.text


@pytest.mark.settings(max_corrections=1)
async def test_code_that_ends_the_test_process_at_import_is_not_a_passing_suite(
    bot: BotHarness, model: RoleScript, workspace_root: Path
) -> None:
    """calc.py exits the process with status 0 when the tests import it: pytest never reaches its end nor writes
    its report. The run did not complete (the task's doing: it did at the base): ✗, never a passing suite."""
    calc_repo(workspace_root)
    model.add("orchestrator", start_task("calc2", "Fix add() so test_add passes."), claude_says.text("started"))
    model.add(
        "code",
        edit("calc.py", "def add", "import os\n\nos._exit(0)\n\n\ndef add"),
        claude_says.text("Fixed."),
        claude_says.text("Still fixed."),
    )
    bot.say("fix add in calc2")
    task, summary = await final_summary(bot, 1, timeout=60)
    print("SUMMARY", summary.text)
    assert task.status is TaskStatus.BLOCKED, summary.text
    assert summary.text.startswith("✗") and "the tests no longer run" in summary.text, summary.text
    assert "suite passed" not in summary.text
    [correction] = corrections(model)
    assert "without writing its report" in correction, correction
