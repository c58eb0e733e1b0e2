"""A task's services: long-lived processes in the task's sandbox and network namespace, ended with the task.

The seam for MCP stdio servers and the browser (the MCP side calls this; nothing else is needed):

    async def start_sandboxed_stdio(
        task_sandbox: SandboxSpec, argv: Sequence[str], env: Mapping[str, str], read_paths: Iterable[Path] = ()
    ) -> asyncio.subprocess.Process

runs `argv` inside `task_sandbox` (the spec a task's commands get, `task` set: TaskExecutor.sandbox_for(..., task_id))
with `read_paths` bound read-only besides the spec's own (SANDBOX_READ_PATHS is in the spec already), stdin and stdout
as pipes, stderr to a log file in a bot-side folder of the task that no sandbox is shown (a server's own output may
carry its secrets: the values of its `env`, printed in debug mode or by a crash), in the task's network namespace
(its services on `localhost`; no network unless `task_sandbox.network`, then pasta, for its whole life). The process
is killed (its whole PID namespace) when the task ends, is cancelled or the bot stops; the caller may end it sooner
with `process.kill()`. `env` keeps only the sandbox's harmless keys (bwrap.sandbox_env) plus those named in it that
the caller passes: an MCP server's own `env` block is passed whole.

`run_command(command, background=true)` uses `TaskServices.start`: the service's stdout and stderr go to a log file in a
bot-side folder shown read-only at SERVICES_MOUNT in every later command of the task (so `cat` / `tail` read its later
output); the call returns once the service printed something or opened a listening port (at most `START_WAIT_SECONDS`),
with its first output and id; a service that exits is reported once (`exit_notes`), and at most
`TaskBounds.max_services` run at a time. The bot writes the logs (a pump per service): they count in the task's disk
budget, and what passes it is left out with a line saying so (the line counts too). The folders are named after the
bot's pid, removed with the task, and by the start-up sweep (temp_folders.py) when a killed bot left them. Each service
is one bwrap: its processes live in their own PID namespace, so a double fork or setsid inside still dies when the bot
kills it (and when the command's own process ends: a service is its command, kept in the foreground); the bwrap
carries the task's tag (orphans.py) and dies with the bot (`--die-with-parent`).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shlex
import shutil
import signal
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from agents.core.errors import ToolError
from agents.sandbox.bwrap import SERVICES_MOUNT, SandboxSpec, keep_size_filter, sandbox_env
from agents.sandbox.reaping import reap, start_group, uninterrupted
from agents.sandbox.shell import confined_argv
from agents.sandbox.task_limits import TaskBounds
from agents.sandbox.temp_folders import temp_folder
from agents.sandbox.user_net import UserNet

LOG_CAP_BYTES = 64 << 20  # the services' logs of a task without a disk budget (SANDBOX=off has no services anyway)
START_WAIT_SECONDS = 10.0
FIRST_OUTPUT_BYTES = 4000
LEFT_OUT = b"\n[agentlab: the rest of this log is left out: the task's disk budget is spent]\n"
_POLL_SECONDS = 0.05
_LISTEN = "0A"  # TCP state LISTEN in /proc/net/tcp


@dataclass
class Service:
    """One running service of a task."""

    id: int
    command: str
    log: Path
    process: asyncio.subprocess.Process
    net: UserNet | None = None
    started: float = field(default_factory=time.monotonic)
    reported: bool = False
    printed: int = 0  # bytes it wrote so far, kept in its log or not (a spent disk budget drops them)
    pump: asyncio.Task[None] | None = None  # copies its output into the log, within the task's disk budget

    @property
    def log_in_sandbox(self) -> str:
        return f"{SERVICES_MOUNT}/{self.log.name}"

    def kill(self) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.process.pid, signal.SIGKILL)  # bwrap and its sandbox: the PID namespace goes with it
        if self.net is not None:
            self.net.close()
            self.net = None


class TaskServices:
    """The services of one task; made at its first service, closed by `TaskBounds.close` (task end, /cancel, stop)."""

    def __init__(self, bounds: TaskBounds) -> None:
        self.bounds = bounds
        # the bot's pid in the name: the start-up sweep (temp_folders.py) removes the folders of a bot that was killed
        self.folder = temp_folder("services", bounds.name)
        # the stderr of what the bot starts in the task's sandbox for itself (an MCP stdio server, the browser) goes
        # here, never shown to the task's commands: a server's own output may carry its secrets (its `env` values,
        # printed by a debug mode or a crash), which a command could print re-encoded past the output filter
        self.own_folder = temp_folder("services", f"{bounds.name}_own")
        self.services: list[Service] = []
        self._next = 1
        self.logged = 0  # bytes written to the logs so far
        bounds.services_started(self, self.folder, self.own_folder, self.close)

    @property
    def next_number(self) -> int:
        """The number the next service started will have (its log and its name carry it)."""
        return self._next

    def log_room(self) -> int:
        """How many more bytes the logs may take: what the task's disk budget has left (the logs count in it), or
        LOG_CAP_BYTES in all without one."""
        disk = self.bounds.disk
        if disk is None:
            return LOG_CAP_BYTES - self.logged
        return disk.budget_bytes - max(disk.grown, 0)

    async def _pump(self, source: asyncio.StreamReader, service: Service) -> None:
        """Copy a service's output into its log until the task's disk budget is spent; then say so once and drop the
        rest (still read, so the service never blocks on a full pipe)."""
        full = False
        with open(service.log, "ab", buffering=0) as sink:
            while chunk := await source.read(65536):
                service.printed += len(chunk)
                if full:
                    continue
                room = self.log_room()
                if len(chunk) > room - len(LEFT_OUT):  # the notice is within the budget too: it is the ceiling
                    kept = max(room - len(LEFT_OUT), 0)
                    chunk = chunk[:kept] + LEFT_OUT[: max(room - kept, 0)]
                    full = True
                sink.write(chunk)
                self.logged += len(chunk)
                if self.bounds.disk is not None:
                    self.bounds.disk.count_logged(len(chunk))

    @classmethod
    def of(cls, bounds: TaskBounds) -> TaskServices:
        """The task's services: those started already, else a new set (which the bounds keep from now on)."""
        if isinstance(bounds.services, TaskServices):
            return bounds.services
        return cls(bounds)

    def running(self) -> list[Service]:
        return [s for s in self.services if s.process.returncode is None]

    def pids(self) -> list[int]:
        return [s.process.pid for s in self.running()]

    async def spawn(
        self, sandbox: SandboxSpec, command: str, env: Mapping[str, str], name: str, stdio: bool
    ) -> Service:
        """Start `command` (a shell line) in the task's sandbox; stdio (a program of the bot's own: an MCP server,
        the browser): stdin/stdout pipes, stderr to a log in `own_folder`, which no sandbox is shown."""
        if reason := await sandbox.probe.unavailable_reason():
            raise ToolError(reason)
        if len(self.running()) >= self.bounds.max_services:
            raise ToolError(
                f"the task already runs {self.bounds.max_services} services (SANDBOX_MAX_SERVICES); "
                "stop one (kill its process) or reuse it"
            )
        net = UserNet(sandbox.egress) if sandbox.network else None
        log = (self.own_folder if stdio else self.folder) / f"{name}.log"
        try:
            with keep_size_filter() as seccomp:
                if net is not None:
                    await net.prepare()
                argv, pass_fds, _group = await confined_argv(sandbox, command, net, seccomp)
                log.touch()
                process = await start_group(
                    argv,
                    cwd=sandbox.worktree,
                    env=sandbox_env(env, sandbox)
                    | (net.env() if net is not None else {})
                    | {k: v for k, v in env.items() if stdio},
                    stdin=asyncio.subprocess.PIPE if stdio else asyncio.subprocess.DEVNULL,
                    stdout=asyncio.subprocess.PIPE,
                    stderr=asyncio.subprocess.PIPE if stdio else asyncio.subprocess.STDOUT,
                    pass_fds=pass_fds,
                    limit=65536,
                )
            if net is not None:
                await net.attach()
        except BaseException as err:
            # Started: its group is killed and waited for before its network is closed. Until bwrap lets the sandbox
            # run the command (`--block-fd`, once the network is wired), the sandbox is in bwrap's process group; a
            # sandbox let go by the network's close first ran the command in a session of its own, and when bwrap
            # was killed before it set itself to die with bwrap, nothing was left to end it.
            if "process" in locals():
                await uninterrupted(reap(process, group=True))
            if net is not None:
                await net.aclose()
            if isinstance(err, OSError):
                raise ToolError(f"cannot start {command!r}: {err}") from None
            raise
        service = Service(self._next, command, log, process, net)
        output = process.stderr if stdio else process.stdout
        if output is not None:
            service.pump = asyncio.create_task(self._pump(output, service), name=f"log-{name}")
        self._next += 1
        self.services.append(service)
        return service

    async def start(self, sandbox: SandboxSpec, command: str, env: Mapping[str, str]) -> str:
        """`run_command(background=true)`: start, wait for first output or a listening port, say what happened."""
        others = [s.process.pid for s in self.running()]
        before = self._listening(others[0]) if others else set()
        service = await self.spawn(sandbox, command, env, f"service-{self.next_number}", stdio=False)
        deadline = time.monotonic() + START_WAIT_SECONDS
        ports: set[int] = set()
        while time.monotonic() < deadline and service.process.returncode is None:
            ports = self._listening(service.process.pid) - before
            if ports or service.printed:
                await asyncio.sleep(0.2)  # let the first lines arrive together
                break
            await asyncio.sleep(_POLL_SECONDS)
        first = _head(service.log)
        where = f"Its output so far (more in {service.log_in_sandbox}: read it with cat or tail)"
        if service.process.returncode is not None:
            service.reported = True
            return f"$ {command}\nservice {service.id} exited at once (exit code {service.process.returncode})\n{first}"
        listening = f"; listening on port {', '.join(map(str, sorted(ports)))}" if ports else ""
        waited = "" if ports or service.printed else f" (no output or port within {START_WAIT_SECONDS:.0f} s)"
        if not first:
            first = "(output left out: the task's disk budget is spent)" if service.printed else "(no output yet)"
        return (
            f"$ {command}\nservice {service.id} started{listening}{waited}; it runs until the task ends. "
            f"Later commands reach it on localhost. {where}:\n{first}"
        )

    def exit_notes(self) -> list[str]:
        """One sentence per service that exited since the last call."""
        notes = []
        for service in self.services:
            if service.process.returncode is not None and not service.reported:
                service.reported = True
                notes.append(
                    f"[service {service.id} ({service.command!r}) exited with code {service.process.returncode}; "
                    f"its output is in {service.log_in_sandbox}]"
                )
        return notes

    def _listening(self, pid: int) -> set[int]:
        """TCP ports listening in the task's network namespace, read through `pid` once it has joined it."""
        fd = self.bounds.net.net_fd
        try:
            joined = fd is not None and os.readlink(f"/proc/{pid}/ns/net") == f"net:[{os.fstat(fd).st_ino}]"
        except OSError:
            joined = False
        return _listening(pid) if joined else set()

    async def close(self) -> None:
        nets = [s.net for s in self.services if s.net is not None]
        for service in self.services:
            service.kill()
        for net in nets:
            await net.wait_closed()
        for service in self.services:
            with contextlib.suppress(Exception):
                async with asyncio.timeout(5):
                    await service.process.wait()
            if service.pump is not None:
                service.pump.cancel()
                with contextlib.suppress(BaseException):
                    await service.pump
        self.services.clear()
        self.bounds.service_logs_gone()
        shutil.rmtree(self.folder, ignore_errors=True)
        shutil.rmtree(self.own_folder, ignore_errors=True)


