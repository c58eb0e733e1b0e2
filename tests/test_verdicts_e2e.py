"""Tests judged against the base commit, end to end: tasks judged by their tests against the base commit, in the workspace's own environment,
through the real bot with a scripted model and workspaces built here (no network)."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from agents.core.models import TaskStatus
from tests.conftest import USER_ID, BotHarness, git, make_repo
from tests.fakes import anthropic_server as claude_says
from tests.scripted import RoleScript, last_user_text, spare
from tests.support.tasks import breaks_then_fixes, corrections, edit, final_summary, start_task, write_file


def write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text))


def sent_to_worker(model: RoleScript, turn: int) -> str:
    """The user text of the code worker's `turn`-th request (0: the task itself)."""
    return last_user_text(model.requests["code"][turn])


def branch_files(repo: Path, branch: str) -> list[str]:
    return git(repo, "diff", "--name-only", f"main..{branch}").split()


# ----------------------------------------------------------------------------------------------------------------------
# red at the base


async def test_pre_existing_failure_is_reported_not_sent_back(bot: BotHarness, model: RoleScript) -> None:
    """calc's test_add fails at the base; an unrelated change completes with no correction turn about it."""
    model.add(
        "orchestrator",
        start_task("calc", "Add a module greet.py with hello() returning 'hi'."),
        claude_says.text("started"),
    )
    model.add("code", write_file("greet.py", "def hello():\n    return 'hi'\n"), claude_says.text("Added greet.py."))
    bot.say("add a greet module to calc")
    task, summary = await final_summary(bot, 1, timeout=60)

    assert task.status is TaskStatus.COMPLETED
    assert len(model.requests["code"]) == 2 and corrections(model) == [], "no correction turn for an old failure"
    assert "0 broken" in summary.text and "1 still failing from before (pre-existing)" in summary.text
    assert "test_calc.py::test_add" in summary.text
    assert "Never weaken, skip or delete tests" in str(model.requests["code"][0]["system"])
    events = await bot.runtime.store.task_events(1)
    detail = next(e.detail for e in events if e.kind == "tests")
    assert "pre-existing (1): test_calc.py::test_add" in detail
    bot.tg.send_command(USER_ID, "/task 1")
    shown = await bot.tg.await_for(
        lambda: next(
            (m for m in bot.tg.messages(USER_ID) if "pre-existing (1): test_calc.py::test_add" in (m.text or "")), None
        )
    )
    assert "Events" in shown.text, "/task N shows the full lists"


async def test_broken_test_is_corrected_alone_with_old_failures_listed_as_not_yours(
    bot: BotHarness, model: RoleScript, workspace_root: Path
) -> None:
    make_repo(
        workspace_root / "shop",
        {
            "price.py": "def total(a, b):\n    return a + b\n\ndef legacy():\n    return 1\n",
            "test_price.py": """\
            from price import legacy, total

            def test_total():
                assert total(2, 3) == 5

            def test_legacy():
                assert legacy() == 2, 'legacy has been wrong for years'
            """,
        },
    )
    model.add(
        "orchestrator", start_task("shop", "Rename the variables in price.py for clarity."), claude_says.text("started")
    )
    model.add("code", *breaks_then_fixes("price.py", "return a + b", "return a * b", "return a + b"))
    bot.say("tidy price.py in shop")
    task, summary = await final_summary(bot, 1, timeout=60)

    assert task.status is TaskStatus.COMPLETED
    [correction] = corrections(model)
    yours, _, not_yours = correction.partition("not yours, leave them unless the task is about them")
    assert "test_price.py::test_total" in yours and "assert 6 == 5" in yours
    assert "test_price.py::test_legacy" not in yours and "legacy has been wrong" not in yours
    assert "test_price.py::test_legacy" in not_yours
    assert "Do not weaken, skip or delete tests" in correction
    assert (
        "1 fixed" not in summary.text and "0 broken" in summary.text and "1 still failing from before" in summary.text
    )


