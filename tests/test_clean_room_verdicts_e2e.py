"""A verdict the task cannot forge, through the real bot (scripted model playing a hostile or unlucky worker, fake
Telegram), real test frameworks and real bwrap: every verdict run tests a fresh checkout of its commit in a network
namespace of its own (the clean room), a fix task's red tests are traced at the base commit, a red test the bot
cannot trace counts as the task's, a test file that crashed once is flaky, and a suite that cannot start says why."""

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
from tests.support.tasks import corrections, edit, final_summary, start_task, write_file

node = pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed")

RED = "tests/test_cart.py::test_total"  # fails on a plain `assert`; runs src/pkg/utils.py


def shop(root: Path) -> Path:
    return make_repo(
        root / "shop",
        {
            "pyproject.toml": "[tool.pytest.ini_options]\ntestpaths = ['tests']\n",
            "src/pkg/__init__.py": "",
            "src/pkg/utils.py": "def add_all(items):\n    total = 0\n    for item in items[1:]:\n"
            "        total += item\n    return total\n",
            "src/pkg/cart.py": "from pkg.utils import add_all\n\n\ndef total(prices):\n    return add_all(prices)\n",
            "tests/test_cart.py": "from pkg.cart import total\n\n\ndef test_total():\n    assert total([1, 2]) == 3\n",
        },
    )


@pytest.mark.settings(max_corrections=1)
async def test_a_worker_that_switches_the_tracer_off_is_still_judged_on_its_red_test(
    bot: BotHarness, model: RoleScript, workspace_root: Path
) -> None:
    """The worker's change makes the package call `sys.setprofile(None)` at import: a tracer in the worker's code
    would see nothing. The red test is traced at the base commit, where the worker's code is not."""
    shop(workspace_root)
    model.add(
        "orchestrator", start_task("shop", "Fix the bug in src/pkg/utils.py: totals are wrong."), claude_says.text("ok")
    )
    model.add(
        "code",
        write_file("src/pkg/__init__.py", "import sys\n\nsys.setprofile(None)\n"),
        claude_says.text("Fixed."),
        edit("src/pkg/utils.py", "items[1:]", "items"),
        claude_says.text("Fixed for real."),
    )
    bot.say("fix the totals in shop")
    task, summary = await final_summary(bot, 1, timeout=120)
    print("SUMMARY[setprofile]", [ln for ln in summary.text.splitlines() if ln.strip()][:4])
    [correction] = corrections(model)
    assert RED in correction and "it runs `src/pkg/utils.py`, which the instructions name" in correction, correction
    assert task.status is TaskStatus.COMPLETED and summary.text.startswith("✔"), summary.text
    assert "1 fixed" in summary.text, summary.text


PORT_TEST = """\
import socket
import time

from app.server import PORT


def test_serves_on_its_port():
    for _ in range(10):  # a moment for anything else that wants the port (a service started by the task)
        with socket.socket() as probe:
            if probe.connect_ex(("127.0.0.1", 8765)) == 0:
                break
        time.sleep(0.1)
    with socket.socket() as server:
        server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        server.bind(("127.0.0.1", PORT))
"""


@pytest.mark.settings(max_corrections=1)
async def test_a_service_holding_a_port_never_makes_a_broken_test_pre_existing(
    bot: BotHarness, model: RoleScript, workspace_root: Path
) -> None:
    """The worker starts a service on the port a test binds, then breaks that test: the base run, in a namespace of
    its own, sees the test pass, so the broken test is the task's (not "still failing from before")."""
    make_repo(
        workspace_root / "portapp",
        {
            "pyproject.toml": "[tool.pytest.ini_options]\ntestpaths = ['tests']\n",
            "src/app/__init__.py": "",
            "src/app/server.py": "PORT = 8765\n",
            "tests/test_server.py": PORT_TEST,
        },
    )
    model.add("orchestrator", start_task("portapp", "Tidy src/app/server.py."), claude_says.text("ok"))
    model.add(
        "code",
        claude_says.tool_use("run_command", {"command": "python3 -m http.server 8765", "background": True}),
        edit("src/app/server.py", "PORT = 8765", "PORT = -1"),
        claude_says.text("Tidied."),
        edit("src/app/server.py", "PORT = -1", "PORT = 8765"),
        claude_says.text("Put the port back."),
    )
    bot.say("tidy the server in portapp")
    task, summary = await final_summary(bot, 1, timeout=120)
    print("SUMMARY[port]", [ln for ln in summary.text.splitlines() if ln.strip()][:4])
    [correction] = corrections(model)
    mine = correction.partition("not yours")[0]
    assert "tests/test_server.py::test_serves_on_its_port" in mine, correction
    assert task.status is TaskStatus.COMPLETED and summary.text.startswith("✔"), summary.text
    assert "0 still failing from before (pre-existing)" in summary.text, summary.text


