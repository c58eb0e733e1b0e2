"""The bot's own checks of one task: the test command taken from the base commit, the baseline run started with the
task (in parallel with the worker), the run after each worker turn with one re-run of newly failing tests, and
the verdict. The command is the bot's, not the worker's: a worker that rewrites `.agentlab.toml` changes nothing
here, and is named in the summary; one that changes what runs inside the test run (the tests' configuration, a module
standing in for the runner's) makes the verdict ⚠ (`touched_checks`).

Every run judges committed content only, in a clean room (agents/verify/clean_room.py): the base run in one of the
base commit, the runs after the worker in one of the task's last commit, each in a network namespace of its own (the
sandbox given is not the task's). For a fix task, what each red test runs is learned at the base commit (traced
there, in parallel with the worker): a red test that could not be traced counts as the task's (never ✔ while red)."""

from __future__ import annotations

import asyncio
import copy
import functools
import json
import logging
import posixpath
import re
import shlex
import sys
from collections.abc import Awaitable
from pathlib import Path, PurePosixPath
from typing import Any

from agents.git.command import GitError
from agents.git.repository import changes_between, file_at, is_tracked, uncommitted_files
from agents.sandbox.safe_paths import TooLarge, UnsafePath, read_file, write_file
from agents.verify.base_run_cache import KeptOutcome, confirm_failing, confirm_fixed
from agents.verify.baseline import BaselineRuns
from agents.verify.checkout_state import CheckoutState, checkout_state
from agents.verify.clean_room import clean_room
from agents.verify.fix_targets import is_fix_task, test_file_of
from agents.verify.run_causes import keep_advice, needed_untracked
from agents.verify.suite_env import (
    CONFIG_FILE,
    TestConfig,
    TestConfigError,
    TestEnvironment,
    detect_environment,
    is_test_file_name,
    link_borrowed,
    npm_test_script,
    parse_config,
    pyproject_table,
    read_config_file,
)
from agents.verify.suite_run import (
    SUITE_ID,
    RunState,
    TestOutcome,
    TestStatus,
    no_tests_outcome,
    run_tests,
    was_killed,
)
from agents.verify.verdict import Verdict, judge, ran, step_key

log = logging.getLogger(__name__)

MAX_TRACED = 200  # red tests traced at the base for a fix task (beyond: untraced, so the task's: fail closed)
# never what a test looks for that the workspace should keep: the environment and caches the bot borrows or ignores
NOT_KEPT = frozenset({".git", "node_modules", ".venv", "venv", "__pycache__", ".pytest_cache", ".tox", ".nox"})
UNCHANGED_NOTE = "nothing in the checkout changed since the last test run: its results stand (not run again)"

TEST_CONFIG_FILES = frozenset(
    {
        "pytest.ini",
        ".pytest.ini",  # pytest 9 reads these three too, ahead of pyproject.toml, tox.ini and setup.cfg
        "pytest.toml",
        ".pytest.toml",
        "conftest.py",
        CONFIG_FILE,
        "tox.ini",
        "noxfile.py",
        "setup.cfg",
        ".mocharc.js",
        ".mocharc.json",
        ".mocharc.yml",
        ".mocharc.yaml",
        "jest.config.js",
        "jest.config.ts",
        "vitest.config.ts",
        "vitest.config.js",
        "karma.conf.js",
    }
)
# a JavaScript framework's configuration (and the transform it runs test files through) in any of its spellings
JS_TEST_CONFIG = re.compile(
    r"^(?:(?:jest|vitest|vite|ava|karma|babel)\.config|vitest\.workspace|\.mocharc|\.babelrc)(?:\.[cm]?[jt]s|\.json|\.ya?ml)?$"
)
# a JavaScript suite's setup file by its conventional names (what a config's setupFiles / require names): it runs inside
# every test file, so a change to it can make any test report a pass
JS_TEST_SETUP = re.compile(
    r"^(?:setupTests|(?:jest|vitest|mocha|ava|test|tests)[.-]setup|setup[.-](?:jest|vitest|tests?)|"
    r"global[.-]?(?:setup|teardown))\.[cm]?[jt]sx?$",
    re.IGNORECASE,
)
JS_TEST_FOLDERS = frozenset({"test", "tests", "__tests__", "spec"})