async def test_stubborn_breakage_ends_blocked(bot: BotHarness, model: RoleScript, workspace_root: Path) -> None:
    make_repo(
        workspace_root / "shop",
        {
            "price.py": "def total(a, b):\n    return a + b\n",
            "test_price.py": "from price import total\n\ndef test_total():\n    assert total(2, 3) == 5\n",
        },
    )
    model.add("orchestrator", start_task("shop", "Make total() faster."), claude_says.text("started"))
    model.add("code", edit("price.py", "return a + b", "return a - b"), *[claude_says.text("fine") for _ in range(4)])
    bot.say("speed up shop")
    task, summary = await final_summary(bot, 1, timeout=90)
    assert task.status is TaskStatus.BLOCKED and "3 corrections" in summary.text
    assert summary.text.startswith("✗ Task #1 blocked: tests still fail"), "the verdict's mark first"
    assert "1 broken" in summary.text and "test_price.py::test_total" in summary.text
    assert len(corrections(model)) == 3


# ----------------------------------------------------------------------------------------------------------------------
# flaky, slow, missing


async def test_flaky_test_is_reported_flaky_not_broken(
    bot: BotHarness, model: RoleScript, workspace_root: Path
) -> None:
    """It passes at the base, fails on the first run after the task's change, passes on the re-run of its id."""
    make_repo(
        workspace_root / "net",
        {
            ".gitignore": ".flaky-ran\n",
            "test_net.py": """\
            import pathlib

            HERE = pathlib.Path(__file__).parent

            def test_stable():
                assert True

            def test_network_sometimes():
                marker = HERE / ".flaky-ran"
                if (HERE / "README.md").exists() and not marker.exists():  # first run after the task's change
                    marker.write_text("ran")
                    assert False, "connection reset"
            """,
        },
    )
    model.add("orchestrator", start_task("net", "Add a README."), claude_says.text("started"))
    model.add("code", write_file("README.md", "# net\n"), claude_says.text("Added a README."))
    bot.say("add a readme to net")
    task, summary = await final_summary(bot, 1, timeout=60)
    assert task.status is TaskStatus.COMPLETED
    assert corrections(model) == []
    assert "1 flaky" in summary.text and "0 broken" in summary.text
    assert "test_net.py::test_network_sometimes" in summary.text


# mul() is wrong whenever the suite's other test module was loaded beside it (the whole run the bot judges by), right
# when its test runs alone (the re-run of a newly failing id): broken deterministically, never flaky
SUITE_ONLY_BREAKAGE = (
    "import sys\n\n\ndef add(a, b):\n    return a + b\n\n\n"
    'def mul(a, b):\n    """Multiply."""\n    return a * b + (1 if "test_calc" in sys.modules else 0)\n'
)


@pytest.mark.settings(max_corrections=1)
async def test_a_test_the_change_breaks_only_beside_the_others_is_broken_not_flaky(
    bot: BotHarness, model: RoleScript, workspace_root: Path
) -> None:
    """test_mul passes at the base; the task's mul() fails it in every whole run and passes it when its id runs
    alone. Called flaky on the re-run of its id alone, it made the task ✔; a whole re-run fails it again: broken."""
    make_repo(
        workspace_root / "calc3",
        {
            "calc.py": "def add(a, b):\n    return a + b\n\n\ndef mul(a, b):\n    return a * b\n",
            "test_calc.py": "from calc import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n",
            "test_mul.py": "from calc import mul\n\n\ndef test_mul():\n    assert mul(2, 3) == 6\n",
        },
    )
    model.add("orchestrator", start_task("calc3", "Add a docstring to mul()."), claude_says.text("started"))
    model.add(
        "code",
        write_file("calc.py", SUITE_ONLY_BREAKAGE),
        claude_says.text("Added the docstring."),
        spare(claude_says.text("Still done."), why="the correction's answer: the bot may stop before asking it"),
    )
    bot.say("add a docstring to mul in calc3")
    task, summary = await final_summary(bot, 1, timeout=90)
    assert task.status is TaskStatus.BLOCKED, summary.text
    assert summary.text.startswith("✗"), summary.text
    assert "1 broken" in summary.text and "test_mul.py::test_mul" in summary.text and "flaky" not in summary.text