AVA_TEST = """\
const test = require('ava');
const { normalize } = require('./source/index.js');

test('keeps plain lines', t => t.is(normalize('a\\n'), 'a\\n'));
test('turns CRLF into LF', t => t.is(normalize('a\\r\\n'), 'a\\n'));
"""


@node
async def test_an_ava_red_test_whose_id_names_no_file_stays_the_tasks_target(
    bot: BotHarness, model: RoleScript, workspace_root: Path, node_tools: Path
) -> None:
    """ava's test ids carry no file, so the bot cannot trace what a red test runs: for a fix task it stays the
    task's target (fail closed), and a change elsewhere is sent back."""
    repo = make_repo(
        workspace_root / "avaapp",
        {
            "package.json": json.dumps({"name": "avaapp", "private": True, "scripts": {"test": "ava"}}),
            ".gitignore": "node_modules/\n",
            "source/utilities.js": "exports.lines = (text) => text.replace(/\\r/g, '\\r');\n",
            "source/index.js": "const { lines } = require('./utilities.js');\nexports.normalize = (t) => lines(t);\n",
            "test.js": AVA_TEST,
        },
    )
    give_node_modules(repo, node_tools, "ava")
    model.add("orchestrator", start_task("avaapp", "Fix the bug in source/utilities.js."), claude_says.text("ok"))
    model.add(
        "code",
        edit("source/index.js", "(t) => lines(t)", "(text) => lines(text)"),  # not the fix
        claude_says.text("Fixed."),
        edit("source/utilities.js", "/\\r/g, '\\r'", "/\\r\\n/g, '\\n'"),
        claude_says.text("Fixed for real."),
    )
    bot.say("fix the CRLF bug in avaapp")
    task, summary = await final_summary(bot, 1, timeout=120)
    print("SUMMARY[ava]", [ln for ln in summary.text.splitlines() if ln.strip()][:4])
    [correction] = corrections(model)
    mine = correction.partition("not yours")[0]
    assert "turns CRLF into LF" in mine and "could not trace" in mine, correction
    assert task.status is TaskStatus.COMPLETED and summary.text.startswith("✔"), summary.text


CRASHING_ONCE = """\
const { test } = require('node:test');
const assert = require('assert');
const fs = require('fs');
const path = require('path');

const root = path.join(__dirname, '..');
if (fs.existsSync(path.join(root, 'lib', 'flag.js')) && !fs.existsSync(path.join(root, '.crashed'))) {
  fs.writeFileSync(path.join(root, '.crashed'), 'once');
  process.abort();
}
test('streams', () => assert.strictEqual(require('../lib/stream.js').read(), 'data'));
"""