async def start_sandboxed_stdio(
    task_sandbox: SandboxSpec, argv: Sequence[str], env: Mapping[str, str], read_paths: Iterable[Path] = ()
) -> asyncio.subprocess.Process:
    """A long-lived program (an MCP stdio server, the browser) in the task's sandbox and network namespace, with
    stdin/stdout pipes and stderr to a bot-side log of the task its commands never see; killed when the task ends
    (see the module docstring)."""
    if task_sandbox.task is None:
        raise ToolError("a sandboxed stdio program needs the task's sandbox (a spec with its task bounds)")
    # found on a PATH without the worker's folders: `python3`, `npx` are never a program the worker wrote
    spec = replace(task_sandbox.for_own_program(), read_only=(*task_sandbox.read_only, *(Path(p) for p in read_paths)))
    services = TaskServices.of(task_sandbox.task)
    name = Path(argv[0]).name.replace("/", "_") or "stdio"
    # nothing the worker wrote may be on the program's import path: it starts in its own private home (a tmpfs of
    # this sandbox alone), not the worktree, so `python -m server` or a relative require finds no worker's module
    # there; Python leaves its working directory off sys.path (PYTHONSAFEPATH), and search-path entries that point
    # into the worktree are dropped
    command = f'cd "$HOME" && exec {shlex.join(argv)}'
    service = await services.spawn(
        spec, command, stdio_env(env, spec.worktree), f"stdio-{services.next_number}-{name}", stdio=True
    )
    service.reported = True  # its own client notices when it ends
    return service.process


