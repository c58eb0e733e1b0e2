"""One network namespace per task: every command of the task, its services and its browser share it.

The namespace is made at the task's first command by a short-lived bwrap (`--unshare-user --unshare-net`: bwrap
brings its loopback up) whose sandbox's namespaces the bot opens (`/proc/<pid>/ns/net` and `ns/user`) before the
bwrap exits. The open descriptors keep the namespace alive: no process holds it, so it costs no memory beyond the
kernel's namespace itself. A later command joins it with `nsenter --net=/proc/self/fd/N` and then runs bwrap with
`--share-net`, so everything else stays per command (user, PID, mount, IPC, UTS namespaces; no other process is
visible). A bot without CAP_SYS_ADMIN (a user, or root in most containers) enters the namespace's user namespace too
(`--user=... --preserve-credentials`): only there does it hold CAP_SYS_ADMIN over the network namespace. Tested as
root, as root without CAP_SYS_ADMIN, and as `nobody`.

There is no route out of it: only loopback. A command allowed the network does not join it: it keeps a namespace of
its own wired out by pasta (agents/sandbox/user_net.py), so the task's services never get the network through
another command's Allow (and the allowed command does not reach the services on `localhost`).
`close()` (task end) drops the descriptors: once the task's processes are gone the namespace is gone.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal

from agents.sandbox.bwrap_info import child_pid
from agents.sandbox.clean_env import child_env
from agents.sandbox.privilege import holds_sys_admin
from agents.sandbox.reaping import reap, start_group, to_its_end

NSENTER = shutil.which("nsenter") or "nsenter"
MAKE_TIMEOUT_SECONDS = 10.0
REAP_SECONDS = 5.0  # reading a killed bwrap's last words


class TaskNet:
    """The task's network namespace, held as open descriptors; `join(argv)` runs `argv` inside it."""

    def __init__(self) -> None:
        self.net_fd: int | None = None
        self.user_fd: int | None = None
        self._lock = asyncio.Lock()

    @property
    def ready(self) -> bool:
        return self.net_fd is not None

    async def ensure(self, bwrap: str = "bwrap") -> None:
        """Make the namespace if the task has none yet (its first command)."""
        async with self._lock:
            if self.net_fd is None:
                async with asyncio.timeout(MAKE_TIMEOUT_SECONDS):
                    self.net_fd, self.user_fd = await _make_namespace(bwrap)

    @property
    def pass_fds(self) -> tuple[int, ...]:
        return tuple(fd for fd in (self.net_fd, self.user_fd) if fd is not None)

    def join(self, argv: list[str]) -> list[str]:
        """`argv` started inside the task's namespace (pass `pass_fds` to the subprocess)."""
        if self.net_fd is None:
            raise RuntimeError("the task's network namespace is not made yet (call ensure first)")
        prefix = [NSENTER]
        if self.user_fd is not None and not holds_sys_admin():  # a user, or root without it (most containers)
            prefix += [f"--user=/proc/self/fd/{self.user_fd}", "--preserve-credentials"]
        prefix += [f"--net=/proc/self/fd/{self.net_fd}", "--"]
        return [*prefix, *argv]

    def path(self) -> str | None:
        """A path of the namespace for tools that attach to it (e.g. pasta), valid while the task runs."""
        return None if self.net_fd is None else f"/proc/{os.getpid()}/fd/{self.net_fd}"

    def close(self) -> None:
        for fd in self.pass_fds:
            with contextlib.suppress(OSError):
                os.close(fd)
        self.net_fd = self.user_fd = None


async def _make_namespace(bwrap: str) -> tuple[int, int]:
    """Start a bwrap that only makes a user and a network namespace (loopback up), open both, let it exit.

    On a failure or a cancel before the namespaces are open, bwrap's whole group is killed (and waited for) before its
    block pipe closes: until bwrap lets its sandbox go, the sandbox is in bwrap's group, and a sandbox killed with it
    never runs. bwrap killed alone left the sandbox waiting on that pipe, holding bwrap's stderr open, so reading it
    hung until the caller's timeout."""
    info_read, info_write = os.pipe()
    block_read, block_write = os.pipe()
    fds: list[int] = []
    process: asyncio.subprocess.Process | None = None
    try:
        process = await start_group(
            [
                bwrap,
                "--unshare-user",
                "--unshare-net",
                "--die-with-parent",
                "--ro-bind",
                "/",
                "/",
                "--info-fd",
                str(info_write),
                "--block-fd",
                str(block_read),
                "--",
                "/bin/true",
            ],
            pass_fds=(info_write, block_read),
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.PIPE,
            env=child_env(),
        )
        os.close(info_write)
        os.close(block_read)
        info_write = block_read = -1
        pid = await child_pid(info_read)
        fds.append(os.open(f"/proc/{pid}/ns/net", os.O_RDONLY | os.O_CLOEXEC))
        fds.append(os.open(f"/proc/{pid}/ns/user", os.O_RDONLY | os.O_CLOEXEC))
    except BaseException as err:
        for fd in fds:
            os.close(fd)
        said = b"" if process is None else await to_its_end(asyncio.ensure_future(_ended(process)))
        if isinstance(err, Exception):
            detail = said.decode(errors="replace").strip()[-300:] or str(err) or type(err).__name__
            raise OSError(f"cannot make the task's network namespace: {detail}") from err
        raise
    finally:
        for fd in (info_read, info_write, block_read):
            if fd >= 0:
                os.close(fd)
        with contextlib.suppress(OSError):  # lets the sandbox run `true` (a killed one reads nothing: EPIPE)
            os.write(block_write, b"1")
        os.close(block_write)
    await process.communicate()
    return fds[0], fds[1]


async def _ended(process: asyncio.subprocess.Process) -> bytes:
    """bwrap's group killed, with the sandbox it still holds; what bwrap said on stderr; both waited for (bounded)."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)
    said = b""
    if process.stderr is not None:
        with contextlib.suppress(TimeoutError, OSError):
            async with asyncio.timeout(REAP_SECONDS):
                said = await process.stderr.read()
    await reap(process, group=True)
    return said
