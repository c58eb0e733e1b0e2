"""User-mode networking for a command allowed the network: its own network namespace, wired to the public Internet
only, by pasta under nftables rules, or through the bot's proxy alone.

bwrap keeps the command's network namespace unshared even when the network is allowed; it reports the sandbox's pid
(`--info-fd`) and waits (`--block-fd`) while the bot wires that namespace out:

- **direct** (the default, with pasta and libnftables installed): `pasta` (Debian's `passt`) gives the namespace a copy
  of the host's address and routes and carries its TCP/UDP/ICMP out through ordinary sockets of the host. pasta has
  no destination filter, so the bot's helper (agents/sandbox/netns_helper.py) first installs the rules of
  agents/sandbox/egress_rules.py in the namespace: no address of the host (any interface), no loopback, private,
  shared, link-local or multicast range, refused at once; DNS only to the address pasta forwards to the host's
  resolver (the sandbox's `/etc/resolv.conf` names it). The namespace's 127.0.0.1 is its own (`--no-map-gw`,
  `-T none -U none`: neither the gateway address nor any port of the host's loopback is mapped in).
- **proxy** (with `SANDBOX_NETWORK_DOMAINS`, or where pasta, libnftables or a tun device the bot may open is missing):
  no route out at all; the helper listens on the namespace's loopback and carries each connection to the bot's egress
  proxy (agents/sandbox/egress_proxy.py), which lets through only the allowed domains' public addresses. The command's
  HTTP_PROXY / HTTPS_PROXY point at it, so package managers, git and curl work; other protocols do not get out.

After the command the helper says which addresses the rules refused, and the proxy which names: `finish()` returns
the note the command's output ends with. Both pasta and the helper join the user namespace that *owns* the network
namespace (ioctl NS_GET_USERNS): for a bot that is not root, bwrap runs the command in a nested user namespace (after
mounting /dev), where they would hold no capability over it.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import ctypes.util
import fcntl
import functools
import logging
import os
import shutil
import signal
import sys
from collections.abc import Coroutine, Sequence
from pathlib import Path
from typing import Any

from agents.sandbox import egress_rules
from agents.sandbox.bwrap_info import child_pid
from agents.sandbox.clean_env import child_env
from agents.sandbox.egress_proxy import EgressProxy
from agents.sandbox.egress_rules import DNS_ADDRESS, PROXY_PORT, Egress
from agents.sandbox.reaping import reap, to_its_end, uninterrupted
from agents.sandbox.temp_folders import temp_folder

log = logging.getLogger(__name__)

ATTACH_TIMEOUT_SECONDS = 10.0
PASTA_START_SECONDS = 10.0  # pasta sets up the namespace's interface, then forks into the background
LOOPBACK_WAIT_POLLS = 2000  # of about a millisecond each
PASTA_OPTIONS = ("--config-net", "--no-map-gw", "-t", "none", "-u", "none", "-T", "none", "-U", "none", "-q")
PASTA_DNS = ("--dns-forward", DNS_ADDRESS)  # DNS sent there goes to the host's resolver, through pasta
HELPER = Path(__file__).with_name("netns_helper.py")
NS_GET_USERNS = 0xB701  # ioctl: the user namespace that owns a namespace
FINISH_SECONDS = 5.0
PROXY_URL = f"http://127.0.0.1:{PROXY_PORT}"
NO_PROXY = "localhost,127.0.0.1,::1"


def pasta_path() -> str | None:
    return shutil.which("pasta")


def available() -> bool:
    return pasta_path() is not None


@functools.cache
def nft_available() -> bool:
    """Whether libnftables is installed (Debian's nftables): the rules of a direct network need it."""
    return ctypes.util.find_library("nftables") is not None


def direct(egress: Egress) -> bool:
    """Whether an allowed command gets pasta under the rules (else only the proxy): no domains list, both tools
    installed, and a tun device this process may open. pasta opens it inside the namespace: without it (a container
    given none, or a bot that is not root where /dev/net/tun is root's alone) every allowed command failed ("Failed to
    open tun socket in namespace"); the proxy carries its HTTP(S) instead."""
    return not egress.through_proxy and available() and nft_available() and tun_available()


def missing_tools() -> list[str]:
    """The Debian packages of what the direct mode needs that this machine lacks (passt for pasta, nftables)."""
    return [name for name, there in (("passt", available()), ("nftables", nft_available())) if not there]


TUN_DEVICE = Path("/dev/net/tun")
TUN_FIX = (
    f"give the bot a tun device it may open ({TUN_DEVICE}): in a container `--device /dev/net/tun`; for a bot that is "
    f"not root, `sudo chmod 666 {TUN_DEVICE}` (Debian's own mode)"
)


def tun_available() -> bool:
    """Whether this process may open the tun device for reading and writing (asked each time: cheap, and a device
    added while the bot runs counts)."""
    return os.access(TUN_DEVICE, os.R_OK | os.W_OK)


def proxy_env() -> dict[str, str]:
    """The environment that sends a command's HTTP(S) through the proxy (proxy mode), in the spellings tools read."""
    env = {}
    for key in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY"):
        env[key] = env[key.lower()] = PROXY_URL
    env["NO_PROXY"] = env["no_proxy"] = NO_PROXY
    return env


@functools.cache
def resolv_conf() -> Path:
    """The sandbox's `/etc/resolv.conf` in direct mode: the one address pasta forwards DNS from."""
    folder = temp_folder("pasta", "dns")
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    path = folder / "resolv.conf"
    path.write_text(f"nameserver {DNS_ADDRESS}\noptions timeout:2 attempts:2\n")
    folder.chmod(0o755)
    path.chmod(0o644)
    return path


class UserNet:
    """The pipes between the bot and one bwrap, and the pasta attached to its namespace; `close` after the command.

    When `attach` did not complete (it failed, was cancelled or timed out), kill bwrap's process group before `close`:
    closing the block pipe lets a held sandbox go on to run the command, and until then the sandbox is in bwrap's
    group (it starts a session of its own only once let go), so the group's kill ends it."""

    def __init__(self, egress: Egress | None = None) -> None:
        self.egress = egress or Egress()
        self.direct = direct(self.egress)
        self.info_read, self.info_write = os.pipe()
        self.block_read, self.block_write = os.pipe()
        self._open = {self.info_read, self.info_write, self.block_read, self.block_write}
        self.pasta_pid: int | None = None
        self._closed = False
        self._launching = False  # pasta's launch has not ended: its pid file is still to be read from the folder
        self.helper: asyncio.subprocess.Process | None = None
        self.folder = temp_folder("pasta", "net")
        self.proxy: EgressProxy | None = None

    @property
    def resolv_conf(self) -> Path | None:
        """The file shown as the sandbox's /etc/resolv.conf (direct mode), else None (the system's)."""
        return resolv_conf() if self.direct else None

    def env(self) -> dict[str, str]:
        """What the command's environment gets: the proxy's address in proxy mode."""
        return {} if self.direct else proxy_env()

    @property
    def child_fds(self) -> tuple[int, int]:
        """(info fd, block fd) as the child sees them (passed with `pass_fds`)."""
        return self.info_write, self.block_read

    async def prepare(self) -> None:
        """Before bwrap starts: the proxy (proxy mode) and the helper, which then waits for the sandbox's pid, so its
        start-up overlaps bwrap's. The host's addresses are read now, as the namespace is made."""
        if self.helper is not None:
            return
        if self.direct:
            args = ["--rules", egress_rules.rules(self.egress, egress_rules.host_addresses())]
        else:
            self.proxy = EgressProxy(self.folder, domains=self.egress.domains, private=self.egress.private)
            self.proxy.allow_all()
            await self.proxy.start()
            args = ["--forward", str(self.proxy.socket_path), str(PROXY_PORT)]
        self.helper = await asyncio.create_subprocess_exec(
            sys.executable,
            "-I",
            "-S",
            str(HELPER),
            *args,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
            env=child_env(),  # it runs beside the sandbox, not in it: none of the bot's secrets
        )

    async def attach(self) -> None:
        """Once bwrap started: wait for its sandbox's pid, wire its namespace out (pasta under the rules, or the
        proxy), then let the command run."""
        for fd in self.child_fds:
            self._close_fd(fd)
        async with asyncio.timeout(ATTACH_TIMEOUT_SECONDS):
            await self.prepare()
            pid = await child_pid(self.info_read)
            await _loopback_configured(pid)
            if self.direct:
                await _all_or_none(self._helper_ready(pid), self._start_pasta(pid))
            else:
                await self._helper_ready(pid)
        os.write(self.block_write, b"1")

    async def _start_pasta(self, pid: int) -> None:
        """pasta attached to the namespace (`_launch_pasta`). Its launch runs to its end even when this is cancelled
        (the attach timed out, the command was cancelled): pasta forks into the background, and a background pasta
        whose pid was never read outlived the command (it keeps the namespace alive by itself)."""
        await to_its_end(asyncio.ensure_future(self._launch_pasta(pid)))

    async def _launch_pasta(self, pid: int) -> None:
        """pasta attached to the namespace, joining the user namespace that owns it (as an unprivileged user bwrap
        runs the command in a nested one, where pasta would hold no capability over the network namespace). Its
        background pid is kept for `close`; if `close` came first (the helper failed meanwhile), it is ended here."""
        pid_file = self.folder / "pasta.pid"
        self._launching = True
        try:
            await self._run_pasta(pid, pid_file)
        finally:
            self._launching = False
            with contextlib.suppress(OSError, ValueError):
                self.pasta_pid = int(pid_file.read_text().strip())
            if self._closed:  # closed meanwhile: what `close` could not end or remove yet
                self._end_pasta()
                shutil.rmtree(self.folder, ignore_errors=True)

    async def _run_pasta(self, pid: int, pid_file: Path) -> None:
        """The pasta launcher, run until it has forked its background pasta (which writes `pid_file`)."""
        runas = ["--runas", "0"] if os.geteuid() == 0 else []  # as root pasta would drop to nobody and fail
        net = os.open(f"/proc/{pid}/ns/net", os.O_RDONLY | os.O_CLOEXEC)
        try:
            owner = fcntl.ioctl(net, NS_GET_USERNS)
        finally:
            os.close(net)
        try:
            process = await asyncio.create_subprocess_exec(
                pasta_path() or "pasta",
                *runas,
                *PASTA_OPTIONS,
                *PASTA_DNS,
                "-P",
                str(pid_file),
                "--userns",
                f"/proc/self/fd/{owner}",
                "--netns",
                f"/proc/{pid}/ns/net",
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.DEVNULL,
                stderr=asyncio.subprocess.PIPE,
                pass_fds=(owner,),
                env=child_env(),
            )
        finally:
            os.close(owner)
        try:  # pasta forks into the background once the namespace is set up
            async with asyncio.timeout(PASTA_START_SECONDS):
                _, err = await process.communicate()
        except TimeoutError:
            await reap(process)
            err = b"pasta did not finish its set-up in time"
        if process.returncode != 0:
            raise OSError(f"pasta failed: {err.decode(errors='replace').strip()[-300:]}")

    async def _helper_ready(self, pid: int) -> None:
        """Tell the helper (agents/sandbox/netns_helper.py) the sandbox's pid; return once it joined and is ready."""
        helper = self.helper
        assert helper is not None and helper.stdin is not None and helper.stdout is not None
        helper.stdin.write(f"{pid}\n".encode())
        await helper.stdin.drain()
        said = (await helper.stdout.readline()).decode(errors="replace").strip()
        if said != "ready":
            rest = (await helper.stdout.read(2000)).decode(errors="replace").strip()
            raise OSError(f"the network rules could not be set: {' '.join((said, rest)).strip()[-400:]}")

    async def finish(self) -> str:
        """After the command: what the rules and the proxy refused, as a note for its output ("" if nothing); then
        `close`."""
        refused: list[str] = []
        helper = self.helper
        try:
            if helper is not None and helper.stdin is not None and helper.stdout is not None:
                helper.stdin.close()
                with contextlib.suppress(OSError, TimeoutError):
                    async with asyncio.timeout(FINISH_SECONDS):
                        said = (await helper.stdout.readline()).decode(errors="replace").split()
                        refused = said[1:] if said[:1] == ["refused"] else []
            note = egress_rules.refused_note(refused)
            if self.proxy is not None and self.proxy.refused:
                note += self.proxy.refused_note()
            return note
        finally:
            self.close()
            if helper is not None:
                with contextlib.suppress(ProcessLookupError):
                    await helper.wait()

    def close(self) -> None:
        self._closed = True
        self._end_pasta()
        if self.helper is not None and self.helper.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                self.helper.kill()
        if self.proxy is not None:
            self.proxy.shut()
        for fd in list(self._open):
            self._close_fd(fd)
        if not self._launching:  # else the launch removes it once it has read pasta's pid there
            shutil.rmtree(self.folder, ignore_errors=True)

    def _end_pasta(self) -> None:
        if self.pasta_pid is not None:
            with contextlib.suppress(OSError):
                os.kill(self.pasta_pid, signal.SIGTERM)
            self.pasta_pid = None

    async def aclose(self) -> None:
        """`close`, then `wait_closed` run to its end even through a cancellation (a failed or cancelled command's
        network: nothing of it is left for the event loop's end)."""
        self.close()
        await uninterrupted(self.wait_closed())

    async def wait_closed(self) -> None:
        """After `close`: its helper process waited for (`reap`, bounded), so nothing of it is left for the event
        loop's end."""
        if self.helper is not None:
            await reap(self.helper)

    def _close_fd(self, fd: int) -> None:
        if fd in self._open:
            self._open.discard(fd)
            with contextlib.suppress(OSError):
                os.close(fd)


async def _all_or_none(*steps: Coroutine[Any, Any, None]) -> None:
    """Run `steps` together. When one fails (or this is cancelled), the others are cancelled and waited for before
    the failure goes on: `gather` alone would leave them running unwatched (pasta's launch, once the helper failed,
    outliving the command's error and cut off by the event loop's end)."""
    running = [asyncio.ensure_future(step) for step in steps]
    try:
        await asyncio.gather(*running)
    except BaseException:
        for task in running:
            task.cancel()
        await uninterrupted(_all_settled(running))
        raise


async def _all_settled(tasks: Sequence[asyncio.Future[None]]) -> None:
    await asyncio.gather(*tasks, return_exceptions=True)


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