def stdio_env(env: Mapping[str, str], worktree: Path) -> dict[str, str]:
    """`env` for a long-lived stdio program: PYTHONSAFEPATH=1, and PYTHONPATH/NODE_PATH without an entry that is
    relative or inside the worktree (where the worker writes)."""
    kept = dict(env)
    for key in ("PYTHONPATH", "NODE_PATH"):
        entries = [
            e for e in kept.pop(key, "").split(os.pathsep) if e and Path(e).is_absolute() and not _within(e, worktree)
        ]
        if entries:
            kept[key] = os.pathsep.join(entries)
    kept["PYTHONSAFEPATH"] = "1"
    return kept


def _within(entry: str, worktree: Path) -> bool:
    try:
        return Path(os.path.realpath(entry)).is_relative_to(worktree.resolve())
    except (OSError, ValueError):
        return True


def _listening(pid: int) -> set[int]:
    """TCP ports in LISTEN state in the network namespace of `pid`."""
    ports: set[int] = set()
    for name in ("tcp", "tcp6"):
        try:
            lines = Path(f"/proc/{pid}/net/{name}").read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if len(fields) > 3 and fields[3] == _LISTEN:
                ports.add(int(fields[1].rsplit(":", 1)[1], 16))
    return ports


def _head(log: Path) -> str:
    try:
        with open(log, "rb") as f:
            data = f.read(FIRST_OUTPUT_BYTES + 1)
    except OSError:
        return ""
    text = data[:FIRST_OUTPUT_BYTES].decode("utf-8", errors="replace")
    return text + ("\n[... more in the log ...]" if len(data) > FIRST_OUTPUT_BYTES else "")
