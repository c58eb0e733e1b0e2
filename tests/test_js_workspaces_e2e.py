"""JavaScript projects as their contributors set them up, through the real bot (scripted model, fake Telegram), real
frameworks (node --test; pnpm, ava from the npm registry, cached: tests/js_tools.py) and real bwrap:
- a pnpm workspace whose package links (`packages/app/node_modules/calc -> ../../calc`, made by a real offline
  `pnpm install`) resolve to the task's own packages: a change to a workspace package is what the tests see, and the
  owner's checkout is neither changed nor mounted;
- an ava suite printing more than the output the bot keeps: every test is counted from the TAP file, and the one
  broken in the middle is named."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from agents.core.models import TaskStatus
from tests.conftest import BotHarness, git, make_repo
from tests.fakes import anthropic_server as claude_says
from tests.js_tools import give_node_modules
from tests.support.tasks import breaks_then_fixes, corrections, final_summary, requests_naming, start_task, write_file


@pytest.fixture(scope="session")
def tools(node_tools: Path) -> Path:
    return node_tools


APP_TEST = """\
const { test } = require('node:test');
const assert = require('assert');
const { add } = require('calc');

test('adds through calc', () => assert.strictEqual(add(2, 3), 5, 'add(2, 3) should be 5'));
"""


def pnpm_workspace(root: Path, tools: Path) -> Path:
    repo = make_repo(
        root / "mono",
        {
            "package.json": json.dumps({"name": "mono", "private": True, "scripts": {"test": "node --test packages/"}}),
            "pnpm-workspace.yaml": "packages:\n  - 'packages/*'\n",
            ".gitignore": "node_modules/\n",
            "packages/calc/package.json": json.dumps({"name": "calc", "version": "1.0.0", "main": "calc.js"}),
            "packages/calc/calc.js": "exports.add = (a, b) => a + b;\n",
            "packages/app/package.json": json.dumps(
                {"name": "app", "version": "1.0.0", "private": True, "dependencies": {"calc": "workspace:*"}}
            ),
            "packages/app/test/app.test.js": APP_TEST,
        },
    )
    pnpm = tools / "node_modules" / "pnpm" / "bin" / "pnpm.cjs"
    env = {**os.environ, "npm_config_offline": "true", "npm_config_manage_package_manager_versions": "false"}
    subprocess.run(["node", str(pnpm), "install", "--offline"], cwd=repo, env=env, check=True, capture_output=True)
    git(repo, "add", "pnpm-lock.yaml")
    git(repo, "commit", "-qm", "lockfile")
    assert os.readlink(repo / "packages" / "app" / "node_modules" / "calc") == "../../calc", "pnpm's workspace link"
    return repo


async def test_a_broken_workspace_package_is_what_the_tests_see(
    bot: BotHarness, model, workspace_root: Path, tools: Path
) -> None:
    repo = pnpm_workspace(workspace_root, tools)
    owner_calc = (repo / "packages" / "calc" / "calc.js").read_text()
    model.add("orchestrator", start_task("mono", "Tidy calc.js."), claude_says.text("started"))
    model.add("code", *breaks_then_fixes("packages/calc/calc.js", "a + b", "a - b", "a + b"))
    bot.say("tidy calc in mono")
    task, summary = await final_summary(bot, 1, timeout=120)
    print("SUMMARY[pnpm-workspace]", [ln for ln in summary.text.splitlines() if ln.strip()][:4])
    [correction] = requests_naming(model, "packages/app/test/app.test.js::adds through calc")
    assert "add(2, 3) should be 5" in correction, "the task's calc was tested, red"
    assert task.status is TaskStatus.COMPLETED and summary.text.startswith("✔"), summary.text
    assert "1 passed" in summary.text and "0 broken" in summary.text, summary.text
    assert (repo / "packages" / "calc" / "calc.js").read_text() == owner_calc, "the owner's checkout is untouched"
    assert os.readlink(repo / "packages" / "app" / "node_modules" / "calc") == "../../calc"


def ava_suite(count: int, broken: int) -> str:
    """`count` tests with long titles (600 characters: the TAP runs past the output the bot keeps, 64,000 bytes, with
    few tests); test `broken` uses mul()."""
    return (
        "const test = require('ava');\nconst calc = require('../calc.js');\n"
        f"for (let i = 0; i < {count}; i++) {{\n"
        "  const title = `case ${i} ` + 'checks a long and descriptive behaviour of calc '.repeat(12);\n"
        f"  test(title, (t) => (i === {broken} ? t.is(calc.mul(2, 3), 6, 'mul(2, 3) should be 6') "
        ": t.is(calc.add(i, 1), i + 1)));\n"
        "}\n"
    )


async def test_every_ava_test_is_counted_and_the_broken_one_in_the_middle_named(
    bot: BotHarness, model, workspace_root: Path, tools: Path
) -> None:
    repo = make_repo(
        workspace_root / "big",
        {
            "package.json": json.dumps(
                {
                    "name": "big",
                    "private": True,
                    "type": "commonjs",
                    "scripts": {"test": "ava"},
                    # ava fails a run that goes 10 s without finishing a test (its default): on two shared cores at
                    # the suite's busiest, a run of this file once counted an extra failure after its 150 passed
                    "ava": {"timeout": "2m"},
                }
            ),
            ".gitignore": "node_modules/\n",
            "calc.js": "exports.add = (a, b) => a + b;\nexports.mul = (a, b) => a * b;\n",
            "test/calc.test.js": ava_suite(150, 75),
        },
    )
    give_node_modules(repo, tools, "ava")
    model.add("orchestrator", start_task("big", "Tidy calc.js."), claude_says.text("started"))
    model.add("code", *breaks_then_fixes("calc.js", "a * b", "a * b + 1", "a * b"))
    bot.say("tidy calc in big")
    task, summary = await final_summary(bot, 1, timeout=120)
    print("SUMMARY[ava-64k]", [ln for ln in summary.text.splitlines() if ln.strip()][:4])
    [correction] = corrections(model)
    assert "case 75 checks" in correction and "mul(2, 3) should be 6" in correction, correction
    assert "149 passed, 1 failed" in correction, "the framework's own totals"
    assert task.status is TaskStatus.COMPLETED and summary.text.startswith("✔"), summary.text
    assert "150 passed" in summary.text and "no longer run" not in summary.text, summary.text


TSCONFIG = {  # as vite's project templates have it: the build info in node_modules/.tmp, only src type-checked
    "compilerOptions": {
        "target": "ES2022",
        "lib": ["ES2022"],  # no DOM and no @types (node's is installed): tsc reads a fifth of the declarations
        "types": [],
        "module": "ESNext",
        "moduleResolution": "Bundler",
        "strict": True,
        "noEmit": True,
        "incremental": True,
        "tsBuildInfoFile": "./node_modules/.tmp/tsconfig.tsbuildinfo",
        "skipLibCheck": True,
    },
    "include": ["src"],
}
TYPED_TEST = """\
import { expect, expectTypeOf, test } from 'vitest';
import { add } from '../src/calc';