async def test_slow_suite_timing_out_at_the_base_too_is_unverified_not_blocked(
    bot: BotHarness, model: RoleScript, workspace_root: Path
) -> None:
    make_repo(
        workspace_root / "slow",
        {
            ".agentlab.toml": "[tests]\ntimeout = 2\n",
            "test_slow.py": "import time\n\ndef test_forever():\n    time.sleep(60)\n",
        },
    )
    model.add("orchestrator", start_task("slow", "Add a README."), claude_says.text("started"))
    model.add("code", write_file("README.md", "# slow\n"), claude_says.text("Added."))
    bot.say("add a readme to slow")
    task, summary = await final_summary(bot, 1, timeout=60)
    assert task.status is TaskStatus.UNVERIFIED and corrections(model) == [], "not the task's doing, not seen passing"
    first = summary.text.splitlines()[0]
    assert first.startswith("⚠") and "timed out after 2 s" in first and "at the base and now" in first
    assert "also at the base commit" in summary.text


async def test_workspace_without_tests_says_so(bot: BotHarness, model: RoleScript) -> None:
    model.add("orchestrator", start_task("group-therapy", "Print hello instead of hi."), claude_says.text("started"))
    model.add("code", edit("app.py", "'hi'", "'hello'"), claude_says.text("Done."))
    bot.say("say hello in group therapy")
    task, summary = await final_summary(bot, 1, timeout=60)
    assert task.status is TaskStatus.UNVERIFIED and corrections(model) == [], "nothing was seen passing"
    assert summary.text.startswith("⚠ Task #1 needs a look · unverified: the workspace has no tests")
    assert "no tests found" in summary.text


async def test_the_checks_are_the_bots_not_the_workers(
    bot: BotHarness, model: RoleScript, workspace_root: Path
) -> None:
    """A worker that breaks the code, rewrites .agentlab.toml to `echo '1 passed'` and deletes a test file gets
    corrected all the same, and the summary names what it did to the checks; the deleted test is never seen passing."""
    make_repo(
        workspace_root / "shop",
        {
            ".agentlab.toml": "[tests]\njunit = 'none.xml'\n",
            "price.py": "def total(a, b):\n    return a + b\n",
            "test_price.py": "from price import total\n\ndef test_total():\n    assert total(2, 3) == 5\n",
            "test_extra.py": "def test_extra():\n    assert True\n",
        },
    )
    model.add("orchestrator", start_task("shop", "Make total() faster."), claude_says.text("started"))
    model.add(
        "code",
        edit("price.py", "return a + b", "return a - b"),
        write_file(".agentlab.toml", "[tests]\ncommand = \"echo '1 passed'\"\n"),
        claude_says.tool_use("run_command", {"command": "rm test_extra.py"}),
        claude_says.text("Faster now."),
        edit("price.py", "return a - b", "return a + b"),
        claude_says.text("Fixed."),
    )
    bot.say("speed up shop")
    task, summary = await final_summary(bot, 1, timeout=60)
    [correction] = corrections(model)
    assert "test_price.py::test_total" in correction and "assert -1 == 5" in correction
    # test_extra passed at the base and no longer runs: never seen passing, so the bot cannot tell (⚠), not done
    assert task.status is TaskStatus.UNVERIFIED
    assert summary.text.startswith("⚠") and "test_extra.py::test_extra" in summary.text, "not plainly done"
    assert "changed test configuration: .agentlab.toml" in summary.text
    assert "deleted the test file test_extra.py" in summary.text


# ----------------------------------------------------------------------------------------------------------------------
# the workspace's own environment, testing the worktree


def fake_node_project(repo: Path) -> None:
    """A JS project whose test framework (`mocha`, a shell script) and dependency live in the main checkout's node_modules."""
    write(repo / "node_modules" / ".bin" / "mocha", "#!/bin/sh\nexec node test/test.js\n")
    (repo / "node_modules" / ".bin" / "mocha").chmod(0o755)
    write(repo / "node_modules" / "helper" / "index.js", "module.exports = (x) => x;\n")
    write(repo / "packages" / "web" / "node_modules" / "webdep" / "index.js", "module.exports = 'web';\n")


