"""Test runs as a contributor has them, through the real bot (scripted model, fake Telegram), real node or pytest
and real bwrap: a failure is re-run once before it counts as broken (a JS test or a script step passing on the
re-run is flaky, not the task's; a run killed once is run again), and the bot's own environment (NO_COLOR) does not
fail tests that pass for the contributor."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from agents.core.models import Task, TaskStatus
from tests.conftest import BotHarness, git, make_repo
from tests.fakes import anthropic_server as claude_says
from tests.scripted import RoleScript
from tests.support.tasks import corrections, final_summary, start_task, write_file

pytestmark = pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed")

FLAKY_TEST = """\
const { test } = require('node:test');
const assert = require('assert');
const fs = require('fs');
const path = require('path');
const root = path.join(__dirname, '..');

test('stable', () => assert.ok(true));

test('finishes in time', () => {
  const marker = path.join(root, '.flaky-ran');
  if (fs.existsSync(path.join(root, 'README.md')) && !fs.existsSync(marker)) {  // the first run after the task's change (its README)
    fs.writeFileSync(marker, 'ran');
    assert.fail('took 140 ms, the limit is 100 ms');
  }
});
"""


def node_repo(root: Path, name: str, files: dict[str, str]) -> Path:
    package = {"name": name, "private": True, "scripts": {"test": "node --test"}}
    return make_repo(root / name, {"package.json": json.dumps(package), ".gitignore": ".flaky-ran\n", **files})


async def readme_task(bot: BotHarness, model: RoleScript, workspace: str) -> tuple[Task, Any]:
    """The user asks for a README in `workspace` and the worker writes one, touching no test: what the bot's test
    run then says is about the tests as the contributor has them. Returns the task and its summary."""
    model.add("orchestrator", start_task(workspace, "Add a README."), claude_says.text("started"))
    model.add("code", write_file("README.md", f"# {workspace}\n"), claude_says.text("Added a README."))
    bot.say(f"add a readme to {workspace}")
    task, summary = await final_summary(bot, 1, timeout=90)
    print(f"SUMMARY[{workspace}]", [ln for ln in summary.text.splitlines() if ln.strip()][:4])
    return task, summary


async def test_a_flaky_js_test_is_reported_flaky_with_no_correction(
    bot: BotHarness, model: RoleScript, workspace_root: Path
) -> None:
    node_repo(workspace_root, "timing", {"test/timing.test.js": FLAKY_TEST})
    task, summary = await readme_task(bot, model, "timing")
    assert corrections(model) == [], "a test passing on its re-run is not sent back"
    assert task.status is TaskStatus.COMPLETED and summary.text.startswith("✔"), summary.text
    assert "1 flaky" in summary.text and "0 broken" in summary.text, summary.text
    assert "test/timing.test.js::finishes in time" in summary.text, summary.text


COLOUR = "exports.red = (text) => ('NO_COLOR' in process.env ? text : `\\x1b[31m${text}\\x1b[39m`);\n"
COLOUR_TEST = """\
const { test } = require('node:test');
const assert = require('assert');
const { red } = require('../colour.js');

test('paints red', () => assert.strictEqual(red('x'), '\\x1b[31mx\\x1b[39m'));
test('keeps the text', () => assert.ok(red('x').includes('x')));
"""


async def test_a_colour_test_passing_for_the_contributor_passes_for_the_bot(
    bot: BotHarness, model: RoleScript, workspace_root: Path
) -> None:
    node_repo(workspace_root, "paint", {"colour.js": COLOUR, "test/colour.test.js": COLOUR_TEST})
    task, summary = await readme_task(bot, model, "paint")
    assert task.status is TaskStatus.COMPLETED and summary.text.startswith("✔"), summary.text
    assert "2 passed" in summary.text and "0 still failing from before" in summary.text, summary.text


FLAKY_LINT = """\
const fs = require('fs');
const path = require('path');
const marker = path.join(__dirname, '.flaky-ran');
if (fs.existsSync(path.join(__dirname, 'README.md')) && !fs.existsSync(marker)) {  // the first run after the task's change (its README)
  fs.writeFileSync(marker, 'ran');
  console.error('lint: worker pool timed out');
  process.exit(1);
}
"""


async def test_a_script_step_failing_once_is_flaky_not_broken(
    bot: BotHarness, model: RoleScript, workspace_root: Path
) -> None:
    repo = node_repo(
        workspace_root, "linted", {"lint.js": FLAKY_LINT, "test/ok.test.js": "require('node:test')('ok', () => {});\n"}
    )
    package = json.loads((repo / "package.json").read_text())
    package["scripts"]["test"] = "node lint.js && node --test"
    (repo / "package.json").write_text(json.dumps(package))
    git(repo, "commit", "-qam", "lint step")
    task, summary = await readme_task(bot, model, "linted")
    assert corrections(model) == [], "a step passing on its re-run is not sent back"
    assert task.status is TaskStatus.COMPLETED and summary.text.startswith("✔"), summary.text
    assert "1 flaky" in summary.text and "step node lint.js" in summary.text, summary.text


CRASHING_ONCE = """\
import os
import pathlib
import signal

HERE = pathlib.Path(__file__).parent


def test_steady():
    marker = HERE / ".crashed"
    if (HERE / "README.md").exists() and not marker.exists():  # the first run after the task's change (its README)
        marker.write_text("crashed")
        os.kill(os.getpid(), signal.SIGKILL)
"""


async def test_a_run_killed_once_is_run_again_before_the_task_is_blamed(
    bot: BotHarness, model: RoleScript, workspace_root: Path
) -> None:
    make_repo(workspace_root / "crashy", {".gitignore": ".crashed\n", "test_steady.py": CRASHING_ONCE})
    task, summary = await readme_task(bot, model, "crashy")
    assert corrections(model) == [], "a crash its re-run does not repeat is not sent back"
    assert task.status is TaskStatus.COMPLETED and summary.text.startswith("✔"), summary.text
    assert "killed part-way" in summary.text and "re-run completed" in summary.text, summary.text