def js_test_setup(path: str) -> bool:
    """Whether `path` is a JavaScript suite's setup file: by its name, or `setup.js` (and the like) in a test folder."""
    parts = Path(path).parts
    if JS_TEST_SETUP.match(parts[-1]):
        return True
    return bool(JS_TEST_FOLDERS & set(parts[:-1])) and re.match(r"^setup\.[cm]?[jt]sx?$", parts[-1]) is not None


# package.json keys that configure a test framework (besides the test script)
PACKAGE_TEST_KEYS = ("jest", "ava", "mocha", "babel", "c8", "nyc")


# the files that say what `make` and `just` run, for a test command run through them
MAKE_FILES = re.compile(r"^(?:GNUmakefile|[Mm]akefile|.+\.mk)$")
JUST_FILES = re.compile(r"^\.?[Jj]ustfile$")


# programs that run the file named after their options (the script), and their options that name none (`-m pytest`,
# `-c CODE`: no file of the checkout is the script then)
INTERPRETERS = frozenset(
    {"sh", "bash", "dash", "zsh", "python", "python3", "node", "ruby", "perl", "php", "bun", "deno"}
)
NO_SCRIPT_OPTIONS = frozenset({"-m", "-c", "-e", "--eval", "-p", "--print"})
SEGMENT_ENDS = frozenset({"&&", "||", ";", "|", "!", "(", ")"})


def defines_command(path: str, command: str) -> bool:
    """Whether `path` says what the test command runs: a script the command runs (`./run_tests.sh`, `sh
    scripts/test.sh`, `python runtests.py`, `node check.js`), or a make or just file of a command run through them. A
    file the command only reads (`grep -q … calc.py`, `python -m pytest tests/`) is the code or tests it judges. The
    command is the bot's, from the base commit, but such a file is the task's: rewritten, the same command runs what the
    task wants."""
    programs, scripts = _run_by(command)
    if posixpath.normpath(path) in scripts:
        return True
    name = posixpath.basename(path)
    return bool(
        ({"make", "gmake"} & programs and MAKE_FILES.match(name)) or ("just" in programs and JUST_FILES.match(name))
    )


@functools.lru_cache(maxsize=32)  # asked once per file a task changed, of the same few commands
def _run_by(command: str) -> tuple[frozenset[str], frozenset[str]]:
    """The programs a command runs (each segment's first word) and the scripts (those words, and the file an
    interpreter is given after its options), as paths."""
    try:
        words = shlex.split(command)
    except ValueError:
        words = command.split()
    programs: set[str] = set()
    scripts: set[str] = set()
    at_start, interpreter, module = True, False, False  # module: the word after an interpreter's `-m`
    for word in words:
        if word in SEGMENT_ENDS:
            at_start, interpreter, module = True, False, False
        elif at_start:
            if "=" in word and not word.startswith(("/", ".")):  # `VAR=value command`
                continue
            programs.add(posixpath.basename(word))
            scripts.add(posixpath.normpath(word))
            at_start, interpreter = False, posixpath.basename(word) in INTERPRETERS
        elif module:  # `python -m X`: X.py, X/__main__.py or X/__init__.py, at the top or in src/
            name = word.replace(".", "/")
            for root in ("", "src/"):
                scripts |= {f"{root}{name}.py", f"{root}{name}/__main__.py", f"{root}{name}/__init__.py"}
            module = False
        elif interpreter:
            if word == "-m":
                interpreter, module = False, True
            elif word in NO_SCRIPT_OPTIONS:
                interpreter = False
            elif not word.startswith("-"):
                scripts.add(posixpath.normpath(word))
                interpreter = False
    return frozenset(programs), frozenset(scripts)


# modules that run inside a Python test run before or as its runner: one of the checkout's by these names replaces them
RUNNER_MODULES = frozenset(
    {"pytest", "_pytest", "pluggy", "iniconfig", "packaging", "pygments", "exceptiongroup", "tomli", "colorama"}
    | {"sitecustomize", "usercustomize"}
)
# so does a module of the standard library's names (the checkout leads the path), as a file or a package's
# `__init__.py` (a folder without one never shadows it); not `test`, many projects' own tests, which no run imports
STANDARD_MODULES = sys.stdlib_module_names - {"test", "__future__"}
# a package's metadata: an entry point there (`[pytest11]`) is a plugin pytest loads by itself, from the checkout too
PACKAGE_METADATA = re.compile(r"(?:^|/)[^/]+\.(?:dist|egg)-info(?:/|$)")
# a Python file that hooks into pytest wherever it is imported from: a test module naming plugins, a hook, a hookimpl
PYTEST_HOOKING = re.compile(r"^\s*(?:pytest_plugins\b|(?:async\s+)?def\s+pytest_\w+\s*\(|@\S*hookimpl\b)", re.MULTILINE)


