"""pasta, the background process that carries an allowed command's network, never outlives the command: not when the
command's network set-up fails beside it, not when the command is cancelled while pasta starts. A service whose
network set-up failed is killed and waited for before the failure is reported, and a sandbox whose network set-up
failed never runs its command."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import os
import signal
import time
from pathlib import Path
from typing import Any

import pytest

from agents.core.errors import ToolError
from agents.core.secrets_filter import SecretsFilter
from agents.sandbox import services
from agents.sandbox.bwrap import SandboxSpec, spec_for
from agents.sandbox.egress_rules import Egress
from agents.sandbox.shell import run_command
from agents.sandbox.task_limits import TaskBounds
from agents.sandbox.user_net import UserNet, direct
from tests.support.sandbox import PROBE, needs_bwrap

pytestmark = [
    needs_bwrap,
    pytest.mark.skipif(not direct(Egress()), reason="pasta (Debian passt) or nft (Debian nftables) is not installed"),
]


def _allowed(root: Path) -> SandboxSpec:
    return dataclasses.replace(spec_for(SecretsFilter(), PROBE, root, network=True), egress=Egress())


def _pastas_of(folder: Path) -> list[int]:
    """The pasta processes whose pid file lies in `folder` (one UserNet's)."""
    found = []
    for entry in Path("/proc").iterdir():
        with contextlib.suppress(OSError):
            if entry.name.isdigit():
                words = (entry / "cmdline").read_bytes().split(b"\0")
                if words and words[0].endswith(b"pasta") and str(folder / "pasta.pid").encode() in words:
                    found.append(int(entry.name))
    return found


async def _pastas_left(folder: Path, within: float = 5.0) -> list[int]:
    """`_pastas_of(folder)` once empty, or after `within` seconds (a SIGTERMed pasta takes a moment to go)."""
    deadline = time.monotonic() + within
    while (left := _pastas_of(folder)) and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
    return left


def _ended_by_hand(pids: list[int]) -> list[int]:
    """`pids`, each killed first: a failing test leaves no pasta behind on the machine."""
    for pid in pids:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
    return pids


@pytest.fixture
def pasta_started(monkeypatch: pytest.MonkeyPatch) -> tuple[asyncio.Event, list[Path]]:
    """Set once pasta has forked into the background (its pid file written), while the bot is still starting it;
    with the folder of each UserNet that started one. The start then takes a moment longer: what happens meanwhile
    (a failure beside it, a cancel) meets it half done."""
    started = asyncio.Event()
    folders: list[Path] = []
    real = asyncio.create_subprocess_exec

    async def starting(*args: Any, **kwargs: Any) -> asyncio.subprocess.Process:
        process = await real(*args, **kwargs)
        if str(args[0]).endswith("pasta"):
            pid_file = Path(args[list(args).index("-P") + 1])
            folders.append(pid_file.parent)
            deadline = time.monotonic() + 10
            while not pid_file.exists() and time.monotonic() < deadline:
                await asyncio.sleep(0.01)
            started.set()
            await asyncio.sleep(0.3)
        return process

    monkeypatch.setattr(asyncio, "create_subprocess_exec", starting)
    return started, folders


async def test_pasta_never_outlives_a_command_whose_network_rules_failed_beside_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, pasta_started: tuple[asyncio.Event, list[Path]]
) -> None:
    # The rules' helper and pasta start side by side; here the helper fails while pasta is being started: the command
    # is refused and its network closed, and pasta, already in the background, had nobody left to end it.
    started, folders = pasta_started

    async def failing_helper(self: UserNet, pid: int) -> None:
        await started.wait()
        raise OSError("the network rules could not be set: (the test's)")

    monkeypatch.setattr(UserNet, "_helper_ready", failing_helper)
    with pytest.raises(ToolError, match="network rules could not be set"):
        await run_command("true", tmp_path, 30, sandbox=_allowed(tmp_path))
    [folder] = folders
    left = _ended_by_hand(await _pastas_left(folder))
    assert not left, f"pasta outlived the refused command: {left}"
    await _gone(folder)


async def test_pasta_never_outlives_a_command_cancelled_while_pasta_starts(
    tmp_path: Path, pasta_started: tuple[asyncio.Event, list[Path]]
) -> None:
    started, folders = pasta_started
    command = asyncio.create_task(run_command("sleep 30", tmp_path, 60, sandbox=_allowed(tmp_path)))
    await started.wait()
    command.cancel()
    with pytest.raises(asyncio.CancelledError):
        await command
    [folder] = folders
    left = _ended_by_hand(await _pastas_left(folder))
    assert not left, f"pasta outlived the cancelled command: {left}"
    await _gone(folder)


async def _gone(folder: Path, within: float = 5.0) -> None:
    """`folder` removed within `within` seconds (the end of pasta's start removes it when the network was closed
    meanwhile)."""
    deadline = time.monotonic() + within
    while folder.exists() and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
    assert not folder.exists(), f"its folder stays behind: {sorted(p.name for p in folder.iterdir())}"


