"""User-mode networking for a command allowed the network: its own network namespace, wired to the outside by pasta.

bwrap keeps the command's network namespace unshared even when the network is allowed; it reports the sandbox's pid
(`--info-fd`) and waits (`--block-fd`) while `pasta` (Debian's `passt`) attaches to that namespace. pasta gives it a
copy of the host's addresses and routes and carries its TCP/UDP/ICMP out through ordinary sockets of the host, so the
Internet stays reachable, while:

- the namespace's 127.0.0.1 / ::1 is its own loopback, not the host's (`--no-map-gw`: the gateway address is not
  mapped to the host either; `-T none -U none`: no port of the host's loopback is forwarded in);
- the host's own addresses are assigned inside the namespace too, so connecting to them stays inside it.

Still reachable: every other address the host itself can reach (other machines of the local network, the gateway's
own services, a cloud metadata address such as 169.254.169.254). Where pasta is not installed, `available()` is False
and an allowed command shares the host's network as before (with a warning at start-up and in `agentlab doctor`).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import shutil
import signal
from pathlib import Path

from agents.sandbox.temp_folders import temp_folder

log = logging.getLogger(__name__)

ATTACH_TIMEOUT_SECONDS = 10.0
LOOPBACK_WAIT_POLLS = 2000  # of about a millisecond each
PASTA_OPTIONS = ("--config-net", "--no-map-gw", "-t", "none", "-u", "none", "-T", "none", "-U", "none", "-q")


def pasta_path() -> str | None:
    return shutil.which("pasta")


def available() -> bool:
    return pasta_path() is not None


class UserNet:
    """The pipes between the bot and one bwrap, and the pasta attached to its namespace; `close` after the command."""

    def __init__(self) -> None:
        self.info_read, self.info_write = os.pipe()
        self.block_read, self.block_write = os.pipe()
        self._open = {self.info_read, self.info_write, self.block_read, self.block_write}
        self.pasta_pid: int | None = None
        self.folder = temp_folder("pasta", "net")

    @property
    def child_fds(self) -> tuple[int, int]:
        """(info fd, block fd) as the child sees them (passed with `pass_fds`)."""
        return self.info_write, self.block_read

    async def attach(self) -> None:
        """Once bwrap started: wait for its sandbox's pid, attach pasta to its namespaces, then let the command run."""
        for fd in self.child_fds:
            self._close_fd(fd)
        async with asyncio.timeout(ATTACH_TIMEOUT_SECONDS):
            pid = await asyncio.to_thread(_read_child_pid, self.info_read)
            await _loopback_configured(pid)
            pid_file = self.folder / "pasta.pid"
            runas = ["--runas", "0"] if os.geteuid() == 0 else []  # as root pasta would drop to nobody and fail
            process = await asyncio.create_subprocess_exec(
                pasta_path() or "pasta",
                *runas,
                *PASTA_OPTIONS,
                "-P",
                str(pid_file),
                "--userns",
                f"/proc/{pid}/ns/user",
                "--netns",
                f"/proc/{pid}/ns/net",
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.DEVNULL,
                stderr=asyncio.subprocess.PIPE,
            )
            _, err = await process.communicate()  # pasta forks into the background once the namespace is set up
            with contextlib.suppress(OSError, ValueError):
                self.pasta_pid = int(pid_file.read_text().strip())
            if process.returncode != 0:
                raise OSError(f"pasta failed: {err.decode(errors='replace').strip()[-300:]}")
        os.write(self.block_write, b"1")

    def close(self) -> None:
        if self.pasta_pid is not None:
            with contextlib.suppress(OSError):
                os.kill(self.pasta_pid, signal.SIGTERM)
            self.pasta_pid = None
        for fd in list(self._open):
            self._close_fd(fd)
        shutil.rmtree(self.folder, ignore_errors=True)

    def _close_fd(self, fd: int) -> None:
        if fd in self._open:
            self._open.discard(fd)
            with contextlib.suppress(OSError):
                os.close(fd)


async def _loopback_configured(pid: int) -> None:
    """Wait until bwrap gave the namespace its loopback address: pasta brings `lo` up, which makes the kernel add
    127.0.0.1 itself, and bwrap's own attempt would then fail ("loopback: Failed RTM_NEWADDR")."""
    trie = Path(f"/proc/{pid}/net/fib_trie")
    for _ in range(LOOPBACK_WAIT_POLLS):
        try:
            if "127.0.0.1" in trie.read_text():
                return
        except OSError:
            return  # the sandbox is gone already: attaching will say so
        await asyncio.sleep(0.001)


def _read_child_pid(fd: int) -> int:
    data = b""
    while chunk := os.read(fd, 4096):
        data += chunk
        with contextlib.suppress(ValueError):
            return int(json.loads(data)["child-pid"])
    raise OSError("bwrap ended before its sandbox was set up")
