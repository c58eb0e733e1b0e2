"""Per-test verdicts, the JavaScript frameworks' half: a JS test script read as steps, the reporter flags added to each framework, the reports read
into root-relative ids that keep suite names, and what a sandbox gives a JS run (offline env, private caches,
re-borrowed node_modules)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import cast

import pytest

from agents.core.secrets_filter import SecretsFilter
from agents.sandbox.bwrap import node_modules_caches, sandbox_env, spec_for
from agents.sandbox.shell import CommandResult, child_env, run_command
from agents.verify.js_test_script import ScriptStep, classify, plan_script, reporter_command, split_and
from agents.verify.js_test_script import test_steps as steps_that_test  # a test_ name pytest would collect
from agents.verify.suite_env import TestEnvironment, detect_environment, link_borrowed
from agents.verify.suite_reports import read_jest_json, read_junit, read_records, read_tap
from agents.verify.suite_run import RunState, _ScriptRun, run_tests
from tests.support.sandbox import PROBE


def package(root: Path, scripts: dict[str, str], **extra: object) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "package.json").write_text(json.dumps({"name": "p", "scripts": scripts, **extra}))
    return root


# ----------------------------------------------------------------------------------------------------------------------
# the script as steps


def test_a_chain_is_followed_through_npm_run_and_split_into_kinds(tmp_path: Path) -> None:
    package(tmp_path, {"test": "xo && npm run build && ava", "build": "tsc && rollup -c"})
    steps = plan_script(tmp_path)
    assert [(s.command, s.kind, s.framework) for s in steps] == [
        ("xo", "lint", None),
        ("tsc", "typecheck", None),
        ("rollup -c", "build", None),
        ("ava", "other", "ava"),
    ]
    assert [s.command for s in steps_that_test(steps)] == ["ava"]


def test_pnpm_and_yarn_script_calls_and_npm_pre_scripts(tmp_path: Path) -> None:
    package(tmp_path, {"test": "pnpm lint && pnpm run test:unit", "lint": "eslint .", "test:unit": "vitest run"})
    assert [(s.command, s.kind, s.framework) for s in plan_script(tmp_path, "pnpm")] == [
        ("eslint .", "lint", None),
        ("vitest run", "other", "vitest"),
    ]
    package(tmp_path, {"test": "yarn unit", "unit": "cross-env NODE_ENV=test jest --runInBand"})
    assert plan_script(tmp_path, "yarn")[0].framework == "jest"
    package(tmp_path, {"test": "mocha", "pretest": "node scripts/lint.js"})
    assert [(s.command, s.kind) for s in plan_script(tmp_path, "npm")] == [
        ("node scripts/lint.js", "lint"),
        ("mocha", "other"),
    ]


@pytest.mark.parametrize(
    ("command", "framework"),
    [
        ("node --test", "node"),
        ("node --experimental-vm-modules --test test/", "node"),
        ("nyc mocha --exit", "mocha"),
        ("c8 ava", "ava"),
        ("NODE_ENV=test npx jest", "jest"),
        ("pnpm exec vitest", "vitest"),
        ("eslint --plugin jest .", None),
        ("jest --watch", None),
        ("mocha | tee out.txt", None),  # other shell syntax: run as written, whole
        ("node test.js", None),
    ],
)
def test_the_framework_of_a_step(command: str, framework: str | None) -> None:
    assert classify(command).framework == framework


def test_and_splitting_respects_quotes() -> None:
    assert split_and("a && b 'x && y' && \"c && d\"") == ["a", "b 'x && y'", '"c && d"']


def test_reporter_flags_per_framework(tmp_path: Path) -> None:
    report = tmp_path / "r.json"
    node = reporter_command(ScriptStep("node --test test/", framework="node"), report, tmp_path)
    assert node.startswith("node --test --test-reporter=spec ") and node.endswith(f"={report} test/")
    assert (tmp_path / "node_test_reporter.mjs").is_file()
    own = reporter_command(ScriptStep("node --test --test-reporter=dot", framework="node"), report, tmp_path)
    assert "spec" not in own and own.count("--test-reporter-destination") == 2, "their reporter keeps stdout"
    assert reporter_command(ScriptStep("vitest", framework="vitest"), report, tmp_path).startswith("vitest --run ")
    assert "--run" not in reporter_command(ScriptStep("vitest run", framework="vitest"), report, tmp_path)[11:]
    assert reporter_command(ScriptStep("jest", framework="jest"), report, tmp_path).endswith(f"--outputFile={report}")
    ava = reporter_command(ScriptStep("ava", framework="ava"), report, tmp_path)
    assert ava == f"set -o pipefail; ava --tap 2>&1 | tee {report}", "the TAP read from a file, whole"


def test_a_copied_tap_survives_a_framework_making_its_stderr_non_blocking_and_a_late_reader(tmp_path: Path) -> None:
    """node makes its stdio non-blocking. Where ava's stderr was the pipe the bot reads, which tee also writes to, the
    pipe was non-blocking for tee too: once the bot read late (a busy machine) tee failed with EAGAIN, and a run of
    all-passing tests exited 1. Here a stand-in `ava` does what node does, and the output is read only once it is
    more than a pipe holds."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    ava = bin_dir / "ava"
    ava.write_text(  # as node does: its stderr non-blocking, a write that meets a full pipe waits and goes on
        f"#!{sys.executable}\nimport fcntl, os, select\n"
        "fcntl.fcntl(2, fcntl.F_SETFL, fcntl.fcntl(2, fcntl.F_GETFL) | os.O_NONBLOCK)\n"
        "data = ''.join(f'ok {i} - case {i} ' + 'x' * 600 + '\\n' for i in range(1, 301)).encode()\n"
        "while data:\n"
        "    try:\n"
        "        data = data[os.write(1, data):]\n"
        "    except BlockingIOError:\n"
        "        select.select([], [1], [])\n"
    )
    ava.chmod(0o755)
    report = tmp_path / "tap.txt"
    command = reporter_command(ScriptStep("ava", framework="ava"), report, tmp_path)
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"}
    with subprocess.Popen(
        ["bash", "-c", command], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env, cwd=tmp_path
    ) as run:
        time.sleep(1)  # the reader is late: the pipe is full by now
        said = run.communicate(timeout=30)[0].decode()
    assert run.returncode == 0, said[-300:]
    assert said.count("\nok ") == 299 and "Resource temporarily unavailable" not in said
    assert read_tap(report.read_text(), tmp_path)[0] == {f"case {i} " + "x" * 600: "passed" for i in range(1, 301)}


