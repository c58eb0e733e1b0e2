"""The bot runs a workspace's tests: detection of the command, and honest outcomes (no tests is never "passed")."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from agents.sandbox.shell import child_env
from agents.verify import suite_run
from agents.verify.suite_env import detect_environment
from agents.verify.suite_run import run_tests

Status = suite_run.TestStatus
PYTEST = f"{shlex.quote(sys.executable)} {suite_run.PYTEST_ARGS}"


def fast_env() -> dict[str, str]:
    """A suite run's default environment, minus the seconds the venv's pytest plugins take to load."""
    return child_env() | {"PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}


def found_command(workspace: Path) -> str | None:
    """The command `detect_environment` (what the bot's test run uses) found for `workspace`; None: no tests."""
    env = detect_environment(workspace)
    return env.command if env is not None else None


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


# ---------------------------------------------------------------------------------------------------------------------
# detection


def test_empty_workspace_has_no_test_command(tmp_path: Path) -> None:
    write(tmp_path / "main.py", "print('hi')\n")
    write(tmp_path / "tests" / "README.md", "no python here\n")
    assert found_command(tmp_path) is None


@pytest.mark.parametrize(
    "path, text",
    [
        ("test_app.py", "def test_x(): pass\n"),
        ("pkg/sub/app_test.py", "def test_x(): pass\n"),
        ("tests/helpers.py", "X = 1\n"),
        ("pytest.ini", "[pytest]\n"),
        ("conftest.py", ""),
        ("pyproject.toml", "[tool.pytest.ini_options]\naddopts = '-q'\n"),
        ("setup.cfg", "[metadata]\nname = x\n\n[tool:pytest]\ntestpaths = t\n"),
    ],
)
def test_pytest_detected_with_the_bots_interpreter(tmp_path: Path, path: str, text: str) -> None:
    write(tmp_path / path, text)
    assert found_command(tmp_path) == PYTEST


def test_test_files_in_hidden_or_vendored_dirs_do_not_count(tmp_path: Path) -> None:
    write(tmp_path / ".venv" / "lib" / "test_thing.py", "")
    write(tmp_path / "node_modules" / "x" / "test_y.py", "")
    write(tmp_path / "pyproject.toml", "[project]\nname = 'x'\n")
    assert found_command(tmp_path) is None


def test_workspace_venv_interpreter_is_preferred(tmp_path: Path) -> None:
    python = write(tmp_path / ".venv" / "bin" / "python", "")
    (tmp_path / ".venv" / "lib" / f"python{sys.version_info.major}.{sys.version_info.minor}").mkdir(parents=True)
    write(tmp_path / "test_app.py", "def test_x(): pass\n")
    assert found_command(tmp_path) == f"{python} {suite_run.PYTEST_ARGS}"


def test_npm_test_script_detected_but_not_the_npm_default(tmp_path: Path) -> None:
    package = tmp_path / "package.json"
    write(package, json.dumps({"scripts": {"test": 'echo "Error: no test specified" && exit 1'}}))
    assert found_command(tmp_path) is None
    write(package, json.dumps({"name": "x", "scripts": {"test": "jest"}}))
    assert found_command(tmp_path) == "npm test --silent"
    write(package, "{not json")
    assert found_command(tmp_path) is None


def test_agentlab_toml_wins(tmp_path: Path) -> None:
    write(tmp_path / "test_app.py", "def test_x(): pass\n")
    write(tmp_path / "package.json", json.dumps({"scripts": {"test": "jest"}}))
    write(tmp_path / ".agentlab.toml", '[tests]\ncommand = "make check"\n')
    assert found_command(tmp_path) == "make check"


def test_agentlab_toml_without_tests_section_falls_through(tmp_path: Path) -> None:
    write(tmp_path / ".agentlab.toml", "[other]\nx = 1\n")
    write(tmp_path / "test_app.py", "def test_x(): pass\n")
    assert found_command(tmp_path) == PYTEST


# ---------------------------------------------------------------------------------------------------------------------
# running


async def test_passing_pytest_suite(tmp_path: Path) -> None:
    write(tmp_path / "calc.py", "def add(a, b):\n    return a + b\n")
    write(
        tmp_path / "test_calc.py",
        "from calc import add\n\ndef test_add():\n    assert add(2, 2) == 4\n\n"
        "def test_add_neg():\n    assert add(-1, 1) == 0\n",
    )

    outcome = await run_tests(tmp_path, timeout=60, env=fast_env())

    assert outcome.status is Status.passed and outcome.passed
    assert outcome.summary.startswith("2 passed")
    assert outcome.exit_code == 0
    assert outcome.command == PYTEST
    assert outcome.duration > 0


async def test_failing_pytest_suite_shows_the_assertion(tmp_path: Path) -> None:
    write(tmp_path / "calc.py", "def add(a, b):\n    return a - b\n")
    write(
        tmp_path / "tests" / "test_calc.py",
        "from calc import add\n\ndef test_ok():\n    assert True\n\n"
        "def test_add():\n    assert add(2, 3) == 5, 'addition is broken'\n",
    )
    write(tmp_path / "conftest.py", "")  # puts the workspace root on sys.path

    outcome = await run_tests(tmp_path, timeout=60, env=fast_env())

    assert outcome.status is Status.failed and not outcome.passed
    assert outcome.exit_code == 1
    assert "addition is broken" in outcome.output
    assert "assert -1 == 5" in outcome.output
    assert "1 failed" in outcome.summary and "1 passed" in outcome.summary
    assert len(outcome.output) <= suite_run.OUTPUT_TAIL_CHARS + 100


async def test_workspace_without_tests_is_no_tests_not_passed(tmp_path: Path) -> None:
    write(tmp_path / "main.py", "print('hi')\n")
    outcome = await run_tests(tmp_path, timeout=60)
    assert outcome.status is Status.no_tests and not outcome.passed
    assert outcome.command is None
    assert outcome.summary == "no tests found"
    assert "no pytest files" in outcome.output and ".agentlab.toml" in outcome.output


async def test_pytest_collecting_nothing_is_no_tests(tmp_path: Path) -> None:
    write(tmp_path / "tests" / "helpers.py", "X = 1\n")  # looks like pytest, but has no tests
    outcome = await run_tests(tmp_path, timeout=60, env=fast_env())
    assert outcome.status is Status.no_tests
    assert outcome.exit_code == 5
    assert outcome.summary == "no tests found"


async def test_agentlab_toml_command_is_run(tmp_path: Path) -> None:
    write(tmp_path / ".agentlab.toml", '[tests]\ncommand = "echo custom-suite-ran; test -f marker"\n')
    failed = await run_tests(tmp_path, timeout=10)
    assert failed.status is Status.failed and failed.exit_code == 1
    assert "custom-suite-ran" in failed.output
    assert failed.summary == "tests failed (exit 1)"

    write(tmp_path / "marker", "")
    passed = await run_tests(tmp_path, timeout=10)
    assert passed.status is Status.passed and passed.command == "echo custom-suite-ran; test -f marker"


async def test_timeout_is_an_error(tmp_path: Path) -> None:
    write(tmp_path / ".agentlab.toml", '[tests]\ncommand = "echo started; sleep 30"\n')
    outcome = await run_tests(tmp_path, timeout=0.5)
    assert outcome.status is Status.error
    assert outcome.summary == "timed out after 0.5 s"
    assert outcome.duration < 10
    assert "started" in outcome.output


async def test_missing_command_is_an_error(tmp_path: Path) -> None:
    write(tmp_path / ".agentlab.toml", '[tests]\ncommand = "no-such-test-tool-agentlab --all"\n')
    outcome = await run_tests(tmp_path, timeout=10)
    assert outcome.status is Status.error
    assert outcome.exit_code == 127
    assert "not found" in outcome.output


async def test_malformed_config_is_an_error_not_no_tests(tmp_path: Path) -> None:
    write(tmp_path / ".agentlab.toml", "[tests\ncommand = \n")
    outcome = await run_tests(tmp_path, timeout=10)
    assert outcome.status is Status.error
    assert ".agentlab.toml" in outcome.summary


async def test_secrets_are_not_passed_to_the_tests(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-should-not-leak")
    write(tmp_path / ".agentlab.toml", '[tests]\ncommand = "test -z \\"$ANTHROPIC_API_KEY\\""\n')
    outcome = await run_tests(tmp_path, timeout=10)
    assert outcome.status is Status.passed


# ---------------------------------------------------------------------------------------------------------------------
# parsing and trimming


@pytest.mark.parametrize(
    "closing, summary",
    [
        ("3 passed in 0.12s", "3 passed"),
        ("1 failed, 3 passed, 1 warning in 0.50s", "1 failed, 3 passed, 1 warning"),
        ("===== 2 failed, 1 error in 75.01s (0:01:15) =====", "2 failed, 1 error"),
        ("no tests ran in 0.01s", "no tests ran"),
        ("Tests:       1 failed, 4 passed, 5 total", "1 failed, 4 passed, 5 total"),
    ],
)
def test_summary_line(closing: str, summary: str) -> None:
    assert suite_run._summary_line(f"collected stuff\nFAILED t.py::x - boom\n{closing}\n") == summary


def test_output_keeps_the_tail() -> None:
    text = "\n".join(f"line {i}" for i in range(5_000)) + "\nFINAL SUMMARY"
    tail = suite_run._tail(text)
    assert tail.endswith("FINAL SUMMARY")
    assert "earlier characters trimmed" in tail
    assert "line 0\n" not in tail
    assert len(tail) <= suite_run.OUTPUT_TAIL_CHARS + 100


NEIGHBOUR_JUNIT = """<testsuite name="s"><testcase classname="t" name="t">
<failure message="NEIGHBOUR-SECRET-31">NEIGHBOUR-SECRET-31</failure></testcase></testsuite>
"""


@pytest.mark.parametrize("junit", ["out/junit.xml", "out/reports/junit.xml"])
async def test_the_declared_junit_report_is_never_read_or_deleted_through_a_folder_the_tests_made_a_link(
    tmp_path: Path, junit: str
) -> None:
    """`.agentlab.toml` may name the JUnit file the tests write (`[tests] junit`, inside the checkout); the bot reads it
    after the run and deletes it when the run wrote it. The tests, which write the checkout, can make a folder on its
    way a link out of it (to a neighbour's folder holding a file of that name): the bot must neither read that file
    as the run's report nor delete it."""
    room, neighbour = tmp_path / "room", tmp_path / "neighbour"
    report = write(neighbour / Path(junit).relative_to("out"), NEIGHBOUR_JUNIT)
    room.mkdir()
    command = f"ln -s {shlex.quote(str(neighbour))} out && echo ran"
    environment = suite_run.TestEnvironment(kind="test", command=command, display="the tests", junit=junit)
    outcome = await run_tests(room, 30, fast_env(), environment=environment)
    assert "ran" in outcome.output, outcome
    assert report.exists(), "the bot deleted the neighbour's file through the link"
    assert "NEIGHBOUR-SECRET" not in outcome.model_dump_json(), outcome


LOCKING_RUN = """\
import asyncio, stat, sys
from pathlib import Path
from agents.sandbox.shell import child_env
from agents.verify.js_test_script import ScriptStep
from agents.verify.suite_env import TestEnvironment
from agents.verify.suite_run import run_tests

base = Path(sys.argv[1])
env = child_env()
env["PATH"] = f"{base / 'bin'}:{env['PATH']}"
step = ScriptStep("mocha", framework="mocha")
outcome = asyncio.run(run_tests(base / "room", 30, env, environment=TestEnvironment("t", "mocha", "t", script=[step])))
print(outcome.output.strip(), oct(stat.S_IMODE((base / "owner-file").stat().st_mode)))
"""
# a `mocha` of the tests' making: in the report folder it is told of, a folder it cannot write with a link out in it
LOCKING_MOCHA = """\
#!/bin/sh
for a in "$@"; do case "$a" in output=*) out="${a#output=}";; esac; done
mkdir "$(dirname "$out")/locked" && ln -s "$OWNER_FILE" "$(dirname "$out")/locked/link"
chmod 500 "$(dirname "$out")/locked" && echo planted && dirname "$out" > "$OWNER_FILE.folder"
"""


@pytest.mark.skipif(shutil.which("setpriv") is None, reason="setpriv (util-linux) is not installed")
def test_the_report_folders_clean_up_never_changes_a_files_mode_through_a_link_the_run_left(tmp_path: Path) -> None:
    """A test run writes its reports in a folder of the bot's, which the bot deletes after the run. The run can leave
    there a folder it made unwritable holding a link out (to a file of the owner's): deleting the link fails, and a
    clean-up that then restores permissions by path (tempfile.TemporaryDirectory's, before Python 3.11.8) chmods the
    link's target. Run without capabilities (as the bot, not root, runs), so that permissions hold."""
    owner_file = write(tmp_path / "owner-file", "the owner's\n")
    owner_file.chmod(0o600)
    mocha = write(tmp_path / "bin" / "mocha", LOCKING_MOCHA)
    mocha.chmod(0o755)
    (tmp_path / "room").mkdir()
    capless = ["setpriv", "--bounding-set=-all", "--inh-caps=-all"] if os.geteuid() == 0 else []
    env = {**os.environ, "OWNER_FILE": str(owner_file), "PYTHONPATH": str(Path.cwd())}
    ran = subprocess.run(
        [*capless, sys.executable, "-c", LOCKING_RUN, str(tmp_path)], env=env, capture_output=True, text=True
    )
    assert ran.returncode == 0, ran.stderr[-2000:]
    assert ran.stdout.split() == ["planted", "0o600"], f"the owner's file after the clean-up: {ran.stdout}"
    assert not Path((tmp_path / "owner-file.folder").read_text().strip()).exists(), "the report folder stayed"
