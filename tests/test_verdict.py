"""Tests judged against the base commit, in small: the workspace's environment detected in order, JUnit outcomes, base-vs-after verdicts, the
baseline cache, borrowed links hidden from git, and the one seam every test run goes through."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from agents.sandbox.shell import child_env
from agents.verify import suite_run
from agents.verify.baseline import BaselineRuns
from agents.verify.suite_env import (
    MAX_TEST_TIMEOUT_S,
    TestConfigError,
    detect_environment,
    link_borrowed,
    parse_config,
    short_command,
)
from agents.verify.suite_run import (
    SUITE_ID,
    TestOutcome,
    TestStatus,
    failures_section,
    read_junit,
    run_tests,
)
from agents.verify.task_tests import defines_command
from agents.verify.verdict import Mark, judge, named_in
from tests.conftest import git, make_repo


def write(path: Path, text: str = "") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def outcome(status: str, **cases: str) -> TestOutcome:
    return TestOutcome(
        status=TestStatus(status),
        command="pytest",
        summary=status,
        cases={k.replace("__", "::"): v for k, v in cases.items()},
        failures={k.replace("__", "::"): f"{k} failed" for k, v in cases.items() if v == "failed"},
    )


# ----------------------------------------------------------------------------------------------------------------------
# the environment, in the order


NPM_PROJECT = json.dumps({"scripts": {"test": "mocha"}})


@pytest.mark.parametrize(
    "lockfile, command",
    [
        (None, "npm test --silent"),
        ("pnpm-lock.yaml", "pnpm test"),
        ("yarn.lock", "yarn test"),
        ("bun.lockb", "bun test"),
    ],
)
def test_package_manager_from_the_lock_file(tmp_path: Path, lockfile: str | None, command: str) -> None:
    write(tmp_path / "package.json", NPM_PROJECT)
    if lockfile:
        write(tmp_path / lockfile)
    env = detect_environment(tmp_path)
    assert env is not None and env.command == command and not env.fallback


@pytest.mark.parametrize(
    "files, command",
    [
        ({"Makefile": "build:\n\techo\n\ntest:\n\techo ok\n"}, "make test"),
        ({"go.mod": "module x\n"}, "go test ./..."),
        ({"Cargo.toml": "[package]\nname='x'\n"}, "cargo test"),
    ],
)
def test_make_go_cargo(tmp_path: Path, files: dict[str, str], command: str) -> None:
    for name, text in files.items():
        write(tmp_path / name, text)
    assert detect_environment(tmp_path).command == command


def test_workspace_venv_beats_package_json_and_the_bots_python_is_the_fallback(tmp_path: Path) -> None:
    write(tmp_path / "test_app.py", "def test_x(): pass\n")
    fallback = detect_environment(tmp_path)
    assert fallback.fallback and fallback.command.startswith(sys.executable.replace("'", ""))
    assert "bot's Python" in fallback.notes[0] and fallback.display == "pytest"
    write(tmp_path / "package.json", NPM_PROJECT)
    assert detect_environment(tmp_path).command == "npm test --silent", "package.json comes before the fallback"
    write(tmp_path / ".venv" / "bin" / "python")
    (tmp_path / ".venv" / "lib" / f"python{sys.version_info.major}.{sys.version_info.minor}").mkdir(parents=True)
    env = detect_environment(tmp_path)
    assert env.kind == "workspace .venv" and env.rerunnable and not env.fallback
    assert env.read_only_paths == [tmp_path / ".venv", env.python_base] and env.python_base is not None


def test_agentlab_toml_names_command_junit_timeout(tmp_path: Path) -> None:
    config = parse_config('[tests]\ncommand = ".venv/bin/pytest tests/unit -q"\njunit = "out.xml"\ntimeout = 30\n')
    write(tmp_path / "test_app.py")
    env = detect_environment(tmp_path, config=config)
    assert env.command == ".venv/bin/pytest tests/unit -q" and env.pytest and not env.rerunnable
    assert env.junit == "out.xml" and env.timeout == 30
    assert short_command(env.command) == "pytest tests/unit -q"
    assert short_command(f"{sys.executable} -m pytest -q --no-header") == "pytest"


@pytest.mark.parametrize("value", ["nan", "inf", "+inf", "-1", "0", str(MAX_TEST_TIMEOUT_S + 1)])
def test_a_repositorys_test_timeout_that_bounds_nothing_is_refused(value: str) -> None:
    """TOML's nan and inf are floats: `timeout <= 0` let them through, and the bot's test run was bounded by nothing
    (inf) or by a NaN deadline; a repository's own timeout is also at most a day."""
    with pytest.raises(TestConfigError, match="timeout must be a number of seconds above 0"):
        parse_config(f'[tests]\ncommand = "pytest"\ntimeout = {value}\n')
    assert parse_config(f"[tests]\ntimeout = {MAX_TEST_TIMEOUT_S}\n").timeout == MAX_TEST_TIMEOUT_S