async def test_js_project_uses_the_main_checkouts_node_modules_and_never_commits_them(
    bot: BotHarness, model: RoleScript, workspace_root: Path
) -> None:
    repo = make_repo(
        workspace_root / "jsapp",
        {
            "package.json": json.dumps({"name": "jsapp", "scripts": {"test": "mocha"}}),
            "index.js": "exports.double = (x) => 2 * x;\n",
            "test/test.js": """\
            const assert = require('assert');
            const helper = require('helper');
            const web = require('../packages/web/lib.js');
            const { double } = require('../index.js');
            assert.strictEqual(helper(double(2)), 4, 'double(2) should be 4');
            assert.strictEqual(web, 'web');
            console.log('  2 passing');
            """,
            "packages/web/package.json": json.dumps({"name": "web"}),
            "packages/web/lib.js": "module.exports = require('webdep');\n",
        },
    )
    fake_node_project(repo)  # untracked and not ignored, as in a fresh clone after `npm install`
    model.add("orchestrator", start_task("jsapp", "Make double() clearer."), claude_says.text("started"))
    model.add("code", *breaks_then_fixes("index.js", "2 * x", "3 * x", "x + x"))
    bot.say("tidy double in jsapp")
    task, summary = await final_summary(bot, 1, timeout=60)

    [correction] = corrections(model)
    assert "double(2) should be 4" in correction, "the worktree's own index.js was tested, red"
    assert "npm test" in correction
    assert task.status is TaskStatus.COMPLETED
    assert "suite passed" in summary.text and "0 broken" in summary.text and "npm test" in summary.text
    assert branch_files(repo, task.branch) == ["index.js"], "borrowed node_modules are never committed"
    assert (repo / "node_modules" / ".bin" / "mocha").is_file()


def make_venv_with_editable_install(repo: Path, package_src: Path) -> Path:
    """A workspace `.venv` (no pip, offline) that sees the bot's pytest and has `mypkg` installed editable from the
    main checkout's `src/` (the `.pth` file an editable install writes)."""
    venv = repo / ".venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    [site] = venv.glob("lib/python*/site-packages")
    bot_site = next(p for p in sys.path if p.endswith("site-packages") and Path(p, "pytest").is_dir())
    (site / "bot_site.pth").write_text(bot_site + "\n")
    (site / "__editable__.mypkg-0.1.pth").write_text(str(package_src) + "\n")
    return venv


async def test_src_layout_editable_install_tests_the_worktree(
    bot: BotHarness, model: RoleScript, workspace_root: Path
) -> None:
    repo = make_repo(
        workspace_root / "lib",
        {
            ".gitignore": ".venv/\n",
            "pyproject.toml": "[project]\nname = 'mypkg'\nversion = '0.1'\n\n[tool.pytest.ini_options]\n"
            "testpaths = ['tests']\n",
            "src/mypkg/__init__.py": "def answer():\n    return 42\n",
            "tests/test_answer.py": "from mypkg import answer\n\ndef test_answer():\n    assert answer() == 42\n",
        },
    )
    await asyncio.to_thread(make_venv_with_editable_install, repo, repo / "src")
    model.add("orchestrator", start_task("lib", "Document answer()."), claude_says.text("started"))
    model.add("code", *breaks_then_fixes("src/mypkg/__init__.py", "return 42", "return 41", "return 40 + 2"))
    bot.say("document answer in lib")
    task, summary = await final_summary(bot, 1, timeout=60)

    [correction] = corrections(model)
    assert "tests/test_answer.py::test_answer" in correction and "assert 41 == 42" in correction
    assert task.status is TaskStatus.COMPLETED
    assert "1 passed" in summary.text and "· pytest" in summary.text and ".venv/bin" not in summary.text
    assert "editable install" in summary.text and "overridden" in summary.text
    assert branch_files(repo, task.branch) == ["src/mypkg/__init__.py"], "the .venv link is never committed"
    assert "agentlab" in (repo / ".git" / "info" / "exclude").read_text()


async def test_bots_interpreter_fallback_is_said(bot: BotHarness, model: RoleScript) -> None:
    model.add("orchestrator", start_task("calc", "Fix add()."), claude_says.text("started"))
    model.add("code", edit("calc.py", "a - b", "a + b"), claude_says.text("Fixed."))
    bot.say("fix calc")
    task, summary = await final_summary(bot, 1, timeout=60)
    assert task.status is TaskStatus.COMPLETED
    assert "1 passed · 1 fixed · 0 broken · 0 still failing from before (pre-existing)" in summary.text
    assert "ran with the bot's Python" in summary.text
    assert sys.executable not in summary.text


def fake_uv(bin_dir: Path, calls: Path) -> None:
    """Stands in for `uv run --frozen python ...`: logs the call and runs the rest with the bot's interpreter."""
    write(
        bin_dir / "uv",
        f"""\
        #!/bin/sh
        echo "$@" >> {calls}
        shift 2
        shift
        exec {sys.executable} "$@"
        """,
    )
    (bin_dir / "uv").chmod(0o755)