async def test_a_service_whose_network_rules_failed_is_ended_and_waited_for(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, pasta_started: tuple[asyncio.Event, list[Path]]
) -> None:
    started, folders = pasta_started
    spawned: list[asyncio.subprocess.Process] = []
    real_start = services.start_group

    async def recording_start(*args: Any, **kwargs: Any) -> asyncio.subprocess.Process:
        spawned.append(await real_start(*args, **kwargs))
        return spawned[-1]

    async def failing_helper(self: UserNet, pid: int) -> None:
        await started.wait()
        raise OSError("the network rules could not be set: (the test's)")

    monkeypatch.setattr(services, "start_group", recording_start)
    monkeypatch.setattr(UserNet, "_helper_ready", failing_helper)
    bounds = TaskBounds("svc-net", 1 << 30, 256)
    spec = dataclasses.replace(_allowed(tmp_path), task=bounds)
    with pytest.raises(ToolError, match="network rules could not be set"):
        await services.TaskServices(bounds).spawn(spec, "exec sleep 30", {}, "service-1", stdio=False)
    [process] = spawned
    assert process.returncode is not None, "the service's sandbox was not waited for when its start failed"
    [folder] = folders
    left = _ended_by_hand(await _pastas_left(folder))
    assert not left, f"pasta outlived the refused service: {left}"


def _processes_running(line: str) -> list[int]:
    """The processes whose command line is `line` (words joined by spaces)."""
    found = []
    for entry in Path("/proc").iterdir():
        with contextlib.suppress(OSError):
            if entry.name.isdigit() and (entry / "cmdline").read_bytes().rstrip(b"\0").replace(b"\0", b" ") == (
                line.encode()
            ):
                found.append(int(entry.name))
    return found


@pytest.mark.parametrize("started_as", ["command", "service"])
async def test_a_sandbox_whose_network_set_up_failed_never_runs_its_command(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, started_as: str
) -> None:
    # bwrap holds the sandbox before the command (`--block-fd`) while the bot wires its network out, and lets it go
    # when that pipe is written or closed. A sandbox whose wiring failed must be ended, not let go: its bwrap killed
    # first, the command ran anyway once the pipe closed, with nothing left to end it (and the bot said it had not).
    async def failing_helper(self: UserNet, pid: int) -> None:
        raise OSError("the network rules could not be set: (the test's)")

    monkeypatch.setattr(UserNet, "_helper_ready", failing_helper)
    real_reap = services.reap

    async def slow_reap(*args: Any, **kwargs: Any) -> None:
        await asyncio.sleep(0.3)  # a busy bot: whatever let the sandbox go before the kill has it run meanwhile
        await real_reap(*args, **kwargs)

    monkeypatch.setattr(services, "reap", slow_reap)
    sleeping = f"sleep 31.{4 if started_as == 'command' else 5}{os.getpid()}"
    line = f"touch ran; exec {sleeping}"
    with pytest.raises(ToolError, match="network rules could not be set"):
        if started_as == "command":
            await run_command(line, tmp_path, 30, sandbox=_allowed(tmp_path))
        else:
            bounds = TaskBounds("never-runs", 1 << 30, 256)
            spec = dataclasses.replace(_allowed(tmp_path), task=bounds)
            await services.TaskServices(bounds).spawn(spec, line, {}, "service-1", stdio=False)
    await asyncio.sleep(1.0)  # a sandbox let go runs its command within this
    left = _ended_by_hand(_processes_running(sleeping))
    made = (tmp_path / "ran").exists()
    assert not made and not left, f"the refused {started_as} ran (its file made: {made}; still running: {left})"


async def test_a_command_whose_network_rules_failed_has_its_helper_waited_for(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The rules' helper was killed with the refused command's network but never waited for: its pipes were still open
    # when the event loop ended (an unclosed transport, reported at garbage collection).
    nets: set[UserNet] = set()
    real_prepare = UserNet.prepare

    async def recording_prepare(self: UserNet) -> None:
        nets.add(self)  # called again by the attach, which finds it prepared
        await real_prepare(self)

    async def failing_helper(self: UserNet, pid: int) -> None:
        raise OSError("the network rules could not be set: (the test's)")

    monkeypatch.setattr(UserNet, "prepare", recording_prepare)
    monkeypatch.setattr(UserNet, "_helper_ready", failing_helper)
    with pytest.raises(ToolError, match="network rules could not be set"):
        await run_command("true", tmp_path, 30, sandbox=_allowed(tmp_path))
    [net] = nets
    assert net.helper is not None and net.helper.returncode is not None, "the helper was not waited for"


async def test_a_command_whose_network_rules_failed_has_its_pasta_launch_ended_first(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The helper failing while pasta was still being launched beside it left the launch running on its own: the
    # command's error reached the caller first, and an event loop ending then (a bot stopping) cut the launch off with
    # its process never waited for (an unclosed transport, reported at garbage collection).
    launches: list[str] = []
    real_run_pasta = UserNet._run_pasta

    async def slow_run_pasta(self: UserNet, pid: int, pid_file: Path) -> None:
        launches.append("started")
        await asyncio.sleep(0.3)  # the helper's failure comes meanwhile
        try:
            await real_run_pasta(self, pid, pid_file)
        finally:
            launches.append("ended")

    async def failing_helper(self: UserNet, pid: int) -> None:
        await asyncio.sleep(0.05)
        raise OSError("the network rules could not be set: (the test's)")

    monkeypatch.setattr(UserNet, "_run_pasta", slow_run_pasta)
    monkeypatch.setattr(UserNet, "_helper_ready", failing_helper)
    with pytest.raises(ToolError, match="network rules could not be set"):
        await run_command("true", tmp_path, 30, sandbox=_allowed(tmp_path))
    assert launches == ["started", "ended"], f"the pasta launch was left running: {launches}"