def test_node_modules_of_a_monorepo_are_borrowed_and_hidden_from_git(tmp_path: Path) -> None:
    repo = make_repo(
        tmp_path / "mono", {"package.json": NPM_PROJECT, "packages/a/package.json": "{}", "packages/a/index.js": ""}
    )
    write(repo / "node_modules" / "dep" / "index.js")
    write(repo / "packages" / "a" / "node_modules" / "adep" / "index.js")
    tree = tmp_path / "tree"
    git(repo, "worktree", "add", "-q", "--detach", str(tree))
    env = detect_environment(tree, repo)
    assert sorted(env.borrowed) == ["node_modules", "packages/a/node_modules"]
    assert link_borrowed(env, tree) == env.borrowed
    assert (tree / "packages" / "a" / "node_modules" / "adep" / "index.js").is_file()
    assert git(tree, "status", "--porcelain") == "", "the links are not even untracked files"
    assert (repo / "packages" / "a" / "node_modules").resolve() in env.read_only_paths


# ----------------------------------------------------------------------------------------------------------------------
# outcomes


def test_junit_ids_are_pytest_node_ids(tmp_path: Path) -> None:
    write(tmp_path / "tests" / "test_a.py")
    report = write(
        tmp_path / "r.xml",
        """<testsuites><testsuite>
      <testcase classname="tests.test_a" name="test_ok"/>
      <testcase classname="tests.test_a.TestGroup" name="test_bad[1]"><failure message="assert 1 == 2">trace</failure></testcase>
      <testcase classname="tests.test_a" name="test_skip"><skipped/></testcase>
      <testcase classname="" name="tests.test_b"><error message="collection failure">ImportError</error></testcase>
    </testsuite></testsuites>""",
    )
    cases, failures = read_junit(report, tmp_path)
    assert cases == {
        "tests/test_a.py::test_ok": "passed",
        "tests/test_a.py::TestGroup::test_bad[1]": "failed",
        "tests/test_a.py::test_skip": "skipped",
        "tests.test_b": "failed",
    }
    assert failures["tests/test_a.py::TestGroup::test_bad[1]"] == "assert 1 == 2\ntrace"


def test_failures_section_drops_warnings_banners() -> None:
    output = (
        "....F\n=================================== FAILURES ===================================\n"
        "___ test_x ___\n    assert 1 == 2\n=============================== warnings summary "
        "===============================\nDeprecationWarning: old\n-- Docs: https://docs.pytest.org\n"
        "=========================== short test summary info ============================\n"
        "FAILED t.py::test_x - assert 1 == 2\n1 failed, 4 passed, 1 warning in 0.12s\n"
    )
    section = failures_section(output)
    assert "assert 1 == 2" in section and "FAILED t.py::test_x" in section and "1 failed, 4 passed" in section
    assert "DeprecationWarning" not in section and "Docs" not in section and "...." not in section


def test_verdict_sorts_fixed_broken_pre_existing_flaky_and_targets() -> None:
    base = outcome(
        "failed",
        t__ok="passed",
        t__old="failed",
        t__fixme="failed",
        t__flaky="passed",
        t__gone="passed",
        t__test_add="failed",
    )
    after = outcome(
        "failed",
        t__ok="failed",
        t__old="failed",
        t__fixme="passed",
        t__flaky="failed",
        t__new="failed",
        t__test_add="failed",
    )
    verdict = judge(after, base, "Fix add() please", flaky={"t::flaky"})
    assert verdict.fixed == ["t::fixme"] and verdict.broken == ["t::ok", "t::new"]
    assert verdict.still_failing == ["t::old", "t::test_add"] and verdict.targets == ["t::test_add"]
    assert verdict.pre_existing == ["t::old"] and verdict.flaky == ["t::flaky"] and verdict.disappeared == ["t::gone"]
    assert verdict.needs_correction
    text = verdict.correction(1, 3)
    yours, _, not_yours = text.partition("not yours")
    assert "t::ok" in yours and "t::new" in yours and "t::test_add" in yours and "t::old" not in yours
    assert "t::old" in not_yours and "t::flaky" not in text


