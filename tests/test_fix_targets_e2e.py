"""A fix task is judged on the test it was meant to fix, whatever way that test fails: through the real bot (scripted
model, fake Telegram), real pytest and real bwrap. The red test fails on a plain `assert` in the test, so its
traceback shows no frame of the code the instructions name; a traced re-run shows that the test runs it (pytest: the
bot's tracer; node --test: node's own V8 coverage)."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
from pathlib import Path

import pytest

from agents.core.models import TaskStatus
from tests.conftest import USER_ID, BotHarness, git, make_repo
from tests.fakes import anthropic_server as claude_says
from tests.support.processes import host_pids, own_sleep
from tests.support.tasks import corrections, edit, ended, final_summary, message_with, start_task, write_file

RED = "tests/test_cart.py::test_total"  # fails on `assert total([1, 2]) == 3`; runs src/pkg/utils.py
OLD = "tests/test_legacy.py::test_legacy"  # red too, runs only src/pkg/legacy.py: not the task's


def shop(root: Path) -> Path:
    return make_repo(
        root / "shop",
        {
            "pyproject.toml": "[tool.pytest.ini_options]\ntestpaths = ['tests']\n",
            "src/pkg/__init__.py": "",
            "src/pkg/utils.py": "def add_all(items):\n    total = 0\n    for item in items[1:]:\n"
            "        total += item\n    return total\n",
            "src/pkg/cart.py": "from pkg.utils import add_all\n\n\ndef total(prices):\n    return add_all(prices)\n",
            "src/pkg/legacy.py": "def legacy():\n    return 1\n",
            "tests/test_cart.py": "from pkg.cart import total\n\n\ndef test_total():\n    assert total([1, 2]) == 3\n",
            "tests/test_legacy.py": "from pkg.legacy import legacy\n\n\ndef test_legacy():\n    assert legacy() == 2\n",
        },
    )


async def test_a_non_fix_of_a_red_test_failing_on_an_assert_is_sent_back(
    bot: BotHarness, model, workspace_root: Path
) -> None:
    shop(workspace_root)
    model.add(
        "orchestrator", start_task("shop", "Fix the bug in src/pkg/utils.py: totals are wrong."), claude_says.text("ok")
    )
    model.add(
        "code",
        write_file("NOTES.md", "Looked at the totals.\n"),  # not a fix
        claude_says.text("Fixed."),
        edit("src/pkg/utils.py", "items[1:]", "items"),
        claude_says.text("Fixed for real."),
    )
    bot.say("fix the totals in shop")
    task, summary = await final_summary(bot, 1, timeout=90)
    print("SUMMARY[fix-target]", [ln for ln in summary.text.splitlines() if ln.strip()][:4])

    [correction] = corrections(model)
    mine, _, not_mine = correction.partition("not yours, leave them unless the task is about them")
    assert RED in mine and "it runs `src/pkg/utils.py`, which the instructions name" in mine, correction
    assert "assert 2 == 3" in mine, "the failure's own text goes back"
    assert OLD not in mine and OLD in not_mine, correction
    assert task.status is TaskStatus.COMPLETED, summary.text
    assert summary.text.startswith("✔"), summary.text
    assert "1 fixed" in summary.text and "1 still failing from before (pre-existing)" in summary.text, summary.text
    assert f"{OLD} judged pre-existing: it runs src/pkg/legacy.py, which the instructions do not name" in summary.text


@pytest.mark.settings(max_corrections=1)  # one correction shows it; more only cost time
async def test_a_non_fix_that_never_fixes_is_never_done(bot: BotHarness, model, workspace_root: Path) -> None:
    shop(workspace_root)
    model.add("orchestrator", start_task("shop", "Fix the failing test in the shop."), claude_says.text("ok"))
    model.add(
        "code",
        edit("src/pkg/utils.py", "total = 0", "total = 0  # running sum"),  # touches the file the test runs
        *[claude_says.text("Fixed.") for _ in range(2)],
    )
    bot.say("fix the shop's failing test")
    task, summary = await final_summary(bot, 1, timeout=120)
    print("SUMMARY[fix-never]", [ln for ln in summary.text.splitlines() if ln.strip()][:4])
    assert corrections(model), "the worker is told"
    assert all(RED in c and "it runs `src/pkg/utils.py`, which the task changed" in c for c in corrections(model))
    assert task.status is TaskStatus.BLOCKED and summary.text.startswith("✗"), summary.text
    assert RED in summary.text


JS_RED = "test/cart.test.js::totals a cart"
JS_OLD = "test/legacy.test.js::legacy is two"


def js_shop(root: Path) -> Path:
    return make_repo(
        root / "jsshop",
        {
            "package.json": json.dumps({"name": "jsshop", "private": True, "scripts": {"test": "node --test"}}),
            "lib/utils.js": "exports.addAll = (items) => items.slice(1).reduce((a, b) => a + b, 0);\n",
            "lib/cart.js": "const { addAll } = require('./utils.js');\nexports.total = (prices) => addAll(prices);\n",
            "lib/legacy.js": "exports.legacy = () => 1;\n",
            "test/cart.test.js": "const { test } = require('node:test');\nconst assert = require('assert');\n"
            "const { total } = require('../lib/cart.js');\n\n"
            "test('totals a cart', () => assert.ok(total([1, 2]) === 3, 'the total is wrong'));\n",
            "test/legacy.test.js": "const { test } = require('node:test');\nconst assert = require('assert');\n"
            "const { legacy } = require('../lib/legacy.js');\n\n"
            "test('legacy is two', () => assert.ok(legacy() === 2, 'legacy has been wrong for years'));\n",
        },
    )


@pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed")
async def test_a_non_fix_of_a_red_js_test_failing_on_an_assert_is_sent_back(
    bot: BotHarness, model, workspace_root: Path
) -> None:
    js_shop(workspace_root)
    model.add("orchestrator", start_task("jsshop", "Fix the bug in lib/utils.js."), claude_says.text("ok"))
    model.add(
        "code",
        write_file("NOTES.md", "Looked at the totals.\n"),
        claude_says.text("Fixed."),
        edit("lib/utils.js", "items.slice(1)", "items"),
        claude_says.text("Fixed for real."),
    )
    bot.say("fix the totals in jsshop")
    task, summary = await final_summary(bot, 1, timeout=90)
    print("SUMMARY[js-fix-target]", [ln for ln in summary.text.splitlines() if ln.strip()][:4])
    [correction] = corrections(model)
    mine, _, not_mine = correction.partition("not yours, leave them unless the task is about them")
    assert JS_RED in mine and "it runs `lib/utils.js`, which the instructions name" in mine, correction
    assert "the total is wrong" in mine and JS_OLD not in mine and JS_OLD in not_mine, correction
    assert task.status is TaskStatus.COMPLETED and summary.text.startswith("✔"), summary.text
    assert "1 fixed" in summary.text and "1 still failing from before (pre-existing)" in summary.text, summary.text


TRACED = own_sleep("1")  # run by the red test only when the bot traces it at the base
WORKING = own_sleep("2")  # the worker's command, keeping the task busy until /cancel

SLOW_WHEN_TRACED = f"""\
import os
import subprocess