async def base_config(repo: Path, commit: str) -> TestConfig | None:
    """`.agentlab.toml` as of the base commit; the workspace's own copy only when it is untracked there."""
    text = await file_at(repo, commit, CONFIG_FILE)
    if text is not None:
        return parse_config(text, "base commit")
    if (repo / CONFIG_FILE).is_file() and not await is_tracked(repo, CONFIG_FILE):
        return await asyncio.to_thread(read_config_file, repo, "workspace (untracked there)")
    return None


def run_timeout(environment: TestEnvironment | None, timeout: float) -> float:
    """How long one test run may take: the owner's TEST_TIMEOUT_SECONDS, or less where `.agentlab.toml` says so. A
    repository's file (anyone's commit) may shorten a run, never lengthen it past the owner's bound."""
    return min(environment.timeout, timeout) if environment is not None and environment.timeout else timeout


class TaskTests:
    """Start with `start()` when the task starts; `check()` after each worker turn; `close()` when the task ends."""

    def __init__(
        self,
        repo: Path,
        base_commit: str,
        instructions: str,
        timeout: float,
        environment: TestEnvironment | None,
        problem: str | None,
        baseline: asyncio.Task[TestOutcome] | None,
        run_options: dict[str, Any],
        baselines: BaselineRuns | None = None,
    ) -> None:
        self.repo, self.base_commit, self.instructions = repo, base_commit, instructions
        self.environment, self.problem, self.baseline = environment, problem, baseline
        self.timeout = run_timeout(environment, timeout)
        self.run_options = run_options
        self.baselines = baselines  # re-runs at the base (base_run_cache); None when the environment is unknown
        self.rerun_at_base: dict[str, bool] = {}  # test id → passed when re-run at the base (confirm_fixed)
        self.base_traces: asyncio.Task[dict[str, list[str]]] | None = None  # a fix task's red tests, traced at base
        # the checkout's state after a check that asked for a correction, and that check's verdict (see check())
        self.last_checked: tuple[CheckoutState, Verdict] | None = None

    @classmethod
    async def start(
        cls,
        repo: Path,
        checkout: Path,
        base_commit: str,
        instructions: str,
        baselines: BaselineRuns,
        timeout: float,
        **run_options: Any,
    ) -> TaskTests:
        """Detect the environment at the base commit (`checkout` is still at it), link what it borrows into the
        checkout, and start the baseline run."""
        try:
            config = await base_config(repo, base_commit)
            environment = await asyncio.to_thread(detect_environment, checkout, repo, config)
        except (TestConfigError, GitError, OSError) as err:  # said in the summary; the task goes on
            return cls(repo, base_commit, instructions, timeout, None, str(err), None, run_options)
        baseline = None
        if environment is not None:
            await asyncio.to_thread(link_borrowed, environment, checkout)
            effective = run_timeout(environment, timeout)
            baseline = asyncio.create_task(
                baselines.outcome(repo, base_commit, environment, effective, **run_options),
                name=f"baseline-{base_commit[:8]}",
            )
        tests = cls(repo, base_commit, instructions, timeout, environment, None, baseline, run_options, baselines)
        if baseline is not None and is_fix_task(instructions):
            tests.base_traces = asyncio.create_task(tests._trace_base(), name=f"base-traces-{base_commit[:8]}")
        return tests

    async def _trace_base(self) -> dict[str, list[str]]:
        """What each test red at the base runs, traced at the base (pytest re-runs those ids, a JavaScript script
        their files, under node's coverage); empty where the framework allows neither (ava: ids name no file)."""
        environment, baselines = self.environment, self.baselines
        assert environment is not None and baselines is not None
        base = await self._base()
        per_file = not environment.rerunnable and any(step.has_framework for step in environment.script)
        if base is None or not (environment.rerunnable or per_file):
            return {}
        red = [t for t, state in base.cases.items() if state == "failed" and t != SUITE_ID and "::" in t]
        if not red:
            return {}
        return await baselines.traces(
            self.repo, self.base_commit, environment, self.timeout, red[:MAX_TRACED], **self.run_options
        )

    @property
    def read_only_paths(self) -> list[Path]:
        return self.environment.read_only_paths if self.environment else []

    async def check(self, checkout: Path, commit: str) -> Verdict:
        """Run the tests of `commit` (the task's last commit, as the bot made it: never read through the checkout's
        own `.git`, which its worker can point at another history while the tests run), compare with the base
        commit, re-run newly failing tests once.

        A checkout that has not changed at all since the last check (a correction turn in which the worker changed
        no file) is not tested again: the same code on the same files gives the same verdict, said in a note. A
        suite of minutes would otherwise run once more for each such turn. Only a check that asked for a correction
        records the state: the next check is then a correction's."""
        if self.last_checked is not None:
            last_state, last_verdict = self.last_checked
            if await checkout_state(checkout) == last_state:
                same = copy.deepcopy(last_verdict)
                same.notes.append(UNCHANGED_NOTE)
                return same
        verdict = await self._run_and_judge(checkout, commit)
        state = await checkout_state(checkout) if verdict.needs_correction else None
        # a copy: what the caller adds to the verdict it is given never reaches a later one
        self.last_checked = (state, copy.deepcopy(verdict)) if state is not None else None
        return verdict

    async def _run_and_judge(self, checkout: Path, head: str) -> Verdict:
        if self.problem is not None:
            failed = _not_run(f"the test configuration is broken: {self.problem}", self.problem)
            return judge(failed, failed, self.instructions)
        changes = await self._changes(checkout, head)
        rooms = self.baselines.directory if self.baselines is not None else checkout.parent / ".agentlab-rooms"
        try:
            async with clean_room(self.repo, head, self.environment, rooms) as room:
                verdict = await self._judge_in(room, [path for _, path in changes])
                python = [path for status, path in changes if status != "D" and path.endswith(".py")]
                hooking = await asyncio.to_thread(hooking_files, room, python)
        except (GitError, OSError) as err:  # no room, no run: the bot cannot tell
            log.warning("the clean room of %s failed: %s", head[:8], err)
            failed = _not_run(f"the task's commit could not be checked out to test it: {err}", str(err))
            return judge(failed, failed, self.instructions)
        verdict.warnings += await self.touched_checks(checkout, verdict, changes, hooking)
        return verdict

    async def _judge_in(self, room: Path, changed: list[str]) -> Verdict:
        """Run the tests in `room` (the clean room of the task's last commit) and judge them against the base."""
        none = no_tests_outcome()
        added = None
        if self.environment is None:  # no tests at the base: the task's own (detected by the bot; no .agentlab.toml)
            added = await asyncio.to_thread(detect_environment, room, self.repo, None)
        if added is not None:
            await asyncio.to_thread(link_borrowed, added, room)
            after = await run_tests(room, self.timeout, environment=added, **self.run_options)
            verdict = judge(after, none, self.instructions, changed=changed)
            verdict.notes += [*added.notes, "the base commit had no tests: these are the task's own"]
            if SUITE_ID in after.cases and not verdict.needs_correction and verdict.unverified is None:
                # a command the task wrote that names no test (`make test` echoing counts): nothing was seen passing
                verdict.unverified = (
                    f"the base commit had no tests and `{added.display}`, the task's own, names no test it ran, so "
                    "the bot saw none pass"
                )
            await self._needed_uncommitted(verdict, added)
            return verdict
        if self.environment is None:
            return judge(none, none, self.instructions)
        after = await run_tests(room, self.timeout, environment=self.environment, **self.run_options)
        base = await self._base()
        after, killed = await self._after_a_kill(room, after, base)
        flaky, crashed = await self._flaky(room, after, base)
        if crashed:  # what a crashed file's tests showed on its re-run stands for the run that never reached them
            seen = {name: state for cases in crashed.values() for name, state in cases.items()}
            after = after.model_copy(update={"cases": {**seen, **after.cases}})
        traced = await self._base_traced()
        verdict = judge(after, base, self.instructions, flaky, changed=changed, traced=traced)
        verdict.crashed_once = [name for name in verdict.flaky if name in crashed]
        verdict.notes += self.environment.notes + killed
        await self._base_reused(verdict, base)
        await self._fixed_by_test_edits(room, verdict, changed)
        await self._needed_uncommitted(verdict, self.environment)
        return verdict

    async def _fixed_by_test_edits(self, room: Path, verdict: Verdict, changed: list[str]) -> None:
        """Tests counted as fixed, where the task changed their test file or another file of the tests (a helper the
        tests assert through, under a test folder or named as a test file), are run once more with the base commit's
        version of those files, against the task's code (in `room`, after its runs): one that fails there passed only
        with the task's change to the tests (an expectation rewritten to what the code returns, an assertion helper
        that no longer asserts), so the bot cannot tell the code was fixed (⚠ unless ✗ anyway)."""
        environment = self.environment
        own = {f for t in verdict.fixed if (f := test_file_of(t)) is not None and f in changed}
        helpers = {f for f in changed if f not in own and test_side(f)}
        if not (own or helpers) or not verdict.fixed or environment is None:
            return
        edited = sorted(own | helpers)
        ids = [t for t in verdict.fixed if test_file_of(t) in own] if not helpers else list(verdict.fixed)
        try:
            for path in edited:
                text = await file_at(self.repo, self.base_commit, path)
                if text is None:
                    if path in own:
                        return  # a test file new with the task: nothing to compare with
                    continue  # a new helper: the base's tests do not import it
                await asyncio.to_thread(write_file, room, path, text.encode())  # never through a link of the task's
        except (UnsafePath, OSError):
            again = None  # the base's version cannot be put in place: fail closed
        else:
            again = await run_tests(room, self.timeout, environment=environment, ids=ids, **self.run_options)
        only_with_edit = [t for t in ids if again is None or again.cases.get(t) != "passed"]
        if not only_with_edit:
            return
        shown = ", ".join(f"`{t}`" for t in only_with_edit[:8]) + (" …" if len(only_with_edit) > 8 else "")
        tests = ", ".join(f"`{f}`" for f in edited[:3])
        verdict.notes.append(
            f"fixed only with the task's change to the tests ({tests}): the base commit's version does not pass "
            f"against the task's code: {shown}"
        )
        if not verdict.needs_correction and verdict.unverified is None:
            verdict.unverified = (
                f"{len(only_with_edit)} test(s) pass only with the task's change to the tests: the base commit's "
                "version does not pass against the task's code, so the bot cannot tell the code was fixed"
            )

    async def _needed_uncommitted(self, verdict: Verdict, env: TestEnvironment) -> None:
        """Files of the owner's workspace that no commit holds, named by a failing run's output: the clean room did
        not have them. Said with how to keep them, and the verdict cannot tell (⚠) unless it is ✗ anyway."""
        runs = [run for run in (verdict.after, verdict.base) if run is not None and not run.passed]
        if not runs:
            return
        try:
            files = await uncommitted_files(self.repo)
        except GitError:
            return
        skipped = {*env.borrowed, *env.keep}
        files = [
            f
            for f in files
            if f.rstrip("/") not in skipped and not NOT_KEPT & set(PurePosixPath(f).parts) and not f.endswith(".pyc")
        ]
        outputs = [run.output for run in runs] + [text for run in runs for text in run.failures.values()]
        outputs += [step.output for run in runs for step in run.steps if not step.passed]
        needed = needed_untracked(outputs, files)
        if not needed:
            return
        advice = [keep_advice(path) for path in needed[:3]]
        if not verdict.needs_correction and verdict.unverified is None:
            verdict.unverified = advice.pop(0)
        verdict.notes += advice

    async def _base_traced(self) -> dict[str, list[str]] | None:
        """A fix task's red tests traced at the base (None for any other task: its red tests are judged by name)."""
        if self.base_traces is None:
            return None
        try:
            return await asyncio.shield(self.base_traces)
        except asyncio.CancelledError:
            raise
        except Exception as err:  # noqa: BLE001  (no trace: every red test counts as the task's, fail closed)
            log.warning("tracing the red tests at %s failed: %s", self.base_commit[:8], err)
            return {}

    async def _changes(self, checkout: Path, head: str) -> list[tuple[str, str]]:
        """(status, path) of what the task changed from the base commit to `head`; none when git cannot say."""
        try:
            return await changes_between(checkout, self.repo, self.base_commit, head)
        except GitError:
            return []

    async def _base(self) -> TestOutcome | None:
        assert self.baseline is not None
        try:
            return await asyncio.shield(self.baseline)
        except asyncio.CancelledError:
            raise
        except Exception as err:  # noqa: BLE001  (no baseline: every failure counts as the task's, as without a base-commit run)
            log.warning("baseline run at %s failed: %s", self.base_commit[:8], err)
            return None

    async def _after_a_kill(
        self, checkout: Path, after: TestOutcome, base: TestOutcome | None
    ) -> tuple[TestOutcome, list[str]]:
        """A run killed part-way (a crash, a signal) where the base run completed is run once more before the task
        is blamed for it: a re-run that completes stands in for it, said in a note."""
        if not was_killed(after) or base is None or base.state is not RunState.complete:
            return after, []
        again = await run_tests(checkout, self.timeout, environment=self.environment, **self.run_options)
        if again.state is not RunState.complete:
            return after, []
        return again, [f"the first run after the change was killed part-way ({after.summary}); its re-run completed"]

    async def _base_reused(self, verdict: Verdict, base: TestOutcome | None) -> None:
        """Say when the base outcome was kept from an earlier task; re-run what it counts as fixed once at the base."""
        if isinstance(base, KeptOutcome):
            verdict.notes.append(
                f"the base commit's test results were reused from an earlier run ({base.kept_at} UTC: same commit, "
                "command and environment)"
            )
        baselines, env = self.baselines, self.environment
        if base is not None and baselines is not None and env is not None:

            def rerun_at_base(ids: list[str] | None) -> Awaitable[TestOutcome]:
                return baselines.rerun(self.repo, self.base_commit, env, self.timeout, ids, **self.run_options)

            await confirm_fixed(verdict, env, rerun_at_base, self.rerun_at_base)
            if isinstance(base, KeptOutcome):  # a kept red result is checked once before it excuses a failure
                await confirm_failing(verdict, env, rerun_at_base, self.rerun_at_base)

    async def _flaky(
        self, room: Path, after: TestOutcome, base: TestOutcome | None
    ) -> tuple[set[str], dict[str, dict[str, str]]]:
        """What fails now but not at the base and passes on one immediate re-run: tests (pytest re-runs those ids
        only, node --test, jest, vitest and ava their files; anything else re-runs whole) and script steps
        (`step_key`, with the whole script). Also which of them were test files that crashed (failed as a whole, no
        test of theirs reported) and whose tests all ran and none failed on the re-run: crashed once, not broken
        (each with what its tests showed on the re-run).

        A test that passes when its id or file runs alone was not re-run as it failed: beside the rest of the suite.
        A change can break a test only there (code that behaves otherwise once another test module is loaded, a
        test-order dependency), deterministically; such a test is called flaky only when a whole re-run, the same
        make-up as the run that failed, passes it too. That costs a second run only when the first says "flaky"."""
        before = base.cases if base is not None else {}
        suspects = [name for name, state in after.cases.items() if state == "failed" and before.get(name) != "failed"]
        at_base = {step.command: step for step in base.steps} if base is not None else {}
        steps = [
            s.command
            for s in after.steps
            if not s.passed and (base is None or (s.command in at_base and at_base[s.command].passed))
        ]
        if not (suspects or steps) or after.state is not RunState.complete:
            return set(), {}
        assert self.environment is not None
        ids = [s for s in suspects if "::" in s and (room / s.split("::", 1)[0]).is_file()]
        # pytest gets the ids; a JavaScript framework taking files gets theirs (run_tests); anything else runs whole
        by_ids = len(ids) == len(suspects) and not steps and (self.environment.rerunnable or self.environment.script)
        rerun = await run_tests(
            room, self.timeout, environment=self.environment, ids=ids if by_ids else None, **self.run_options
        )
        passed_steps = {s.command for s in rerun.steps if s.passed}
        crashed = {s: _cases_of(s, rerun) for s in suspects if _crashed_file(s, room) and _file_passed(s, rerun)}
        flaky = {s for s in suspects if rerun.cases.get(s) == "passed"} | set(crashed)
        if by_ids and flaky:
            whole = await run_tests(room, self.timeout, environment=self.environment, **self.run_options)
            crashed = {s: cases for s, cases in crashed.items() if _file_passed(s, whole)}
            flaky = {s for s in flaky if whole.cases.get(s) == "passed"} | set(crashed)
        return flaky | {step_key(c) for c in steps if c in passed_steps}, crashed

    async def touched_checks(
        self, checkout: Path, verdict: Verdict, changes: list[tuple[str, str]], hooking: frozenset[str] = frozenset()
    ) -> list[str]:
        """What the task changed of its own checks: test configuration, deleted test files, tests gone, a module
        that stands in for the runner's own, a script or make file the test command runs (`defines_command`). A change
        to what runs inside the test run (all of these but the `.agentlab.toml` the bot does not read from the task)
        can make the run report what the task wants, so the verdict cannot tell (⚠) unless it is ✗ anyway."""
        warnings = []
        in_run: list[str] = []
        for status, path in changes:
            name = Path(path).name
            if status == "D" and (
                is_test_file_name(path) or "/tests/" in f"/{path}" or ".test." in name or ".spec." in name
            ):
                warnings.append(f"the task deleted the test file `{path}`")
            elif (
                name in TEST_CONFIG_FILES
                or JS_TEST_CONFIG.match(name)
                or js_test_setup(path)
                or (
                    name in ("pyproject.toml", "package.json")
                    and await self._test_section_changed(checkout, path, name)
                )
            ):
                warnings.append(
                    f"the task changed test configuration: `{path}` (the tests ran with the base commit's command)"
                )
                in_run += [path] if name != CONFIG_FILE else []
            elif shadowed := runner_module(path):
                warnings.append(f"the task changed `{path}`, which the test run imports ahead of `{shadowed}`'s own")
                in_run.append(path)
            elif PACKAGE_METADATA.search(path):
                warnings.append(f"the task changed `{path}`, package metadata whose entry points pytest loads")
                in_run.append(path)
            elif path in hooking:
                warnings.append(f"the task changed `{path}`, which hooks into pytest (a plugin, a hook)")
                in_run.append(path)
            elif self.environment is not None and (
                any(defines_command(path, command) for command in self._commands())
                or await self._named_by_recipe(checkout, path)
            ):
                warnings.append(f"the task changed `{path}`, which says what the test command runs")
                in_run.append(path)
        if verdict.disappeared:
            warnings.append(f"{len(verdict.disappeared)} test(s) that ran at the base commit no longer run")
        base_complete = verdict.base is not None and ran(verdict.base)
        hidden = [
            path
            for status, path in changes
            if test_side(path)
            and (
                (status == "D" and not base_complete)  # with a complete base its tests count as no longer run
                or (status != "A" and SUITE_ID in verdict.after.cases)  # the command names no test: none is seen
            )
        ]
        if hidden and not verdict.needs_correction and verdict.unverified is None:
            named = ", ".join(f"`{path}`" for path in hidden[:3]) + (" …" if len(hidden) > 3 else "")
            verdict.unverified = (
                f"the task changed or deleted tests ({named}) where the bot sees no test one by one (the whole "
                "suite's result, or no complete run at the base), so it cannot tell whether one was skipped or "
                "weakened"
            )
        if in_run and not verdict.needs_correction and verdict.unverified is None:
            named = ", ".join(f"`{path}`" for path in in_run[:3]) + (" …" if len(in_run) > 3 else "")
            verdict.unverified = (
                f"the task changed what runs inside its own test run ({named}), which can make the run report what "
                "the task wants, so the bot cannot tell"
            )
        return warnings

    def _commands(self) -> list[str]:
        """The test command and each step of its script."""
        if self.environment is None:
            return []
        return [self.environment.command, *(step.command for step in self.environment.script)]

    async def _named_by_recipe(self, checkout: Path, path: str) -> bool:
        """Whether `path` is named in the make or just file (at the top of the checkout, as of the base commit) of a
        test command run through them: a script a recipe runs (`sh scripts/check.sh`) says what the command runs as
        much as the recipe does."""
        programs = set().union(*(_run_by(command)[0] for command in self._commands()))
        names = (("GNUmakefile", "makefile", "Makefile") if {"make", "gmake"} & programs else ()) + (
            ("justfile", ".justfile", "Justfile") if "just" in programs else ()
        )
        for name in names:
            text = await file_at(checkout, self.base_commit, name)
            if text is not None and re.search(rf"(?<![\w./-])(?:\./)?{re.escape(path)}(?![\w/-])", text):
                return True
        return False

    async def _test_section_changed(self, checkout: Path, path: str, name: str) -> bool:
        before = await file_at(checkout, self.base_commit, path)
        after = await file_at(checkout, "HEAD", path)
        read = (lambda t: pyproject_table(t, "pytest")) if name == "pyproject.toml" else _package_test_config
        return (read(before) if before else None) != (read(after) if after else None)

    def close(self) -> None:
        for running in (self.baseline, self.base_traces):
            if running is not None and not running.done():
                running.cancel()