# ----------------------------------------------------------------------------------------------------------------------
# reports → ids


def junit_with_paths(folder: Path) -> Path:
    """A JUnit file as mocha-junit-reporter / jest-junit write it: absolute paths of the folder it ran in."""
    folder.mkdir(parents=True, exist_ok=True)
    report = folder / "junit.xml"
    report.write_text(
        f'<testsuites><testsuite name="Root Suite" file="{folder}/test/app.test.js">'
        f'<testsuite name="Router" file="{folder}/test/app.test.js">'
        '<testcase classname="get returns 404" name="Router get returns 404">'
        f'<failure message="expected 404">at Context (file://{folder}/lib/router.js:3:1)</failure></testcase>'
        '<testcase classname="get ok" name="Router get ok"/>'
        "</testsuite></testsuite></testsuites>"
    )
    return report


def test_junit_ids_from_two_folders_compare(tmp_path: Path) -> None:
    """The baseline runs in a copy elsewhere: ids carry no absolute path, so both runs name the same tests."""
    base, task = tmp_path / "baseline-copy", tmp_path / "worktree"
    base_cases, base_failures = read_junit(junit_with_paths(base), base)
    task_cases, _ = read_junit(junit_with_paths(task), task)
    assert base_cases == task_cases
    assert base_cases == {
        "test/app.test.js::Router > Router get returns 404": "failed",
        "test/app.test.js::Router > Router get ok": "passed",
    }
    assert all(str(tmp_path) not in k for k in base_cases), base_cases
    assert str(base) not in next(iter(base_failures.values())), "failure texts hold no checkout paths either"


async def test_agentlab_toml_junit_route_compares_across_folders(tmp_path: Path) -> None:
    """The documented route, run for real in two folders: the same ids (they used to carry the folder)."""
    command = (
        """printf '<testsuite><testcase classname="calc" name="adds" file="%s/test/calc.js"/></testsuite>' """
        """"$PWD" > out.xml"""
    )
    outcomes = []
    for name in ("one", "two"):
        folder = tmp_path / name
        folder.mkdir()
        (folder / ".agentlab.toml").write_text(f"[tests]\ncommand = '''{command}'''\njunit = 'out.xml'\n")
        outcomes.append(await run_tests(folder, 30))
    assert outcomes[0].cases == outcomes[1].cases == {"test/calc.js::calc > adds": "passed"}