from calc import add


def test_add():
    if os.environ.get("AGENTLAB_TRACE_OUT"):  # only in the bot's traced run of the base's red tests
        subprocess.run(["sleep", "{TRACED}"])
    assert add(2, 3) == 5
"""


async def test_a_cancelled_fix_tasks_traced_run_of_its_base_ends_with_it(
    bot: BotHarness, model, workspace_root: Path
) -> None:
    """A fix task: while its worker works, the bot traces the base's red test, a test run of the owner's suite.
    /cancel comes meanwhile; no other task waits for that trace, so it ends with the task, its test process killed
    (not left running until the test timeout)."""
    calc = workspace_root / "calc"
    (calc / "test_calc.py").write_text(SLOW_WHEN_TRACED)
    git(calc, "commit", "-qam", "a test that is slow when traced")
    model.add("orchestrator", start_task("calc", "Fix add in calc.py so test_add passes."), claude_says.text("Ok."))
    model.add("code", claude_says.tool_use("run_command", {"command": f"sleep {WORKING}"}))
    try:
        bot.say("fix add in calc")
        await bot.tg.await_for(lambda: host_pids(TRACED) and host_pids(WORKING), timeout=90)
        bot.tg.send_command(USER_ID, "/cancel")
        await bot.tg.await_for(lambda: message_with(bot, "Task #1 cancelled"), timeout=30)
        task = await ended(bot, 1, timeout=30)
        assert task.status is TaskStatus.CANCELLED, (task.status, task.error)
        # a hang guard, far below the test timeout (120 s) at which the traced run would end by itself
        with contextlib.suppress(TimeoutError):
            await bot.tg.await_for(lambda: not host_pids(TRACED) and not host_pids(WORKING), timeout=30)
        assert not host_pids(TRACED), "the cancelled task's traced test run at its base is still running"
        assert not host_pids(WORKING), "the cancelled task's command is still running"
    finally:
        for pid in host_pids(TRACED) + host_pids(WORKING):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