@node
@pytest.mark.settings(max_corrections=1)
async def test_a_test_file_that_crashes_once_is_flaky_not_broken(
    bot: BotHarness, model: RoleScript, workspace_root: Path
) -> None:
    """A test file aborts (SIGABRT, no per-test result) on its first run after the change only: its re-run passes,
    so it is "flaky (crashed once)", not broken, and the worker is not sent back."""
    make_repo(
        workspace_root / "streamapp",
        {
            "package.json": json.dumps({"name": "streamapp", "private": True, "scripts": {"test": "node --test"}}),
            "lib/stream.js": "exports.read = () => 'data';\n",
            "test/stream.test.js": CRASHING_ONCE,
        },
    )
    model.add("orchestrator", start_task("streamapp", "Add a flag module to lib."), claude_says.text("ok"))
    model.add(
        "code",
        write_file("lib/flag.js", "exports.flag = true;\n"),
        claude_says.text("Added."),
        spare(claude_says.text("Nothing to change."), why="only if sent back (the old verdict): it must not be"),
    )
    bot.say("add a flag in streamapp")
    task, summary = await final_summary(bot, 1, timeout=120)
    print("SUMMARY[crash]", [ln for ln in summary.text.splitlines() if ln.strip()][:6])
    assert corrections(model) == [], "a crash that does not repeat is not the worker's"
    assert task.status is TaskStatus.COMPLETED and summary.text.startswith("✔"), summary.text
    assert "Flaky (crashed once, passed on re-run): test/stream.test.js" in summary.text, summary.text
    assert "Tests: 1 passed · 0 fixed · 0 broken" in summary.text and "no longer run" not in summary.text, summary.text


@node
async def test_a_suite_that_cannot_start_says_which_module_is_missing_and_what_to_do(
    bot: BotHarness, model: RoleScript, workspace_root: Path
) -> None:
    """The test script imports a package the workspace does not have (as vitest looking for `vite` in a folder the
    sandbox hides): ⚠ names the missing module, where it was looked for from, and one thing to do."""
    make_repo(
        workspace_root / "viteapp",
        {
            "package.json": json.dumps(
                {"name": "viteapp", "private": True, "type": "module", "scripts": {"test": "node run-tests.js"}}
            ),
            "run-tests.js": "import { createServer } from 'vite';\nawait createServer();\n",
            "calc.js": "export const add = (a, b) => a + b;\n",
        },
    )
    model.add("orchestrator", start_task("viteapp", "Tidy calc.js."), claude_says.text("ok"))
    model.add("code", edit("calc.js", "(a, b) => a + b", "(x, y) => x + y"), claude_says.text("Tidied."))
    bot.say("tidy calc in viteapp")
    task, summary = await final_summary(bot, 1, timeout=120)
    print("SUMMARY[cannot-start]", [ln for ln in summary.text.splitlines() if ln.strip()][:4])
    assert summary.text.startswith("⚠"), summary.text
    assert "the module vite cannot be found (looked for from run-tests.js)" in summary.text, summary.text
    assert "install it in the workspace" in summary.text, summary.text


async def test_a_file_the_tests_need_that_no_commit_holds_is_named_with_how_to_keep_it(
    bot: BotHarness, model: RoleScript, workspace_root: Path
) -> None:
    """The tests read `.env.test`, which the owner's workspace has but never committed: the clean room lacks it,
    so the verdict is ⚠ naming the file and `.agentlab.toml [tests] keep`, never a silent ✔."""
    repo = make_repo(
        workspace_root / "envapp",
        {
            ".gitignore": ".env.test\n",
            "app.py": "def greet():\n    return 'hi'\n",
            "test_app.py": "from pathlib import Path\n\nfrom app import greet\n\n\ndef test_greet():\n"
            "    assert Path('.env.test').read_text().strip() == 'MODE=test'\n    assert greet() == 'hi'\n",
        },
    )
    (repo / ".env.test").write_text("MODE=test\n")
    model.add("orchestrator", start_task("envapp", "Tidy app.py."), claude_says.text("ok"))
    model.add("code", edit("app.py", "return 'hi'", "return 'hi'  # tidy"), claude_says.text("Tidied."))
    bot.say("tidy app in envapp")
    task, summary = await final_summary(bot, 1, timeout=120)
    print("SUMMARY[keep]", [ln for ln in summary.text.splitlines() if ln.strip()][:4])
    assert summary.text.startswith("⚠"), summary.text
    assert summary.text.startswith("⚠ Task #1 needs a look · unverified: the tests looked for .env.test"), summary.text
    assert "an untracked .agentlab.toml of the workspace" in summary.text, summary.text
    assert '[tests] keep = [".env.test"]' in summary.text, summary.text