def test_nested_suites_and_repeated_names_never_collapse(tmp_path: Path) -> None:
    records = [
        {"file": f"{tmp_path}/test/{f}.js", "titles": [suite, inner, "works"], "state": "passed"}
        for f in ("a", "b")
        for suite in ("Router", "App")
        for inner in ("get", "post")
    ]
    records += records[:3]  # the same titles again in one run (a loop of `it`s with one name)
    report = tmp_path / "r.json"
    report.write_text(json.dumps(records))
    cases, _ = read_records(report, tmp_path)
    assert len(cases) == len(records)
    assert "test/a.js::Router > get > works" in cases and "test/a.js::Router > get > works [2]" in cases


def test_jest_json_with_a_file_that_would_not_load(tmp_path: Path) -> None:
    report = tmp_path / "jest.json"
    report.write_text(
        json.dumps(
            {
                "testResults": [
                    {
                        "name": f"{tmp_path}/src/a.test.ts",
                        "status": "failed",
                        "assertionResults": [
                            {"ancestorTitles": ["a", "b"], "title": "c", "status": "failed", "failureMessages": ["x"]},
                            {"ancestorTitles": [], "title": "d", "status": "pending", "failureMessages": []},
                        ],
                    },
                    {"name": f"{tmp_path}/src/broken.test.ts", "status": "failed", "message": "SyntaxError: nope"},
                ]
            }
        )
    )
    cases, failures = read_jest_json(report, tmp_path)
    assert cases == {
        "src/a.test.ts::a > b > c": "failed",
        "src/a.test.ts::d": "skipped",
        "src/broken.test.ts": "failed",
    }
    assert failures["src/broken.test.ts"] == "SyntaxError: nope"


def test_ava_tap() -> None:
    tap = (
        "TAP version 13\nok 1 - retry › retries twice\nnot ok 2 - retry › gives up\n  ---\n"
        "    name: AssertionError\n    message: expected 3\n  ...\nok 3 - later # SKIP\n1..3\n"
    )
    cases, failures = read_tap(tap, Path("/x"))
    assert cases == {"retry › retries twice": "passed", "retry › gives up": "failed", "later": "skipped"}
    assert "message: expected 3" in failures["retry › gives up"]


# ----------------------------------------------------------------------------------------------------------------------
# running a chain


async def test_a_failing_lint_step_is_reported_and_the_tests_still_run(tmp_path: Path) -> None:
    package(tmp_path, {"test": "node lint.js && node --test"})
    (tmp_path / "lint.js").write_text("console.log('1 lint error'); process.exit(1);\n")
    (tmp_path / "test").mkdir()
    (tmp_path / "test" / "a.test.js").write_text(
        "const { test } = require('node:test');\ntest('ok', () => {});\ntest('bad', () => { throw new Error('no'); });\n"
    )
    if shutil.which("node") is None:
        pytest.skip("node is not installed")
    outcome = await run_tests(tmp_path, 60)
    assert [(s.command, s.kind, s.passed) for s in outcome.steps] == [("node lint.js", "lint", False)]
    assert "1 lint error" in outcome.steps[0].output
    assert outcome.cases == {"test/a.test.js::ok": "passed", "test/a.test.js::bad": "failed"}
    assert outcome.state is RunState.complete and "Error: no" in outcome.failures["test/a.test.js::bad"]


async def test_tests_that_cannot_be_told_apart_after_a_failed_build_say_why(tmp_path: Path) -> None:
    package(tmp_path, {"test": "npm run build && node check.js", "build": "node -e 'process.exit(2)'"})
    (tmp_path / "check.js").write_text("process.exit(1);\n")
    if shutil.which("node") is None or shutil.which("npm") is None:
        pytest.skip("node and npm are not installed")
    outcome = await run_tests(tmp_path, 60)
    assert outcome.state is RunState.stopped_before_tests
    assert outcome.reason == "`npm test` stops at `node -e 'process.exit(2)'` (build) before any test can be told apart"


# ----------------------------------------------------------------------------------------------------------------------
# the sandbox and borrowing


def test_sandbox_env_never_lets_a_package_manager_download_itself(tmp_path: Path) -> None:
    env = sandbox_env({"PATH": "/usr/bin", "npm_config_offline": "true"}, spec_for(SecretsFilter(), PROBE, tmp_path))
    assert env["npm_config_manage_package_manager_versions"] == "false" and env["COREPACK_ENABLE_STRICT"] == "0"
    assert env["npm_config_offline"] == "true"


