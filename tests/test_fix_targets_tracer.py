"""The parts of a verdict that depend on what a test runs and where it runs: the tracer of a red test's functions,
red tests judged by it, a borrowed node_modules as a folder of links (caches, workspace packages), the contributor's
environment, and failures the sandbox causes said apart."""

from __future__ import annotations

import json
import os
import shutil
import threading
from pathlib import Path

import pytest

from agents.core.secrets_filter import SecretsFilter
from agents.sandbox.bwrap import spec_for
from agents.sandbox.shell import child_env
from agents.verify.js_test_script import ScriptStep, with_files
from agents.verify.node_modules_links import MARKER, is_links_folder
from agents.verify.suite_env import detect_environment, link_borrowed, parse_config
from agents.verify.suite_run import RunState, TestOutcome, TestStatus, run_tests, sandbox_write_failure
from agents.verify.tracer import read_v8_coverage
from agents.verify.verdict import Mark, judge
from tests.support.sandbox import PROBE

needs_bwrap = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed")


def write(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    return root


SHOP = {
    "pyproject.toml": "[tool.pytest.ini_options]\ntestpaths = ['tests']\n",
    "src/pkg/__init__.py": "",
    "src/pkg/utils.py": "def add_all(items):\n    return sum(items[1:])\n",
    "src/pkg/cart.py": "from pkg.utils import add_all\n\n\ndef total(prices):\n    return add_all(prices)\n",
    "tests/test_cart.py": "from pkg.cart import total\n\n\ndef test_total():\n    assert total([1, 2]) == 3\n\n\n"
    "def test_alone():\n    assert 1 == 2\n",
}
IDS = ["tests/test_cart.py::test_total", "tests/test_cart.py::test_alone"]


# ----------------------------------------------------------------------------------------------------------------------
# the tracer


@pytest.mark.parametrize("confined", [False, pytest.param(True, marks=needs_bwrap)], ids=["plain", "sandboxed"])
async def test_a_traced_run_says_which_functions_each_test_calls(tmp_path: Path, confined: bool) -> None:
    shop = write(tmp_path / "shop", SHOP)
    env = detect_environment(shop)
    assert env is not None and env.rerunnable
    sandbox = spec_for(SecretsFilter(), PROBE, shop, extra_read_only=env.read_only_paths) if confined else None
    outcome = await run_tests(shop, 60, environment=env, ids=IDS, trace=True, sandbox=sandbox)
    assert outcome.cases == dict.fromkeys(IDS, "failed")
    assert outcome.traced[IDS[0]] == [
        "src/pkg/cart.py::total",
        "src/pkg/utils.py::add_all",
        "tests/test_cart.py::test_total",
    ], "its own function and the checkout's code it calls, nothing of pytest's"
    assert outcome.traced[IDS[1]] == ["tests/test_cart.py::test_alone"]
    untraced = await run_tests(shop, 60, environment=env, ids=IDS[:1], sandbox=sandbox)
    assert untraced.traced == {} and not list(shop.rglob("_agentlab_trace*")), "nothing left in the checkout"


PROFILE_SEEN = """\
import sys

AT_COLLECTION = sys.getprofile()


def test_on():
    assert AT_COLLECTION is None, "profiled while the suite was collected"
    assert sys.getprofile() is not None, "not profiled while the test runs"
"""


async def test_a_traced_run_is_profiled_only_while_its_tests_run(tmp_path: Path) -> None:
    """Starting pytest and collecting the suite (importing the project) run at full speed: the profile is on only
    while a test runs, and the run still names what each test called."""
    shop = write(tmp_path / "shop", {**SHOP, "tests/test_profile.py": PROFILE_SEEN})
    env = detect_environment(shop)
    assert env is not None
    ids = ["tests/test_profile.py::test_on", IDS[0]]
    outcome = await run_tests(shop, 60, environment=env, ids=ids, trace=True)
    assert outcome.cases == {ids[0]: "passed", ids[1]: "failed"}, outcome.output
    assert outcome.traced[ids[0]] == ["tests/test_profile.py::test_on"]
    assert "src/pkg/utils.py::add_all" in outcome.traced[ids[1]]


def red(*ids: str, failure: str = "assert 2 == 3") -> TestOutcome:
    return TestOutcome(
        status=TestStatus.failed,
        command="pytest",
        summary="failed",
        cases=dict.fromkeys(ids, "failed"),
        failures=dict.fromkeys(ids, failure),
    )


def test_a_red_test_is_the_tasks_when_it_runs_what_the_instructions_name() -> None:
    base = after = red(*IDS)
    traced = {IDS[0]: ["src/pkg/cart.py::total", "src/pkg/utils.py::add_all"], IDS[1]: ["tests/test_cart.py::x"]}
    untraced = judge(after, base, "Fix the bug in src/pkg/utils.py")
    assert untraced.targets == [] and untraced.mark is Mark.done, "how it fails names no file: not enough"
    verdict = judge(after, base, "Fix the bug in src/pkg/utils.py", traced=traced)
    assert verdict.targets == [IDS[0]] and verdict.mark is Mark.failed
    assert verdict.target_reasons[IDS[0]] == "it runs `src/pkg/utils.py`, which the instructions name"
    assert "runs no code of the checkout beyond its own file" in verdict.not_target_reasons[IDS[1]]
    assert any("is the task's: it runs `src/pkg/utils.py`" in line for line in verdict.summary_lines())
    by_symbol = judge(after, base, "Fix `add_all` please", traced=traced)
    assert by_symbol.target_reasons[IDS[0]] == "it runs `add_all()` of `src/pkg/utils.py`, which the instructions name"
    by_change = judge(after, base, "Fix the failing test", traced=traced, changed=["src/pkg/cart.py"])
    assert by_change.target_reasons[IDS[0]] == "it runs `src/pkg/cart.py`, which the task changed"
    elsewhere = judge(after, base, "Fix the bug in src/pkg/other.py", traced=traced)
    assert elsewhere.targets == [] and elsewhere.mark is Mark.done
    assert elsewhere.not_target_reasons[IDS[0]].startswith("it runs `src/pkg/cart.py`, `src/pkg/utils.py`, none")


# ----------------------------------------------------------------------------------------------------------------------
# a borrowed node_modules: a folder of links


def monorepo(root: Path) -> Path:
    """The layout pnpm makes for a workspace: root packages in node_modules, workspace packages linked."""
    owner = write(
        root / "owner",
        {
            "package.json": json.dumps({"name": "mono", "scripts": {"test": "node --test"}}),
            "packages/calc/package.json": json.dumps({"name": "calc"}),
            "packages/calc/index.js": "exports.add = (a, b) => a + b;\n",
            "packages/app/package.json": json.dumps({"name": "app"}),
            "node_modules/dep/index.js": "module.exports = 1;\n",
            "node_modules/@scope/lib/index.js": "module.exports = 2;\n",
            "node_modules/.cache/eslint/x.json": "{}",
            "node_modules/.bin/.keep": "",
        },
    )
    (owner / "node_modules" / "@scope" / "calc").symlink_to("../../packages/calc")
    (owner / "node_modules" / ".bin" / "calc").symlink_to("../@scope/calc/index.js")  # npm's program link
    (owner / "packages" / "app" / "node_modules").mkdir()
    (owner / "packages" / "app" / "node_modules" / "calc").symlink_to("../../calc")
    return owner


def test_workspace_packages_resolve_to_the_checkouts_own(tmp_path: Path) -> None:
    owner = monorepo(tmp_path)
    checkout = tmp_path / "checkout"
    shutil.copytree(owner, checkout, ignore=shutil.ignore_patterns("node_modules"))
    env = detect_environment(checkout, owner)
    assert env is not None and sorted(env.borrowed) == ["node_modules", "packages/app/node_modules"]
    assert sorted(link_borrowed(env, checkout)) == ["node_modules", "packages/app/node_modules"]
    app = checkout / "packages" / "app" / "node_modules"
    assert is_links_folder(app) and (app / MARKER).is_file()
    assert os.readlink(app / "calc") == str(checkout / "packages" / "calc"), "the checkout's package, not the owner's"
    nm = checkout / "node_modules"
    assert os.readlink(nm / "@scope" / "calc") == str(checkout / "packages" / "calc")
    assert os.readlink(nm / "@scope" / "lib") == str(owner / "node_modules" / "@scope" / "lib")
    assert os.readlink(nm / "dep") == str(owner / "node_modules" / "dep")
    assert os.readlink(nm / ".bin" / "calc") == str(checkout / "packages" / "calc" / "index.js")
    assert os.readlink(nm / ".bin" / ".keep") == str(owner / "node_modules" / ".bin" / ".keep")
    assert not (nm / ".cache").exists(), "the owner's caches are not shared: each checkout makes its own"
    (nm / ".cache").mkdir()
    (nm / "dep").unlink()
    (nm / "dep").symlink_to(tmp_path)  # re-pointed by a worker
    again = detect_environment(checkout, owner)  # a resumed task: the bot's folders are borrowed again
    assert again is not None and sorted(again.borrowed) == ["node_modules", "packages/app/node_modules"]
    link_borrowed(again, checkout)
    assert os.readlink(nm / "dep") == str(owner / "node_modules" / "dep") and (nm / ".cache").is_dir()
    assert sorted(os.listdir(owner / "node_modules" / ".cache")) == ["eslint"], "the owner's untouched"


def test_a_checkouts_own_node_modules_is_never_touched(tmp_path: Path) -> None:
    owner = monorepo(tmp_path)
    checkout = write(tmp_path / "checkout", {"package.json": "{}", "node_modules/mine/index.js": ""})
    (checkout / "package.json").write_text((owner / "package.json").read_text())
    env = detect_environment(checkout, owner)
    assert env is not None and "node_modules" not in env.borrowed
    assert link_borrowed(env, checkout) == [] and os.listdir(checkout / "node_modules") == ["mine"]


# ----------------------------------------------------------------------------------------------------------------------
# the contributor's environment; the sandbox's failures said apart


def test_test_runs_get_no_no_color(tmp_path: Path) -> None:
    env = detect_environment(write(tmp_path, {"package.json": json.dumps({"scripts": {"test": "node --test"}})}))
    assert env is not None
    assert child_env()["NO_COLOR"] == "1", "the bot's own commands keep it"
    assert "NO_COLOR" not in env.env_for(tmp_path, child_env()) and env.env_for(tmp_path, child_env())["CI"]


def test_a_write_refused_by_a_read_only_mount_is_named() -> None:
    node = "Error: EROFS: read-only file system, open '/owner/node_modules/vitest/dist/tsconfig.tmp.tsbuildinfo'"
    assert sandbox_write_failure(node).startswith("a write to `/owner/node_modules/vitest/dist/tsconfig.tmp")
    python = "OSError: [Errno 30] Read-only file system: '/owner/.venv/cache'"
    assert "`/owner/.venv/cache`" in sandbox_write_failure(python)
    assert sandbox_write_failure("AssertionError: 2 != 3") is None


@needs_bwrap
async def test_a_failure_the_sandbox_causes_says_so(tmp_path: Path) -> None:
    checkout = write(tmp_path / "w", {"check.sh": "echo building; touch /usr/agentlab-build-info\n"})
    config = parse_config('[tests]\ncommand = "sh check.sh"\n')
    env = detect_environment(checkout, config=config)
    assert env is not None
    outcome = await run_tests(checkout, 30, environment=env, sandbox=spec_for(SecretsFilter(), PROBE, checkout))
    assert outcome.status is TestStatus.failed and outcome.state is RunState.complete
    assert outcome.sandbox_problem and "`/usr/agentlab-build-info`" in outcome.sandbox_problem
    verdict = judge(outcome, outcome)
    assert any("a failure came from the sandbox" in note for note in verdict.notes)


def test_node_coverage_tells_per_test_file_only_where_a_process_ran_one(tmp_path: Path) -> None:
    root = tmp_path / "app"

    def script(rel: str, *functions: tuple[str, int, int]) -> dict:
        return {
            "url": f"file://{root}/{rel}",
            "functions": [
                {"functionName": name, "ranges": [{"startOffset": start, "endOffset": 99, "count": count}]}
                for name, start, count in functions
            ],
        }

    one = [script("test/a.test.js", ("", 0, 1)), script("lib/x.js", ("", 0, 1), ("f", 10, 2), ("g", 40, 0))]
    one.append(script("node_modules/dep/index.js", ("h", 5, 1)))
    both = [script("test/a.test.js", ("", 0, 1)), script("test/b.test.js", ("", 0, 1)), script("lib/y.js", ("k", 3, 1))]
    folder = tmp_path / "v8"
    folder.mkdir()
    (folder / "coverage-1-1-0.json").write_text(json.dumps({"result": one}))
    (folder / "coverage-2-1-0.json").write_text(json.dumps({"result": both}))
    (folder / "coverage-3-1-0.json").write_text("{not json")
    found = read_v8_coverage(folder, root, ["test/a.test.js", "test/b.test.js"])
    assert found == {"test/a.test.js": ["lib/x.js::f"]}, "called functions only; a process of two files says nothing"


def test_node_coverage_files_are_read_never_through_a_link_or_a_fifo(tmp_path: Path) -> None:
    """The tests write the coverage folder: a FIFO in a file's place must not hold the bot, a link must not lead it
    to a file of the host's."""
    root, folder = tmp_path / "app", tmp_path / "v8"
    folder.mkdir()
    outside = tmp_path / "host.json"
    script = {"url": f"file://{root}/lib/x.js", "functions": [{"functionName": "f", "ranges": [{"count": 1}]}]}
    outside.write_text(json.dumps({"result": [{"url": f"file://{root}/test/a.test.js", "functions": []}, script]}))
    os.mkfifo(folder / "coverage-1-1-0.json")
    os.symlink(outside, folder / "coverage-2-1-0.json")
    found: list[dict[str, list[str]]] = []
    reader = threading.Thread(target=lambda: found.append(read_v8_coverage(folder, root, ["test/a.test.js"])))
    reader.daemon = True  # on a read that blocks, the test still ends
    reader.start()
    reader.join(timeout=10)
    assert not reader.is_alive(), "reading the coverage folder waited on a FIFO"
    assert found == [{}], "nothing read through the link"


# ----------------------------------------------------------------------------------------------------------------------
# re-runs of failing tests: only their files, where the framework takes files


def test_a_rerun_names_the_failing_files_to_frameworks_that_take_them() -> None:
    node = with_files(ScriptStep("node --test", framework="node"), ["test/a b.test.js"])
    assert node is not None and node.command == "node --test 'test/a b.test.js'"
    jest = with_files(ScriptStep("jest --silent", framework="jest"), ["a.test.js"])
    assert jest is not None and jest.command == "jest --silent --runTestsByPath a.test.js"
    vitest = with_files(ScriptStep("vitest run", framework="vitest"), ["a.test.ts"])
    assert vitest is not None and vitest.command == "vitest run a.test.ts"
    assert with_files(ScriptStep("node --test test/unit/", framework="node"), ["x.js"]) is None, "its own files"
    assert with_files(ScriptStep("mocha", framework="mocha"), ["x.js"]) is None, "mocha's config may name specs"


@pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed")
async def test_a_js_rerun_runs_only_the_failing_tests_files(tmp_path: Path) -> None:
    test = "const {{ test }} = require('node:test');\ntest('{name}', () => {{ {body} }});\n"
    project = write(
        tmp_path / "app",
        {
            "package.json": json.dumps({"name": "app", "scripts": {"test": "node --test"}}),
            "test/a.test.js": test.format(name="a", body="throw new Error('red')"),
            "test/b.test.js": test.format(name="b", body=""),
        },
    )
    env = detect_environment(project)
    assert env is not None and not env.rerunnable
    whole = await run_tests(project, 60, environment=env)
    assert whole.cases == {"test/a.test.js::a": "failed", "test/b.test.js::b": "passed"}
    again = await run_tests(project, 60, environment=env, ids=["test/a.test.js::a"])
    assert again.cases == {"test/a.test.js::a": "failed"}, "only the failing test's file"
