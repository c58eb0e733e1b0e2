"""Base-commit test runs kept in the store: reused while the key holds, run again when any part of it changes,
bounded per workspace; a base failure that passes after the worker is re-run at the base before it counts as fixed."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest

from agents.store.base_runs import BaseRunRows
from agents.store.database import Store
from agents.verify.base_run_cache import KeptBaseRuns, KeptOutcome, environment_identity
from agents.verify.baseline import BaselineRuns
from agents.verify.suite_env import TestEnvironment, detect_environment
from agents.verify.suite_run import TestStatus
from agents.verify.task_tests import TaskTests
from tests.conftest import git, make_repo
from tests.support.processes import host_pids, own_sleep


def write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[Store]:
    opened = await Store.open(tmp_path / "state.db")
    yield opened
    await opened.close()


def counting_repo(tmp_path: Path) -> tuple[Path, Path]:
    """A workspace whose test command counts its runs in a file outside the repository."""
    counter = tmp_path / "runs"
    repo = make_repo(tmp_path / "w", {"app.py": "x = 1\n", "run.sh": f"echo x >> {counter}\n"})
    write(repo / ".agentlab.toml", '[tests]\ncommand = "bash run.sh"\n')  # untracked: the workspace's own copy
    return repo, counter


def runs(counter: Path) -> int:
    return counter.read_text().count("x") if counter.exists() else 0


async def test_a_kept_outcome_is_reused_until_its_key_changes(tmp_path: Path, store: Store) -> None:
    repo, counter = counting_repo(tmp_path)
    commit = git(repo, "rev-parse", "HEAD").strip()
    baselines = BaselineRuns(tmp_path / "cache", KeptBaseRuns(store))
    env = detect_environment(repo)
    first = await baselines.outcome(repo, commit, env, 30)
    assert first.status is TestStatus.passed and not isinstance(first, KeptOutcome)
    again = await BaselineRuns(tmp_path / "other", KeptBaseRuns(store)).outcome(repo, commit, env, 30)
    assert isinstance(again, KeptOutcome) and again.status is TestStatus.passed
    assert runs(counter) == 1, "a second task on the same base (even after a restart) ran nothing"

    write(repo / "uv.lock", "version = 1\n")  # a lock file appears in the workspace
    await baselines.outcome(repo, commit, env, 30)
    assert runs(counter) == 2, "a changed lock file runs the base again"
    write(repo / ".agentlab.toml", '[tests]\ncommand = "bash run.sh"\ntimeout = 60\n')
    await baselines.outcome(repo, commit, env, 30)
    assert runs(counter) == 3, "a changed .agentlab.toml runs the base again"
    await baselines.outcome(repo, commit, env, 30)
    assert runs(counter) == 3
    rows = BaseRunRows(store)
    assert await rows.count(str(repo.resolve())) == 1, "what the commit had under the old keys is gone"


async def test_installed_packages_and_node_modules_are_part_of_the_identity(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "w", {"package.json": '{"scripts": {"test": "node --test"}}\n'})
    write(repo / "node_modules" / ".package-lock.json", '{"packages": {}}\n')
    env = detect_environment(repo)
    assert env is not None
    before = environment_identity(env, repo)
    write(repo / "node_modules" / ".package-lock.json", '{"packages": {"node_modules/left-pad": {}}}\n')
    assert environment_identity(env, repo) != before, "an npm install changes the identity"

    venv = tmp_path / "venv"
    site = venv / "lib" / f"python{sys.version_info.major}.{sys.version_info.minor}" / "site-packages"
    site.mkdir(parents=True)
    env.python_env = venv
    with_venv = environment_identity(env, repo)
    (site / "requests-2.32.0.dist-info").mkdir()
    assert environment_identity(env, repo) != with_venv, "a package installed in the environment changes it"
    assert environment_identity(env, repo) == environment_identity(env, repo), "and nothing else does"


async def test_each_workspace_keeps_a_bounded_number(tmp_path: Path, store: Store) -> None:
    repo, counter = counting_repo(tmp_path)
    baselines = BaselineRuns(tmp_path / "cache", KeptBaseRuns(store, limit=2))
    env = detect_environment(repo)
    commits = []
    for n in range(3):
        write(repo / "app.py", f"x = {n + 2}\n")
        git(repo, "commit", "-qam", f"change {n}")
        commits.append(git(repo, "rev-parse", "HEAD").strip())
        await baselines.outcome(repo, commits[-1], env, 30)
    assert await BaseRunRows(store).count(str(repo.resolve())) == 2
    await baselines.outcome(repo, commits[-1], env, 30)
    assert runs(counter) == 3, "the newest is still kept"
    await baselines.outcome(repo, commits[0], env, 30)
    assert runs(counter) == 4, "the oldest was dropped"


FLAKY_AT_BASE = """\
import pathlib