def test_a_test_file_that_crashed_at_the_base_and_runs_its_tests_now_still_runs() -> None:
    """A file red as a whole at the base (it crashed: its id is the file) whose tests run one by one now has not
    stopped running: never "no longer run", never the task's target left red."""
    crashed = "test/x.test.js"
    base = TestOutcome(
        status=TestStatus.failed,
        command="npm test",
        summary="failed",
        cases={crashed: "failed", "test/y.test.js::y": "passed"},
        failures={crashed: "Error: Cannot find module '../x.js'"},
    )
    after = outcome("passed", **{"test/x.test.js::x > works": "passed", "test/y.test.js::y": "passed"})
    verdict = judge(after, base, "Fix the crash in test/x.test.js")
    assert verdict.no_longer_run == [] and verdict.targets == [] and verdict.mark is Mark.done, verdict.detail()


def test_a_step_that_failed_outside_its_tests_at_the_base_and_exits_0_now_is_fixed_not_gone() -> None:
    """A JavaScript test step whose hook failed at the base (its exit-status case red, every test green) and exits 0
    now: its case is fixed, never "no longer run" (it exists only while failing); while a test still fails now,
    the step's exit says nothing of the hook, so nothing is claimed fixed."""
    exit_case = f"{suite_run.EXIT_CASE} `jest`)"
    base = outcome("failed", **{"t.test.js::adds": "passed", exit_case: "failed"})
    verdict = judge(outcome("passed", **{"t.test.js::adds": "passed"}), base, "Tidy calc")
    assert verdict.fixed == [exit_case] and verdict.no_longer_run == verdict.disappeared == [], verdict.detail()
    assert verdict.mark is Mark.done, verdict.detail()
    still_red = judge(outcome("failed", **{"t.test.js::adds": "failed"}), base, "Tidy calc")
    assert still_red.fixed == [] and still_red.no_longer_run == [] and still_red.broken == ["t.test.js::adds"]


def test_pre_existing_only_needs_no_correction_and_the_line_is_short() -> None:
    base = outcome("failed", t__a="passed", t__b="failed")
    after = outcome("failed", t__a="passed", t__b="failed", t__c="passed")
    after.duration = 12.34
    verdict = judge(after, base, "Add a module")
    assert not verdict.needs_correction and not verdict.introduced_error
    assert verdict.line() == (
        "**Tests:** 2 passed · 0 fixed · 0 broken · 1 still failing from before (pre-existing) · 12.3 s · `pytest`"
    )


def test_a_run_that_breaks_is_introduced_only_when_the_base_ran() -> None:
    error = TestOutcome(status=TestStatus.error, command="pytest", summary="timed out after 5 s", timed_out=True)
    assert judge(error, outcome("passed", t__a="passed")).introduced_error
    assert not judge(error, error).introduced_error and not judge(error, error).needs_correction


def test_whole_suite_status_when_the_runner_names_no_tests() -> None:
    base, after = outcome("passed", **{SUITE_ID: "passed"}), outcome("failed", **{SUITE_ID: "failed"})
    assert judge(after, base).broken == [SUITE_ID]
    assert judge(after, outcome("failed", **{SUITE_ID: "failed"})).pre_existing == [SUITE_ID]


@pytest.mark.parametrize(
    "instructions, named",
    [
        ("Fix add().", True),
        ("make test_add pass", True),
        ("Add a greet module", False),
        ("fix t.py::test_add", True),
    ],
)
def test_named_targets(instructions: str, named: bool) -> None:
    assert named_in("t.py::test_add", instructions) is named


# ----------------------------------------------------------------------------------------------------------------------
# running: one seam, per-test outcomes, cache