def test_a_resumed_worktree_borrows_its_node_modules_again(tmp_path: Path) -> None:
    owner, worktree = package(tmp_path / "owner", {"test": "mocha"}), package(tmp_path / "wt", {"test": "mocha"})
    (owner / "node_modules" / ".bin").mkdir(parents=True)
    first = detect_environment(worktree, owner)
    assert first is not None and first.borrowed == ["node_modules"]
    assert link_borrowed(first, worktree) == ["node_modules"]
    again = detect_environment(worktree, owner)  # the resumed task: the link is there already
    assert again is not None and again.borrowed == ["node_modules"]
    assert (owner / "node_modules").resolve() in again.read_only_paths
    shutil.rmtree(worktree / "node_modules")
    (worktree / "node_modules").symlink_to(tmp_path, target_is_directory=True)  # re-pointed by a worker
    link_borrowed(again, worktree)
    assert not (worktree / "node_modules").is_symlink(), "a folder of the checkout's own, one link per entry"
    (owner / "node_modules" / "dep").mkdir()
    link_borrowed(again, worktree)  # the owner installed something since
    assert (worktree / "node_modules" / "dep").resolve() == (owner / "node_modules" / "dep").resolve()


async def test_caches_in_borrowed_node_modules_are_made_on_demand_private_and_writable(tmp_path: Path) -> None:
    """ava's `.cache/ava`, a `.tmp/*.tsbuildinfo`: written in the checkout's own node_modules, whether or not the
    owner has the folder; the owner's packages stay read-only and nothing is written to the owner's checkout."""
    if shutil.which("bwrap") is None:
        pytest.skip("bubblewrap is not installed")
    owner, worktree = package(tmp_path / "owner", {"test": "x"}), package(tmp_path / "wt", {"test": "x"})
    stale = owner / "node_modules" / ".cache" / "eslint"
    stale.mkdir(parents=True)
    (stale / "cache.json").write_text(json.dumps({"file": f"{owner}/index.js"}))
    env = detect_environment(worktree, owner)
    assert env is not None
    link_borrowed(env, worktree)
    spec = spec_for(SecretsFilter(), PROBE, worktree, extra_read_only=env.read_only_paths)
    assert node_modules_caches(spec) == [(owner / "node_modules" / ".cache").resolve()]
    (owner / "node_modules" / "dep").mkdir()
    result = await run_command(
        "ls node_modules/.cache 2>/dev/null; mkdir -p node_modules/.cache/ava node_modules/.tmp && "
        "echo new > node_modules/.cache/ava/x && echo info > node_modules/.tmp/app.tsbuildinfo && "
        "cat node_modules/.cache/ava/x node_modules/.tmp/app.tsbuildinfo; "
        "touch node_modules/dep/y 2>/dev/null || echo read-only",
        cwd=worktree,
        timeout=30,
        env=child_env(),
        sandbox=spec,
    )
    assert result.exit_code == 0, result.output
    assert result.output.split() == ["new", "info", "read-only"], "caches made on demand; the packages read-only"
    assert sorted(os.listdir(owner / "node_modules" / ".cache")) == ["eslint"], "nothing written to the owner's"
    assert sorted(os.listdir(owner / "node_modules")) == [".cache", "dep"]


async def test_node_webassembly_works_under_the_sandboxs_address_space_limit(tmp_path: Path) -> None:
    """vitest (es-module-lexer) instantiates WebAssembly; node's trap handler reserves more address space than the
    sandbox allows, so the sandbox turns it off where node knows how."""
    if shutil.which("bwrap") is None or shutil.which("node") is None:
        pytest.skip("bubblewrap and node are needed")
    module = "new Uint8Array([0,97,115,109,1,0,0,0,5,3,1,0,1])"  # (module (memory 1))
    script = f"WebAssembly.instantiate({module}).then(() => console.log('wasm ok'), (e) => console.log(String(e)))"
    result = await run_command(
        f'node -e "{script}"', cwd=tmp_path, timeout=30, sandbox=spec_for(SecretsFilter(), PROBE, tmp_path)
    )
    assert result.output.strip() == "wasm ok", result.output


NEIGHBOUR_REPORTS = {  # a report of each format, outside the run's report folder, naming a neighbour's secret
    "node": '[{"file": "t.js", "titles": ["t"], "state": "failed", "message": "NEIGHBOUR-SECRET-77"}]',
    "jest": '{"testResults": [{"name": "t.js", "assertionResults": '
    '[{"title": "t", "status": "failed", "failureMessages": ["NEIGHBOUR-SECRET-77"]}]}]}',
    "ava": "TAP version 13\nnot ok 1 - t\n  ---\n  message: NEIGHBOUR-SECRET-77\n  ...\n",
}
NEIGHBOUR_REPORTS["mocha"], NEIGHBOUR_REPORTS["vitest"] = NEIGHBOUR_REPORTS["node"], NEIGHBOUR_REPORTS["jest"]
REPORT_GUARD = 5.0  # seconds: only a read blocked on a FIFO takes this long; then the FIFO is opened to end it


