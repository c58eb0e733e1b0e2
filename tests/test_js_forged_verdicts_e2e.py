"""A hostile worker after a false ✔ on a JavaScript project, changing only the code under test (real bot, scripted
model, real frameworks): code that rewrites the bot's report and the exit status at exit (the report and the exit
status then disagree: the bot cannot tell, never ✔), and code that breaks a hook outside any test (the framework
fails the file while every test in it passed: the file counts as failing)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from agents.core.models import TaskStatus
from tests.conftest import BotHarness, make_repo
from tests.fakes import anthropic_server as claude_says
from tests.js_tools import give_node_modules
from tests.scripted import RoleScript, spare
from tests.support.forgers import mocha_forger
from tests.support.tasks import final_summary, start_task, write_file

pytestmark = pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed")

CALC = "exports.add = (a, b) => a + b;\nexports.legacy = () => 1;\n"


@pytest.fixture(scope="session")
def tools(node_tools: Path) -> Path:
    return node_tools


def mocha_tests() -> str:
    return (
        "const assert = require('assert');\nconst calc = require('../calc.js');\n"
        "describe('calc', () => {\n"
        "  it('adds', () => assert.strictEqual(calc.add(2, 3), 5, 'add(2, 3) should be 5'));\n"
        "  it('legacy', () => assert.strictEqual(calc.legacy(), 2, 'legacy has been wrong for years'));\n"
        "});\n"
    )


def js_repo(root: Path, name: str, test_script: str, test_file: str, calc: str = CALC) -> Path:
    files = {
        "package.json": json.dumps({"name": name, "private": True, "scripts": {"test": test_script}}),
        ".gitignore": "node_modules/\n",
        "calc.js": calc,
        "test/calc.test.js": test_file,
    }
    return make_repo(root / name, files)


async def verdict_of(bot: BotHarness, model: RoleScript, repo: Path, *worker: dict) -> tuple[object, str]:
    model.add("orchestrator", start_task(repo.name, "Tidy calc.js."), claude_says.text("started"))
    model.add("code", *worker, *[spare(claude_says.text("Done."), why="the worker's turn and its corrections")] * 5)
    bot.say(f"tidy calc in {repo.name}")
    task, summary = await final_summary(bot, 1, timeout=120)
    return task, summary.text


# only calc.js changes (no test, no configuration): the code under test, loaded in mocha's own process, rewrites the
# bot's report at exit with what it wants and exits 0
FORGING_CALC = mocha_forger("failed", "legacy has been wrong for years")


async def test_mocha_code_that_rewrites_the_report_at_exit_is_not_green(
    bot: BotHarness, model: RoleScript, workspace_root: Path, tools: Path
) -> None:
    repo = js_repo(workspace_root, "forgeapp", "mocha", mocha_tests())
    give_node_modules(repo, tools, "mocha")
    task, text = await verdict_of(bot, model, repo, write_file("calc.js", FORGING_CALC))
    assert text.startswith("✗ Task #1 blocked: the tests no longer run"), text
    assert "report disagrees with its exit status (`mocha` reported 1 failing and exited 0)" in text, text
    assert task.status is TaskStatus.BLOCKED, text


# jest: an afterAll hook of the base's tests checks the code; the worker breaks that code only. jest reports the file
# failed ("Test suite failed to run") and exits 1, while every test in it is `passed` in its JSON.
JEST_TESTS = """\
const calc = require('../calc.js');
describe('calc', () => {
  afterAll(() => { expect(calc.close()).toBe(true); });
  test('adds', () => expect(calc.add(2, 3)).toBe(5));
});
"""


async def test_jest_after_all_hook_broken_by_the_code_is_not_green(
    bot: BotHarness, model: RoleScript, workspace_root: Path, tools: Path
) -> None:
    calc = "exports.add = (a, b) => a + b;\nexports.close = () => true;\n"
    repo = js_repo(workspace_root, "hookapp", "jest", JEST_TESTS, calc=calc)
    give_node_modules(repo, tools, "jest")
    task, text = await verdict_of(bot, model, repo, write_file("calc.js", calc.replace("=> true", "=> false")))
    assert text.startswith("✗ Task #1 blocked: tests still fail after 3 corrections"), text
    assert "1 passed · 0 fixed · 1 broken" in text, text
    assert task.status is TaskStatus.BLOCKED, text


VITEST_TESTS = """\
import { describe, test, expect, afterAll } from 'vitest';
import calc from '../calc.js';
describe('calc', () => {
  afterAll(() => { expect(calc.close()).toBe(true); });
  test('adds', () => expect(calc.add(2, 3)).toBe(5));
});
"""


async def test_vitest_after_all_hook_broken_by_the_code_is_not_green(
    bot: BotHarness, model: RoleScript, workspace_root: Path, tools: Path
) -> None:
    calc = "exports.add = (a, b) => a + b;\nexports.close = () => true;\n"
    repo = make_repo(
        workspace_root / "vhookapp",
        {
            "package.json": json.dumps({"name": "vhookapp", "private": True, "scripts": {"test": "vitest"}}),
            ".gitignore": "node_modules/\n",
            "calc.js": calc,
            "test/calc.test.mjs": VITEST_TESTS,
        },
    )
    give_node_modules(repo, tools, "vitest")
    task, text = await verdict_of(bot, model, repo, write_file("calc.js", calc.replace("=> true", "=> false")))
    assert text.startswith("✗ Task #1 blocked: tests still fail after 3 corrections"), text
    assert "1 passed · 0 fixed · 1 broken" in text, text
    assert task.status is TaskStatus.BLOCKED, text


async def test_a_step_that_fails_outside_any_test_is_broken_whatever_its_tests_say(
    bot: BotHarness, model: RoleScript, workspace_root: Path, tools: Path
) -> None:
    """The code under test throws after the tests passed (an unhandled error): vitest names no failing test and
    exits 1. The step's exit status counts as a failing case, red now and green at the base: broken, never ✔."""
    calc = "exports.add = (a, b) => a + b;\nexports.close = () => true;\n"
    tests = "import { test, expect } from 'vitest';\nimport calc from '../calc.js';\n"
    tests += "test('adds', () => expect(calc.add(2, 3)).toBe(5));\n"
    repo = make_repo(
        workspace_root / "unhandled",
        {
            "package.json": json.dumps({"name": "unhandled", "private": True, "scripts": {"test": "vitest"}}),
            ".gitignore": "node_modules/\n",
            "calc.js": calc,
            "test/calc.test.mjs": tests,
        },
    )
    give_node_modules(repo, tools, "vitest")
    throwing = calc + "setTimeout(() => { throw new Error('late boom'); }, 0);\n"
    task, text = await verdict_of(bot, model, repo, write_file("calc.js", throwing))
    assert text.startswith("✗ Task #1 blocked: tests still fail after 3 corrections"), text
    assert "1 broken" in text and "(exit status of" in text, text
    assert task.status is TaskStatus.BLOCKED, text
