"""The bot runs a workspace's tests itself: find the test command, run it bounded in time, and say plainly what happened.

Detection order: `.agentlab.toml` `[tests] command`, then pytest (test files, a `tests/` folder with Python in it, or
pytest configuration), then a real `npm test` script. No command means "no tests" — never "passed".
"""

from __future__ import annotations

import asyncio
import enum
import json
import os
import re
import shlex
import sys
import tomllib
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import ClassVar

from pydantic import BaseModel

from agents.sandbox import SandboxSpec
from agents.shell import run_command
from agents.workspaces import ToolError

CONFIG_FILE = ".agentlab.toml"
PYTEST_ARGS = "-m pytest -q -x --no-header -p no:cacheprovider"
NPM_TEST_COMMAND = "npm test --silent"
NO_TESTS_MESSAGE = "no tests found: no pytest files, no npm test script, no .agentlab.toml [tests] command"
OUTPUT_TAIL_CHARS = 4_000
_CAPTURE_BYTES = 64_000
_NPM_DEFAULT_TEST = "no test specified"
_SKIP_DIRS = frozenset({"node_modules", "__pycache__", "site-packages", "venv", "env", "build", "dist"})
_MAX_FILES_SCANNED = 20_000
_PYTEST_NO_TESTS_EXIT = 5
_PYTEST_ERROR_EXITS = frozenset({3, 4})  # internal error, usage error: the run itself is broken
_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
_PYTEST_COUNT = r"\d+ (?:passed|failed|errors?|skipped|xfailed|xpassed|deselected|warnings?|rerun)"
_PYTEST_SUMMARY = re.compile(rf"^=*\s*((?:{_PYTEST_COUNT})(?:, {_PYTEST_COUNT})*) in [\d.]+s\b")
_PYTEST_NO_TESTS = re.compile(r"^=*\s*no tests ran in [\d.]+s\b")
_JEST_SUMMARY = re.compile(r"^Tests:\s+(.+?)\s*$")
_MOCHA_COUNT = re.compile(r"^\s*(\d+ (?:passing|failing|pending))\b")


class TestStatus(str, enum.Enum):
    __test__ = False  # not a pytest test class

    passed = "passed"
    failed = "failed"
    no_tests = "no_tests"
    error = "error"  # the tests could not be run: bad config, command not found, timeout


class TestOutcome(BaseModel):
    """What running the tests showed; `output` is the tail of the log, where failures are summarised."""

    __test__: ClassVar[bool] = False

    status: TestStatus
    command: str | None
    exit_code: int | None = None
    output: str = ""
    duration: float = 0.0
    summary: str

    @property
    def passed(self) -> bool:
        return self.status is TestStatus.passed


class TestConfigError(ValueError):
    """`.agentlab.toml` exists but its [tests] section cannot be used."""

    __test__ = False


# ----------------------------------------------------------------------------------------------------------------------
# detection


def detect_test_command(workspace: Path) -> str | None:
    """The shell command that runs this workspace's tests, or None when it has none.

    Raises TestConfigError when `.agentlab.toml` is malformed (better said than silently ignored).
    """
    workspace = Path(workspace)
    configured = _configured_command(workspace)
    if configured is not None:
        return configured
    if _looks_like_pytest(workspace):
        return f"{shlex.quote(_python_for(workspace))} {PYTEST_ARGS}"
    if _has_npm_test_script(workspace):
        return NPM_TEST_COMMAND
    return None


def _configured_command(workspace: Path) -> str | None:
    path = workspace / CONFIG_FILE
    if not path.is_file():
        return None
    try:
        config = tomllib.loads(path.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError, OSError) as err:
        raise TestConfigError(f"{CONFIG_FILE} cannot be read: {err}") from None
    tests = config.get("tests")
    if tests is None:
        return None
    if not isinstance(tests, dict):
        raise TestConfigError(f"{CONFIG_FILE}: [tests] must be a table with a `command = \"...\"` key")
    command = tests.get("command")
    if command is None:
        return None
    if not isinstance(command, str) or not command.strip():
        raise TestConfigError(f"{CONFIG_FILE}: [tests] command must be a non-empty string")
    return command.strip()


def _python_for(workspace: Path) -> str:
    """The workspace's own `.venv` interpreter if it has one, else the bot's."""
    own = workspace / ".venv" / "bin" / "python"
    return str(own) if own.exists() else sys.executable


def _looks_like_pytest(workspace: Path) -> bool:
    if (workspace / "pytest.ini").is_file() or (workspace / "conftest.py").is_file():
        return True
    if _pyproject_configures_pytest(workspace / "pyproject.toml"):
        return True
    if _ini_has_section(workspace / "setup.cfg", "tool:pytest") or _ini_has_section(workspace / "tox.ini", "pytest"):
        return True
    tests_dir = workspace / "tests"
    if tests_dir.is_dir() and _find_python_file(tests_dir, lambda name: name.endswith(".py")):
        return True
    return _find_python_file(workspace, _is_test_file_name)


def _is_test_file_name(name: str) -> bool:
    return name.endswith(".py") and (name.startswith("test_") or name.endswith("_test.py"))