def _package_test_config(text: str) -> object:
    """What of a package.json configures the tests: the test script and the frameworks' own keys."""
    try:
        data = json.loads(text)
    except ValueError:
        return None
    keys = {key: data.get(key) for key in PACKAGE_TEST_KEYS} if isinstance(data, dict) else {}
    return (npm_test_script(text), keys)


def hooking_files(room: Path, paths: list[str]) -> frozenset[str]:
    """Those of `paths` (Python files the task changed, read in the clean room: its commit, byte for byte) that name
    pytest plugins (`pytest_plugins`, which a test module may set: pytest loads them while collecting it) or define a
    hook or hookimpl: a change anywhere in such a file may be one to what the hook does. One unreadable (a link, not
    a file, over 1 MB) counts as one."""
    found = set()
    for path in paths:
        try:
            text = read_file(room, path, max_bytes=1 << 20).decode("utf-8", "replace")
        except (OSError, UnsafePath, TooLarge):
            found.add(path)
            continue
        if PYTEST_HOOKING.search(text):
            found.add(path)
    return frozenset(found)


def test_side(path: str) -> bool:
    """Whether `path` belongs to the tests rather than the code: a test file by its name, or any file under a test
    folder (`tests/`, `test/`, `testing/`, `__tests__/`, `spec/`)."""
    parts = PurePosixPath(path).parts
    return is_test_file_name(path) or bool({"tests", "test", "testing", "__tests__", "spec"} & set(parts[:-1]))