def test_flaky():
    marker = pathlib.Path({marker!r})
    if not marker.exists():
        marker.write_text("ran")
        assert False, "fails on its first run only"

def test_broken():
    from app import value
    assert value() == 2
"""


async def test_a_base_failure_that_passes_on_a_rerun_at_the_base_is_not_fixed_by_the_task(tmp_path: Path) -> None:
    marker = tmp_path / "first-run"
    repo = make_repo(
        tmp_path / "w",
        {"app.py": "def value():\n    return 1\n", "test_app.py": FLAKY_AT_BASE.format(marker=str(marker))},
    )
    commit = git(repo, "rev-parse", "HEAD").strip()
    tree = tmp_path / "tree"
    git(repo, "worktree", "add", "-q", "--detach", str(tree))
    checks = await TaskTests.start(repo, tree, commit, "make value() return 2", BaselineRuns(tmp_path / "c"), 60)
    await checks.baseline
    write(tree / "app.py", "def value():\n    return 2\n")
    git(tree, "commit", "-qam", "the fix")  # as the bot does before each check: only committed content is judged
    verdict = await checks.check(tree, git(tree, "rev-parse", "HEAD").strip())
    checks.close()
    assert verdict.fixed == ["test_app.py::test_broken"], "the real fix counts; the flaky one does not"
    assert any("flaky at the base" in note and "test_app.py::test_flaky" in note for note in verdict.notes)


async def test_a_base_run_nobody_waits_on_has_ended_when_the_runs_are_closed(tmp_path: Path) -> None:
    """The last task waiting on a base run went (it ended blocked, or was cancelled): the run is cancelled and reaps
    its test process in its own asyncio task. `close` (the bot's shutdown) stops and waits for it: nothing of it is
    left for an event loop that ends next."""
    started, sleep = tmp_path / "started", own_sleep("7")
    repo = make_repo(tmp_path / "w", {"slow.sh": f"touch {started}\nsleep {sleep}\n"})
    write(repo / ".agentlab.toml", '[tests]\ncommand = "bash slow.sh"\n')
    commit = git(repo, "rev-parse", "HEAD").strip()
    baselines = BaselineRuns(tmp_path / "cache")
    waiter = asyncio.create_task(baselines.outcome(repo, commit, detect_environment(repo), 120))
    for _ in range(3000):
        if started.exists() and host_pids(sleep):
            break
        await asyncio.sleep(0.01)
    assert host_pids(sleep), "the base run's test process started"
    try:
        waiter.cancel()  # the last task waiting on it is gone: the run is cancelled, not awaited
        with pytest.raises(asyncio.CancelledError):
            await waiter
        await baselines.close()
        assert not [t for t in asyncio.all_tasks() if t.get_name().startswith("baseline-") and not t.done()]
    finally:  # a cancelled run outside a sandbox may leave the shell's child behind: not this test's subject
        for pid in host_pids(sleep):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


SLOW_WHEN_TRACED = """\
import os
import subprocess


def test_red():
    if os.environ.get("AGENTLAB_TRACE_OUT"):  # only in the bot's traced run of it
        subprocess.run(["sleep", {sleep!r}])
    assert False
"""
RED = ["test_red.py::test_red"]


async def holds(check: Callable[[], object], what: str) -> None:
    """Poll `check` (a scan of /proc) until it is true; a hang guard only: past a minute, the test fails on `what`."""
    for _ in range(600):
        if check():
            return
        await asyncio.sleep(0.1)
    raise AssertionError(what)


def kill(pids: list[int]) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def trace_runs() -> list[asyncio.Task[object]]:
    """The traced runs under way (`BaselineRuns._trace`, the asyncio task the tasks asking for a trace share)."""
    return [
        t
        for t in asyncio.all_tasks()
        if getattr(t.get_coro(), "__qualname__", "") == "BaselineRuns._trace" and not t.done()
    ]


def a_base_whose_red_test_is_slow_traced(
    tmp_path: Path, tag: str
) -> tuple[str, Path, str, TestEnvironment, BaselineRuns]:
    """A repository whose red test sleeps (its own `sleep` argument, from `tag`) when traced: that argument, the
    repository, its commit, its test environment and the base runs of a bot."""
    sleep = own_sleep(tag)
    repo = make_repo(tmp_path / "w", {"test_red.py": SLOW_WHEN_TRACED.format(sleep=sleep)})
    env = detect_environment(repo)
    assert env is not None
    return sleep, repo, git(repo, "rev-parse", "HEAD").strip(), env, BaselineRuns(tmp_path / "cache")


async def test_a_base_trace_goes_on_while_a_task_waits_for_it_and_ends_with_the_last(tmp_path: Path) -> None:
    """Two tasks on one base wait for the same traced run of its red test: the first one cancelled leaves it to the
    second; the second one cancelled too, no task waits for it any more, so it is cancelled and its test process
    killed, with no shutdown (`close`) to do it."""
    sleep, repo, commit, env, baselines = a_base_whose_red_test_is_slow_traced(tmp_path, "8")
    first = asyncio.create_task(baselines.traces(repo, commit, env, 120, RED))
    second = asyncio.create_task(baselines.traces(repo, commit, env, 120, RED))
    try:
        await holds(lambda: host_pids(sleep), "the traced run's test process started")
        [shared] = trace_runs()
        first.cancel()
        with pytest.raises(asyncio.CancelledError):
            await first
        assert not shared.cancelling() and not second.done(), "the second task still waits for the trace: it goes on"
        assert host_pids(sleep)
        second.cancel()
        with pytest.raises(asyncio.CancelledError):
            await second
        await holds(lambda: not host_pids(sleep), "the trace nobody waits for is still running its test")
        await holds(shared.done, "the cancelled trace ended")
    finally:
        await baselines.close()
        kill(host_pids(sleep))


async def test_a_task_asking_while_a_cancelled_trace_is_reaped_gets_a_run_of_its_own(tmp_path: Path) -> None:
    """The last task waiting for a trace was cancelled (its run is being stopped) and the next task on the base asks
    for the same one at once: it gets a new traced run, never the cancelled one's cancellation."""
    sleep, repo, commit, env, baselines = a_base_whose_red_test_is_slow_traced(tmp_path, "9")
    first = asyncio.create_task(baselines.traces(repo, commit, env, 120, RED))
    try:
        await holds(lambda: host_pids(sleep), "the first traced run's test process started")
        before = set(host_pids(sleep))
        first.cancel()
        with pytest.raises(asyncio.CancelledError):
            await first
        later = asyncio.create_task(baselines.traces(repo, commit, env, 120, RED))
        await holds(lambda: set(host_pids(sleep)) - before, "the later task's traced run started")
        assert not later.done(), "the later task waits for its own run"
        await holds(lambda: not set(host_pids(sleep)) & before, "the cancelled trace's test process was killed")
        later.cancel()
        with pytest.raises(asyncio.CancelledError):
            await later
        await holds(lambda: not host_pids(sleep), "the later trace ended with its task")
    finally:
        await baselines.close()
        kill(host_pids(sleep))