async def test_uv_project_runs_through_uv_run(
    bot: BotHarness, model: RoleScript, workspace_root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Detection picks `uv run` for a project with uv.lock. Here `uv` is a stand-in on PATH (`uv` syncing a real
    environment needs the network); `test_real_uv_project` uses the real one where it is installed."""
    calls = tmp_path / "uv-calls.txt"
    fake_uv(tmp_path / "bin", calls)
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}")
    # detection is under test here, not confinement: the stand-in logs its calls to a file outside any sandbox
    bot.runtime.settings.sandboxing.sandbox = "off"
    make_repo(
        workspace_root / "uvproj",
        {
            "pyproject.toml": "[project]\nname = 'uvproj'\nversion = '0.1'\n",
            "uv.lock": "version = 1\n",
            "mod.py": "def f():\n    return 1\n",
            "test_mod.py": "from mod import f\n\ndef test_f():\n    assert f() == 1\n",
        },
    )
    model.add("orchestrator", start_task("uvproj", "Refactor f()."), claude_says.text("started"))
    model.add("code", *breaks_then_fixes("mod.py", "return 1", "return 2", "return 2 - 1"))
    bot.say("refactor uvproj")
    task, summary = await final_summary(bot, 1, timeout=60)
    [correction] = corrections(model)
    assert "test_mod.py::test_f" in correction and "uv run pytest" in correction
    assert task.status is TaskStatus.COMPLETED and "uv run pytest" in summary.text
    assert calls.read_text().startswith("run --frozen python -m pytest")


# uv: on PATH, or the one the test extras install beside this Python
UV = shutil.which("uv") or shutil.which("uv", path=str(Path(sys.executable).parent))


@pytest.mark.skipif(UV is None, reason="uv is not installed on this machine")
async def test_real_uv_project(bot: BotHarness, model: RoleScript, workspace_root: Path) -> None:
    """With the real uv: a project whose `.venv` uv made; the workspace .venv is found first and tests the worktree."""
    repo = make_repo(
        workspace_root / "uvreal",
        {
            ".gitignore": ".venv/\n",
            "pyproject.toml": "[project]\nname = 'uvreal'\nversion = '0.1'\nrequires-python = '>=3.11'\n",
            "mod.py": "def f():\n    return 1\n",
            "test_mod.py": "from mod import f\n\ndef test_f():\n    assert f() == 1\n",
        },
    )
    await asyncio.to_thread(
        subprocess.run, [UV, "venv", "--offline", "-p", sys.executable, str(repo / ".venv")], check=True
    )
    [site] = (repo / ".venv").glob("lib/python*/site-packages")
    bot_site = next(p for p in sys.path if p.endswith("site-packages") and Path(p, "pytest").is_dir())
    (site / "bot_site.pth").write_text(bot_site + "\n")
    model.add("orchestrator", start_task("uvreal", "Refactor f()."), claude_says.text("started"))
    model.add("code", *breaks_then_fixes("mod.py", "return 1", "return 2", "return 1"))
    bot.say("refactor uvreal")
    task, _summary = await final_summary(bot, 1, timeout=60)
    [correction] = corrections(model)
    assert "test_mod.py::test_f" in correction
    assert task.status is TaskStatus.COMPLETED


async def test_untracked_agentlab_toml_in_the_workspace_is_used_and_said(
    bot: BotHarness, model: RoleScript, workspace_root: Path
) -> None:
    repo = make_repo(workspace_root / "custom", {"check.sh": 'test "$(cat value)" = 1\n', "value": "1\n"})
    (repo / ".agentlab.toml").write_text('[tests]\ncommand = "sh check.sh"\n')  # untracked
    model.add("orchestrator", start_task("custom", "Change value."), claude_says.text("started"))
    model.add(
        "code",
        write_file("value", "2\n"),
        claude_says.text("Changed."),
        write_file("value", "1\n"),
        claude_says.text("Reverted."),
    )
    bot.say("change value in custom")
    task, summary = await final_summary(bot, 1, timeout=60)
    [correction] = corrections(model)
    assert "sh check.sh" in correction and "(whole suite)" in correction
    assert task.status is TaskStatus.COMPLETED
    assert ".agentlab.toml read from the workspace (untracked there)" in summary.text