def _find_python_file(root: Path, wanted: Callable[[str], bool]) -> bool:
    """Whether a file whose name satisfies `wanted` is under `root` (skipping hidden, vendored and virtualenv dirs)."""
    scanned = 0
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if not d.startswith(".") and d not in _SKIP_DIRS]
        if any(wanted(name) for name in filenames):
            return True
        scanned += len(filenames)
        if scanned > _MAX_FILES_SCANNED:
            return False
    return False


def _pyproject_configures_pytest(path: Path) -> bool:
    if not path.is_file():
        return False
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError, OSError):
        return False
    tool = data.get("tool")
    return isinstance(tool, dict) and "pytest" in tool


def _ini_has_section(path: Path, section: str) -> bool:
    if not path.is_file():
        return False
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return False
    return re.search(rf"^\[{re.escape(section)}\]\s*$", text, re.MULTILINE) is not None


def _has_npm_test_script(workspace: Path) -> bool:
    path = workspace / "package.json"
    if not path.is_file():
        return False
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (ValueError, OSError):
        return False
    scripts = data.get("scripts") if isinstance(data, dict) else None
    test = scripts.get("test") if isinstance(scripts, dict) else None
    return isinstance(test, str) and bool(test.strip()) and _NPM_DEFAULT_TEST not in test


# ----------------------------------------------------------------------------------------------------------------------
# running


async def run_tests(workspace: Path, timeout: float, env: Mapping[str, str] | None = None,
                    sandbox: SandboxSpec | None = None) -> TestOutcome:
    """Run the workspace's tests (see `detect_test_command`) with a time limit. `env=None` means `child_env()`;
    `sandbox`: run them confined (agents/sandbox.py), as every process of a task."""
    workspace = Path(workspace)
    try:
        command = await asyncio.to_thread(detect_test_command, workspace)
    except TestConfigError as err:
        return TestOutcome(status=TestStatus.error, command=None, output=str(err), summary=str(err))
    if command is None:
        return TestOutcome(status=TestStatus.no_tests, command=None, output=NO_TESTS_MESSAGE, summary="no tests found")

    try:
        result = await run_command(
            command, cwd=workspace, timeout=timeout, env=env, max_output=_CAPTURE_BYTES, sandbox=sandbox
        )
    except ToolError as err:
        return TestOutcome(status=TestStatus.error, command=command, output=str(err), summary=f"could not run: {err}")

    output = _ANSI.sub("", result.output)
    tail = _tail(output)
    base = {"command": command, "exit_code": result.exit_code, "output": tail, "duration": result.duration}
    if result.timed_out:
        return TestOutcome(status=TestStatus.error, summary=f"timed out after {timeout:g} s", **base)
    if result.cancelled:
        return TestOutcome(status=TestStatus.error, summary="cancelled", **base)

    code = result.exit_code
    is_pytest = _runs_pytest(command)
    if code in (126, 127):
        return TestOutcome(status=TestStatus.error, summary=f"could not run the test command (exit {code})", **base)
    if is_pytest and code == 1 and "No module named pytest" in output:
        return TestOutcome(status=TestStatus.error, summary="pytest is not installed for this interpreter", **base)
    if is_pytest and code == _PYTEST_NO_TESTS_EXIT:
        return TestOutcome(status=TestStatus.no_tests, summary="no tests found", **base)
    if is_pytest and code in _PYTEST_ERROR_EXITS:
        summary = _summary_line(output) or f"pytest could not run the tests (exit {code})"
        return TestOutcome(status=TestStatus.error, summary=summary, **base)
    if code == 0:
        return TestOutcome(status=TestStatus.passed, summary=_summary_line(output) or "tests passed (exit 0)", **base)
    return TestOutcome(status=TestStatus.failed, summary=_summary_line(output) or f"tests failed (exit {code})", **base)


def _runs_pytest(command: str) -> bool:
    """Whether the command runs pytest (`python -m pytest`, `pytest`, `.venv/bin/pytest`, `py.test`)."""
    try:
        tokens = shlex.split(command)
    except ValueError:
        tokens = command.split()
    return any(Path(token).name in ("pytest", "py.test") for token in tokens)


def _tail(text: str, limit: int = OUTPUT_TAIL_CHARS) -> str:
    """The last `limit` characters, cut at a line start, with a note of how much was dropped."""
    text = text.rstrip()
    if len(text) <= limit:
        return text
    cut = text[-limit:]
    newline = cut.find("\n")
    if 0 <= newline < limit // 4:
        cut = cut[newline + 1 :]
    return f"[... {len(text) - len(cut)} earlier characters trimmed ...]\n{cut}"


def _summary_line(output: str) -> str | None:
    """The counts from the runner's closing line: pytest ("3 passed, 1 failed"), jest ("Tests: ..."), mocha."""
    lines = output.splitlines()
    for line in reversed(lines):
        stripped = line.strip()
        if match := _PYTEST_SUMMARY.match(stripped):
            return match.group(1)
        if _PYTEST_NO_TESTS.match(stripped):
            return "no tests ran"
        if match := _JEST_SUMMARY.match(stripped):
            return match.group(1)
    mocha = [m.group(1) for line in lines if (m := _MOCHA_COUNT.match(line))]
    return ", ".join(mocha[-3:]) if mocha else None