async def test_a_kept_file_reaches_the_clean_room(bot: BotHarness, model: RoleScript, workspace_root: Path) -> None:
    """Declared in the workspace's own (untracked) `.agentlab.toml [tests] keep`, its uncommitted `.env.test` is
    copied into each clean room: the tests pass and the verdict is ✔. (A committed file never keeps a credential
    file: tests/test_clean_room.py.)"""
    repo = make_repo(
        workspace_root / "keptapp",
        {
            ".gitignore": ".env.test\n",
            "app.py": "def greet():\n    return 'hi'\n",
            "test_app.py": "from pathlib import Path\n\nfrom app import greet\n\n\ndef test_greet():\n"
            "    assert Path('.env.test').read_text().strip() == 'MODE=test'\n    assert greet() == 'hi'\n",
        },
    )
    (repo / ".env.test").write_text("MODE=test\n")
    (repo / ".agentlab.toml").write_text('[tests]\nkeep = [".env.test"]\n')  # the owner's, never committed
    model.add("orchestrator", start_task("keptapp", "Tidy app.py."), claude_says.text("ok"))
    model.add("code", edit("app.py", "return 'hi'", "return 'hi'  # tidy"), claude_says.text("Tidied."))
    bot.say("tidy app in keptapp")
    task, summary = await final_summary(bot, 1, timeout=120)
    assert task.status is TaskStatus.COMPLETED and summary.text.startswith("✔"), summary.text
    assert "1 passed" in summary.text, summary.text


async def test_a_kept_red_base_result_that_a_second_base_run_contradicts_is_never_pre_existing(
    bot: BotHarness, model: RoleScript, workspace_root: Path
) -> None:
    """A kept base result says a test failed at the base (as one taken in a task's namespace, with its service on
    the port, could): a task that then breaks the test is not excused by it. The test is re-run at the base, passes
    there, and is "flaky at the base": ⚠, never ✔ with the test "still failing from before (pre-existing)"."""
    make_repo(
        workspace_root / "price",
        {
            "price.py": "def total(a, b):\n    return a + b\n",
            "test_price.py": "from price import total\n\ndef test_total():\n    assert total(2, 3) == 5\n",
        },
    )
    model.add("orchestrator", start_task("price", "Add notes.txt."), claude_says.text("started"))
    model.add("code", write_file("notes.txt", "hi\n"), claude_says.text("Added."))
    bot.say("add notes to price")
    first, summary = await final_summary(bot, 1, timeout=60)
    assert first.status is TaskStatus.COMPLETED and "1 passed" in summary.text, summary.text

    store = bot.runtime.store
    [(key, text)] = await store.rows("SELECT key, outcome FROM base_runs")
    kept = json.loads(text)
    kept["outcome"].update(status="failed", cases={"test_price.py::test_total": "failed"})
    kept["outcome"]["failures"] = {"test_price.py::test_total": "OSError: [Errno 98] Address already in use"}
    await store.write("UPDATE base_runs SET outcome = ? WHERE key = ?", (json.dumps(kept), key))

    model.add("orchestrator", start_task("price", "Tidy price.py."), claude_says.text("started"))
    model.add("code", edit("price.py", "a + b", "a - b"), claude_says.text("Tidied."))
    bot.say("tidy price")
    task, summary = await final_summary(bot, 2, timeout=60)
    print("SUMMARY[kept-contradicted]", [ln for ln in summary.text.splitlines() if ln.strip()][:4])
    assert "reused from an earlier run" in summary.text, "the kept result was used"
    assert summary.text.startswith("⚠") and task.status is not TaskStatus.COMPLETED, summary.text
    assert "flaky at the base" in summary.text and "test_price.py::test_total" in summary.text, summary.text
    assert "0 still failing from before (pre-existing)" in summary.text, summary.text
