"""The bot runs a workspace's tests itself: one bounded run in a checkout, with per-test outcomes where the framework
names tests (pytest through its JUnit XML report, a JUnit file `.agentlab.toml` names, or the reporter the bot adds
to a JavaScript framework: node --test, mocha, jest, vitest, ava), whole-suite status otherwise. A JavaScript test
script is run step by step (`js_test_script`): lint/build steps are reported apart and the tests run even
when one of them fails. No command means "no tests", never "passed".

`run_tests` is the one place a workspace's tests are started (baseline, after the worker, re-runs of failing ids):
`**run_options` go to `agents.sandbox.shell.run_command` unchanged (e.g. a sandbox).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import enum
import os
import re
import shlex
import stat
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, ClassVar

from pydantic import BaseModel, Field

from agents.core.errors import ToolError
from agents.sandbox.bwrap import SandboxSpec
from agents.sandbox.safe_paths import open_folder, unlink_file
from agents.sandbox.shell import CommandResult, child_env, run_command
from agents.sandbox.temp_folders import scratch_folder
from agents.verify.js_test_script import ScriptStep, describe_step, reporter_command, test_steps, with_files
from agents.verify.run_causes import missing_module
from agents.verify.suite_env import (  # noqa: F401  (re-exported: this module's public names)
    CONFIG_FILE,
    PYTEST_ARGS,
    TestConfigError,
    TestEnvironment,
    detect_environment,
    runs_pytest,
)
from agents.verify.suite_reports import read_jest_json, read_records, read_tap, report_text
from agents.verify.suite_reports import read_junit as read_junit_untrimmed
from agents.verify.tracer import V8_COVERAGE, install_tracer, read_traces, read_v8_coverage, traced_env

NO_TESTS_MESSAGE = "no tests found: no pytest files, no npm test script, no .agentlab.toml [tests] command"
SUITE_ID = "(whole suite)"  # the one "test" of a framework that names none
# a JavaScript test step that failed outside any test (`_failing_exit_case`): the case is there only while it fails
EXIT_CASE = "(exit status of"


def is_exit_case(name: str) -> bool:
    return name.startswith(EXIT_CASE)


OUTPUT_TAIL_CHARS = 4_000
FAILURE_CHARS = 1_500  # per failing test
_CAPTURE_BYTES = 64_000
_PYTEST_NO_TESTS_EXIT = 5
_PYTEST_INTERRUPTED_EXIT = 2  # collection errors, ^C: pytest's "Interrupted"
_KILLED_EXITS = frozenset({128 + 6, 128 + 9, 128 + 11, 128 + 15})  # SIGABRT, SIGKILL, SIGSEGV, SIGTERM: a crash or kill
_PYTEST_ERROR_EXITS = frozenset({3, 4})  # internal error, usage error: the run itself is broken
_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
_PYTEST_COUNT = r"\d+ (?:passed|failed|errors?|skipped|xfailed|xpassed|deselected|warnings?|rerun)"
_PYTEST_SUMMARY = re.compile(rf"^=*\s*((?:{_PYTEST_COUNT})(?:, {_PYTEST_COUNT})*) in [\d.]+s\b")
_PYTEST_NO_TESTS = re.compile(r"^=*\s*no tests ran in [\d.]+s\b")
_JEST_SUMMARY = re.compile(r"^Tests:\s+(.+?)\s*$")
_MOCHA_COUNT = re.compile(r"^\s*(\d+ (?:passing|failing|pending))\b")
_MOCHA_PASSING = re.compile(r"^\s*\d+ passing\b")  # the first line of mocha's closing tally, printed once
_MOCHA_FAILING = re.compile(r"^\s*(\d+) failing\b")
_BANNER = re.compile(r"^=+ (.*?) =+$")
_READ_ONLY = re.compile(r"EROFS|read-only file system", re.IGNORECASE)
_QUOTED_PATH = re.compile(r"""['"`](/[^'"`\n]+)['"`]""")


class TestStatus(str, enum.Enum):
    __test__ = False  # not a pytest test class

    passed = "passed"
    failed = "failed"
    no_tests = "no_tests"
    error = "error"  # the tests could not be run: bad config, command not found, timeout


class RunState(str, enum.Enum):
    """How far a test run got. Only a `complete` run can back a ✔ (✔ only for what the bot saw pass)."""

    __test__ = False

    complete = "complete"  # the framework reached its end and reported (per test, or as a whole suite)
    not_started = "not_started"  # the framework ran no test: command not found, usage/internal error, none collected
    interrupted = "interrupted"  # stopped part-way: pytest exit 2 (collection errors), a timeout, a crash, a kill
    stopped_before_tests = "stopped_before_tests"  # an earlier step of the script (lint, build) failed first


class StepOutcome(BaseModel):
    """One non-test step of a multi-step test script (`xo && npm run build && ava`): judged apart from the tests."""

    command: str  # as written in the script: `xo`, `npm run build`
    kind: str = "other"  # lint / build / typecheck / other
    passed: bool
    output: str = ""  # the tail of what it printed


class TestOutcome(BaseModel):
    """What running the tests showed; `output` is the tail of the log, where failures are summarised."""

    __test__: ClassVar[bool] = False

    status: TestStatus
    command: str | None
    exit_code: int | None = None
    output: str = ""
    duration: float = 0.0
    summary: str
    display: str | None = None  # the command as a phone shows it (`pytest`)
    timed_out: bool = False
    cases: dict[str, str] = Field(default_factory=dict)  # test id -> passed / failed / skipped
    failures: dict[str, str] = Field(default_factory=dict)  # failing test id -> its failure text, trimmed
    state: RunState = RunState.complete  # how far the run got; anything but complete means "cannot tell"
    reason: str | None = None  # one sentence, when state is not complete: why the bot cannot tell
    steps: list[StepOutcome] = Field(default_factory=list)  # the script's other steps (lint, build), in order
    traced: dict[str, list[str]] = Field(default_factory=dict)  # test id -> `file::function` it ran (a traced run)
    sandbox_problem: str | None = None  # a failure the sandbox caused (a write to a read-only folder), said apart
    cause: str | None = None  # why a run that did not get through its tests stopped, and what to do (run_causes)

    @property
    def passed(self) -> bool:
        return self.status is TestStatus.passed


# ----------------------------------------------------------------------------------------------------------------------
# running


def no_tests_outcome() -> TestOutcome:
    """A workspace with no test command: nothing can be verified (never "passed")."""
    return TestOutcome(
        status=TestStatus.no_tests,
        command=None,
        output=NO_TESTS_MESSAGE,
        summary="no tests found",
        state=RunState.not_started,
        reason="the workspace has no tests the bot can find",
    )


SandboxFor = Callable[[Path, list[Path]], "SandboxSpec | None"]


async def run_tests(
    workspace: Path,
    timeout: float,
    env: Mapping[str, str] | None = None,
    *,
    environment: TestEnvironment | None = None,
    ids: list[str] | None = None,
    sandbox: SandboxSpec | None = None,
    sandbox_for: SandboxFor | None = None,
    trace: bool = False,
    **run_options: Any,
) -> TestOutcome:
    """Run the tests of the checkout `workspace` (with `environment`, detected from it when None) in `timeout`
    seconds; `ids`: only those tests where the command allows it. `env=None` means `child_env()`.

    Confined (agents/sandbox/bwrap.py) with `sandbox`, or with `sandbox_for(checkout, read_only_paths)`: the sandbox of
    whichever checkout runs (a task's worktree, a baseline copy) with what its environment borrows mounted read-only.
    `trace`: record which of the checkout's functions each test calls (pytest only; agents/verify/tracer.py).
    """
    workspace = Path(workspace)
    if environment is None:
        try:
            environment = await asyncio.to_thread(detect_environment, workspace)
        except TestConfigError as err:
            return TestOutcome(
                status=TestStatus.error,
                command=None,
                output=str(err),
                summary=str(err),
                state=RunState.not_started,
                reason=f"the test configuration is broken: {err}",
            )
        if environment is None:
            return no_tests_outcome()
    command = environment.with_ids(ids or [])
    # The JUnit report goes outside the checkout (never in a diff); a sandboxed run must be able to write report_dir.
    with scratch_folder("junit", "run") as report_dir:  # the run writes it: deleted with no link followed
        report = Path(report_dir) / "junit.xml"
        full = f"{command} --junitxml={shlex.quote(str(report))}" if environment.pytest else command
        child = environment.env_for(workspace, dict(child_env() if env is None else env))
        traces = Path(report_dir) / "trace" if trace and environment.pytest else None
        if traces is not None:  # the tracer's folder first on the path, inside the report folder the run can write
            site = await asyncio.to_thread(install_tracer, Path(report_dir))
            traced_env(child, site, traces, workspace)
        # the report `.agentlab.toml` names is the checkout's, whose folders the tests can make links out of it:
        # looked at, read and deleted by the checkout's descriptors, never through a link (`_mtime`, `read_junit`)
        own_report = workspace / environment.junit if environment.junit and not environment.pytest else None
        stale = _mtime(workspace, environment.junit) if own_report and environment.junit else None
        if sandbox is None and sandbox_for is not None:
            sandbox = sandbox_for(workspace, environment.read_only_paths)
        if sandbox is not None:  # the report is written inside, read outside
            sandbox = dataclasses.replace(sandbox, writable=(*sandbox.writable, Path(report_dir)))
        if environment.script and not environment.pytest:
            run = _ScriptRun(environment, workspace, child, sandbox, Path(report_dir), timeout, run_options, trace)
            return await run.outcome(ids or [])
        try:
            result = await run_command(
                full,
                cwd=workspace,
                timeout=timeout,
                env=child,
                max_output=_CAPTURE_BYTES,
                sandbox=sandbox,
                **run_options,
            )
        except ToolError as err:
            return TestOutcome(
                status=TestStatus.error,
                command=command,
                display=environment.display,
                output=str(err),
                summary=f"could not run: {err}",
                state=RunState.not_started,
                reason=f"`{environment.display or command}` could not be started",
            )
        junit = report if environment.pytest else own_report
        written = _mtime(workspace, environment.junit) if own_report is not None and environment.junit else None
        if own_report is not None and written == stale:
            junit = None  # the framework wrote no new report: a stale one says nothing about this run
        # pytest writes its report at the end of every run that reaches it, and a declared report is the command's
        # own: none means the process ended before its end (the code under test can exit at import, status 0)
        wrote = junit is not None and (written is not None or await asyncio.to_thread(junit.is_file))
        unreported = not wrote and (environment.pytest or own_report is not None)
        inside = workspace if junit is not None and junit == own_report else None
        cases, failures = await asyncio.to_thread(read_junit, junit, workspace, inside) if junit else ({}, {})
        if own_report is not None and environment.junit and stale is None:  # this run's: not the task's to commit
            with contextlib.suppress(OSError):
                unlink_file(workspace, Path(environment.junit).as_posix())
        traced = await asyncio.to_thread(read_traces, traces) if traces is not None else {}
    outcome = _outcome(environment, command, result, cases, failures, timeout, unreported=unreported)
    outcome.traced = traced
    _with_cause(outcome, result.output, workspace)
    return _with_sandbox_problem(outcome, result.output if not result.ok else "")


def _mtime(root: Path, relative: str) -> int | None:
    """When the regular file `root/relative` was written (None: no such file), its folders walked with no link
    followed and the name itself not followed either."""
    parts = Path(relative).parts
    try:
        with open_folder(root, Path(*parts[:-1]) if len(parts) > 1 else ".") as folder:
            info = os.stat(parts[-1], dir_fd=folder, follow_symlinks=False)
    except (OSError, IndexError):
        return None
    return info.st_mtime_ns if stat.S_ISREG(info.st_mode) else None


def _outcome(
    environment: TestEnvironment,
    command: str,
    result: CommandResult,
    cases: dict[str, str],
    failures: dict[str, str],
    timeout: float,
    unreported: bool = False,
) -> TestOutcome:
    """What one finished test command showed, as a TestOutcome: timed out, not started, interrupted, no tests, or
    passed/failed with per-test cases. `unreported`: the JUnit report the run should have written is not there, so
    it never reached its end, whatever its exit status says. Why long: one ordered list of exit-code and output
    rules, first match wins."""
    output = _ANSI.sub("", result.output)
    tail = _tail(failures_section(output))
    base = {
        "command": command,
        "display": environment.display,
        "exit_code": result.exit_code,
        "output": tail,
        "duration": result.duration,
    }
    shown = f"`{environment.display or command}`"
    stopped, not_started = RunState.interrupted, RunState.not_started
    if result.timed_out:
        return TestOutcome(
            status=TestStatus.error,
            timed_out=True,
            summary=f"timed out after {timeout:g} s",
            state=stopped,
            reason=f"{shown} timed out after {timeout:g} s before the tests ended",
            **base,
        )
    if result.cancelled:
        return TestOutcome(
            status=TestStatus.error, summary="cancelled", state=stopped, reason=f"{shown} was cancelled", **base
        )
    code = result.exit_code
    is_pytest = environment.pytest or runs_pytest(command)
    if code in (126, 127):
        why = "command not found" if code == 127 else "not executable"
        return TestOutcome(
            status=TestStatus.error,
            summary=f"could not run the test command (exit {code})",
            state=not_started,
            reason=f"{shown} could not start ({why}, exit {code})",
            **base,
        )
    if code is not None and (code < 0 or code in _KILLED_EXITS):
        return TestOutcome(
            status=TestStatus.error,
            summary=f"killed (exit {code})",
            state=stopped,
            reason=f"{shown} was killed part-way (exit {code})",
            **base,
        )
    if is_pytest and code == 1 and "No module named pytest" in output:
        summary = "pytest is not installed for this interpreter"
        return TestOutcome(status=TestStatus.error, summary=summary, state=not_started, reason=summary, **base)
    if is_pytest and code == _PYTEST_NO_TESTS_EXIT:
        return TestOutcome(
            status=TestStatus.no_tests,
            summary="no tests found",
            state=not_started,
            reason=f"{shown} collected no tests",
            **base,
        )
    if is_pytest and code in _PYTEST_ERROR_EXITS and not failures:
        summary = _summary_line(output) or f"pytest could not run the tests (exit {code})"
        why = "an internal error" if code == 3 else "a usage error"
        return TestOutcome(
            status=TestStatus.error, summary=summary, state=not_started, reason=f"{shown} stops at {why}", **base
        )
    if is_pytest and code == _PYTEST_INTERRUPTED_EXIT:  # collection errors (or ^C): the tests did not run through
        summary = _summary_line(output) or "interrupted"
        collection = re.search(r"errors? during collection", output) is not None
        why = "stops at a collection error before any test runs" if collection else "was interrupted (exit 2)"
        return TestOutcome(
            status=TestStatus.failed,
            summary=summary,
            cases=cases,
            failures=failures,
            state=stopped,
            reason=f"{shown} {why}",
            **base,
        )
    if unreported:
        return TestOutcome(
            status=TestStatus.error,
            summary=f"ended without its report (exit {code})",
            state=stopped,
            reason=f"{shown} ended (exit {code}) without writing its report: the run stopped before its end",
            **base,
        )
    if is_pytest and (disagreement := _report_disagrees(output, cases, code)):
        return TestOutcome(
            status=TestStatus.error,
            summary=f"the report disagrees with pytest's own words ({disagreement})",
            state=stopped,
            reason=(
                f"{shown}'s report disagrees with what pytest printed at its end ({disagreement}): something in the "
                "run changed its report or its exit status, so the bot cannot tell which tests passed"
            ),
            **base,
        )
    status = TestStatus.passed if code == 0 else TestStatus.failed
    if not cases:  # the framework names no tests: the suite is the one test
        cases = {SUITE_ID: status.value}
        if status is TestStatus.failed:
            failures = {SUITE_ID: tail}
    summary = _summary_line(output) or ("tests passed (exit 0)" if code == 0 else f"tests failed (exit {code})")
    return TestOutcome(status=status, summary=summary, cases=cases, failures=failures, **base)


class _ScriptRun:
    """A JavaScript test script run step by step: each lint/build step on its own (a StepOutcome), each test step
    with its framework's reporter added; a failing earlier step does not keep the tests from running."""

    STEP_OUTPUT_CHARS = 1_500

    def __init__(
        self,
        environment: TestEnvironment,
        workspace: Path,
        env: dict[str, str],
        sandbox: SandboxSpec | None,
        folder: Path,
        timeout: float,
        run_options: dict[str, Any],
        trace: bool = False,
    ) -> None:
        self.environment, self.workspace, self.env, self.sandbox = environment, workspace, env, sandbox
        self.folder, self.timeout, self.run_options = folder, timeout, run_options
        self.coverage = folder / "v8" if trace else None  # node's own coverage: which functions each file's tests call
        if self.coverage is not None:
            self.env = {**env, V8_COVERAGE: str(self.coverage)}

    async def outcome(self, ids: list[str] | None = None) -> TestOutcome:
        """`ids`: re-run only their test files where the script has one test step whose framework takes files."""
        environment = self.environment
        tests = test_steps(environment.script)
        files = self._files(ids or []) if len(tests) == 1 else []
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.timeout
        steps: list[StepOutcome] = []
        results: list[CommandResult] = []
        cases: dict[str, str] = {}
        failures: dict[str, str] = {}
        failed_before: ScriptStep | None = None  # the first lint/build step that failed before a test step
        disagreement: str | None = None  # a test step whose report and exit status tell two stories
        per_test = True
        for index, step in enumerate(environment.script):
            remaining = deadline - loop.time()
            if remaining <= 0:
                return self._timed_out(steps)
            report = self.folder / f"report-{index}.json"
            selected = (with_files(step, files) or step) if step in tests and files else step
            command = reporter_command(selected, report, self.folder) if step in tests else step.command
            try:
                result = await run_command(
                    command,
                    cwd=self.workspace,
                    timeout=remaining,
                    env=self.env,
                    max_output=_CAPTURE_BYTES,
                    sandbox=self.sandbox,
                    **self.run_options,
                )
            except ToolError as err:
                return TestOutcome(
                    status=TestStatus.error,
                    command=environment.command,
                    display=environment.display,
                    output=str(err),
                    summary=f"could not run: {err}",
                    state=RunState.not_started,
                    reason=f"`{environment.display}` could not start: {err}",
                    steps=steps,
                )
            if step not in tests:
                output = _tail(_ANSI.sub("", result.output), self.STEP_OUTPUT_CHARS)
                steps.append(StepOutcome(command=step.command, kind=step.kind, passed=result.ok, output=output))
                if not result.ok and failed_before is None and not results:
                    failed_before = step
                if result.timed_out or result.cancelled:
                    return self._timed_out(steps, cancelled=result.cancelled)
                continue
            found = await asyncio.to_thread(self._read, step, report, result)
            per_test = per_test and bool(found[0])
            disagreement = disagreement or _step_disagrees(step, result, found[0])
            cases.update(found[0])
            failures.update({k: _trim_failure(v) for k, v in found[1].items()})
            if (exit_case := _failing_exit_case(step, result, found[0])) is not None:
                cases[exit_case], failures[exit_case] = "failed", _tail(_ANSI.sub("", result.output), 2_000)
            results.append(result)
            if result.timed_out or result.cancelled:
                break
        if not per_test:  # one test step the bot cannot read per test: the whole script's tests are one suite
            cases, failures = {}, {}
        merged = _merged(results)
        outcome = _outcome(environment, environment.command, merged, cases, failures, self.timeout)
        outcome.steps = steps
        if disagreement is not None and outcome.state is RunState.complete:
            return _disagreeing(outcome, environment.display, disagreement)
        if self.coverage is not None:
            outcome.traced = await asyncio.to_thread(self._traced, outcome.cases)
        failing = [s.output for s in steps if not s.passed] + ([merged.output] if not merged.ok else [])
        _with_sandbox_problem(outcome, "\n".join(failing))
        _with_cause(outcome, "\n".join(failing), self.workspace)
        if outcome.cases and SUITE_ID not in outcome.cases:
            outcome.summary = _counts(outcome.cases)
        if failed_before is not None and SUITE_ID in outcome.cases and not outcome.passed:
            outcome.state = RunState.stopped_before_tests
            outcome.reason = (
                f"`{environment.display}` stops at {describe_step(failed_before)} before any test can be told apart"
            )
        return outcome

    def _files(self, ids: list[str]) -> list[str]:
        """The test files of `ids` when every id names a file of the checkout (else none: the step runs whole)."""
        files = [i.split("::", 1)[0] for i in ids if "::" in i]
        if not ids or len(files) < len(ids) or not all((self.workspace / f).is_file() for f in files):
            return []
        return list(dict.fromkeys(files))

    def _traced(self, cases: dict[str, str]) -> dict[str, list[str]]:
        """Test id -> the checkout's functions its test file's process called (agents/verify/tracer.py)."""
        assert self.coverage is not None
        files = {case.split("::", 1)[0]: case for case in cases if "::" in case}
        by_file = read_v8_coverage(self.coverage, self.workspace, files)
        return {case: by_file[case.split("::", 1)[0]] for case in cases if case.split("::", 1)[0] in by_file}

    def _read(self, step: ScriptStep, report: Path, result: CommandResult) -> tuple[dict[str, str], dict[str, str]]:
        root = self.workspace
        if step.framework in ("node", "mocha"):
            return read_records(report, root)
        if step.framework in ("jest", "vitest"):
            return read_jest_json(report, root)
        if step.framework == "ava":  # the whole TAP from its file, never the capped output
            tap = report_text(report)
            return read_tap(_ANSI.sub("", tap), root) if tap is not None else ({}, {})
        return {}, {}

    def _timed_out(self, steps: list[StepOutcome], cancelled: bool = False) -> TestOutcome:
        environment = self.environment
        summary = "cancelled" if cancelled else f"timed out after {self.timeout:g} s"
        return TestOutcome(
            status=TestStatus.error,
            command=environment.command,
            display=environment.display,
            summary=summary,
            timed_out=not cancelled,
            state=RunState.interrupted,
            reason=f"`{environment.display}` was {summary} before its tests ran",
            steps=steps,
        )


def _step_disagrees(step: ScriptStep, result: CommandResult, cases: dict[str, str]) -> str | None:
    """A JavaScript test step whose report holds a failed test while the step exited 0: every framework the bot runs
    (node --test, mocha, jest, vitest, ava) exits non-zero when a test fails, so code of the run rewrote the report
    or the exit status (an exit handler in the code under test can do either). For mocha, also its printed tally
    (`N failing`, written when the run ends, before exit handlers run) against the report: more failing printed than
    the report holds, or a tally printed twice, is a report rewritten after the run."""
    failed = sum(1 for state in cases.values() if state == "failed")
    if failed and result.exit_code == 0 and not (result.timed_out or result.cancelled):
        return f"`{step.command}` reported {failed} failing and exited 0"
    if step.framework == "mocha":
        lines = _ANSI.sub("", result.output).splitlines()
        tallies = [line for line in lines if _MOCHA_PASSING.match(line)]
        printed = [int(m.group(1)) for line in lines if (m := _MOCHA_FAILING.match(line))]
        if len(tallies) > 1:
            return f"`{step.command}` printed its tally {len(tallies)} times"
        if printed and printed[-1] > failed:
            return f"`{step.command}` printed {printed[-1]} failing, its report holds {failed}"
    return None


def _failing_exit_case(step: ScriptStep, result: CommandResult, cases: dict[str, str]) -> str | None:
    """The id of a case that stands for a test step's exit status when the step exited non-zero (not killed, not
    timed out) while its report holds no failed test: the framework failed outside any test (a hook, an unhandled
    error, a coverage threshold), and that counts like a failing test (at the base too, where it did the same)."""
    code = result.exit_code
    if not cases or code in (None, 0) or code < 0 or code in _KILLED_EXITS or code in (126, 127):
        return None
    if result.timed_out or result.cancelled or any(state == "failed" for state in cases.values()):
        return None
    return f"{EXIT_CASE} `{step.command}`)"


def _disagreeing(outcome: TestOutcome, display: str, disagreement: str) -> TestOutcome:
    """The run's outcome when a test step's report and exit status disagree: no test counts as seen."""
    outcome.status, outcome.state = TestStatus.error, RunState.interrupted
    outcome.cases, outcome.failures = {}, {}
    outcome.summary = f"the report disagrees with the exit status ({disagreement})"
    outcome.reason = (
        f"`{display}`'s report disagrees with its exit status ({disagreement}): something in the run changed its "
        "report or its exit status, so the bot cannot tell which tests passed"
    )
    return outcome


def was_killed(outcome: TestOutcome) -> bool:
    """The run was stopped part-way by a signal (a crash, a kill), not by its own exit or the bot's timeout."""
    code = outcome.exit_code
    return (
        outcome.state is RunState.interrupted
        and not outcome.timed_out
        and code is not None
        and (code < 0 or code in _KILLED_EXITS)
    )


def sandbox_write_failure(output: str) -> str | None:
    """One phrase when a failing run's output shows a write refused by a read-only mount (EROFS): the sandbox's
    doing, not the code's (a contributor's own checkout is writable)."""
    for line in _ANSI.sub("", output).splitlines():
        if _READ_ONLY.search(line):
            path = _QUOTED_PATH.search(line)
            where = f"`{path.group(1)}`" if path else "a folder"
            return (
                f"a write to {where} was refused: the sandbox mounts it read-only (a contributor's checkout would not)"
            )
    return None


def _with_cause(outcome: TestOutcome, output: str, workspace: Path) -> None:
    """A run that did not get through its tests (stopped, or red as a whole suite) says why where its output shows
    it: a module the tests could not find, where from, and what to do (agents/verify/run_causes.py)."""
    if outcome.passed or (outcome.state is RunState.complete and SUITE_ID not in outcome.cases):
        return
    outcome.cause = missing_module(_ANSI.sub("", output), str(workspace))


def _with_sandbox_problem(outcome: TestOutcome, failing_output: str) -> TestOutcome:
    """Say in the outcome (and its reason, when it has one) that a failure came from the sandbox, where it did."""
    if not failing_output or (problem := sandbox_write_failure(failing_output)) is None:
        return outcome
    outcome.sandbox_problem = problem
    if outcome.reason:
        outcome.reason = f"{outcome.reason.rstrip('.')}; {problem}"
    return outcome


def _merged(results: list[CommandResult]) -> CommandResult:
    """The test steps' results as one (the first failing exit code; outputs one after the other)."""
    if len(results) == 1:
        return results[0]
    failing = [r.exit_code for r in results if r.exit_code != 0]
    return CommandResult(
        command=" && ".join(r.command for r in results),
        exit_code=failing[0] if failing else 0,
        output="\n".join(r.output for r in results),
        timed_out=any(r.timed_out for r in results),
        cancelled=any(r.cancelled for r in results),
        duration=sum(r.duration for r in results),
    )


def _counts(cases: dict[str, str]) -> str:
    states = list(cases.values())
    return ", ".join(f"{states.count(s)} {s}" for s in ("passed", "failed", "skipped") if states.count(s))


# ----------------------------------------------------------------------------------------------------------------------
# reading what the framework reported


def read_junit(path: Path, root: Path, inside: Path | None = None) -> tuple[dict[str, str], dict[str, str]]:
    """Per-test outcomes and failure texts (trimmed) from a JUnit XML file; ids relative to `root`
    (agents/verify/suite_reports.py; `inside`: the folder below which no link is followed)."""
    cases, failures = read_junit_untrimmed(path, root, inside)
    return cases, {k: _trim_failure(v) for k, v in failures.items()}


def _trim_failure(text: str, limit: int = FAILURE_CHARS) -> str:
    text = text.strip()
    return text if len(text) <= limit else text[: limit // 3] + "\n[...]\n" + text[-(2 * limit // 3) :]


def failures_section(output: str) -> str:
    """Pytest's FAILURES / ERRORS sections, short summary and closing line, without warnings banners or progress
    dots; any other framework's output as it is."""
    lines = output.splitlines()
    if not any(_BANNER.match(line.strip()) for line in lines):
        return output
    kept: list[str] = []
    keep = False
    for line in lines:
        banner = _BANNER.match(line.strip())
        if banner:
            title = banner.group(1)
            keep = any(word in title.lower() for word in ("failures", "errors", "short test summary"))
            if keep or _PYTEST_SUMMARY.match(line.strip()) or _PYTEST_NO_TESTS.match(line.strip()):
                kept.append(line)
            continue
        if keep or _PYTEST_SUMMARY.match(line.strip()):
            kept.append(line)
    return "\n".join(kept)


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


_PRINTED_FAILED = re.compile(r"(\d+) failed\b")  # one per failed test, as the report has a failed case per test
_PRINTED_ERRORS = re.compile(r"(\d+) errors?\b")  # one per failing phase: a test may have two, the report one case


def _report_disagrees(output: str, cases: dict[str, str], code: int | None) -> str | None:
    """Where pytest's closing line (printed before the process ends: what runs after it cannot take it back) counts
    more failed tests than the JUnit report holds, or any failure while the run exits 0 (pytest exits 1 then): code of
    the run rewrote the report or the exit status at its end. So does a second closing line: pytest prints one, and
    code that printed another after it (the last one was the one read) could make a rewritten report agree with it.
    None when they agree (or pytest printed no counts)."""
    closing = [line for line in output.splitlines() if _PYTEST_SUMMARY.match(line.strip())]
    if len(closing) > 1:
        return f"pytest's closing line was printed {len(closing)} times"
    summary = _summary_line(output)
    if summary is None:
        return None
    failed = sum(int(n) for n in _PRINTED_FAILED.findall(summary))
    errors = sum(int(n) for n in _PRINTED_ERRORS.findall(summary))
    reported = sum(1 for outcome in cases.values() if outcome == "failed")
    if failed > reported and cases:
        return f"pytest printed {failed} failed, the report holds {reported}"
    if (failed or errors) and code == 0:
        return f"pytest printed {failed + errors} failing, and the run exited 0"
    return None


def _summary_line(output: str) -> str | None:
    """The counts from the framework's closing line: pytest ("3 passed, 1 failed"), jest ("Tests: ..."), mocha."""
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