def runner_module(path: str) -> str | None:
    """The module `path` stands in for when the test run imports it ahead of the installed one (the checkout's
    source roots, its top and `src/`, lead the path): the runner (`pytest.py`, `_pytest/…`, `pluggy/…`), what
    Python runs at its start (`sitecustomize.py`), or a module of the standard library (`argparse.py`,
    `json/__init__.py`). None for anything else."""
    parts = PurePosixPath(path).parts
    if parts[:1] == ("src",):
        parts = parts[1:]
    if not parts or (len(parts) == 1 and PurePosixPath(parts[0]).suffix not in (".py", ".pyc", ".so")):
        return None
    top = parts[0].split(".", 1)[0]
    if top in RUNNER_MODULES:
        return top
    return top if top in STANDARD_MODULES and (len(parts) == 1 or parts[1:] == ("__init__.py",)) else None


def _not_run(reason: str, problem: str) -> TestOutcome:
    return TestOutcome(
        status=TestStatus.error,
        command=None,
        output=problem,
        summary=problem,
        state=RunState.not_started,
        reason=reason,
    )


def _crashed_file(test_id: str, room: Path) -> bool:
    """A test id that is a whole test file (a file that crashed or would not load: no test of its own reported)."""
    try:
        return "::" not in test_id and (room / test_id).is_file()
    except OSError:  # a title too long for a path (ava's ids are titles): no file
        return False


def _cases_of(test_file: str, run: TestOutcome) -> dict[str, str]:
    return {name: state for name, state in run.cases.items() if name.startswith(test_file + "::")}


def _file_passed(test_file: str, rerun: TestOutcome) -> bool:
    """The re-run reported tests of `test_file` and none of them (nor the file as a whole) failed."""
    own = list(_cases_of(test_file, rerun).values())
    whole = rerun.cases.get(test_file)
    return rerun.state is RunState.complete and bool(own) and "failed" not in own and whole != "failed"