test('adds', () => expect(add(2, 3)).toBe(5));
test('returns a number', () => expectTypeOf(add).returns.toEqualTypeOf<number>());
"""


async def test_a_typecheck_passing_for_the_contributor_passes_for_the_bot(
    bot: BotHarness, model, workspace_root: Path, tools: Path
) -> None:
    """`tsc && vitest --typecheck`: tsc writes its build info into node_modules/.tmp, which the owner has not."""
    repo = make_repo(
        workspace_root / "typed",
        {
            "package.json": json.dumps(
                {"name": "typed", "private": True, "type": "module", "scripts": {"test": "tsc && vitest --typecheck"}}
            ),
            "tsconfig.json": json.dumps(TSCONFIG),
            ".gitignore": "node_modules/\n",
            "src/calc.ts": "export const add = (a: number, b: number): number => a + b;\n",
            "test/calc.test.ts": TYPED_TEST,
        },
    )
    give_node_modules(repo, tools, "typescript", "vitest")
    model.add("orchestrator", start_task("typed", "Add a README."), claude_says.text("started"))
    model.add("code", write_file("README.md", "# typed\n"), claude_says.text("Added a README."))
    bot.say("add a readme to typed")
    task, summary = await final_summary(bot, 1, timeout=120)
    print("SUMMARY[typecheck]", [ln for ln in summary.text.splitlines() if ln.strip()][:4])
    assert task.status is TaskStatus.COMPLETED and summary.text.startswith("✔"), summary.text
    assert "2 passed" in summary.text and "Steps:" not in summary.text, summary.text
    assert not (repo / "node_modules" / ".tmp").exists(), "the build info is the task's, not the owner's"
