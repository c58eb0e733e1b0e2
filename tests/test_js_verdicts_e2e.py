"""Per-test verdicts end to end, the JavaScript frameworks' half: JavaScript projects judged per test through the real bot (scripted model, fake
Telegram), real frameworks (node --test; mocha, jest and pnpm from the npm registry, cached) and real bwrap.

Each project has one test red at the base commit; the worker breaks another: the correction names the broken test
by its id (file and describe names), and the old failure is listed as pre-existing."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from agents.core.models import TaskStatus
from agents.verify.node_modules_links import is_links_folder
from tests.conftest import USER_ID, BotHarness, git, make_repo, start_bot
from tests.fakes import anthropic_server as claude_says
from tests.js_tools import give_node_modules
from tests.scripted import RoleScript, last_user_text
from tests.support.tasks import breaks_then_fixes, final_summary, requests_naming, start_task, stored_task

pytestmark = pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed")

CALC = "exports.add = (a, b) => a + b;\nexports.legacy = () => 1;\n"
BROKEN = "calc > adds"  # the describe > it names of the test the worker breaks
OLD = "calc > legacy"  # red at the base: pre-existing


@pytest.fixture(scope="session")
def tools(node_tools: Path) -> Path:
    return node_tools


def describe_calc(prelude: str, it: str = "it") -> str:
    return (
        f"{prelude}const assert = require('assert');\nconst calc = require('../calc.js');\n"
        "describe('calc', () => {\n"
        f"  {it}('adds', () => assert.strictEqual(calc.add(2, 3), 5, 'add(2, 3) should be 5'));\n"
        f"  {it}('legacy', () => assert.strictEqual(calc.legacy(), 2, 'legacy has been wrong for years'));\n"
        "});\n"
    )


def js_repo(root: Path, name: str, test_script: str, test_file: str, extra: dict[str, str] | None = None) -> Path:
    files = {
        "package.json": json.dumps({"name": name, "private": True, "scripts": {"test": test_script}}),
        ".gitignore": "node_modules/\n",
        "calc.js": CALC,
        "test/calc.test.js": test_file,
        **(extra or {}),
    }
    return make_repo(root / name, files)


async def broken_test_named(bot: BotHarness, model: RoleScript, repo: Path, test_file: str = "test/calc.test.js"):
    model.add("orchestrator", start_task(repo.name, "Tidy calc.js."), claude_says.text("started"))
    model.add("code", *breaks_then_fixes("calc.js", "a + b", "a - b", "a + b"))
    bot.say(f"tidy calc in {repo.name}")
    task, summary = await final_summary(bot, 1, timeout=120)
    print(f"SUMMARY[{repo.name}]", [ln for ln in summary.text.splitlines() if ln.strip()][:4])
    broken, old = f"{test_file}::{BROKEN}", f"{test_file}::{OLD}"
    [correction] = requests_naming(model, broken)
    assert "add(2, 3) should be 5" in correction, correction
    assert task.status is TaskStatus.COMPLETED, summary.text
    assert old in summary.text and "(whole suite)" not in summary.text, summary.text
    return correction, summary


async def test_node_test_framework_names_the_broken_test(bot: BotHarness, model: RoleScript, workspace_root: Path):
    repo = js_repo(
        workspace_root, "nodeapp", "node --test", describe_calc("const { describe, it } = require('node:test');\n")
    )
    await broken_test_named(bot, model, repo)


async def test_jest_names_the_broken_test(
    bot: BotHarness, model: RoleScript, workspace_root: Path, tools: Path
) -> None:
    repo = js_repo(workspace_root, "jestapp", "jest", describe_calc("", it="test"))
    give_node_modules(repo, tools, "jest")
    await broken_test_named(bot, model, repo)


async def test_tests_are_judged_when_the_lint_step_is_red_at_the_base(
    bot: BotHarness, model: RoleScript, workspace_root: Path, tools: Path
) -> None:
    """mocha names the broken test; in `node lint.js && npm run build && mocha`, with lint red at the base and
    after, mocha still runs."""
    repo = js_repo(
        workspace_root,
        "lintapp",
        "node lint.js && npm run build && mocha",
        describe_calc(""),
        {"lint.js": "console.error('calc.js: 1 lint error'); process.exit(1);\n", "build.js": "// nothing to build\n"},
    )
    package = json.loads((repo / "package.json").read_text())
    package["scripts"]["build"] = "node build.js"
    (repo / "package.json").write_text(json.dumps(package))
    git(repo, "commit", "-qam", "build script")
    give_node_modules(repo, tools, "mocha")  # a real folder in the owner's checkout, untracked
    _, summary = await broken_test_named(bot, model, repo)
    assert "Steps: node lint.js (lint) failing before too (pre-existing)" in summary.text, summary.text


async def test_pnpm_workspace_pinning_another_pnpm_runs_offline_in_the_sandbox(
    bot: BotHarness, model: RoleScript, workspace_root: Path, tools: Path
) -> None:
    """`packageManager` pins pnpm 9.8.0, pnpm 10 is installed, the sandbox has no network: the tests run."""
    repo = make_repo(
        workspace_root / "monorepo",
        {
            "package.json": json.dumps(
                {
                    "name": "monorepo",
                    "private": True,
                    "packageManager": "pnpm@9.8.0",
                    "scripts": {"test": "pnpm -r test"},
                }
            ),
            "pnpm-workspace.yaml": "packages:\n  - 'packages/*'\n",
            "pnpm-lock.yaml": "lockfileVersion: '9.0'\n",
            ".gitignore": "node_modules/\n",
            "packages/calc/package.json": json.dumps(
                {"name": "calc", "private": True, "scripts": {"test": "node --test"}}
            ),
            "packages/calc/calc.js": CALC.replace("() => 1", "() => 2"),
            "packages/calc/test/calc.test.js": describe_calc("const { describe, it } = require('node:test');\n"),
        },
    )
    give_node_modules(repo, tools, "pnpm")  # pnpm 10 is in the owner's node_modules/.bin
    model.add("orchestrator", start_task("monorepo", "Tidy calc.js."), claude_says.text("started"))
    model.add("code", *breaks_then_fixes("packages/calc/calc.js", "a + b", "a - b", "a + b"))
    bot.say("tidy calc in monorepo")
    task, summary = await final_summary(bot, 1, timeout=120)
    print("SUMMARY[monorepo]", [ln for ln in summary.text.splitlines() if ln.strip()][:4])
    [correction] = requests_naming(model, "add(2, 3) should be 5")  # the tests ran, red, in the sandbox
    assert task.status is TaskStatus.COMPLETED, summary.text
    assert "0 broken" in summary.text, summary.text


async def test_a_resumed_js_task_runs_its_tests(
    fake_telegram, fake_anthropic, tmp_path: Path, workspace_root: Path, bot_repo: Path, tools: Path
) -> None:
    """The resumed task's worktree already holds the node_modules link: it is borrowed (and mounted) again."""
    from telegram_bot.app import stop_application
    from tests.conftest import make_settings

    repo = js_repo(workspace_root, "resumeapp", "mocha", describe_calc(""))
    give_node_modules(repo, tools, "mocha")
    model = RoleScript()
    fake_anthropic.handler = model
    settings = make_settings(  # the step "running: sleep 60" follows an edit at once: shown after a short interval
        fake_telegram, fake_anthropic, tmp_path, workspace_root, bot_repository=bot_repo, progress_interval_seconds=0.2
    )
    model.add("orchestrator", start_task("resumeapp", "Make add() subtract, slowly."), claude_says.text("started"))
    model.add(
        "code",
        claude_says.tool_use("edit_file", {"path": "calc.js", "old": "a + b", "new": "a - b"}),
        claude_says.tool_use("run_command", {"command": "sleep 60"}),
    )
    first = await start_bot(settings, fake_telegram, fake_anthropic)
    try:
        fake_telegram.send_text(USER_ID, "change calc")
        await fake_telegram.await_for(
            lambda: any("running: sleep" in (m.text or "") for m in fake_telegram.messages(USER_ID)), timeout=60
        )
    finally:
        await stop_application(first.app)
    model.add(  # told of the broken test, the worker fixes it (the summary then lists the file it changed)
        "code",
        claude_says.text("Resumed: add() subtracts."),
        claude_says.tool_use("edit_file", {"path": "calc.js", "old": "a - b", "new": "b + a"}),
        claude_says.text("Fixed: add() adds."),
    )
    second = await start_bot(settings, fake_telegram, fake_anthropic)
    try:
        notice = await fake_telegram.await_for(
            lambda: next((m for m in fake_telegram.messages(USER_ID) if "stopped while" in (m.text or "")), None),
            timeout=60,
        )
        task = await stored_task(settings, 1)
        assert is_links_folder(Path(task.worktree) / "node_modules"), "the worktree holds the links from the first run"
        fake_telegram.press_button(USER_ID, notice.message_id, "task:resume:1")
        summary = await fake_telegram.await_for(
            lambda: next(
                (m for m in fake_telegram.messages(USER_ID) if "Task #1" in (m.text or "") and "Files:" in m.text), None
            ),
            timeout=120,
        )
        print("SUMMARY[resumeapp]", [ln for ln in summary.text.splitlines() if ln.strip()][:4])
    finally:
        await stop_application(second.app)
    later = [last_user_text(r) for r in model.requests["code"][1:]]
    named = [t for t in later if "test/calc.test.js::calc > adds" in t and "add(2, 3) should be 5" in t]
    assert named, "the resumed task's tests ran (mocha found) and the broken test was sent back:\n" + "\n".join(later)
    assert not [t for t in later if "mocha: not found" in t]