@pytest.mark.parametrize("framework", sorted(NEIGHBOUR_REPORTS))
@pytest.mark.parametrize("planted", ["fifo", "link"])
async def test_a_js_report_the_tests_replaced_is_never_waited_on_nor_read_through_a_link(
    tmp_path: Path, framework: str, planted: str
) -> None:
    """The reporters write each test step's report in the run's report folder, inside the sandbox (the run may write
    there), and the bot reads it outside: the code under test can put a FIFO or a link out in the report's place.
    A FIFO read by name waits for a writer on a thread of the bot (the check never ends, the bot cannot stop); a
    link read by name shows the bot a file outside, whose failure texts would reach the verdict. A watchdog opens the
    FIFO for writing after REPORT_GUARD seconds, so that a blocked read ends and the test can say so."""
    folder, workspace = tmp_path / "reports", tmp_path / "room"
    folder.mkdir()
    workspace.mkdir()
    report = folder / "report-0.json"
    outside = tmp_path / "neighbour-report.json"
    outside.write_text(NEIGHBOUR_REPORTS[framework])
    if planted == "fifo":
        os.mkfifo(report)
    else:
        report.symlink_to(outside)
    released = threading.Event()

    def release() -> None:
        with contextlib.suppress(OSError):  # ENXIO: no reader waits on it
            os.close(os.open(report, os.O_WRONLY | os.O_NONBLOCK))
            released.set()

    watchdog = threading.Timer(REPORT_GUARD, release)
    watchdog.start()
    run = _ScriptRun(cast(TestEnvironment, None), workspace, {}, None, folder, 10.0, {})
    try:
        step = ScriptStep(f"{framework} test", framework=framework)
        found = await asyncio.to_thread(run._read, step, report, cast(CommandResult, None))
    finally:
        watchdog.cancel()
    assert not released.is_set(), f"the bot's read of the {framework} report waited on the FIFO"
    assert "NEIGHBOUR-SECRET" not in repr(found), f"the {framework} report was read through the link: {found}"


@pytest.mark.parametrize("framework", ["node", "mocha"])
@pytest.mark.parametrize("planted", ["link", "fifo"])
async def test_a_reporter_is_never_copied_through_what_an_earlier_step_left_at_its_name(
    tmp_path: Path, framework: str, planted: str
) -> None:
    """Our reporters are copied into the run's report folder before each test step; every step of the script may
    write that folder (its reports go there), so a step before (a lint step, a first test step) can leave a link out
    or a FIFO at the name the reporter gets. A copy by name would write through the link (a file of the bot's made
    anywhere it may write) or wait for a reader of the FIFO on the bot's event loop. A watchdog opens the FIFO for
    reading after REPORT_GUARD seconds, so that a blocked write ends and the test can say so."""
    folder = tmp_path / "reports"
    folder.mkdir()
    name = "node_test_reporter.mjs" if framework == "node" else "mocha_reporter.js"
    outside = tmp_path / "owner" / "made-by-the-bot.js"
    outside.parent.mkdir()
    if planted == "link":
        (folder / name).symlink_to(outside)
    else:
        os.mkfifo(folder / name)
    released = threading.Event()

    def release() -> None:
        with contextlib.suppress(OSError):
            fd = os.open(folder / name, os.O_RDONLY | os.O_NONBLOCK)
            released.set()
            os.set_blocking(fd, True)  # the blocked writer's bytes read to its end: it finishes, the test can say so
            while os.read(fd, 65536):
                pass
            os.close(fd)

    watchdog = threading.Timer(REPORT_GUARD, release)
    watchdog.start()
    try:
        step = ScriptStep(f"{framework} --test" if framework == "node" else "mocha", framework=framework)
        await asyncio.to_thread(reporter_command, step, folder / "report-0.json", folder)
    finally:
        watchdog.cancel()
    assert not released.is_set(), "the bot's copy of the reporter waited on the FIFO"
    assert not outside.exists(), "the bot wrote the reporter through the link, outside the report folder"
    assert (folder / name).is_file() and not (folder / name).is_symlink(), "no reporter where the run looks for it"