async def test_every_test_run_goes_through_run_tests_to_run_command_with_run_options(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Baseline, after, the re-run of failing ids and the whole re-run that confirms a flaky one all reach
    `agents.sandbox.shell.run_command` through `run_tests`, with the caller's `**run_options` (the sandbox's way in)."""
    from agents.verify.task_tests import TaskTests

    seen: list[tuple[str, dict]] = []
    real = suite_run.run_command

    async def recording(command: str, **kwargs):
        seen.append((command, {k: v for k, v in kwargs.items() if k == "marker"}))
        kwargs.pop("marker")
        return await real(command, **kwargs)

    monkeypatch.setattr(suite_run, "run_command", recording)
    repo = make_repo(
        tmp_path / "w",
        {
            ".gitignore": ".ran\n",
            "test_a.py": (
                "import pathlib\n\ndef test_stable():\n    pass\n\ndef test_once():\n"
                "    m = pathlib.Path(__file__).parent / '.ran'\n"
                "    if (pathlib.Path(__file__).parent / 'changed').exists() and not m.exists():\n"
                "        m.write_text('1')\n        assert False\n"
            ),
        },
    )
    tree = tmp_path / "tree"
    git(repo, "worktree", "add", "-q", "--detach", str(tree))
    commit = git(repo, "rev-parse", "HEAD").strip()
    checks = await TaskTests.start(repo, tree, commit, "x", BaselineRuns(tmp_path / "cache"), 60, marker="sandbox")
    (tree / "changed").write_text("the task's change: test_once fails on its first run after it\n")
    git(tree, "add", "-A")
    git(tree, "commit", "-qm", "the task's change")
    verdict = await checks.check(tree, git(tree, "rev-parse", "HEAD").strip())
    assert verdict.flaky == ["test_a.py::test_once"] and verdict.broken == []
    assert len(seen) == 4 and all(options == {"marker": "sandbox"} for _, options in seen)
    assert "--junitxml=" in seen[0][0] and " -x " not in seen[0][0]
    assert seen[2][0].split("--junitxml")[0].rstrip().endswith("test_a.py::test_once"), "re-run of the failing id"
    whole = seen[3][0].split("--junitxml")[0]
    assert whole == seen[1][0].split("--junitxml")[0] and "::" not in whole, "then the whole suite again, as it failed"


async def test_baseline_is_cached_per_workspace_and_commit(tmp_path: Path) -> None:
    counter = tmp_path / "runs"
    repo = make_repo(tmp_path / "w", {".agentlab.toml": f'[tests]\ncommand = "echo x >> {counter}"\n'})
    env = detect_environment(repo)
    commit = git(repo, "rev-parse", "HEAD").strip()
    cache = BaselineRuns(tmp_path / "cache")
    first, second = await cache.outcome(repo, commit, env, 30), await cache.outcome(repo, commit, env, 30)
    assert first.status is second.status is TestStatus.passed
    assert counter.read_text().count("x") == 1, "the second task on the commit paid nothing"
    write(repo / "more.txt", "1")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "more")
    await cache.outcome(repo, git(repo, "rev-parse", "HEAD").strip(), env, 30)
    assert counter.read_text().count("x") == 2, "a new commit runs again"
    assert not [p for p in (tmp_path / "cache").iterdir() if p.is_dir()], "throw-away copies are removed"


async def test_pytest_runs_every_test_without_x(tmp_path: Path) -> None:
    write(
        tmp_path / "test_a.py",
        "def test_1():\n    assert 0\n\ndef test_2():\n    assert 0\n\ndef test_3():\n    pass\n",
    )
    result = await run_tests(tmp_path, 60, env=child_env() | {"PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"})
    assert result.cases == {"test_a.py::test_1": "failed", "test_a.py::test_2": "failed", "test_a.py::test_3": "passed"}


async def test_a_junit_file_named_in_agentlab_toml_gives_per_test_outcomes(tmp_path: Path) -> None:
    report = (
        '<testsuite><testcase classname="math" name="adds"/>'
        '<testcase classname="math" name="divides"><failure message="expected 2"/></testcase></testsuite>'
    )
    toml = "[tests]\ncommand = '''printf '" + report + "' > out.xml; exit 1'''\njunit = 'out.xml'\n"
    write(tmp_path / ".agentlab.toml", toml)
    result = await run_tests(tmp_path, 30)
    assert result.cases == {"math::adds": "passed", "math::divides": "failed"}
    assert result.failures["math::divides"] == "expected 2"
    assert not (tmp_path / "out.xml").exists(), "the report this run wrote is not left for the commit"


@pytest.mark.parametrize(
    ("path", "command", "defines"),
    [
        ("run_tests.sh", "sh ./run_tests.sh", True),
        ("scripts/test.sh", "bash scripts/test.sh --quick", True),
        ("runtests.py", "python runtests.py -v", True),
        ("Makefile", "make test", True),
        ("sub/rules.mk", "make -C sub check", True),
        ("justfile", "just test", True),
        ("node_modules/.bin/jest", "npx jest && node ./check.js", False),
        ("check.js", "npx jest && node ./check.js", True),
        ("run.sh", "CI=1 ./run.sh --fast", True),
        ("calc.py", "sh ./run_tests.sh", False),  # the code under test is the task's to change
        ("calc.py", '! grep -q "a [*] b" calc.py', False),  # read by the command, not run: what it judges
        ("tests/test_calc.py", "python -m pytest tests/test_calc.py", False),
        ("calc.py", "python3 -c 'import calc'", False),
        ("Makefile", "sh ./run_tests.sh", False),  # not run through make
        ("run_tests.sh", "sh 'unbalanced", False),
    ],
)
def test_what_a_test_command_runs_is_told_from_the_code_it_tests(path: str, command: str, defines: bool) -> None:
    assert defines_command(path, command) is defines
