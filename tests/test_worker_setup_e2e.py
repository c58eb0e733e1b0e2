"""Workers set up to succeed, through the real bot (scripted model, fake Telegram, real git, real test runs): the first
turn names the command the bot judges by (the workspace's own, never another language's test framework); a worker out of
steps is warned first, then reports and is tested (blocked, not failed); corrections carry the quick re-run, the
diffstat, and from the second on a step back."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from agents.core.models import TaskStatus
from tests.conftest import BotHarness, make_repo
from tests.fakes import anthropic_server as claude_says
from tests.scripted import RoleScript, last_user_text
from tests.support.tasks import edit, final_summary, start_task

JS_CALC = {
    "package.json": json.dumps({"name": "jscalc", "private": True, "scripts": {"test": "node --test"}}),
    "calc.js": "exports.add = (a, b) => a + b;\n",
    "test/calc.test.js": (
        "const { test } = require('node:test');\nconst assert = require('assert');\n"
        "const { add } = require('../calc');\n\ntest('adds', () => assert.strictEqual(add(2, 3), 5));\n"
    ),
}


def first_request_text(model: RoleScript, role: str) -> str:
    return last_user_text(model.requests[role][0])


@pytest.mark.skipif(shutil.which("node") is None, reason="needs node")
async def test_the_test_worker_in_a_javascript_workspace_is_told_its_own_runner_not_pytest(
    bot: BotHarness, model: RoleScript, workspace_root: Path
) -> None:
    make_repo(workspace_root / "jscalc", JS_CALC)
    model.add("orchestrator", start_task("jscalc", "Write tests for add() in calc.js.", worker="test"), "started")
    model.add("test", claude_says.text("The existing test already covers add()."))
    bot.say("write tests for calc.js in jscalc")
    task, _summary = await final_summary(bot, 1, timeout=60)
    first = first_request_text(model, "test")
    system = model.requests["test"][0]["system"][0]["text"]
    assert "How your work is judged" in first and "npm test --silent" in first, first
    assert "pytest" not in first.lower() and "pytest" not in system.lower(), "never another language's test framework"
    assert "the workspace's own test framework" in system
    assert task.status is not TaskStatus.FAILED


@pytest.mark.quick_tests
async def test_the_first_turn_names_the_agentlab_toml_command(
    bot: BotHarness, model: RoleScript, workspace_root: Path
) -> None:
    model.add("orchestrator", start_task("calc", "Fix add() in calc.py."), "started")
    model.add("code", edit("calc.py", "a - b", "a + b"), claude_says.text("Fixed."))
    bot.say("fix calc")
    task, _ = await final_summary(bot, 1)
    first = first_request_text(model, "code")
    assert "its .agentlab.toml [tests] command" in first
    assert "python3 -c 'from calc import add; assert add(2, 3) == 5'" in first
    assert task.status is not TaskStatus.FAILED


async def test_the_first_turn_names_the_pytest_command_the_bot_found(
    bot: BotHarness, model: RoleScript, workspace_root: Path
) -> None:
    model.add("orchestrator", start_task("calc", "Fix add() in calc.py."), "started")
    # the first turn is the point: a blocked worker's task ends without the test runs that follow a turn
    model.add("code", claude_says.text("BLOCKED: the first turn is all this test looks at."))
    bot.say("fix calc")
    await final_summary(bot, 1)
    first = first_request_text(model, "code")
    assert "How your work is judged" in first and "-m pytest -q" in first and "found:" in first


@pytest.mark.quick_tests
@pytest.mark.settings(worker_max_steps=3, worker_warn_steps=1)
async def test_out_of_steps_the_worker_is_warned_then_reports_and_its_work_is_tested(
    bot: BotHarness, model: RoleScript
) -> None:
    model.add("orchestrator", start_task("calc", "Fix add() and tidy calc.py."), "started")
    model.add(
        "code",
        claude_says.tool_use("read_file", {"path": "calc.py"}),
        edit("calc.py", "a - b", "a + b"),
        claude_says.tool_use("read_file", {"path": "calc.py"}),
        claude_says.text("Report: add() fixed; the tidying is left to do."),
    )
    bot.say("fix and tidy calc")
    task, summary = await final_summary(bot, 1)
    requests = model.requests["code"]
    assert "1 steps left before your step limit (3)" in last_user_text(requests[2]), "warned before the last step"
    wrap_up = requests[3]
    assert wrap_up["tool_choice"] == {"type": "none"} and "reached your step limit" in last_user_text(wrap_up)
    assert task.status is TaskStatus.BLOCKED, "out of steps is blocked with its reason, not failed"
    assert "step limit" in summary.text and "Report: add() fixed" in summary.text
    assert "passed" in summary.text, "the bot tested what the worker did"


async def test_corrections_carry_the_quick_rerun_and_the_diffstat_and_the_second_asks_to_step_back(
    bot: BotHarness, model: RoleScript
) -> None:
    model.add("orchestrator", start_task("calc", "Fix add()."), "started")
    model.add(
        "code",
        edit("calc.py", "a - b", "a * b"),
        claude_says.text("Fixed."),
        claude_says.text("It is fine as it is."),
        edit("calc.py", "a * b", "a + b"),
        claude_says.text("Fixed for real."),
    )
    bot.say("fix calc")
    task, _ = await final_summary(bot, 1, timeout=60)
    first, second = (last_user_text(r) for r in model.requests["code"][2:4])
    assert "re-run only the failing tests" in first and "test_calc.py::test_add" in first, first
    assert "calc.py | 2" in first, "the diffstat of what the task changed"
    assert "step back" not in first
    assert "step back" in second and "most likely causes" in second
    assert task.status is TaskStatus.COMPLETED
