"""Run shell commands for the agents: own process group, merged bounded output, timeouts and cancellation that kill
the whole group, and an environment without the bot's secrets."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import os
import shutil
import signal
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from agents.core.errors import ToolError
from agents.sandbox.bwrap import (
    SERVICES_MOUNT,
    SandboxSpec,
    bwrap_argv,
    bwrap_path,
    keep_size_filter,
    sandbox_env,
)

# named here too (`as`: exported), where the commands they are for are run
from agents.sandbox.clean_env import DEFAULT_SECRETS as DEFAULT_SECRETS
from agents.sandbox.clean_env import child_env as child_env
from agents.sandbox.pause import RunningCommands
from agents.sandbox.process_cap import PidsCap
from agents.sandbox.reaping import start_group, uninterrupted
from agents.sandbox.task_cgroup import TaskCgroup
from agents.sandbox.user_net import UserNet

log = logging.getLogger(__name__)

TERM_GRACE_SECONDS = 2.0
KILL_WAIT_SECONDS = 5.0
DRAIN_GRACE_SECONDS = 0.5
_CHUNK = 65_536
# how often a running shell's exit is checked while its output pipe is still open: at first often (most commands
# are short), then less and less (a task's service, or a test run, may go on for minutes; polling it at 50 Hz the
# whole time cost CPU for nothing). The pipe closing is noticed at once either way: only a shell that exited while
# a background child still holds the pipe waits up to the longest pause.
_POLL_FIRST_SECONDS = 0.02
_POLL_MAX_SECONDS = 0.25
_SHELL = shutil.which("bash") or "/bin/sh"
_SANDBOX_SHELL = "/bin/bash" if os.path.exists("/bin/bash") else "/bin/sh"  # a system path, visible in the sandbox


@dataclass
class CommandResult:
    """What a command did. `exit_code` is None when it timed out or was cancelled, negative when a signal killed it."""

    command: str
    exit_code: int | None
    output: str
    timed_out: bool
    cancelled: bool
    duration: float
    stopped: str | None = None  # why the bot stopped it (e.g. the task's disk budget), one sentence for the model

    @property
    def ok(self) -> bool:
        return self.exit_code == 0 and not self.timed_out and not self.cancelled and self.stopped is None

    def format_for_model(self) -> str:
        if self.timed_out:
            status = f"(timed out after {self.duration:.1f}s; process group killed)"
        elif self.cancelled:
            status = f"(cancelled after {self.duration:.1f}s; process group killed)"
        elif self.exit_code is not None and self.exit_code < 0:
            try:
                name = signal.Signals(-self.exit_code).name
            except ValueError:
                name = f"signal {-self.exit_code}"
            status = f"killed by {name} after {self.duration:.1f}s"
        else:
            status = f"exit code {self.exit_code} after {self.duration:.1f}s"
        body = self.output if self.output.strip() else "(no output)"
        if self.stopped:
            status = f"{self.stopped}\n{status}"
        return f"$ {self.command}\n{status}\n{body}"


class _BoundedOutput:
    """Keeps the first `head_limit` and the last `tail_limit` bytes of a stream, counting what falls between."""

    def __init__(self, max_output: int) -> None:
        self.head_limit = max(0, max_output // 2)
        self.tail_limit = max(0, max_output - self.head_limit)
        self.head = bytearray()
        self.tail = bytearray()
        self.total = 0

    def feed(self, chunk: bytes) -> None:
        self.total += len(chunk)
        room = self.head_limit - len(self.head)
        if room > 0:
            self.head += chunk[:room]
            chunk = chunk[room:]
        if chunk and self.tail_limit:
            self.tail += chunk
            excess = len(self.tail) - self.tail_limit
            if excess > 0:
                del self.tail[:excess]

    def render(self) -> str:
        omitted = self.total - len(self.head) - len(self.tail)
        if omitted <= 0:
            return bytes(self.head + self.tail).decode("utf-8", errors="replace")
        head = bytes(self.head).decode("utf-8", errors="replace")
        tail = bytes(self.tail).decode("utf-8", errors="replace")
        return f"{head}\n[... {omitted} bytes omitted ...]\n{tail}"


def _signal_group(pgid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


async def _until_exited(process: asyncio.subprocess.Process, reader: asyncio.Task[None]) -> None:
    """Wait until the shell itself has exited (and been reaped).

    `Process.wait()` on Python 3.11 also waits for the pipe to close, which a background child can hold open for
    ever, so poll `returncode` (set by the child watcher once it reaped the shell) while the pipe is still open.
    """
    pause = _POLL_FIRST_SECONDS
    while process.returncode is None:
        if reader.done():  # pipe closed: wait() cannot be held up any more
            await process.wait()
            return
        await asyncio.wait({reader}, timeout=pause)
        pause = min(_POLL_MAX_SECONDS, pause * 1.5)


async def _kill_group(process: asyncio.subprocess.Process, pgid: int, reader: asyncio.Task[None]) -> None:
    """SIGTERM the group, give it a short grace (until the shell is reaped and the pipe is closed), then SIGKILL
    whatever is left of it, and wait until the shell is reaped."""
    _signal_group(pgid, signal.SIGTERM)
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(TERM_GRACE_SECONDS):
            await _until_exited(process, reader)
            await asyncio.shield(reader)  # EOF once every process holding the pipe is gone
    _signal_group(pgid, signal.SIGKILL)  # also reaches children that outlived or ignored SIGTERM
    try:  # a SIGKILLed process is gone at once; never let a reaping hiccup hold up a cancel for ever
        async with asyncio.timeout(KILL_WAIT_SECONDS):
            await _until_exited(process, reader)
    except TimeoutError:
        log.warning("process %s was sent SIGKILL but was not reaped within %.0f s", process.pid, KILL_WAIT_SECONDS)


async def run_command(
    command: str,
    cwd: Path,
    timeout: float,
    env: Mapping[str, str] | None = None,
    max_output: int = 30_000,
    sandbox: SandboxSpec | None = None,
    running: RunningCommands | None = None,
) -> CommandResult:
    """Run `command` with bash in `cwd` in a new session; stdout+stderr merged and capped to `max_output` bytes
    (head and tail kept). `env=None` means `child_env()`. On timeout or cancellation the whole process group is
    killed; background processes still running after the command itself exits are killed too.

    With `sandbox`, the command runs inside bubblewrap (agents/sandbox/bwrap.py) with only the harmless keys of `env`;
    killing bwrap ends its PID namespace, so every process of the command dies, detached or not. Where bwrap
    cannot run, ToolError says so and how to fix it. `running` (a task's `TaskBounds.commands`) holds the command's
    first process while it runs: the task's processes stopped while the bot writes include it and its descendants,
    confined or not, cgroup or not."""
    cwd = Path(cwd)
    if not cwd.is_dir():
        raise ToolError(f"cannot run {command!r}: working folder {str(cwd)!r} does not exist")
    environment = dict(child_env() if env is None else env)
    if sandbox is None:
        return await _run_argv([_SHELL, "-c", command], command, cwd, environment, timeout, max_output, running=running)
    if reason := await sandbox.probe.unavailable_reason():
        raise ToolError(reason)
    return await _run_sandboxed(command, cwd, environment, timeout, max_output, sandbox, running)


async def _run_sandboxed(
    command: str,
    cwd: Path,
    environment: dict[str, str],
    timeout: float,
    max_output: int,
    sandbox: SandboxSpec,
    running: RunningCommands | None,
) -> CommandResult:
    """A command in bwrap, inside the task's cgroup (or a pids cgroup of its own), its network user-mode via pasta
    when allowed and installed, the task's disk budget watched while it runs (agents/sandbox/task_limits.py)."""
    with keep_size_filter() as seccomp:
        return await _run_filtered(command, cwd, environment, timeout, max_output, sandbox, seccomp, running)


async def _run_filtered(
    command: str,
    cwd: Path,
    environment: dict[str, str],
    timeout: float,
    max_output: int,
    sandbox: SandboxSpec,
    seccomp: int | None,
    running: RunningCommands | None,
) -> CommandResult:
    bounds = sandbox.task
    budget = bounds.disk_for(sandbox.worktree) if bounds is not None else None
    net = UserNet(sandbox.egress) if sandbox.network else None
    try:
        if net is not None:
            await net.prepare()
        argv, pass_fds, group = await confined_argv(sandbox, command, net, seccomp)
    except BaseException:
        if net is not None:
            await net.aclose()
        raise
    environment = sandbox_env(environment, sandbox) | (net.env() if net is not None else {})
    cap = None if group is not None and group.bounds_processes else PidsCap.create(sandbox.limits.max_processes)
    if cap is not None:  # the process limit that holds for root too (agents/sandbox/process_cap.py)
        argv = cap.wrap(argv)
    oom_before = group.oom_kills() if group is not None else 0
    earlier = group.members() if group is not None else set()  # the task's services, already running
    watcher: asyncio.Task[None] | None = None
    tripped: list[int] = []  # the budget watcher killed the command and is cleaning up after it
    if budget is not None:
        await budget.start()

    async def on_start(pgid: int) -> None:
        nonlocal watcher
        if net is not None:
            await net.attach()
        if budget is not None:
            watcher = asyncio.create_task(budget.watch(lambda: stop(pgid)))

    def stop(pgid: int) -> None:
        tripped.append(pgid)
        _signal_group(pgid, signal.SIGKILL)

    try:
        result = await _run_argv(
            argv,
            command,
            cwd,
            environment,
            timeout,
            max_output,
            pass_fds=pass_fds,
            on_start=on_start,
            running=running,
        )
    except BaseException:
        if net is not None:
            await net.aclose()
        raise
    finally:
        if watcher is not None and not watcher.done():
            if tripped:
                await asyncio.wait({watcher})
            else:
                watcher.cancel()
        if tripped:  # the clean-up below must not race a killed process still finishing its write
            await _until_gone(group, cap, earlier)
        if cap is not None:  # removed in the background: its last processes may take a moment to leave it
            cap.close_later()
    if net is not None:  # what the network rules and the proxy refused, so the worker sees why
        result.output += await net.finish()
    if budget is not None and (tripped or await budget.over()):
        result.stopped = await budget.exceeded()
    if group is not None and group.oom_kills() > oom_before and bounds is not None:
        result.output += (
            f"\n[the task's memory limit of {bounds.memory_bytes >> 20} MB (SANDBOX_MAX_MEMORY_MB) was reached: "
            "the kernel killed a process of this command]"
        )
    return result


def _pid_namespace(pid: int) -> str | None:
    try:
        return os.readlink(f"/proc/{pid}/ns/pid")
    except OSError:  # gone
        return None


async def _until_gone(
    group: TaskCgroup | None, cap: PidsCap | None, earlier: set[int], wait_seconds: float = KILL_WAIT_SECONDS
) -> None:
    """Kill a stopped command's processes and wait until they are gone. They die with bwrap's PID namespace a moment
    after the shell, and one of them may still be in the middle of a write. In the task's cgroup they are those in a
    PID namespace none of the `earlier` processes (the task's services, each in a sandbox of its own) is in; otherwise
    the command has a pids cgroup of its own."""
    services = {_pid_namespace(pid) for pid in earlier}

    def left() -> set[int]:
        if group is not None:
            return {pid for pid in group.members() if _pid_namespace(pid) not in services}
        return cap.members() if cap is not None else set()

    deadline = time.monotonic() + wait_seconds
    while (pids := left()) and time.monotonic() < deadline:
        for pid in pids:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        await asyncio.sleep(0.02)
    if pids:
        log.warning("a command stopped for the disk budget still had processes after %.0f s", wait_seconds)


async def confined_argv(
    sandbox: SandboxSpec, command: str, net: UserNet | None = None, seccomp: int | None = None
) -> tuple[list[str], tuple[int, ...], TaskCgroup | None]:
    """The argv that runs the shell `command` in bwrap: in the task's cgroup and network namespace
    (agents/sandbox/task_net.py) unless it has the network (then `net`, pasta, or the host's where pasta is missing);
    the service logs shown read-only at SERVICES_MOUNT (the bot's own programs' logs never); the largest file a
    command may write is at most the task's disk budget, and a reservation that keeps the file size is refused
    (`seccomp`: bwrap.keep_size_filter's descriptor). Returns it, the descriptors to pass and the task's cgroup."""
    bounds = sandbox.task
    group = bounds.cgroup() if bounds is not None else None
    disk = bounds.disk_for(sandbox.worktree) if bounds is not None else None
    if disk is not None and disk.budget_bytes < sandbox.limits.max_file_bytes:
        # one file may not outgrow the task's whole disk budget: the kernel refuses it at once (RLIMIT_FSIZE), where
        # the budget's poll would only see it at its next look
        limits = dataclasses.replace(sandbox.limits, max_file_bytes=disk.budget_bytes)
        sandbox = dataclasses.replace(sandbox, limits=limits)
    join = bounds is not None and not sandbox.network
    if bounds is not None and bounds.service_logs is not None:
        sandbox = dataclasses.replace(sandbox, mounts=(*sandbox.mounts, (bounds.service_logs, SERVICES_MOUNT)))
    if bounds is not None and bounds.own_logs is not None:
        # the bot's own programs' logs may hold their secrets: covered even where a bound folder (a SANDBOX_READ_PATHS
        # entry holding the temporary directory) would show it
        sandbox = dataclasses.replace(sandbox, hidden=(*sandbox.hidden, bounds.own_logs))
    bwrap = bwrap_path() or "bwrap"
    if join and bounds is not None:
        try:
            await bounds.net.ensure(bwrap)
        except OSError as err:
            raise ToolError(str(err)) from None
    wrapped = bwrap_argv(
        sandbox,
        command,
        bwrap=bwrap,
        shell=_SANDBOX_SHELL,
        user_net=net.child_fds if net is not None else None,
        joined=join,
        seccomp=seccomp,
        resolv_conf=net.resolv_conf if net is not None else None,
    )
    pass_fds: tuple[int, ...] = net.child_fds if net is not None else ()
    if seccomp is not None:
        pass_fds += (seccomp,)
    if join and bounds is not None:
        wrapped = bounds.net.join(wrapped)
        pass_fds += bounds.net.pass_fds
    if group is not None:  # memory (and processes) of the whole task (agents/sandbox/task_cgroup.py)
        wrapped = group.wrap(wrapped)
    return wrapped, pass_fds, group


async def _run_argv(
    argv: list[str],
    command: str,
    cwd: Path,
    environment: dict[str, str],
    timeout: float,
    max_output: int,
    pass_fds: tuple[int, ...] = (),
    on_start: Callable[[int], Awaitable[None]] | None = None,
    running: RunningCommands | None = None,
) -> CommandResult:
    """Start `argv` in its own session and collect its output; the group is killed on timeout or cancellation.
    `on_start(pgid)` runs once the process exists (a failure there kills it and becomes a ToolError); `running` holds
    the process's pid from its start until it and its group are reaped."""
    started = time.monotonic()
    tracked = running if running is not None else RunningCommands()
    async with tracked.spawning() as spawned:
        try:
            process = await start_group(
                argv,
                cwd=cwd,
                env=environment,
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.STDOUT,
                pass_fds=pass_fds,
            )
        except OSError as err:
            raise ToolError(f"cannot start {command!r}: {err}") from None
        spawned(process.pid)  # leader of its own session and process group
    try:
        return await _collect(process, command, timeout, max_output, started, on_start)
    finally:
        tracked.ended(process.pid)


async def _collect(
    process: asyncio.subprocess.Process,
    command: str,
    timeout: float,
    max_output: int,
    started: float,
    on_start: Callable[[int], Awaitable[None]] | None,
) -> CommandResult:
    """`_run_argv` once the process is started: its output read, its group ended.

    Why long: start, read, time out, cancel and kill share the process and its group; every exit path must reap
    both, which one try/finally keeps visible in one place."""
    pgid = process.pid
    if on_start is not None:
        try:
            await on_start(pgid)
        except BaseException as err:
            _signal_group(pgid, signal.SIGKILL)
            said = b""
            with contextlib.suppress(Exception):
                async with asyncio.timeout(KILL_WAIT_SECONDS):
                    said = await process.stdout.read(2000) if process.stdout else b""
                    await process.wait()
            if isinstance(err, Exception):
                detail = said.decode(errors="replace").strip()
                raise ToolError(f"cannot start {command!r}: {err}" + (f" ({detail})" if detail else "")) from None
            raise
    collected = _BoundedOutput(max_output)

    async def pump() -> None:
        assert process.stdout is not None
        while chunk := await process.stdout.read(_CHUNK):
            collected.feed(chunk)

    reader = asyncio.create_task(pump())
    timed_out = leftovers = False
    try:
        try:
            async with asyncio.timeout(timeout):
                await _until_exited(process, reader)
                # The shell is done; background children may still hold the pipe open.
                try:  # asyncio.timeout, not wait_for: on 3.11 wait_for can swallow a cancellation (/cancel)
                    async with asyncio.timeout(DRAIN_GRACE_SECONDS):
                        await asyncio.shield(reader)
                except TimeoutError:
                    leftovers = True
        except TimeoutError:
            timed_out = True
        await _kill_group(process, pgid, reader)  # ends a timed-out command and anything it left running
        await _finish_reader(reader, process)
    except asyncio.CancelledError:
        await uninterrupted(_end_cancelled(process, pgid, reader))
        raise
    output = collected.render()
    if leftovers and not timed_out:
        output += "\n[background processes still running after the command finished were killed]"
    return CommandResult(
        command=command,
        exit_code=None if timed_out else process.returncode,
        output=output,
        timed_out=timed_out,
        cancelled=False,
        duration=time.monotonic() - started,
    )


async def _end_cancelled(process: asyncio.subprocess.Process, pgid: int, reader: asyncio.Task[None]) -> None:
    """A cancelled command's group killed and reaped, its pipe read to the end or given up on."""
    try:
        await _kill_group(process, pgid, reader)
        await _finish_reader(reader, process)
    finally:
        _signal_group(pgid, signal.SIGKILL)
        reader.cancel()


async def _finish_reader(reader: asyncio.Task[None], process: asyncio.subprocess.Process) -> None:
    """Let the reader collect what is left in the pipe; give up if a process that escaped the group still holds it."""
    try:
        async with asyncio.timeout(DRAIN_GRACE_SECONDS):
            await asyncio.shield(reader)
    except TimeoutError:
        reader.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await reader
        transport = getattr(process, "_transport", None)
        if transport is not None:
            transport.close()
